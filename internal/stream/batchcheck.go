package stream

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
)

// The checks of a batched publish. nats-server v2.15.2 checks every
// message of an atomic batch, at its commit, and every message of a fast
// batch with one function (jetstream_batching.go
// checkMsgHeadersPreClusteredProposal), whose order and answers differ
// from those of a single publish (checks.go). With the features cairn
// serves, in its order (the first failure is the answer):
//
//  1. File storage only: a record over 32 MiB, 10077 "message too large".
//  2. With a header: header over 65535 bytes, 10097; Nats-Incr, 10171 if
//     not an integer, else 10168; Nats-Expected-Stream, 10060; Nats-TTL
//     on a stream without allow_msg_ttl, 10166, or unparsable, 10165;
//     Nats-Msg-Id already in the batch or in the duplicate window, 10201
//     (the window's sequence is kept for a fast batch's duplicate
//     answer); Nats-Stream-Source, 10227.
//  3. A counter stream: the counter message built as for a publish
//     (counter.go: 10169, 10172), from the running value of the batch's
//     earlier messages on the subject; over the smaller of max_payload
//     and max_msg_size, 10054.
//  4. With a header: Nats-Expected-Last-Sequence against the stream's last
//     sequence plus the messages of the batch before this one, 10071;
//     when it matches but is not the batch's first message, 10164.
//     Nats-Expected-Last-Subject-Sequence: 10164 when the batch already
//     wrote to that subject, else 10071 against the subject's last
//     sequence (checked once per subject and batch); the -Subject header
//     alone, 10193. Schedules (schedule.go: checkSchedule, then
//     checkScheduler, which takes a schedule the batch stored before as
//     the last on its subject). Nats-Rollup
//     (lowercased): 10111 "rollup not permitted", "batch rollup sub
//     invalid" when the batch already wrote to the subject, "batch
//     rollup all invalid" when it is not the batch's first message, or
//     "rollup value invalid".
//  5. With discard new: the stream's messages and bytes plus the batch's
//     over max_msgs or max_bytes, 10077 "maximum messages exceeded" or
//     "maximum bytes exceeded"; with discard_new_per_subject and no
//     Nats-Rollup, the subject's messages plus the batch's over
//     max_msgs_per_subject, 10077 "maximum messages per subject
//     exceeded".

// batchDiff is what the messages of one batch checked so far add to the
// stream (nats-server batchStagedDiff on one server).
type batchDiff struct {
	msgIDs   map[string]struct{}
	inflight map[string]*inflightSubject // by stored subject
	ops      uint64                      // messages in inflight
	bytes    uint64                      // their store sizes
	expected map[string]uint64           // Nats-Expected-Last-Subject-Sequence results by subject
	counters map[string]*counterTotal    // running counter values by subject (counter streams)
}

type inflightSubject struct {
	ops      uint64
	schedule bool // the batch's last message on the subject holds a schedule
}

// checkBatchMsg runs the checks above on m, the message checked after
// the batch's messages in d, with clseq the stream's last sequence plus
// the number of those messages. On a duplicate Nats-Msg-Id it also
// returns the sequence the window holds for it (0 for one seen earlier
// in the batch). On success it records m in d and fills m.msgID,
// m.rollup and m.ttl.
func (s *Stream) checkBatchMsg(m *pub, d *batchDiff, clseq uint64) (uint64, *jserr.Error) {
	if s.cfg.Storage == FileStorage && fileRecordSize(m) > fileRecordLimit {
		return 0, jserr.New(jserr.StreamStoreFailed, jserr.Sub("err", "message too large"))
	}
	if len(m.hdr) > 0 {
		if dup, err := s.checkBatchHeaders(m, d); err != nil {
			return dup, err
		}
	}
	if s.cfg.AllowMsgCounter {
		if d.counters == nil {
			d.counters = map[string]*counterTotal{}
		}
		if err := s.applyCounter(m, d.counters, true); err != nil {
			return 0, err
		}
	}
	if len(m.hdr) > 0 {
		if err := s.checkBatchExpected(m, d, clseq); err != nil {
			return 0, err
		}
		if err := s.checkSchedule(m); err != nil {
			return 0, err
		}
		if err := s.checkScheduler(m, d); err != nil {
			return 0, err
		}
		if err := s.checkBatchRollup(m, d); err != nil {
			return 0, err
		}
	}
	return 0, s.trackBatchMsg(m, d)
}

// checkBatchHeaders runs the checks of step 2.
func (s *Stream) checkBatchHeaders(m *pub, d *batchDiff) (uint64, *jserr.Error) {
	if len(m.hdr) > maxHeaderLen {
		return 0, jserr.New(jserr.StreamHeaderExceedsMaximum)
	}
	if err := s.checkIncr(m); err != nil {
		return 0, err
	}
	if err := s.checkExpectedStream(m); err != nil {
		return 0, err
	}
	if v := m.value(hdrTTL); len(v) > 0 && !m.sourced {
		ttl, ok := store.ParseTTL(string(v))
		switch {
		case (ttl != 0 || !ok) && !s.cfg.AllowMsgTTL:
			return 0, jserr.New(jserr.MessageTTLDisabled)
		case !ok:
			return 0, jserr.New(jserr.MessageTTLInvalid)
		}
		m.ttl = ttl
	}
	if id := string(m.value(hdrMsgID)); id != "" {
		if _, seen := d.msgIDs[id]; seen {
			return 0, jserr.New(jserr.AtomicPublishContainsDuplicateMessage)
		}
		if seq, dup := s.dedupe.lookup(id); dup {
			return seq, jserr.New(jserr.AtomicPublishContainsDuplicateMessage)
		}
		if d.msgIDs == nil {
			d.msgIDs = map[string]struct{}{}
		}
		d.msgIDs[id] = struct{}{}
		m.msgID = id
	}
	return 0, s.checkSourceHeader(m)
}

// checkBatchExpected runs the Nats-Expected-Last-Sequence and
// Nats-Expected-Last-Subject-Sequence checks of step 4.
func (s *Stream) checkBatchExpected(m *pub, d *batchDiff, clseq uint64) *jserr.Error {
	if v, ok := headerValue(m.hdr, hdrExpectedLastSeq); ok && len(v) > 0 {
		if parseSeq(v) != clseq {
			return jserr.New(jserr.StreamWrongLastSequence, jserr.Sub("seq", clseq))
		}
		if d.ops > 0 {
			return jserr.New(jserr.StreamWrongLastSequenceConstant)
		}
	}
	filter := string(m.value(hdrExpectedSubjSubj))
	v := m.value(hdrExpectedSubjSeq)
	if len(v) == 0 {
		if filter != "" {
			return jserr.New(jserr.StreamExpectedLastSeqPerSubjectInvalid)
		}
		return nil
	}
	if filter == "" {
		filter = m.subject
	}
	if _, ok := d.inflight[filter]; ok {
		return jserr.New(jserr.StreamWrongLastSequenceConstant)
	}
	want := parseSeq(v)
	if have, ok := d.expected[filter]; ok {
		if have != want {
			return jserr.New(jserr.StreamWrongLastSequence, jserr.Sub("seq", have))
		}
		return nil
	}
	have, err := s.lastSeqOn(filter)
	if errors.Is(err, store.ErrNotFound) && want == 0 {
		have, err = 0, nil
	}
	if err != nil || have != want {
		return jserr.New(jserr.StreamWrongLastSequence, jserr.Sub("seq", have))
	}
	if d.expected == nil {
		d.expected = map[string]uint64{}
	}
	d.expected[filter] = have
	return nil
}

// checkBatchRollup reads Nats-Rollup into m.rollup with the batch's
// rules.
func (s *Stream) checkBatchRollup(m *pub, d *batchDiff) *jserr.Error {
	v := strings.ToLower(string(m.value(hdrRollup)))
	if v == "" {
		return nil
	}
	permitted := s.cfg.AllowRollup && !s.cfg.DenyPurge
	if !permitted && !m.sourced {
		return rollupFailed("rollup not permitted")
	}
	switch v {
	case rollupSub:
		if _, ok := d.inflight[m.subject]; ok {
			return rollupFailed("batch rollup sub invalid")
		}
	case rollupAll:
		if d.ops > 0 {
			return rollupFailed("batch rollup all invalid")
		}
	default:
		return rollupFailed(fmt.Sprintf("rollup value invalid: %q", v))
	}
	if permitted {
		m.rollup = v
	}
	return nil
}

func rollupFailed(text string) *jserr.Error {
	return jserr.New(jserr.StreamRollupFailed, jserr.Sub("err", text))
}

// trackBatchMsg records m in d and runs the discard new checks of step 5.
func (s *Stream) trackBatchMsg(m *pub, d *batchDiff) *jserr.Error {
	if d.inflight == nil {
		d.inflight = map[string]*inflightSubject{}
	}
	in := d.inflight[m.subject]
	if in == nil {
		in = &inflightSubject{}
		d.inflight[m.subject] = in
	}
	in.ops++
	in.schedule = m.schedule
	d.ops++
	scfg := s.cfg.StoreConfig()
	d.bytes += scfg.MsgSize(m.subject, m.hdr, m.data)
	if s.cfg.Discard != DiscardNew {
		return nil
	}
	if s.cfg.MaxMsgs > 0 || s.cfg.MaxBytes > 0 {
		st := s.store.State(false)
		switch {
		case s.cfg.MaxMsgs > 0 && st.Msgs+d.ops > uint64(s.cfg.MaxMsgs):
			return storeError(store.ErrMaxMsgs)
		case s.cfg.MaxBytes > 0 && st.Bytes+d.bytes > uint64(s.cfg.MaxBytes):
			return storeError(store.ErrMaxBytes)
		}
	}
	if s.cfg.DiscardNewPerSubject && s.cfg.MaxMsgsPerSubject > 0 {
		if _, hasRollup := headerValue(m.hdr, hdrRollup); !hasRollup {
			have := s.store.SubjectsState(m.subject)[m.subject].Msgs
			if have+in.ops > uint64(s.cfg.MaxMsgsPerSubject) {
				return storeError(store.ErrMaxMsgsPerSubject)
			}
		}
	}
	return nil
}
