package jetstream

import (
	"time"

	"errors"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"sort"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// StreamRequest is the config of a STREAM.CREATE or STREAM.UPDATE
// request with what else the request says: Pedantic refuses what would
// otherwise be fixed (stream.Config.CheckPedantic, 10157); Subject is
// the stream name of the request subject, which the config's name must
// equal (10056; "" when there is none: no check).
type StreamRequest struct {
	Config   stream.Config
	Pedantic bool
	Subject  string
	// Created, when not zero, is the stream's creation time (a clustered
	// stream's replica takes the one its assignment names); zero: now.
	Created time.Time
}

// AddStream creates a stream from cfg: StreamCreate without a request
// subject or pedantic mode.
func (js *JetStream) AddStream(cfg stream.Config) (*StreamInfo, *jserr.Error) {
	return js.StreamCreate(StreamRequest{Config: cfg})
}

// StreamCreate creates a stream (nats-server v2.15.2 STREAM.CREATE, jsStreamCreateRequest). The config
// is readied and checked in one place (stream.Config.PrepareCreate: the
// name against the subject, 10128, sealed, mirror_direct, pedantic
// 10157, defaults, validation), then against the server in nats-server's
// order: creating a stream that exists with the same config returns its
// info, with another config 10058; the storage limits (10028, 10047),
// source filters, and subjects that overlap another stream's (10065).
func (js *JetStream) StreamCreate(req StreamRequest) (*StreamInfo, *jserr.Error) {
	cfg, pedantic := req.Config, req.Pedantic
	prepare := cfg.PrepareCreate
	if js.clustered() {
		prepare = cfg.PrepareClusteredCreate
	}
	if err := prepare(req.Subject, pedantic); err != nil {
		return nil, err
	}
	js.mu.Lock()
	defer js.mu.Unlock()
	for ch := js.deleting[cfg.Name]; ch != nil; ch = js.deleting[cfg.Name] {
		js.mu.Unlock() // until the files of the stream deleted are gone
		<-ch
		js.mu.Lock()
	}
	if js.closed {
		return nil, jserr.New(jserr.NotEnabled)
	}
	if err := cfg.CheckOrigins(js.configLocked, pedantic); err != nil {
		return nil, err
	}
	if r := js.streams[cfg.Name]; r != nil {
		return js.existing(r, cfg)
	}
	// nats-server's order (addStream): limits, source filters, overlap.
	if err := js.checkAccountLimitsLocked(&cfg, true); err != nil {
		return nil, err
	}
	if err := js.checkReservationLocked(&cfg); err != nil {
		return nil, err
	}
	if err := cfg.CheckSourceFilters(); err != nil {
		return nil, err
	}
	// In a cluster the meta group decided the overlap (meta.State.Apply,
	// 10065) against the streams' current subjects, and a replica may
	// start from the config its stream's log starts from (jscluster).
	if !js.clustered() && js.overlapsLocked(cfg.Name, cfg.Subjects) {
		return nil, jserr.New(jserr.StreamSubjectOverlap)
	}
	r, err := js.createLocked(cfg, req.Created)
	if err != nil {
		return nil, jserr.From(err, jserr.StreamCreate)
	}
	js.adviseStream(cfg.Name, actionCreate)
	return r.info(InfoOptions{}), nil
}

// existing answers a create of a stream that already exists: its info
// when the config is the same (nats-server compares after copying the
// versioning metadata), else 10058.
func (js *JetStream) existing(r *streamEntry, cfg stream.Config) (*StreamInfo, *jserr.Error) {
	cur := r.Config()
	cfg.CopyVersionMetadata(&cur)
	if !cfg.Equal(&cur) {
		return nil, jserr.New(jserr.StreamNameExist)
	}
	return r.info(InfoOptions{}), nil
}

// createLocked writes the metadata, opens the store and starts the
// stream's runtime. The caller holds mu.
func (js *JetStream) createLocked(cfg stream.Config, created time.Time) (*streamEntry, error) {
	if created.IsZero() {
		created = js.now().UTC()
	}
	dir := ""
	if cfg.Storage == stream.FileStorage {
		dir = js.streamDir(cfg.Name)
		if err := js.setAside(cfg.Name, dir); err != nil {
			return nil, err
		}
		if err := js.makeStreamDir(dir, metaFile{Config: cfg, Created: created}); err != nil {
			js.discardStreamDir(dir)
			return nil, err
		}
	}
	r, err := js.openRunner(cfg, created, dir)
	if err != nil {
		js.discardStreamDir(dir)
		return nil, err
	}
	js.addLocked(r, cfg)
	return r, nil
}

// addLocked makes the started stream r, with config cfg, one of the
// account's and starts its sourcers. The caller holds mu.
func (js *JetStream) addLocked(r *streamEntry, cfg stream.Config) {
	js.streams[cfg.Name] = r
	delete(js.unrestored, cfg.Name)
	js.refreshCapturesLocked()
	r.srcs.Start(cfg, func(name string) *streamrun.Stream {
		if e := js.streams[name]; e != nil {
			return e.Stream
		}
		return nil
	})
}

// makeStreamDir creates a file stream's directory and its metadata
// durably.
func (js *JetStream) makeStreamDir(dir string, m metaFile) error {
	if err := js.cfg.FS.MkdirAll(dir); err != nil {
		return err
	}
	if err := js.cfg.FS.SyncDir(js.streamsDir()); err != nil {
		return err
	}
	return metafile.Write(js.cfg.FS, dir, m)
}

// UpdateStream changes a stream's config to cfg: StreamUpdate without a
// request subject or pedantic mode.
func (js *JetStream) UpdateStream(cfg stream.Config) (*StreamInfo, *jserr.Error) {
	return js.StreamUpdate(StreamRequest{Config: cfg})
}

// StreamUpdate changes a stream's config within what nats-server allows
// (nats-server v2.15.2 configUpdateCheck, what an update may change). The config is readied and checked in one
// place (stream.Config.PrepareUpdate: pedantic 10157, defaults,
// validation, the name against the subject 10056), then against the
// stream (updateLocked). A change of the mirror (only its removal is
// allowed) or of the sources restarts the stream's sourcers.
func (js *JetStream) StreamUpdate(req StreamRequest) (*StreamInfo, *jserr.Error) {
	cfg := req.Config
	if err := cfg.PrepareUpdate(req.Subject, req.Pedantic); err != nil {
		return nil, err
	}
	r, err := js.updateLocked(cfg)
	if err != nil {
		return nil, err
	}
	// An interest stream keeps only what a consumer or a sourcer still
	// needs: after a change to interest retention, nats-server v2.15.2
	// removes the rest (everything, without consumers) before it answers;
	// any other update of an interest stream finds nothing to remove.
	r.DropUnneededWait()
	r.srcs.Restart()
	return r.info(InfoOptions{}), nil
}

// updateLocked checks and applies an update under mu; it returns the
// stream's table entry.
func (js *JetStream) updateLocked(cfg stream.Config) (*streamEntry, *jserr.Error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	r := js.streams[cfg.Name]
	if r == nil {
		return nil, jserr.New(jserr.StreamNotFound)
	}
	old := r.Config()
	if err := stream.CheckUpdate(&old, &cfg); err != nil {
		return nil, err
	}
	if err := r.checkConsumerLimits(old.ConsumerLimits, cfg.ConsumerLimits); err != nil {
		return nil, err
	}
	// nats-server v2.15.2 checks the filters on create only, and then
	// cannot load the stream it updated: cairn answers an update error
	// (10069) with the create's text (docs/compatibility.md).
	if err := cfg.CheckSourceFilters(); err != nil {
		return nil, jserr.New(jserr.StreamUpdate, jserr.Sub("err", err.Description))
	}
	if err := cfg.CheckOrigins(js.configLocked, false); err != nil {
		return nil, err
	}
	if js.overlapsLocked(cfg.Name, cfg.Subjects) {
		return nil, jserr.New(jserr.StreamSubjectOverlap)
	}
	if err := js.checkAccountLimitsLocked(&cfg, false); err != nil {
		return nil, err
	}
	if err := js.checkReservationLocked(&cfg); err != nil {
		return nil, err
	}
	if err := r.checkDeadLetters(&cfg); err != nil {
		return nil, err
	}
	if err := js.applyUpdate(r, cfg); err != nil {
		return nil, jserr.From(err, jserr.StreamUpdate)
	}
	js.refreshCapturesLocked()
	js.adviseStream(cfg.Name, actionModify)
	return r, nil
}

// configLocked returns the config of a stream (stream.Origins). The
// caller holds mu.
func (js *JetStream) configLocked(name string) (stream.Config, bool) {
	r := js.streams[name]
	if r == nil {
		return stream.Config{}, false
	}
	return r.Config(), true
}

// applyUpdate persists the new config, proposes it to the stream as an
// UpdateConfig operation (the runtime takes it once applied,
// configApplied) and moves the subscriptions.
func (js *JetStream) applyUpdate(r *streamEntry, cfg stream.Config) error {
	if r.Dir() != "" {
		if err := metafile.Write(js.cfg.FS, r.Dir(), metaFile{Config: cfg, Created: r.Created()}); err != nil {
			return err
		}
	}
	out, ok := r.Do(&stream.UpdateConfig{Config: cfg})
	if !ok {
		return store.ErrClosed
	}
	if out.Err != nil {
		return out.Err
	}
	return r.Resubscribe(cfg)
}

// DeleteStream stops a stream and removes its files; a create of the
// same name meanwhile waits until they are gone (JetStream.deleting).
func (js *JetStream) DeleteStream(name string) *jserr.Error {
	js.mu.Lock()
	r := js.streams[name]
	delete(js.streams, name)
	js.refreshCapturesLocked()
	if r != nil {
		if js.deleting == nil {
			js.deleting = map[string]chan struct{}{}
		}
		ch := make(chan struct{})
		js.deleting[name] = ch
		defer func() {
			js.mu.Lock()
			delete(js.deleting, name)
			js.mu.Unlock()
			close(ch)
		}()
	}
	js.mu.Unlock()
	if r == nil {
		return jserr.New(jserr.StreamNotFound)
	}
	consumers := r.consumerNames()
	if err := r.Stop(consumer.StatusDeleted); err != nil && !errors.Is(err, store.ErrClosed) {
		js.logf("jetstream: stream %s: close before delete: %v", name, err)
	}
	if r.Dir() != "" {
		if err := js.removeStreamDir(name, r.Dir()); err != nil {
			return jserr.From(err, jserr.StreamDelete)
		}
	}
	for _, c := range consumers {
		js.adviseConsumer(name, c, actionDelete)
	}
	js.adviseStream(name, actionDelete)
	return nil
}

// StreamInfo returns a stream's info, or 10059.
func (js *JetStream) StreamInfo(name string, opts InfoOptions) (*StreamInfo, *jserr.Error) {
	r, err := js.lookup(name)
	if err != nil {
		return nil, err
	}
	return r.info(opts), nil
}

// Purge removes messages from a stream as req selects (the purge
// variants, ADR-10) and returns how many, through a Purge operation; a
// fenced stream is healed first when its disk takes writes again
// (heal.go). The operation
// decides: a sealed stream 10109, deny_purge 10110, seq with keep 10003,
// a store failure 10051 (stream.Stream.ApplyOp).
func (js *JetStream) Purge(name string, req store.PurgeRequest) (uint64, *jserr.Error) {
	r, jerr := js.healBefore(name)
	if jerr != nil {
		return 0, jerr
	}
	out, ok := r.Do(&stream.Purge{Request: req})
	if !ok {
		return 0, jserr.New(jserr.StreamNotFound)
	}
	if out.Err != nil {
		return 0, out.Err
	}
	return out.Removed, nil
}

// DeleteMsg removes one message (nats-server v2.15.2 STREAM.MSG.DELETE)
// through a DeleteMsg operation, after healing a fenced stream as Purge
// does. The operation decides: 10109 when sealed, 10057 with
// deny_delete or, for a file stream, for sequence 0 or outside the
// stream, 10043 when there is no such message.
func (js *JetStream) DeleteMsg(name string, seq uint64) *jserr.Error {
	r, jerr := js.healBefore(name)
	if jerr != nil {
		return jerr
	}
	out, ok := r.Do(&stream.DeleteMsg{Seq: seq})
	if !ok {
		return jserr.New(jserr.StreamNotFound)
	}
	return out.Err
}

// checkConsumerLimits refuses a change of consumer_limits that an existing
// consumer exceeds: 10069 "change to limits violates consumers: <names>"
// (names sorted; nats-server v2.15.2 updateWithAdvisory, which checks a
// limit only when it is set and changed).
func (r *streamEntry) checkConsumerLimits(old, cur stream.ConsumerLimits) *jserr.Error {
	inactive := cur.InactiveThreshold > 0 && cur.InactiveThreshold != old.InactiveThreshold
	ackPending := cur.MaxAckPending > 0 && cur.MaxAckPending != old.MaxAckPending
	if !inactive && !ackPending {
		return nil
	}
	var names []string
	for _, c := range r.cons.list() {
		cc := c.Config()
		if (inactive && cc.InactiveThreshold > cur.InactiveThreshold) ||
			(ackPending && cc.MaxAckPending > cur.MaxAckPending) {
			names = append(names, c.Name())
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return jserr.New(jserr.StreamUpdate, jserr.Sub("err", "change to limits violates consumers: "+strings.Join(names, ", ")))
}
