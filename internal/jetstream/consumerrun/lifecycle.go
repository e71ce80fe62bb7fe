package consumerrun

import (
	"errors"
	"maps"
	"path"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// Meta is the content of a durable consumer's meta.json (metafile).
type Meta struct {
	Config  consumer.Config `json:"config"`
	Created time.Time       `json:"created"`
}

// Dir is where a persisted consumer's files live, under its stream's
// directory: <stream dir>/obs/<name>.
func Dir(streamDir, name string) string { return path.Join(streamDir, "obs", name) }

// Persisted reports whether a consumer with cfg of a stream whose
// directory is streamDir ("" for a memory stream) keeps its state on
// disk: a durable consumer of a file stream without mem_storage.
func Persisted(streamDir string, cfg *consumer.Config) bool {
	return streamDir != "" && cfg.Durable != "" && !cfg.MemoryStorage
}

// New makes the runtime of a new consumer of stream s named name with
// config cfg (checked, defaults applied; its Name may be empty, as
// nats-server leaves a generated name out of the config it reports),
// created at created, at its starting
// position (consumer.Deliverer.Position); when it is persisted
// (Persisted), its metadata is written and its state store opened. It
// does not run until Start.
func New(env Env, s *streamrun.Stream, name string, cfg consumer.Config, created time.Time) (*Consumer, error) {
	c := newConsumer(env, s, name, cfg, created)
	c.d.Position()
	c.st = c.d.State()
	c.initPause()
	if !Persisted(s.Dir(), &cfg) {
		return c, nil
	}
	if err := c.persist(); err != nil {
		return nil, err
	}
	c.dirty = true
	c.maybeSave(created, true)
	return c, nil
}

func newConsumer(env Env, s *streamrun.Stream, name string, cfg consumer.Config, created time.Time) *Consumer {
	c := &Consumer{
		env: env, sr: s, name: name, created: created, cfg: cfg,
		wake: make(chan struct{}, 1), quit: make(chan struct{}),
		moves: map[uint64]*move{},
	}
	c.d = consumer.NewDeliverer(s.Name(), name, cfg.Clone(), created, s.Store(), env.Transport, c, env.Logf)
	newLog := env.NewLog
	if newLog == nil {
		newLog = streamrun.NewLocalConsumerLog
	}
	c.log = newLog(s.Name(), name, c)
	return c
}

// initPause pauses a new or restored consumer whose config holds a pause
// that has not ended. The caller holds c.mu or owns c alone.
func (c *Consumer) initPause() {
	if p := c.cfg.PauseUntil; p != nil && p.After(c.now()) {
		c.Commit(&consumer.Pause{Until: p.UnixNano()})
	}
}

// persist writes the consumer's metadata and opens its state.
func (c *Consumer) persist() error {
	fs, sdir := c.env.FS, c.sr.Dir()
	dir := Dir(sdir, c.name)
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	// The consumer's entry in obs/, and obs/'s own in the stream's
	// directory (MkdirAll created it for the first consumer).
	for _, d := range []string{path.Dir(dir), sdir} {
		if err := fs.SyncDir(d); err != nil {
			return err
		}
	}
	if err := metafile.Write(fs, dir, Meta{Config: c.cfg, Created: c.created}); err != nil {
		return err
	}
	cs, err := c.sr.Store().ConsumerStore(c.name)
	if err != nil {
		return err
	}
	c.setStore(dir, cs)
	return nil
}

// setStore attaches a persisted consumer's directory and state store,
// and its ack journal when the store has one.
func (c *Consumer) setStore(dir string, cs store.ConsumerStore) {
	c.dir, c.cstore = dir, cs
	c.jr, _ = cs.(store.ConsumerJournal)
	c.saver = newSaver(cs, c.sr.Name()+" > "+c.name, c.env.Logf, c.stored)
}

// stored runs on the saver's goroutine once a snapshot is written: the
// journal may drop what it holds, confirmed acks of the deliveries it
// holds need only the journal from now on, and the confirmations that
// waited for it are sent.
func (c *Consumer) stored(st *store.ConsumerState, gen uint64, waits []confirm) {
	if c.jr != nil {
		c.jr.Covered(gen)
	}
	c.durDelivered.Store(st.Delivered.Stream)
	c.sendConfirms(waits)
}

// replayJournal applies the confirmed acks the ack journal held at open
// to a restored consumer's state (consumer.State.Replay, a step of
// restoring a state, not an operation) and keeps what they acknowledged
// for retention (TakeReplayed).
func (c *Consumer) replayJournal() {
	if c.jr == nil {
		return
	}
	ops := c.jr.Journaled()
	now := c.now().UnixNano()
	for _, op := range ops {
		c.replayed = append(c.replayed, c.st.Replay(op, now)...)
	}
	if len(ops) > 0 {
		c.dirty = true
	}
}

// Restore makes the runtime of the persisted consumer name of stream s
// from its files: its metadata, its stored state (a damaged state is
// logged and replaced by nothing acknowledged, so that everything is
// delivered again rather than skipped), the confirmed acks of its ack
// journal. It does not run until Start. An error leaves the files
// alone.
func Restore(env Env, s *streamrun.Stream, name string) (*Consumer, error) {
	dir := Dir(s.Dir(), name)
	var m Meta
	if err := metafile.Read(env.FS, dir, &m); err != nil {
		return nil, err
	}
	cs, err := s.Store().ConsumerStore(name)
	if err != nil {
		return nil, err
	}
	st, err := cs.State()
	if errors.Is(err, store.ErrCorrupt) {
		env.Logf("consumer %s > %s: consumer state damaged (%v); restored from its config with nothing acknowledged: its messages are delivered again", s.Name(), name, err)
		st, err = &store.ConsumerState{}, nil
	}
	if err != nil {
		_ = cs.Close()
		return nil, err
	}
	c := newConsumer(env, s, name, m.Config, m.Created)
	c.setStore(dir, cs)
	c.st = consumer.RestoreState(consumer.PolicyOf(&c.cfg), st)
	c.d.SetState(c.st)
	c.durDelivered.Store(st.Delivered.Stream)
	if c.st.Delivered().Stream == 0 && c.st.Delivered().Consumer == 0 {
		c.d.Position()
		c.st = c.d.State()
	}
	c.initPause()
	c.refreshDeadLetter()
	c.restoreMoves()
	c.replayJournal() // (makes no marks: a replayed NAK never ends deliveries)
	if st.Delivered.Stream == 0 && st.Delivered.Consumer == 0 {
		c.dirty = true // store the restored or repositioned state
	}
	return c, nil
}

// TakeReplayed returns, and forgets, what the acks replayed from the
// journal at Restore acknowledged: the stream's retention runs for them
// once every consumer of the stream is back.
func (c *Consumer) TakeReplayed() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	seqs := c.replayed
	c.replayed = nil
	return seqs
}

// Start subscribes the consumer and starts its loop.
func (c *Consumer) Start() {
	tr := c.env.Transport
	subs := []struct {
		subj string
		h    streamrun.MsgHandler
	}{
		{"$JS.ACK." + c.sr.Name() + "." + c.name + ".>", c.onAck},
		{"$JS.API.CONSUMER.MSG.NEXT." + c.sr.Name() + "." + c.name, c.onPull},
		{"$JS.FC." + c.sr.Name() + "." + c.name + ".*", c.onFC},
	}
	if c.cfg.AckPolicy == consumer.AckNone {
		subs = subs[1:] // nothing listens for acks: an ack request gets no responders, as in nats-server
	}
	for _, s := range subs {
		sub, err := tr.Subscribe(s.subj, "", s.h)
		if err != nil {
			c.env.Logf("consumer %s > %s: subscribe %s: %v", c.sr.Name(), c.name, s.subj, err)
			continue
		}
		c.subs = append(c.subs, sub)
	}
	c.done.Add(1)
	go c.loop()
	c.Signal()
}

func (c *Consumer) onAck(subject, reply string, _, data []byte) {
	dc, sseq, cseq, ok := ParseAckSubject(subject)
	if !ok {
		return
	}
	a := parseAckBody(data)
	a.dc, a.sseq, a.cseq, a.reply = dc, sseq, cseq, reply
	c.push(cevent{ack: &a})
}

func (c *Consumer) onPull(_, reply string, hdr, data []byte) {
	c.mu.Lock()
	push := c.cfg.IsPush()
	c.mu.Unlock()
	if reply != "" && !push && stream.RequiredLevelAbove(hdr, c.env.APILevel) {
		c.env.Transport.Publish(reply, "", streamrun.StatusRequiredAPILevel, nil) // after the push check, as nats-server
		return
	}
	c.push(cevent{pull: &pullEvent{reply: reply, body: append([]byte(nil), data...)}})
}

func (c *Consumer) onFC(subject, _ string, _, _ []byte) { c.push(cevent{fcSub: subject}) }

// Stop ends the consumer: unsubscribes, stops the loop, ends waiting pull
// requests with status (nil = none) and saves its state.
func (c *Consumer) Stop(status []byte) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	c.mu.Unlock()
	for _, s := range c.subs {
		s.Unsubscribe()
	}
	close(c.quit)
	c.done.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d.EndPulls(status)
	c.cancelMoves()
	c.maybeSave(c.now(), true)
	if c.saver != nil {
		c.saver.close()
	}
	if c.cstore != nil {
		_ = c.cstore.Close()
	}
}

// Name returns the consumer's name.
func (c *Consumer) Name() string { return c.name }

// Created returns when the consumer was created.
func (c *Consumer) Created() time.Time { return c.created }

// Config returns a copy of the consumer's config.
func (c *Consumer) Config() consumer.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Clone()
}

// Update applies a config change the engine allowed (its policy as an
// UpdatePolicy operation) and rewrites a persisted consumer's metadata.
func (c *Consumer) Update(cfg consumer.Config) error {
	c.mu.Lock()
	c.cfg = cfg.Clone()
	c.d.SetConfig(cfg.Clone())
	c.Commit(&consumer.UpdatePolicy{Policy: consumer.PolicyOf(&c.cfg), DeadLetter: c.st.DeadLetterOn()})
	dir := c.dir
	c.mu.Unlock()
	c.Signal()
	if dir == "" {
		return nil
	}
	return metafile.Write(c.env.FS, dir, Meta{Config: cfg, Created: c.created})
}

// Pause pauses the consumer until until (the zero time or a time at or
// before now resumes it) with a Pause operation, records the pause in
// its config (a pause needs API level 1, and nats-server records that
// in the metadata from the first pause on, resumes included) and saves
// a persisted consumer's metadata. It returns whether it is paused.
func (c *Consumer) Pause(until, now time.Time) bool {
	c.mu.Lock()
	var p int64
	if until.After(now) {
		p = until.UnixNano()
	}
	c.Commit(&consumer.Pause{Until: p})
	if until.After(now) || c.cfg.Metadata[stream.MetaRequiredLevel] == "1" {
		c.cfg.Metadata = maps.Clone(c.cfg.Metadata)
		if c.cfg.Metadata == nil {
			c.cfg.Metadata = map[string]string{}
		}
		c.cfg.Metadata[stream.MetaRequiredLevel] = "1"
	}
	if until.IsZero() {
		c.cfg.PauseUntil = nil
	} else {
		u := until.UTC()
		c.cfg.PauseUntil = &u
	}
	cfg, dir := c.cfg.Clone(), c.dir
	c.mu.Unlock()
	if dir != "" {
		if err := metafile.Write(c.env.FS, dir, Meta{Config: cfg, Created: c.created}); err != nil {
			c.env.Logf("consumer %s > %s: save pause: %v", c.sr.Name(), c.name, err)
		}
	}
	c.Signal()
	return until.After(now)
}

// RemoveFiles deletes a persisted consumer's state and metadata (the
// consumer was deleted and stopped).
func (c *Consumer) RemoveFiles() {
	if c.dir == "" {
		return
	}
	if cs, err := c.sr.Store().ConsumerStore(c.name); err == nil {
		_ = cs.Delete()
	}
	if err := metafile.RemoveAll(c.env.FS, c.dir); err != nil {
		c.env.Logf("consumer %s > %s: remove %s: %v", c.sr.Name(), c.name, c.dir, err)
	}
}

// Info returns the consumer's info (nats-server v2.15.2 ConsumerInfo).
func (c *Consumer) Info() *consumer.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	d, af := c.st.Delivered(), c.st.AckFloor()
	cfg := c.cfg.WithServerMetadata(c.env.Version, c.env.APILevel)
	info := &consumer.Info{
		Stream: c.sr.Name(), Name: c.name, Created: c.created, Config: &cfg,
		Delivered:      consumer.SequenceInfo{Consumer: d.Consumer, Stream: d.Stream, Last: timePtr(c.d.LastDelivered())},
		AckFloor:       consumer.SequenceInfo{Consumer: af.Consumer, Stream: af.Stream, Last: timePtr(c.lastAck)},
		NumAckPending:  c.st.NumAckPending(),
		NumRedelivered: c.st.NumRedelivered(),
		NumWaiting:     c.d.NumWaiting(),
		NumPending:     c.d.NumPending(c.sr.DurableSeq()),
		PushBound:      c.cfg.IsPush() && c.env.Transport.HasInterest(c.cfg.DeliverSubject),
		TimeStamp:      now.UTC(),
	}
	if p := c.pausedUntil(); p.After(now) {
		info.Paused, info.PauseRemaining = true, p.Sub(now)
	}
	return info
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// StreamName returns the name of the consumer's stream.
func (c *Consumer) StreamName() string { return c.sr.Name() }
