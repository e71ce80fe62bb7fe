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
	"github.com/cairnmq/cairn/internal/vfs"
)

// Meta is the content of a persisted consumer's meta.json (metafile),
// durable or ephemeral.
type Meta struct {
	Config  consumer.Config `json:"config"`
	Created time.Time       `json:"created"`
}

// Dir is where a persisted consumer's files live, under its stream's
// directory: <stream dir>/obs/<name>.
func Dir(streamDir, name string) string { return path.Join(streamDir, "obs", name) }

// Persisted reports whether a consumer with cfg of a stream whose
// directory is streamDir ("" for a memory stream) keeps its config and
// state on disk: a consumer of a file stream without mem_storage,
// durable or ephemeral. nats-server v2.15.2 writes an ephemeral's config
// and state as a durable's (fileStore.ConsumerStore) and restores it as
// an ephemeral (jetstream.go, switchToEphemeral), so it survives a
// restart until its inactive_threshold runs out; a mem_storage consumer
// of a file stream has a consumerMemStore there, which writes nothing,
// and ends with the server.
func Persisted(streamDir string, cfg *consumer.Config) bool {
	return streamDir != "" && !cfg.MemoryStorage
}

// New makes the runtime of a new consumer of stream s named name with
// config cfg (checked, defaults applied; its Name may be empty, as
// nats-server leaves a generated name out of the config it reports),
// created at created, at its starting position
// (consumer.Deliverer.Position). A persisted (Persisted) durable has its
// metadata written and its state store opened here; a persisted
// ephemeral's files are written once it runs (persistLater, started by
// Start), so that creating one costs the client no fsync. It does not
// run until Start.
func New(env Env, s *streamrun.Stream, name string, cfg consumer.Config, created time.Time) (*Consumer, error) {
	c := newConsumer(env, s, name, cfg, created)
	c.d.Position()
	c.st = c.d.State()
	if c.repl {
		// A replica's position is its log's: its first leader proposes
		// it (lead, which lists the last_per_subject messages then).
		// The list made here would be delivered again by a replica
		// elected later, after its first leader had delivered it.
		c.d.Reset()
	}
	c.initPause()
	if c.repl || !Persisted(s.Dir(), &cfg) {
		return c, nil // a replicated consumer's state is its log's
	}
	if !cfg.IsDurable() {
		c.persisting.Add(1) // persistLater, started by Start
		c.persistOnStart = true
		return c, nil
	}
	fcfg := cfg
	fcfg.Name = name
	dir, cs, err := c.writeFiles(fcfg)
	if err != nil {
		return nil, err
	}
	c.setStore(dir, cs)
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
	c.d.SetRateBurst(c.rateBurst())
	newLog := env.NewLog
	if newLog == nil {
		newLog = streamrun.NewLocalConsumerLog
	}
	c.log = newLog(s.Name(), name, c)
	_, c.repl = c.log.(ReplicatedLog)
	return c
}

// initPause pauses a new or restored consumer whose config holds a pause
// that has not ended. The caller holds c.mu or owns c alone.
func (c *Consumer) initPause() {
	if p := c.cfg.PauseUntil; p != nil && p.After(c.now()) {
		c.Commit(&consumer.Pause{Until: p.UnixNano()})
	}
}

// rateBurst returns the bucket of the rate_limit_bps limiter: the
// stream's max_msg_size, else the server's max_payload (nats-server
// v2.15.2 setRateLimit); 0 lets the Deliverer take 1 MiB.
func (c *Consumer) rateBurst() int {
	if mms := c.sr.Config().MaxMsgSize; mms > 0 {
		return int(mms)
	}
	return int(c.env.MaxPayload)
}

// writeFiles writes the consumer's metadata (cfg, whose Name is set, and
// its creation time) durably and opens its state store, returning the
// consumer's directory and the store (WriteFiles).
func (c *Consumer) writeFiles(cfg consumer.Config) (string, store.ConsumerStore, error) {
	return WriteFiles(c.env.FS, c.sr.Dir(), c.sr.Store(), cfg, c.created)
}

// WriteFiles writes the metadata of consumer cfg.Name (cfg and its
// creation time created) into its directory under the stream directory
// streamDir, durably (the directory entries synced), and opens its state
// in the stream's store st. It returns the consumer's directory ("" when
// even that could not be made) and the state store. The engine's
// restore of a snapshot writes the files of the consumers it restores
// with it.
func WriteFiles(fs vfs.FS, streamDir string, st store.Store, cfg consumer.Config, created time.Time) (string, store.ConsumerStore, error) {
	dir := Dir(streamDir, cfg.Name)
	if err := fs.MkdirAll(dir); err != nil {
		return "", nil, err
	}
	// The consumer's entry in obs/, and obs/'s own in the stream's
	// directory (MkdirAll created it for the first consumer).
	for _, d := range []string{path.Dir(dir), streamDir} {
		if err := fs.SyncDir(d); err != nil {
			return dir, nil, err
		}
	}
	if err := metafile.Write(fs, dir, Meta{Config: cfg, Created: created}); err != nil {
		return dir, nil, err
	}
	cs, err := st.ConsumerStore(cfg.Name)
	if err != nil {
		return dir, nil, err
	}
	return dir, cs, nil
}

// persistLater writes a new ephemeral's files on a goroutine of its own
// and then attaches them: from the next round on, the consumer saves its
// state as a durable does. Stop waits for it, so that a consumer deleted
// meanwhile has its files removed and one stopped at shutdown has its
// state stored. A failure is logged and leaves the consumer in memory
// only (it ends with the server).
func (c *Consumer) persistLater() {
	defer c.persisting.Done()
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	c.mu.Lock()
	cfg := c.cfg.Clone()
	c.mu.Unlock()
	cfg.Name = c.name // a generated name is kept in the file, as nats-server does
	dir, cs, err := c.writeFiles(cfg)
	if err != nil {
		c.env.Logf("consumer %s > %s: kept in memory only, it will not survive a restart: %v", c.sr.Name(), c.name, err)
		if cs != nil {
			_ = cs.Delete()
		}
		if dir != "" {
			_ = metafile.RemoveAll(c.env.FS, dir)
		}
		return
	}
	c.mu.Lock()
	c.setStore(dir, cs)
	c.dirty = true
	c.mu.Unlock()
	c.Signal()
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
	if m.Config.Name == "" {
		m.Config.Name = name // a generated name shows in the config once restored, as in nats-server
	}
	c := newConsumer(env, s, name, m.Config, m.Created)
	c.d.Restarted(env.Now()) // the inactive_threshold counts from the restart
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

// FromState makes the runtime of consumer name of stream s with config
// cfg (checked, defaults applied) and the delivery state st, created at
// created: a consumer of a stream snapshot being restored that keeps no
// files (mem_storage, or a memory stream's; the engine writes the files
// of the others and Restore reads them). A state that delivered nothing
// starts at the consumer's starting position. It does not run until
// Start.
func FromState(env Env, s *streamrun.Stream, name string, cfg consumer.Config, st *store.ConsumerState, created time.Time) *Consumer {
	c := newConsumer(env, s, name, cfg, created)
	c.st = consumer.RestoreState(consumer.PolicyOf(&c.cfg), st)
	c.d.SetState(c.st)
	if st.Delivered.Stream == 0 && st.Delivered.Consumer == 0 {
		c.d.Position()
		c.st = c.d.State()
	}
	c.initPause()
	c.refreshDeadLetter()
	return c
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
	c.mu.Lock()
	if !c.repl {
		c.subscribe() // a replicated one subscribes once it leads
	}
	c.mu.Unlock()
	c.done.Add(1)
	go c.loop()
	if c.persistOnStart {
		c.persistOnStart = false
		go c.persistLater()
	}
	c.Signal()
}

// subscribe subscribes to the consumer's acks, pull requests, flow
// control replies and resets: at Start, or for a replicated consumer
// when it starts to lead (c.mu held).
func (c *Consumer) subscribe() {
	if len(c.subs) > 0 {
		return // a replicated consumer's, kept while its leadership moved (endOrphans)
	}
	tr := c.env.Transport
	subs := []struct {
		subj string
		h    streamrun.MsgHandler
	}{
		{"$JS.ACK." + c.sr.Name() + "." + c.name + ".>", c.onAck},
		{"$JS.API.CONSUMER.MSG.NEXT." + c.sr.Name() + "." + c.name, c.onPull},
		{"$JS.FC." + c.sr.Name() + "." + c.name + ".*", c.onFC},
		{"$JS.API.CONSUMER.RESET." + c.sr.Name() + "." + c.name, c.onReset},
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
}

// unsubscribe ends the consumer's subscriptions (c.mu held).
func (c *Consumer) unsubscribe() {
	for _, s := range c.subs {
		s.Unsubscribe()
	}
	c.subs = nil
}

func (c *Consumer) onAck(subject, reply string, _, data []byte) {
	dc, sseq, cseq, ok := ParseAckSubject(subject)
	if !ok {
		return
	}
	a := parseAckBody(data)
	a.dc, a.sseq, a.cseq, a.reply = dc, sseq, cseq, reply
	c.push(cevent{ack: &a, fwd: c.raw(subject, reply, nil, data)})
}

func (c *Consumer) onPull(subject, reply string, hdr, data []byte) {
	c.mu.Lock()
	push := c.cfg.IsPush()
	c.mu.Unlock()
	if reply != "" && !push && stream.RequiredLevelAbove(hdr, c.env.APILevel) {
		c.env.Transport.Publish(reply, "", streamrun.StatusRequiredAPILevel, nil) // after the push check, as nats-server
		return
	}
	c.push(cevent{pull: &pullEvent{reply: reply, body: append([]byte(nil), data...)}, fwd: c.raw(subject, reply, hdr, data)})
}

func (c *Consumer) onFC(subject, _ string, hdr, _ []byte) {
	c.push(cevent{fcSub: subject, fcHdr: append([]byte(nil), hdr...)})
}

// Stop ends the consumer: unsubscribes, stops the loop, ends waiting pull
// requests with status and saves its state. A status (409 Consumer
// Deleted) means the consumer or its stream is being deleted: its state
// is not saved, since its files go next (RemoveFiles). nil means the
// server shuts down: each waiting pull request gets 409 Server Shutdown
// with what it was still owed (consumer.Deliverer.EndPulls), but those
// of a replicated consumer whose leadership moved get 409 Leadership
// Change and what it took since goes to its successor (endOrphans),
// whatever the status. It waits
// for a new ephemeral's files to be written first (persistLater).
func (c *Consumer) Stop(status []byte) {
	c.persisting.Wait()
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	c.unsubscribe()
	c.mu.Unlock()
	close(c.quit)
	c.done.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.repl && !c.leading && !c.orphansUntil.IsZero() {
		// A replica whose leadership moved (a lame duck's hand-over, or
		// one leaving its group right after it handed its leadership
		// over: its replica removed, status 409 Consumer Deleted): its
		// pull requests end as the move's would (endOrphans), and the
		// acks it took since go to the successor all the same.
		c.orphansUntil = time.Time{}
		c.d.EndPullsOnce(statusLeadershipChange)
		c.forward(c.late)
		c.late = nil
	}
	c.d.EndPulls(status)
	c.cancelMoves()
	if status != nil {
		if c.saver != nil {
			c.saver.discard()
		}
		return // RemoveFiles deletes the state through c.cstore, still open
	}
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
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	c.mu.Lock()
	c.cfg = cfg.Clone()
	c.d.SetRateBurst(c.rateBurst())
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
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
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

// RemoveFiles deletes a persisted consumer's state (through its state
// store, which Stop left open) and metadata (the consumer was deleted and
// stopped with a status).
func (c *Consumer) RemoveFiles() {
	if c.dir == "" {
		return
	}
	if err := c.cstore.Delete(); err != nil {
		c.env.Logf("consumer %s > %s: remove its state: %v", c.sr.Name(), c.name, err)
	}
	if err := metafile.RemoveAll(c.env.FS, c.dir); err != nil {
		c.env.Logf("consumer %s > %s: remove %s: %v", c.sr.Name(), c.name, c.dir, err)
	}
}

// Info returns the consumer's info (nats-server v2.15.2 ConsumerInfo).
func (c *Consumer) Info() *consumer.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.infoLocked()
}

// infoLocked is Info with c.mu held.
func (c *Consumer) infoLocked() *consumer.Info {
	now := c.now()
	d, af := c.st.Delivered(), c.st.AckFloor()
	cfg := c.cfg.WithServerMetadata(c.env.Version, c.env.APILevel)
	if p := c.st.PausedUntil(); p != 0 {
		// The committed pause, which every replica applied: a replica
		// that came to lead after the pause has it only there.
		u := time.Unix(0, p).UTC()
		cfg.PauseUntil = &u
	}
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
	info.PriorityGroups = c.d.PriorityGroups()
	return info
}

// Unpin ends the pinned client of priority group group
// ($JS.API.CONSUMER.UNPIN, ADR-42), with an UNPINNED advisory ("admin"),
// and lets the consumer pin another: false when the consumer has no such
// group (10160).
func (c *Consumer) Unpin(group string) bool {
	c.mu.Lock()
	ok := c.d.Unpin(group)
	evs := c.d.TakePinEvents()
	c.mu.Unlock()
	c.advisePins(evs)
	c.Signal()
	return ok
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
