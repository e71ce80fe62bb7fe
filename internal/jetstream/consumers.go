package jetstream

import (
	"errors"
	"fmt"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
	"github.com/nats-io/nuid"
)

// ConsumerAction is the action of a consumer create request (protocol.md
// section 2.6.9).
type ConsumerAction int

// Consumer create actions.
const (
	CreateOrUpdate ConsumerAction = iota // "" : create, or update an existing one
	CreateOnly                           // "create": an existing one must be equal
	UpdateOnly                           // "update": it must exist
)

// consumerDir is where a persisted consumer's metadata lives.
func consumerDir(streamDir, name string) string { return path.Join(streamDir, "obs", name) }

// CreateConsumer creates or updates a consumer on a stream (protocol.md
// section 2.6.9) and returns its info, taken before any delivery. Errors:
// 10059 stream not found, the config errors of consumer.Config (SetDefaults,
// Validate), 10148 (create of a different existing consumer), 10149
// (update of a missing one), 10012 (a refused update), 10026 (max
// consumers), 10099/10100 (workqueue overlap).
func (js *JetStream) CreateConsumer(streamName string, cfg consumer.Config, action ConsumerAction, pedantic bool) (*consumer.Info, *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return nil, jerr
	}
	return js.createConsumer(r, cfg, action, pedantic)
}

// createConsumer is CreateConsumer on the stream r found; r may have been
// deleted since (10059 then).
func (js *JetStream) createConsumer(r *streamEntry, cfg consumer.Config, action ConsumerAction, pedantic bool) (*consumer.Info, *jserr.Error) {
	scfg := r.Config()
	cfg.SetStaticMetadata()
	if err := cfg.SetDefaults(&scfg, pedantic); err != nil {
		return nil, err
	}
	if err := cfg.Validate(&scfg, false); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Durable
	}
	generated := cfg.Name == ""
	if generated {
		cfg.Name = randomName()
	}
	// refiltered: an existing consumer's filters changed; released: the
	// new consumer replaced an unrestored one (releaseUnrestoredLocked).
	var refiltered, released bool
	defer func() {
		if refiltered {
			// After r.cons.mu is released: an interest stream drops what the
			// consumer's new filters leave nobody needing, as nats-server
			// v2.15.2 does before it answers.
			r.DropUnneededWait()
		}
	}()
	r.cons.mu.Lock()
	defer r.cons.mu.Unlock()
	if c := r.cons.byName[cfg.Name]; c != nil {
		old := c.config()
		info, err := r.recreate(c, cfg, action)
		refiltered = err == nil && !slices.Equal(old.Filters(), cfg.Filters())
		return info, err
	}
	if r.cons.done {
		// The stream stopped (deleted) after the lookup: creating the
		// consumer now would leave its directory behind.
		return nil, jserr.New(jserr.StreamNotFound)
	}
	if r.cons.deleting[cfg.Name] {
		// A consumer of this name is being deleted; its files must go
		// before a new one can have them.
		return nil, jserr.New(jserr.ConsumerNameExist)
	}
	if action == UpdateOnly {
		return nil, jserr.New(jserr.ConsumerDoesNotExist)
	}
	if err := r.checkNewLocked(&scfg, &cfg); err != nil {
		return nil, err
	}
	if r.cons.unrestored[cfg.Name] {
		if err := r.releaseUnrestoredLocked(cfg.Name); err != nil {
			return nil, jserr.From(err, jserr.ConsumerCreate)
		}
		released = true
	}
	cfg.SetEphemeralThreshold()
	c, err := r.newConsumer(cfg, js.now().UTC())
	if err != nil {
		return nil, jserr.From(err, jserr.ConsumerCreate)
	}
	if generated {
		c.cfg.Name = "" // nats-server names it only at the top level of its info
	}
	info := c.info()
	r.cons.byName[cfg.Name] = c
	// What only the unrestored consumer held may go now that the new one
	// is in place (it may need some of it).
	refiltered = released
	c.start()
	js.adviseConsumer(r.Name(), cfg.Name, actionCreate)
	if info.Paused {
		js.adviseConsumerPause(r.Name(), cfg.Name, PauseResult{Paused: true, Until: *cfg.PauseUntil})
	}
	return info, nil
}

// checkNewLocked runs nats-server v2.15.2's checks for a consumer that
// does not exist yet, in its order: max_consumers over the limitable
// consumers (10026), the workqueue rules, the durable name length
// (10102). The caller holds r.cons.mu.
func (r *streamEntry) checkNewLocked(scfg *stream.Config, cfg *consumer.Config) *jserr.Error {
	others := r.consumerConfigsLocked("")
	if scfg.MaxConsumers > 0 && cfg.Limitable() && countLimitable(others) >= scfg.MaxConsumers {
		return jserr.New(jserr.MaximumConsumersLimit)
	}
	if scfg.Retention == stream.WorkQueuePolicy {
		if err := consumer.CheckWorkQueue(cfg, others); err != nil {
			return err
		}
	}
	return cfg.CheckDurableLength()
}

func countLimitable(cfgs []*consumer.Config) int {
	n := 0
	for _, c := range cfgs {
		if c.Limitable() {
			n++
		}
	}
	return n
}

// recreate answers a create of an existing consumer: with action create
// an equal config returns its info (else 10148); otherwise it is an
// update. The caller holds r.cons.mu.
func (r *streamEntry) recreate(c *cons, cfg consumer.Config, action ConsumerAction) (*consumer.Info, *jserr.Error) {
	old := c.config()
	if action == CreateOnly {
		if !cfg.EqualForCreate(&old) {
			return nil, jserr.New(jserr.ConsumerAlreadyExists)
		}
		return c.info(), nil
	}
	if r.Config().Retention == stream.WorkQueuePolicy {
		if err := consumer.CheckWorkQueueUpdate(&cfg, r.consumerConfigsLocked(cfg.Name)); err != nil {
			return nil, err
		}
	}
	if err := consumer.CheckUpdate(&old, &cfg); err != nil {
		return nil, err
	}
	if old.DeliverSubject != cfg.DeliverSubject && old.DeliverSubject != "" && r.js.tr.HasInterest(old.DeliverSubject) {
		return nil, jserr.New(jserr.ConsumerNameExist)
	}
	cfg.SetEphemeralThreshold()
	cfg.PauseUntil = old.PauseUntil // only CONSUMER.PAUSE changes it
	cfg.SetStaticMetadata()
	if err := c.update(cfg); err != nil {
		return nil, jserr.From(err, jserr.ConsumerCreate)
	}
	return c.info(), nil // nats-server v2.15.2 sends no advisory for an update
}

// consumerConfigsLocked returns the configs of the stream's consumers
// except the one named skip. The caller holds r.cons.mu.
func (r *streamEntry) consumerConfigsLocked(skip string) []*consumer.Config {
	out := make([]*consumer.Config, 0, len(r.cons.byName))
	for name, c := range r.cons.byName {
		if name != skip {
			cfg := c.config()
			out = append(out, &cfg)
		}
	}
	return out
}

// randomName returns an 8-character base-62 consumer name, as nats-server
// generates for unnamed ephemerals.
func randomName() string {
	id := nuid.Next()
	return id[len(id)-8:]
}

// persisted reports whether a consumer with cfg keeps its state on disk:
// a durable consumer of a file stream without mem_storage.
func (r *streamEntry) persisted(cfg *consumer.Config) bool {
	return r.Dir() != "" && cfg.Durable != "" && !cfg.MemoryStorage
}

// newConsumer builds a consumer at its starting position, writing its
// metadata and opening its state when it is persisted.
func (r *streamEntry) newConsumer(cfg consumer.Config, created time.Time) (*cons, error) {
	c := r.makeCons(cfg, created)
	c.d.Position()
	c.st = c.d.State()
	c.initPause()
	if !r.persisted(&cfg) {
		return c, nil
	}
	if err := r.persistConsumer(c); err != nil {
		return nil, err
	}
	c.dirty = true
	c.maybeSave(created, true)
	return c, nil
}

func (r *streamEntry) makeCons(cfg consumer.Config, created time.Time) *cons {
	c := &cons{
		js: r.js, sr: r, name: cfg.Name, created: created, cfg: cfg,
		wake: make(chan struct{}, 1), quit: make(chan struct{}),
		moves: map[uint64]*move{},
	}
	c.d = consumer.NewDeliverer(r.Name(), cfg.Name, cfg.Clone(), created, r.Store(), r.js.tr, c, r.js.logf)
	c.log = r.js.newConsumerLog(r.Name(), cfg.Name, c)
	return c
}

// newConsumerLog makes the log of a consumer (Config.NewConsumerLog).
func (js *JetStream) newConsumerLog(streamName, name string, a Applier[consumer.Op]) Log[consumer.Op] {
	if js.cfg.NewConsumerLog != nil {
		return js.cfg.NewConsumerLog(streamName, name, a)
	}
	return defaultNewConsumerLog(streamName, name, a)
}

// initPause pauses a new or restored consumer whose config holds a pause
// that has not ended. The caller holds c.mu or owns c alone.
func (c *cons) initPause() {
	if p := c.cfg.PauseUntil; p != nil && p.After(c.now()) {
		c.Commit(&consumer.Pause{Until: p.UnixNano()})
	}
}

// persistConsumer writes the consumer's metadata and opens its state.
func (r *streamEntry) persistConsumer(c *cons) error {
	dir := consumerDir(r.Dir(), c.name)
	if err := r.js.cfg.FS.MkdirAll(dir); err != nil {
		return err
	}
	// The consumer's entry in obs/, and obs/'s own in the stream's
	// directory (MkdirAll created it for the first consumer).
	for _, d := range []string{path.Dir(dir), r.Dir()} {
		if err := r.js.cfg.FS.SyncDir(d); err != nil {
			return err
		}
	}
	if err := metafile.Write(r.js.cfg.FS, dir, consumerMeta{Config: c.cfg, Created: c.created}); err != nil {
		return err
	}
	cs, err := r.Store().ConsumerStore(c.name)
	if err != nil {
		return err
	}
	c.setStore(dir, cs)
	return nil
}

// setStore attaches a persisted consumer's directory and state store,
// and its ack journal when the store has one.
func (c *cons) setStore(dir string, cs store.ConsumerStore) {
	c.dir, c.cstore = dir, cs
	c.jr, _ = cs.(store.ConsumerJournal)
	c.saver = newSaver(cs, c.sr.Name()+" > "+c.name, c.js.logf, c.stored)
}

// stored runs on the saver's goroutine once a snapshot is written: the
// journal may drop what it holds, confirmed acks of the deliveries it
// holds need only the journal from now on, and the confirmations that
// waited for it are sent.
func (c *cons) stored(st *store.ConsumerState, gen uint64, waits []confirm) {
	if c.jr != nil {
		c.jr.Covered(gen)
	}
	c.durDelivered.Store(st.Delivered.Stream)
	c.sendConfirms(waits)
}

// replayJournal applies the confirmed acks the ack journal held at open
// to a restored consumer's state (consumer.State.Replay) and keeps what
// they acknowledged for retention.
func (c *cons) replayJournal() {
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

// restoreConsumers starts the persisted consumers of a file stream. A
// consumer whose metadata or state cannot be read is reported and left
// on disk.
func (r *streamEntry) restoreConsumers() {
	if r.Dir() == "" {
		return
	}
	names, err := r.js.cfg.FS.ReadDir(path.Join(r.Dir(), "obs"))
	if err != nil {
		return
	}
	for _, name := range names {
		if strings.Contains(name, ".") {
			continue // set aside (holdUnrestored); no consumer name has a dot
		}
		if err := r.restoreConsumer(name); err != nil {
			r.holdUnrestored(name, err)
		}
	}
	// Retention for the acks replayed from the journal, once every
	// consumer is back (interest counts them all).
	for _, c := range r.cons.list() {
		c.mu.Lock()
		seqs := c.replayed
		c.replayed = nil
		c.mu.Unlock()
		if len(seqs) > 0 {
			r.OnAcked(c, seqs, false)
		}
	}
}

// holdUnrestored records a consumer a start could not restore: its files
// stay, and an interest stream removes no message while it is
// unrestored, since its filter and ack floor are unknown. nats-server
// v2.15.2 takes such a stream offline instead; cairn keeps serving it
// and keeps its messages (docs/compatibility.md). Creating a consumer
// of the same name sets the old files aside and ends the hold
// (releaseUnrestoredLocked).
func (r *streamEntry) holdUnrestored(name string, err error) {
	r.cons.mu.Lock()
	r.cons.unrestored[name] = true
	r.cons.held.Store(true)
	r.cons.mu.Unlock()
	r.js.logf("consumer %s > %s not restored (left on disk): %v", r.Name(), name, err)
	if r.Retention() == stream.InterestPolicy {
		r.js.logf("stream %s: interest retention removes no message while consumer %s is not restored; repair or remove %s and restart, or create a consumer named %s (the old files are then set aside)", r.Name(), name, consumerDir(r.Dir(), name), name)
	}
}

// releaseUnrestoredLocked moves the files of the unrestored consumer
// name out of the way of a new consumer of that name, to
// obs/<name>.unrestored-<unix nanoseconds>, and ends its hold on
// retention. It returns the rename's error (the create fails with
// 10012 then). The caller holds r.cons.mu.
func (r *streamEntry) releaseUnrestoredLocked(name string) error {
	dir := consumerDir(r.Dir(), name)
	aside := fmt.Sprintf("%s.unrestored-%d", dir, r.js.now().UnixNano())
	if err := r.js.cfg.FS.Rename(dir, aside); err != nil && !vfs.IsNotExist(err) {
		return fmt.Errorf("move %s, not restored at the start, aside: %w", dir, err)
	}
	if err := r.js.cfg.FS.SyncDir(path.Dir(dir)); err != nil {
		return err
	}
	delete(r.cons.unrestored, name)
	r.cons.held.Store(len(r.cons.unrestored) > 0)
	r.js.logf("consumer %s > %s: the files a start did not restore are kept as %s; the new consumer starts from its config", r.Name(), name, path.Base(aside))
	return nil
}

func (r *streamEntry) restoreConsumer(name string) error {
	dir := consumerDir(r.Dir(), name)
	var m consumerMeta
	if err := metafile.Read(r.js.cfg.FS, dir, &m); err != nil {
		return err
	}
	cs, err := r.Store().ConsumerStore(name)
	if err != nil {
		return err
	}
	st, err := cs.State()
	if errors.Is(err, store.ErrCorrupt) {
		// Nothing good is left of the state (the store kept the damaged
		// copies aside): start from the config with nothing acknowledged,
		// so that everything is delivered again rather than skipped.
		r.js.logf("consumer %s > %s: consumer state damaged (%v); restored from its config with nothing acknowledged: its messages are delivered again", r.Name(), name, err)
		st, err = &store.ConsumerState{}, nil
	}
	if err != nil {
		_ = cs.Close()
		return err
	}
	c := r.makeCons(m.Config, m.Created)
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
	r.cons.mu.Lock()
	r.cons.byName[name] = c
	r.cons.mu.Unlock()
	c.start()
	return nil
}

// start subscribes the consumer and starts its loop.
func (c *cons) start() {
	tr := c.js.tr
	subs := []struct {
		subj string
		h    MsgHandler
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
			c.js.logf("consumer %s > %s: subscribe %s: %v", c.sr.Name(), c.name, s.subj, err)
			continue
		}
		c.subs = append(c.subs, sub)
	}
	c.done.Add(1)
	go c.loop()
	c.Signal()
}

func (c *cons) onAck(subject, reply string, _, data []byte) {
	dc, sseq, cseq, ok := parseAckSubject(subject)
	if !ok {
		return
	}
	a := parseAckBody(data)
	a.dc, a.sseq, a.cseq, a.reply = dc, sseq, cseq, reply
	c.push(cevent{ack: &a})
}

func (c *cons) onPull(_, reply string, hdr, data []byte) {
	c.mu.Lock()
	push := c.cfg.IsPush()
	c.mu.Unlock()
	if reply != "" && !push && stream.RequiredLevelAbove(hdr, c.js.cfg.APILevel) {
		c.js.tr.Publish(reply, "", streamrun.StatusRequiredAPILevel, nil) // after the push check, as nats-server
		return
	}
	c.push(cevent{pull: &pullEvent{reply: reply, body: append([]byte(nil), data...)}})
}

func (c *cons) onFC(subject, _ string, _, _ []byte) { c.push(cevent{fcSub: subject}) }

// stop ends the consumer: unsubscribes, stops the loop, ends waiting pull
// requests with status (nil = none) and saves its state.
func (c *cons) stop(status []byte) {
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

// config returns a copy of the consumer's config.
func (c *cons) config() consumer.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Clone()
}

// update applies an allowed config change.
func (c *cons) update(cfg consumer.Config) error {
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
	return metafile.Write(c.js.cfg.FS, dir, consumerMeta{Config: cfg, Created: c.created})
}

// ConsumerInfo returns a consumer's info: 10059 or 10014 when missing.
func (js *JetStream) ConsumerInfo(streamName, name string) (*consumer.Info, *jserr.Error) {
	c, jerr := js.lookupConsumer(streamName, name)
	if jerr != nil {
		return nil, jerr
	}
	return c.info(), nil
}

func (js *JetStream) lookupConsumer(streamName, name string) (*cons, *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return nil, jerr
	}
	r.cons.mu.Lock()
	defer r.cons.mu.Unlock()
	if c := r.cons.byName[name]; c != nil {
		return c, nil
	}
	return nil, jserr.New(jserr.ConsumerNotFound)
}

// ConsumerNames returns the sorted names of a stream's consumers, or
// 10059.
func (js *JetStream) ConsumerNames(streamName string) ([]string, *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return nil, jerr
	}
	return r.consumerNames(), nil
}

func (r *streamEntry) consumerNames() []string {
	r.cons.mu.Lock()
	defer r.cons.mu.Unlock()
	names := make([]string, 0, len(r.cons.byName))
	for name := range r.cons.byName {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// DeleteConsumer stops and removes a consumer (protocol.md section
// 2.6.10): waiting pull requests get 409 Consumer Deleted; on an
// interest stream, messages no other consumer needs are removed. Errors:
// 10059, 10014.
func (js *JetStream) DeleteConsumer(streamName, name string) *jserr.Error {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return jerr
	}
	r.cons.mu.Lock()
	c := r.cons.byName[name]
	delete(r.cons.byName, name)
	if c != nil {
		r.cons.deleting[name] = true // its files are still there
	}
	r.cons.mu.Unlock()
	if c == nil {
		return jserr.New(jserr.ConsumerNotFound)
	}
	c.stop(consumer.StatusDeleted)
	c.removeFiles()
	r.cons.mu.Lock()
	delete(r.cons.deleting, name)
	r.cons.mu.Unlock()
	js.adviseConsumer(streamName, name, actionDelete)
	r.DropUnneededWait()
	return nil
}

// removeFiles deletes a persisted consumer's state and metadata.
func (c *cons) removeFiles() {
	if c.dir == "" {
		return
	}
	if cs, err := c.sr.Store().ConsumerStore(c.name); err == nil {
		_ = cs.Delete()
	}
	if err := metafile.RemoveAll(c.js.cfg.FS, c.dir); err != nil {
		c.js.logf("consumer %s > %s: remove %s: %v", c.sr.Name(), c.name, c.dir, err)
	}
}

// expireConsumer deletes a consumer past its inactive_threshold; it runs
// apart from the consumer's loop, which has returned.
func (js *JetStream) expireConsumer(c *cons) {
	go func() {
		r := c.sr
		r.cons.mu.Lock()
		if r.cons.byName[c.name] != c {
			r.cons.mu.Unlock()
			return
		}
		r.cons.mu.Unlock()
		_ = js.DeleteConsumer(r.Name(), c.name)
	}()
}

// PauseResult is the answer to a pause request.
type PauseResult struct {
	Paused    bool
	Until     time.Time
	Remaining time.Duration
}

// PauseConsumer pauses a consumer until the given time (the zero time or
// a time in the past resumes it), as protocol.md section 2.6.11
// describes. Errors: 10059, 10014.
func (js *JetStream) PauseConsumer(streamName, name string, until time.Time) (PauseResult, *jserr.Error) {
	c, jerr := js.lookupConsumer(streamName, name)
	if jerr != nil {
		return PauseResult{}, jerr
	}
	now := js.now()
	c.mu.Lock()
	var p int64
	if until.After(now) {
		p = until.UnixNano()
	}
	c.Commit(&consumer.Pause{Until: p})
	// A pause needs API level 1, and nats-server records that in the
	// consumer's metadata from the first pause on, resumes included.
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
		if err := metafile.Write(js.cfg.FS, dir, consumerMeta{Config: cfg, Created: c.created}); err != nil {
			js.logf("consumer %s > %s: save pause: %v", streamName, name, err)
		}
	}
	c.Signal()
	res := PauseResult{Paused: until.After(now), Until: until.UTC()}
	if res.Paused {
		res.Remaining = until.Sub(now)
	}
	js.adviseConsumerPause(streamName, name, res)
	return res, nil
}

// stopConsumers stops every consumer of a stream (stream deleted: status
// 409 Consumer Deleted; shutdown: none).
func (r *streamEntry) stopConsumers(status []byte) {
	r.cons.mu.Lock()
	r.cons.done = true
	cs := make([]*cons, 0, len(r.cons.byName))
	for _, c := range r.cons.byName {
		cs = append(cs, c)
	}
	r.cons.byName = map[string]*cons{}
	r.cons.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.stop(status) }()
	}
	wg.Wait()
}

// info returns the consumer's info (protocol.md section 3.5).
func (c *cons) info() *consumer.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	d, af := c.st.Delivered(), c.st.AckFloor()
	cfg := c.cfg.WithServerMetadata(c.js.cfg.Version, c.js.cfg.APILevel)
	info := &consumer.Info{
		Stream: c.sr.Name(), Name: c.name, Created: c.created, Config: &cfg,
		Delivered:      consumer.SequenceInfo{Consumer: d.Consumer, Stream: d.Stream, Last: timePtr(c.d.LastDelivered())},
		AckFloor:       consumer.SequenceInfo{Consumer: af.Consumer, Stream: af.Stream, Last: timePtr(c.lastAck)},
		NumAckPending:  c.st.NumAckPending(),
		NumRedelivered: c.st.NumRedelivered(),
		NumWaiting:     c.d.NumWaiting(),
		NumPending:     c.d.NumPending(c.sr.DurableSeq()),
		PushBound:      c.cfg.IsPush() && c.js.tr.HasInterest(c.cfg.DeliverSubject),
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
