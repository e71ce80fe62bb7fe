package stream

import (
	"errors"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
)

// Outcome is what ApplyOp decided. Which fields an operation fills:
//
//   - Publish: Results, one per entry (Result says stored, duplicate or
//     refused).
//   - Copy: Results, one per entry applied, from the first; when one was
//     refused it is the last, with Err set, and the rest were not tried.
//   - BatchCommit: Results, one per message stored; or Err (nothing
//     stored).
//   - Purge: Removed, or Err (and StoreErr for a store failure).
//   - DeleteMsg: Err (and StoreErr) when nothing was removed.
//   - UpdateConfig: Err (10069 with the store's text) and StoreErr when
//     the store refused the new limits; the config is then unchanged.
//   - Expire: Results, one per subject delete marker stored or refused;
//     Next, the next TTL deadline (store.Expiry.Next); Changed, whether
//     messages were removed or markers stored; StoreErr when the store
//     failed.
//   - Remove: Removed, and StoreErr when the store failed.
//   - FireSchedules: Results, one per scheduled message stored or
//     refused; Next, when the next schedule is due (0 for none);
//     Changed, whether a message was tried; StoreErr when a schedule's
//     message could not be read.
type Outcome struct {
	Results  []Result
	Err      *jserr.Error
	StoreErr error
	Removed  uint64
	Next     int64
	Changed  bool
}

// reset empties o for reuse, keeping Results' backing array.
func (o *Outcome) reset() {
	clear(o.Results)
	*o = Outcome{Results: o.Results[:0]}
}

// ApplyOp applies one operation to the stream and writes what it decided
// into out (reused: its Results are overwritten). It is the stream's one
// apply function (docs/engine.md): its outcome depends only on the
// stream's state (config, store, duplicate window, last Nats-Msg-Id) and
// op; it reads no clock, no random source and no server setting, and
// iterates no map, so every replica that applies the same operations in
// the same order reaches the same state. Results alias out.Results
// until the next call.
func (s *Stream) ApplyOp(op Op, out *Outcome) {
	out.reset()
	switch o := op.(type) {
	case *Publish:
		for i := range o.Entries {
			out.Results = append(out.Results, s.Apply(o.Entries[i]))
		}
	case *Copy:
		s.applyCopy(o, out)
	case *BatchCommit:
		rs, err := s.ApplyBatch(*o)
		out.Results, out.Err = append(out.Results, rs...), err
	case *Purge:
		s.applyPurge(o.Request, out)
	case *DeleteMsg:
		out.Err, out.StoreErr = s.applyDelete(o.Seq)
	case *UpdateConfig:
		if err := s.SetConfig(o.Config); err != nil {
			out.Err, out.StoreErr = jserr.From(err, jserr.StreamUpdate), err
		}
	case *Expire:
		s.applyExpire(o.Time, out)
	case *Remove:
		if len(o.Seqs) > 0 {
			out.Removed, out.StoreErr = s.store.DeleteMany(o.Seqs)
		}
	case *FireSchedules:
		s.applyFire(o.Time, out)
	}
}

// applyCopy stores a Copy's entries until the first refusal.
func (s *Stream) applyCopy(c *Copy, out *Outcome) {
	for i := range c.Entries {
		var r Result
		if c.Mirror && i < len(c.OriginSeqs) {
			r = s.ApplyMirror(c.Entries[i], c.OriginSeqs[i])
		} else {
			r = s.Apply(c.Entries[i])
		}
		out.Results = append(out.Results, r)
		if r.Err != nil {
			return
		}
	}
}

// applyPurge runs a purge after nats-server v2.15.2's checks, in its
// order (jsStreamPurgeRequest): sealed 10109, deny_purge 10110, seq
// with keep 10003.
func (s *Stream) applyPurge(req store.PurgeRequest, out *Outcome) {
	switch {
	case s.cfg.Sealed:
		out.Err = jserr.New(jserr.StreamSealed)
	case s.cfg.DenyPurge:
		out.Err = jserr.New(jserr.StreamPurgeFailed, jserr.Sub("err", "stream purge not permitted"))
	case req.Seq > 0 && req.Keep > 0:
		out.Err = jserr.New(jserr.BadRequest)
	default:
		n, err := s.store.Purge(req)
		if err != nil {
			out.Err, out.StoreErr = StoreError(err, jserr.StreamGeneralError), err
		}
		out.Removed = n
	}
}

// applyDelete removes one message after nats-server v2.15.2's checks
// (jsMsgDeleteRequest, and its file store's answers for a sequence out
// of range: 10057 with the store's text; its memory store answers 10043
// like any missing sequence).
func (s *Stream) applyDelete(seq uint64) (*jserr.Error, error) {
	switch {
	case s.cfg.Sealed:
		return jserr.New(jserr.StreamSealed), nil
	case s.cfg.DenyDelete:
		return jserr.New(jserr.StreamMsgDeleteFailed, jserr.Sub("err", "message delete not permitted")), nil
	}
	if s.cfg.Storage == FileStorage {
		state := s.store.State(false)
		switch {
		case seq == 0 || seq < state.FirstSeq:
			return jserr.New(jserr.StreamMsgDeleteFailed, jserr.Sub("err", "no message found")), nil
		case seq > state.LastSeq:
			return jserr.New(jserr.StreamMsgDeleteFailed, jserr.Sub("err", "stream store EOF")), nil
		}
	}
	err := s.store.Delete(seq)
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, store.ErrNotFound):
		return jserr.New(jserr.SequenceNotFound, jserr.Sub("seq", seq)), err
	}
	return StoreError(err, jserr.StreamMsgDeleteFailed), err
}

// applyExpire removes what expired at now, stores the subject delete
// markers that leaves, each as a publish stamped now, and forgets the
// Nats-Msg-Ids that left the duplicate window.
func (s *Stream) applyExpire(now int64, out *Outcome) {
	before := s.store.State(false).Msgs
	markers, next, err := s.ExpireUpTo(now)
	out.Next, out.StoreErr = next, err
	for _, m := range markers {
		out.Results = append(out.Results, s.Apply(m))
	}
	out.Changed = len(markers) > 0 || s.store.State(false).Msgs != before
	s.ExpireDedupe(now)
}
