package stream

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/transform"
)

// Stream is the state machine of one stream: its config, its store, the
// Nats-Msg-Id window and the id of the last stored message. Apply decides
// every publish from that state and the entry alone. A Stream is not safe
// for concurrent use: one goroutine (the stream's apply loop) owns it and
// makes every call, ExpireDedupe and SetConfig included.
type Stream struct {
	cfg       Config
	store     store.Store
	dedupe    dedupe
	lastMsgID string               // Nats-Msg-Id of the last stored message, "" if none
	in        *transform.Transform // subject_transform, nil without one
	rp        *transform.Transform // republish source to destination, nil without republish
	nextAge   int64                // the max_age deadline the last ExpireUpTo found (MaxAgeDeadline), 0 if none
	sched     *schedules           // the schedules, with allow_msg_schedules (schedule.go); nil without
}

// Entry is one publish to apply: the subject, the raw NATS header block
// (nil when the publish had none), the payload, and the time in unix
// nanoseconds, chosen once by whoever made the entry. Apply never
// modifies Header or Data, and passes them to store.Append without copying
// when it does not have to change the header.
//
// Sourced marks a message copied from another stream (SourcedEntry): the
// origin already validated it, so, as in nats-server v2.15.2
// (processJetStreamMsg with sourced set), its Nats-Stream-Source header,
// schedule headers, a Nats-TTL on a stream without allow_msg_ttl and a
// rollup the stream does not permit are not refused.
//
// FastBatch marks a message of a fast batch (FastBatches.Before sets
// it): Apply then checks it as nats-server v2.15.2 checks a batched
// message (batchcheck.go) followed by Nats-Expected-Last-Msg-Id, and a
// Nats-Msg-Id seen in the window is a Duplicate as for any publish.
//
// MaxPayload is the server's max_payload (bytes) when the entry was
// made, 0 for none: the limit of the message a counter stream builds
// from a Nats-Incr publish (counter.go), which nats-server v2.15.2 checks
// against its max_payload. The proposer sets it, so that the apply
// function reads no server setting; it is not used for other streams.
type Entry struct {
	Subject    string
	Header     []byte
	Data       []byte
	Time       int64
	Sourced    bool
	FastBatch  bool
	MaxPayload int64
}

// Result is the outcome of Apply. Exactly one of these holds:
//
//   - Err == nil, Duplicate false: stored at Seq.
//   - Duplicate: not stored; Seq is the sequence of the message first
//     stored with the same Nats-Msg-Id. This is a success.
//   - Err != nil: not stored (Seq 0), except when a rollup purge failed
//     after the message was stored at Seq (StoreErr is then set).
type Result struct {
	Seq       uint64
	Duplicate bool
	Err       *jserr.Error
	// Subject is the subject the message was stored under, the publish
	// subject as the stream's subject_transform mapped it; "" when
	// nothing was stored.
	Subject string
	// StoreErr is the store's error behind an Err of 10077 (or 10054 from
	// the store), for the runner to log or act on (store.ErrFenced).
	StoreErr error
	// Purged is the number of messages a Nats-Rollup removed, for the
	// runner to tell the consumers.
	Purged uint64
	// Rollup is the purge a Nats-Rollup ran (nil without one): the
	// consumers move past it as after an API purge, also when it
	// removed nothing (nats-server v2.15.2 purgeLocked).
	Rollup *store.PurgeRequest
	// RePublish is the copy of the stored message to publish, when the
	// stream republishes it; the runner publishes it once the message is
	// durable.
	RePublish *RePublished
	// Expires is the earliest time (unix nanoseconds; 0 for none) an
	// expiry pass has work for the stored message: its Nats-TTL removes
	// it, max_age does, or its Nats-Msg-Id leaves the duplicate window.
	// The runner brings its expiry pass forward to it when that is sooner
	// than the next pass (nats-server's resetAgeChk on a store, and its
	// dedupe timer).
	Expires int64
	// Value is the counter's value (base 10) a counter stream stored,
	// "" for other streams: the PubAck's "val" (ADR-49).
	Value string
	// SchedulerPurge is the purge a stored "Nats-Schedule-Next: purge"
	// ran on its Nats-Scheduler subject (nil without one), and
	// SchedulerPurged what it removed: the consumers move past it as
	// after a rollup.
	SchedulerPurge  *store.PurgeRequest
	SchedulerPurged uint64
}

// New returns the state machine of a stream with config cfg over st. cfg
// must have passed SetDefaults and Validate, and st must enforce
// cfg.StoreConfig(). New reads nothing from st: after opening a store that
// already holds messages, call Rebuild.
func New(cfg Config, st store.Store) *Stream {
	s := &Stream{cfg: cfg.Clone(), store: st, rp: compileRePublish(&cfg), in: compileTransform(&cfg)}
	if cfg.AllowMsgSchedules {
		s.sched = newSchedules()
	}
	return s
}

// Config returns a copy of the stream's config.
func (s *Stream) Config() Config { return s.cfg.Clone() }

// Retention returns the stream's retention policy without copying the
// config.
func (s *Stream) Retention() RetentionPolicy { return s.cfg.Retention }

// LimitsRemove reports whether a publish may push stored messages out:
// max_msgs, max_bytes or max_msgs_per_subject is set. It does not copy
// the config.
func (s *Stream) LimitsRemove() bool {
	return s.cfg.MaxMsgs > 0 || s.cfg.MaxBytes > 0 || s.cfg.MaxMsgsPerSubject > 0
}

// Store returns the stream's store.
func (s *Stream) Store() store.Store { return s.store }

// SetConfig makes cfg the stream's config after an update that
// CheckUpdate allowed: it gives the store the new limits (which removes
// what they push out, store.Store.UpdateConfig) and then takes the new
// duplicate window, which applies from the next ExpireDedupe, and the new
// subject_transform, which applies from the next Apply. On a store error
// the config is unchanged.
func (s *Stream) SetConfig(cfg Config) error {
	if err := s.store.UpdateConfig(cfg.StoreConfig()); err != nil {
		return fmt.Errorf("stream %s: update store limits: %w", s.cfg.Name, err)
	}
	s.cfg = cfg.Clone()
	s.in = compileTransform(&s.cfg)
	s.rp = compileRePublish(&s.cfg)
	if cfg.AllowMsgSchedules && s.sched == nil {
		// Schedules turned on: the messages stored already may hold
		// some (nats-server recovers them from its store then). A load
		// error leaves the schedules read before it.
		_ = s.rebuildSchedules()
	} else if !cfg.AllowMsgSchedules {
		s.sched = nil
	}
	return nil
}

// Apply applies one publish (nats-server v2.15.2 processJetStreamMsg; the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg): it maps
// the subject with the stream's subject_transform (mapSubject), runs
// nats-server v2.15.2's checks on the mapped subject in its order
// (checks.go), stores the
// message with store.Append (which applies the limits and assigns
// LastSeq+1), records its Nats-Msg-Id and runs the Nats-Rollup purge. It
// reads no clock: the entry's time is the message's time. The stored
// header is the entry's without an inline status line or
// Nats-Request-Info field.
func (s *Stream) Apply(e Entry) Result {
	e.Subject = s.mapSubject(e.Subject)
	m := newPub(e)
	if e.FastBatch {
		return s.applyFast(m)
	}
	if len(m.value(hdrBatchID)) > 0 {
		return Result{Err: s.checkBatch(m)}
	}
	if err := s.checkBeforeDedupe(m); err != nil {
		return Result{Err: err}
	}
	if m.msgID != "" {
		if seq, dup := s.dedupe.lookup(m.msgID); dup {
			return Result{Seq: seq, Duplicate: true}
		}
	}
	if err := s.checkAfterDedupe(m); err != nil {
		return Result{Err: err}
	}
	return s.commit(m)
}

// applyFast applies a message of a fast batch: the batch checks with
// nothing else in flight, then Nats-Expected-Last-Msg-Id (which
// nats-server checks after them), then the store.
func (s *Stream) applyFast(m *pub) Result {
	m.hdr = removeHeader(m.hdr, hdrRequestInfo)
	if dup, err := s.checkBatchMsg(m, &batchDiff{}, s.store.State(false).LastSeq); err != nil {
		if dup > 0 {
			return Result{Seq: dup, Duplicate: true}
		}
		return Result{Err: err}
	}
	if len(m.hdr) > 0 {
		if err := s.checkLastMsgID(m); err != nil {
			return Result{Err: err}
		}
	}
	s.raiseTTL(m)
	return s.commit(m)
}

// commit appends the checked message and does the bookkeeping of a
// stored message.
func (s *Stream) commit(m *pub) Result {
	rpSubj, rpLast, rpOK := s.rePublishTarget(m)
	seq, err := s.store.Append(store.Msg{Subject: m.subject, Header: m.hdr, Data: m.data, Time: m.time})
	if err != nil {
		return Result{Err: storeError(err), StoreErr: err}
	}
	s.lastMsgID = m.msgID
	if m.msgID != "" && s.cfg.DuplicateWindow > 0 {
		s.dedupe.add(m.msgID, seq, m.time)
	}
	r := Result{Seq: seq, Subject: m.subject, Value: m.counter}
	if m.ttl > 0 {
		r.Expires = store.TTLDeadline(m.time, m.ttl)
	}
	if m.msgID != "" && s.cfg.DuplicateWindow > 0 {
		r.Expires = earliest(r.Expires, m.time+int64(s.cfg.DuplicateWindow))
	}
	if s.cfg.MaxAge > 0 {
		r.Expires = earliest(r.Expires, m.time+int64(s.cfg.MaxAge))
	}
	if rpOK {
		r.RePublish = s.rePublish(m, rpSubj, seq, rpLast)
	}
	if s.sched != nil && len(m.hdr) > 0 {
		if due := s.sched.noteSchedule(seq, m.subject, m.hdr, m.time); due != 0 {
			r.Expires = earliest(r.Expires, due)
		}
	} else if s.sched != nil {
		s.sched.removeSubject(m.subject)
	}
	if m.rollup != "" {
		var req store.PurgeRequest
		req, r.Purged, err = s.rollup(m)
		r.Rollup = &req
		if err != nil {
			r.Err, r.StoreErr = storeError(err), err
		}
	}
	if len(m.hdr) > 0 {
		if r.SchedulerPurge, r.SchedulerPurged, err = s.purgeScheduler(m); err != nil && r.Err == nil {
			r.Err, r.StoreErr = storeError(err), err
		}
	}
	return r
}

// rollup purges what a stored rollup message replaces: with "sub" every
// other message on its subject, with "all" every other message, keeping
// the rollup message itself (nats-server processJetStreamMsgWithRollup).
func (s *Stream) rollup(m *pub) (store.PurgeRequest, uint64, error) {
	req := store.PurgeRequest{Keep: 1}
	if m.rollup == rollupSub {
		req.Subject = m.subject
	}
	n, err := s.store.Purge(req)
	return req, n, err
}

// storeError turns an Append or Purge error into the PubAck error:
// ErrMaxMsgSize is 10054, everything else 10077 with the store's text
// (nats-server's own text for a closed store). See StoreError.
func storeError(err error) *jserr.Error {
	if errors.Is(err, store.ErrMaxMsgSize) {
		return jserr.New(jserr.StreamMessageExceedsMaximum)
	}
	return StoreError(err, jserr.StreamStoreFailed)
}

// StoreError returns the API error a client gets for a store error, with
// code c (a code whose description is "{err}"): a full disk is 10023
// "insufficient resources", as nats-server answers once it runs out of
// space; a store fenced after an I/O error or holding damaged data gets
// a fixed text, since the store's own names server paths (the log has
// them, written where the error happened); other store errors keep their
// text, which names no path.
func StoreError(err error, c jserr.ErrCode) *jserr.Error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return jserr.New(jserr.InsufficientResources)
	case errors.Is(err, store.ErrClosed):
		return jserr.New(c, jserr.Sub("err", "store is closed"))
	case errors.Is(err, store.ErrFenced):
		return jserr.New(c, jserr.Sub("err", "stream store failed after a write error"))
	case errors.Is(err, store.ErrCorrupt):
		return jserr.New(c, jserr.Sub("err", "stream store holds damaged data"))
	}
	return jserr.New(c, jserr.Sub("err", err))
}

// ExpireDedupe forgets the Nats-Msg-Ids stored at least duplicate_window
// before now (unix nanoseconds), as nats-server's dedupe timer does. The
// runner calls it on the apply goroutine, at DedupeDeadline or on a
// regular tick; until it does, an id stays a duplicate.
func (s *Stream) ExpireDedupe(now int64) {
	s.dedupe.expire(now, int64(s.cfg.DuplicateWindow))
}

// ExpiryIdle reports whether an Expire at now (unix nanoseconds) would
// change nothing: no remembered Nats-Msg-Id leaves the duplicate window
// by then, and no stored message can have expired (the stream is empty,
// or has neither max_age nor per-message TTLs, or only max_age, whose
// first deadline the last ExpireUpTo found still ahead, and no mirror or
// source: messages stored since are younger). The runner of a replicated stream then proposes no
// Expire, so that an idle stream's group appends nothing and goes quiet
// (docs/cluster.md, "Idle groups").
func (s *Stream) ExpiryIdle(now int64) bool {
	if d, ok := s.DedupeDeadline(); ok && d <= now {
		return false
	}
	switch {
	case s.cfg.MaxAge == 0 && !s.cfg.AllowMsgTTL:
		return true
	case s.store.State(false).Msgs == 0:
		return true
	case s.cfg.AllowMsgTTL, s.cfg.Mirror != nil, len(s.cfg.Sources) > 0:
		return false // a copy keeps its origin's time: it may be older than nextAge
	}
	return s.nextAge > now
}

// DedupeDeadline returns the time (unix nanoseconds) at which the oldest
// remembered Nats-Msg-Id leaves the window under the current config, and
// false when no id is remembered.
func (s *Stream) DedupeDeadline() (int64, bool) {
	t, ok := s.dedupe.oldest()
	return t + int64(s.cfg.DuplicateWindow), ok
}

// NumMsgIDs returns the number of Nats-Msg-Ids in the window.
func (s *Stream) NumMsgIDs() int { return s.dedupe.size() }

// LastMsgID returns the Nats-Msg-Id of the last stored message ("" when
// it had none), the value Nats-Expected-Last-Msg-Id is checked against.
func (s *Stream) LastMsgID() string { return s.lastMsgID }

// earliest returns the earlier of two deadlines, 0 meaning none.
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
