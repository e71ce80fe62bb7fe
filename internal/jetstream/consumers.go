package jetstream

import (
	"errors"
	"fmt"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
	"github.com/nats-io/nuid"
)

// ConsumerAction is the action of a consumer create request (nats-server v2.15.2 consumer create, jsConsumerCreateRequest).
type ConsumerAction int

// Consumer create actions.
const (
	CreateOrUpdate ConsumerAction = iota // "" : create, or update an existing one
	CreateOnly                           // "create": an existing one must be equal
	UpdateOnly                           // "update": it must exist
)

// consumerDir is where a persisted consumer's metadata lives.
func consumerDir(streamDir, name string) string { return path.Join(streamDir, "obs", name) }

// CreateConsumer creates or updates a consumer on a stream (nats-server v2.15.2 consumer create, jsConsumerCreateRequest) and returns its info, taken before any delivery. Errors:
// 10059 stream not found, the config errors of consumer.Config (SetDefaults,
// Validate), 10148 (create of a different existing consumer), 10149
// (update of a missing one), 10012 (a refused update), 10026 (max
// consumers), 10099/10100 (workqueue overlap).
func (js *JetStream) CreateConsumer(streamName string, cfg consumer.Config, action ConsumerAction, pedantic bool) (*consumer.Info, *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return nil, jerr
	}
	return js.createConsumer(r, "", cfg, action, pedantic, time.Time{})
}

// CreateConsumerAt is CreateConsumer for the consumer named name created
// at created (not now): the cluster layer starts its replica of a
// consumer with the name and created time its meta group assigned, on
// every server and after every restart, as nats-server keeps a
// consumer's created time. name is the consumer's name when cfg has none
// (an ephemeral the meta leader named: its config keeps no name, as
// nats-server's); "" lets CreateConsumer name it.
func (js *JetStream) CreateConsumerAt(streamName, name string, cfg consumer.Config, action ConsumerAction, created time.Time) (*consumer.Info, *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return nil, jerr
	}
	return js.createConsumer(r, name, cfg, action, false, created)
}

// CreateConsumerAssigned is CreateConsumerAt checked against the stream
// config scfg rather than the one the stream runs here: the cluster
// layer starts and updates its replica of a consumer against the config
// the meta group assigns the stream, which the meta leader checked the
// consumer against, as nats-server v2.15.2 checks a consumer's replica
// against its stream's config, which follows the stream's assignment on
// every server. This server's replica of the stream may still run an
// older config of its group's log meanwhile (a new replica that has not
// caught up yet; docs/cluster.md, "Consumers in a cluster"): a
// consumer of num_replicas 3 would be refused with 10126 against the
// config of one replica the stream had earlier. scfg's retention,
// limits and subjects apply to the defaults and every check (the errors
// are CreateConsumer's).
func (js *JetStream) CreateConsumerAssigned(streamName, name string, cfg consumer.Config, action ConsumerAction, created time.Time, scfg stream.Config) (*consumer.Info, *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return nil, jerr
	}
	return js.createConsumerIn(r, name, cfg, action, false, created, scfg, nil)
}

// createConsumer is CreateConsumer on the stream r found (r may have
// been deleted since: 10059 then), for a consumer named name when cfg
// names none ("": a generated name).
func (js *JetStream) createConsumer(r *streamEntry, name string, cfg consumer.Config, action ConsumerAction, pedantic bool, created time.Time) (*consumer.Info, *jserr.Error) {
	return js.createConsumerIn(r, name, cfg, action, pedantic, created, r.Config(), nil)
}

// CreateConsumerState starts the consumer name of stream streamName
// (config cfg, created at created), which must not run here, with the
// committed state data of a replicated consumer rather than at its
// starting position: in a cluster, a consumer of one replica of a
// memory stream whose runtime a conversion of its stream, or the end of
// its own group, took its state from (docs/cluster.md, "Memory
// streams"). One that keeps files (consumerrun.Persisted: a stream
// replica's directory holds them, also a memory stream's) has them
// written with that state and is restored from them (WriteConsumerState,
// RestoreConsumer); one that keeps none is made as CreateConsumerAssigned
// makes it, checked against the stream config scfg, with that state
// (consumerrun.FromCommitted). Errors: CreateConsumer's, 10013 when it
// runs already, jserr.ConsumerCreate for a state that does not decode,
// the file system's.
func (js *JetStream) CreateConsumerState(streamName, name string, cfg consumer.Config, created time.Time, scfg stream.Config, state []byte) *jserr.Error {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return jerr
	}
	if consumerrun.Persisted(r.Dir(), &cfg) {
		if jerr := js.WriteConsumerState(streamName, name, cfg, created, state); jerr != nil {
			return jerr
		}
		_, jerr := js.RestoreConsumer(streamName, name, created)
		return jerr
	}
	if state == nil {
		state = []byte("null") // not a state: refused by FromCommitted
	}
	_, jerr = js.createConsumerIn(r, name, cfg, CreateOrUpdate, false, created, scfg, state)
	return jerr
}

// createConsumerIn is createConsumer checked against the stream config
// scfg; a new consumer starts from the committed state state when it is
// not nil (CreateConsumerState).
func (js *JetStream) createConsumerIn(r *streamEntry, name string, cfg consumer.Config, action ConsumerAction, pedantic bool, created time.Time, scfg stream.Config, state []byte) (*consumer.Info, *jserr.Error) {
	cfg.SetStaticMetadata()
	acc := js.consumerLimits()
	if err := cfg.SetDefaultsIn(&scfg, acc, pedantic); err != nil {
		return nil, err
	}
	if err := cfg.ValidateIn(&scfg, acc, false); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Durable
	}
	generated := cfg.Name == ""
	if generated {
		cfg.Name = name
		if name == "" {
			cfg.Name = randomName()
		}
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
		if state != nil {
			return nil, jserr.New(jserr.ConsumerNameExist)
		}
		old := c.Config()
		info, err := r.recreate(c, cfg, action, &scfg)
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
	ccfg := cfg
	if generated {
		ccfg.Name = "" // nats-server names it only at the top level of its info
	}
	if created.IsZero() {
		created = js.now()
	}
	var c *consumerrun.Consumer
	var err error
	switch {
	case state == nil:
		c, err = consumerrun.New(js.consumerEnv(), r.Stream, cfg.Name, ccfg, created.UTC())
	case consumerrun.Persisted(r.Dir(), &cfg):
		err = errors.New("a consumer that keeps files starts from them") // CreateConsumerState writes them
	default:
		c, err = consumerrun.FromCommitted(js.consumerEnv(), r.Stream, cfg.Name, ccfg, created.UTC(), state)
	}
	if err != nil {
		return nil, jserr.From(err, jserr.ConsumerCreate)
	}
	info := c.Info()
	r.cons.byName[cfg.Name] = c
	// What only the unrestored consumer held may go now that the new one
	// is in place (it may need some of it).
	refiltered = released
	js.succeedRetired(r.Name(), c)
	c.Start()
	if !js.cfg.ClusterAdvises {
		js.adviseConsumer(r.Name(), cfg.Name, actionCreate)
	}
	if info.Paused {
		c.AdvisePause(true, *cfg.PauseUntil)
	}
	return info, nil
}

// checkNewLocked runs nats-server v2.15.2's checks for a consumer that
// does not exist yet (checkNew) against the stream's other consumers.
// The caller holds r.cons.mu.
func (r *streamEntry) checkNewLocked(scfg *stream.Config, cfg *consumer.Config) *jserr.Error {
	return r.js.checkNew(scfg, cfg, r.consumerConfigsLocked(""))
}

// checkNew runs nats-server v2.15.2's checks for a consumer cfg that does
// not exist yet, of a stream whose config is scfg and whose consumers
// are others, in its order: max_consumers over the limitable consumers
// (10026: the stream's, the account's, else the server's
// default_max_consumers), the workqueue rules, the durable name length (10102).
func (js *JetStream) checkNew(scfg *stream.Config, cfg *consumer.Config, others []*consumer.Config) *jserr.Error {
	if scfg.MaxConsumers > 0 && cfg.Limitable() && countLimitable(others) >= scfg.MaxConsumers {
		return jserr.New(jserr.MaximumConsumersLimit)
	}
	if l := js.acctLimits(); l != nil && l.MaxConsumers > 0 && cfg.Limitable() && countLimitable(others) >= l.MaxConsumers {
		return jserr.New(jserr.MaximumConsumersLimit) // the account's max_consumers, per stream
	}
	if d := js.DefaultMaxConsumers(); d > 0 && scfg.MaxConsumers <= 0 && (js.acctLimits() == nil || js.acctLimits().MaxConsumers <= 0) &&
		cfg.Limitable() && countLimitable(others) >= d {
		return jserr.New(jserr.MaximumConsumersLimit) // the server's default_max_consumers
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

// recreate answers a create of an existing consumer of the stream whose
// config is scfg: with action create an equal config returns its info
// (else 10148); otherwise it is an update. The caller holds r.cons.mu.
func (r *streamEntry) recreate(c *consumerrun.Consumer, cfg consumer.Config, action ConsumerAction, scfg *stream.Config) (*consumer.Info, *jserr.Error) {
	old := c.Config()
	if action == CreateOnly {
		if !cfg.EqualForCreate(&old) {
			return nil, jserr.New(jserr.ConsumerAlreadyExists)
		}
		return c.Info(), nil
	}
	if scfg.Retention == stream.WorkQueuePolicy {
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
	if err := c.Update(cfg); err != nil {
		return nil, jserr.From(err, jserr.ConsumerCreate)
	}
	return c.Info(), nil // nats-server v2.15.2 sends no advisory for an update
}

// consumerConfigsLocked returns the configs of the stream's consumers
// except the one named skip. The caller holds r.cons.mu.
func (r *streamEntry) consumerConfigsLocked(skip string) []*consumer.Config {
	out := make([]*consumer.Config, 0, len(r.cons.byName))
	for name, c := range r.cons.byName {
		if name != skip {
			cfg := c.Config()
			out = append(out, &cfg)
		}
	}
	return out
}

// ConsumerName returns a new name for an unnamed ephemeral consumer: 8
// base-62 characters, as nats-server v2.15.2 generates
// (createConsumerName). The cluster layer's meta leader names the
// ephemerals it assigns with it.
func ConsumerName() string { return randomName() }

// ConsumerConfig returns a copy of the config of consumer name of stream
// streamName as it runs here. Errors: 10059, 10014.
func (js *JetStream) ConsumerConfig(streamName, name string) (consumer.Config, *jserr.Error) {
	c, jerr := js.lookupConsumer(streamName, name)
	if jerr != nil {
		return consumer.Config{}, jerr
	}
	return c.Config(), nil
}

// randomName returns an 8-character base-62 consumer name, as nats-server
// generates for unnamed ephemerals.
func randomName() string {
	id := nuid.Next()
	return id[len(id)-8:]
}

// restoreConsumers starts the persisted consumers of a file stream (in a
// cluster, only those Config.RestoreConsumer keeps). A consumer whose
// metadata or state cannot be read is reported and left on disk.
func (r *streamEntry) restoreConsumers() {
	if r.Dir() == "" {
		return
	}
	names, err := r.js.cfg.FS.ReadDir(path.Join(r.Dir(), "obs"))
	if err != nil {
		return
	}
	var restored []*consumerrun.Consumer
	for _, name := range names {
		if strings.Contains(name, ".") {
			continue // set aside (holdUnrestored); no consumer name has a dot
		}
		if keep := r.js.cfg.RestoreConsumer; keep != nil {
			var m consumerrun.Meta
			if err := metafile.Read(r.js.cfg.FS, consumerrun.Dir(r.Dir(), name), &m); err == nil && !keep(r.Name(), name, m.Created) {
				continue // not this server's (left on disk)
			}
		}
		c, err := consumerrun.Restore(r.js.consumerEnv(), r.Stream, name)
		if err != nil {
			r.holdUnrestored(name, err)
			continue
		}
		r.cons.mu.Lock()
		r.cons.byName[name] = c
		r.cons.mu.Unlock()
		r.js.succeedRetired(r.Name(), c)
		c.Start()
		restored = append(restored, c)
	}
	// Retention for what each consumer acknowledged, once every consumer
	// is back (interest counts them all).
	for _, c := range restored {
		r.retainRestored(c)
	}
}

// retainRestored runs retention for what the restored consumer c
// acknowledged: the acks replayed from its journal, and the messages its
// stored state has acknowledged that the stream still holds because a
// crash came between the state's save and their removal.
func (r *streamEntry) retainRestored(c *consumerrun.Consumer) {
	seqs := append(c.TakeReplayed(), r.ackedStillStored(c)...)
	if len(seqs) > 0 {
		slices.Sort(seqs)
		r.OnAcked(c, slices.Compact(seqs), false)
	}
}

// RestoreConsumer starts the persisted consumer name of stream
// streamName, created at created, from its files, as a start restores
// it: in a cluster, a consumer with one replica the meta group assigns to
// this server that the stream's start did not restore
// (Config.RestoreConsumer). found is false when it has no files here, or
// files of another consumer of that name (created at another time: one
// the meta group removed while this server was down), which the caller's
// create then replaces; true, with no error, when it runs already.
// Errors: 10059, and the consumer's own (its files cannot be read: it is
// reported, left on disk and held as a start holds it, as
// jserr.ConsumerCreate).
func (js *JetStream) RestoreConsumer(streamName, name string, created time.Time) (found bool, _ *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return false, jerr
	}
	if r.Dir() == "" || strings.Contains(name, ".") {
		return false, nil
	}
	r.cons.mu.Lock()
	running := r.cons.byName[name] != nil
	r.cons.mu.Unlock()
	if running {
		return true, nil
	}
	var m consumerrun.Meta
	switch err := metafile.Read(js.cfg.FS, consumerrun.Dir(r.Dir(), name), &m); {
	case vfs.IsNotExist(err):
		return false, nil
	case err == nil && !m.Created.Equal(created):
		js.logf("consumer %s > %s: the files here are those of a consumer of that name created at %v, not of the one created at %v: replaced", streamName, name, m.Created.UTC(), created.UTC())
		return false, nil
	}
	c, err := consumerrun.Restore(js.consumerEnv(), r.Stream, name)
	if err != nil {
		r.holdUnrestored(name, err)
		return true, jserr.From(err, jserr.ConsumerCreate)
	}
	r.cons.mu.Lock()
	if r.cons.done || r.cons.byName[name] != nil {
		r.cons.mu.Unlock()
		c.Stop(nil)
		return true, nil
	}
	r.cons.byName[name] = c
	r.cons.mu.Unlock()
	js.succeedRetired(r.Name(), c)
	c.Start()
	r.retainRestored(c)
	return true, nil
}

// ackedStillStored returns, for a workqueue or interest stream, the
// stored messages up to c's delivered sequence that c's filters match
// and that it acknowledged (neither pending nor held), as nats-server
// v2.15.2 acks them again when it restores a consumer
// (consumer.checkStateForInterestStream). It reads the stream from its
// first message, once, at a start.
func (r *streamEntry) ackedStillStored(c *consumerrun.Consumer) []uint64 {
	if r.Retention() == stream.LimitsPolicy {
		return nil
	}
	end, _ := c.NeedsAllAbove()
	var seqs []uint64
	for seq := r.Store().State(false).FirstSeq; seq > 0 && seq <= end; {
		m, err := r.Store().LoadNext(nil, seq)
		if err != nil || m.Seq > end {
			break
		}
		if c.Matches(m.Subject) && !c.NeedAck(m.Seq, m.Subject) {
			seqs = append(seqs, m.Seq)
		}
		seq = m.Seq + 1
	}
	return seqs
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
		r.js.logf("stream %s: interest retention removes no message while consumer %s is not restored; repair or remove %s and restart, or create a consumer named %s (the old files are then set aside)", r.Name(), name, consumerrun.Dir(r.Dir(), name), name)
	}
}

// releaseUnrestoredLocked moves the files of the unrestored consumer
// name out of the way of a new consumer of that name, to
// obs/<name>.unrestored-<unix nanoseconds>, and ends its hold on
// retention. It returns the rename's error (the create fails with
// 10012 then). The caller holds r.cons.mu.
func (r *streamEntry) releaseUnrestoredLocked(name string) error {
	dir := consumerrun.Dir(r.Dir(), name)
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

// ConsumerInfo returns a consumer's info: 10059 or 10014 when missing.
func (js *JetStream) ConsumerInfo(streamName, name string) (*consumer.Info, *jserr.Error) {
	c, jerr := js.lookupConsumer(streamName, name)
	if jerr != nil {
		return nil, jerr
	}
	info := c.Info()
	if f := js.cfg.ConsumerClusterInfo; f != nil {
		info.Cluster = f(streamName, name)
	}
	return info, nil
}

func (js *JetStream) lookupConsumer(streamName, name string) (*consumerrun.Consumer, *jserr.Error) {
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

// DeleteConsumer stops and removes a consumer (nats-server v2.15.2 CONSUMER.INFO, DELETE, NAMES and LIST): waiting pull requests get 409 Consumer Deleted; on an
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
	c.Stop(consumer.StatusDeleted)
	c.RemoveFiles()
	r.cons.mu.Lock()
	delete(r.cons.deleting, name)
	r.cons.mu.Unlock()
	if !js.cfg.ClusterAdvises {
		js.adviseConsumer(streamName, name, actionDelete)
	}
	r.DropUnneededWait()
	return nil
}

// expireConsumer deletes a consumer past its inactive_threshold; it runs
// apart from the consumer's loop, which has returned.
func (js *JetStream) expireConsumer(c *consumerrun.Consumer) {
	go func() {
		r := js.streamNamed(c.StreamName())
		if r == nil {
			return
		}
		r.cons.mu.Lock()
		if r.cons.byName[c.Name()] != c {
			r.cons.mu.Unlock()
			return
		}
		r.cons.mu.Unlock()
		_ = js.DeleteConsumer(r.Name(), c.Name())
	}()
}

// PauseResult is the answer to a pause request.
type PauseResult struct {
	Paused    bool
	Until     time.Time
	Remaining time.Duration
}

// PauseConsumer pauses a consumer until the given time (the zero time or
// a time in the past resumes it), as nats-server v2.15.2 CONSUMER.PAUSE, jsConsumerPauseRequest
// describes. Errors: 10059, 10014.
// UnpinConsumer ends the pinned client of priority group group of
// consumer name of stream streamName ($JS.API.CONSUMER.UNPIN, ADR-42;
// nats-server v2.15.2 jsConsumerUnpinRequest): 10059 without the
// stream, 10014 without the consumer, 10160 when the consumer has no
// such group.
func (js *JetStream) UnpinConsumer(streamName, name, group string) *jserr.Error {
	c, jerr := js.lookupConsumer(streamName, name)
	if jerr != nil {
		return jerr
	}
	if !c.Unpin(group) {
		return jserr.New(jserr.ConsumerInvalidPriorityGroup)
	}
	return nil
}

func (js *JetStream) PauseConsumer(streamName, name string, until time.Time) (PauseResult, *jserr.Error) {
	c, jerr := js.lookupConsumer(streamName, name)
	if jerr != nil {
		return PauseResult{}, jerr
	}
	now := js.now()
	paused := c.Pause(until, now)
	res := PauseResult{Paused: paused, Until: until.UTC()}
	if res.Paused {
		res.Remaining = until.Sub(now)
	}
	c.AdvisePause(res.Paused, res.Until)
	return res, nil
}
