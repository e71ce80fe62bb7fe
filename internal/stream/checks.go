package stream

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/subject"
)

// The publish checks, in the order nats-server v2.15.2 runs them for a
// stream on a single server (server/stream.go processJetStreamMsgWithBatch
// and processJetStreamAtomicBatchMsg). The first failure is the answer
// and nothing is stored. The order differs from the table of the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg in two ways that nats-server v2.15.2 shows on the wire: the
// size checks (10054, 10097) come right after the sealed check, before
// any header check; and an unparsable Nats-TTL (10165) is reported only
// after every header check. On a stream without the newer features:
//
//  1. Nats-Batch-Id (atomic batch): sealed 10109, size 10054, then 10174.
//  2. File storage only: a record over 32 MiB, 10077 "message too large".
//  3. Sealed, 10109. Then Nats-Request-Info is removed.
//  4. Header and payload over max_msg_size, 10054; header over 65535, 10097.
//  5. Nats-Incr: 10171 if not an integer; for a publish (not a copy from
//     a source), 10168 on a stream without counters, 10170 with a
//     payload, 10171 with a header a counter cannot honour (checkIncr).
//  6. Nats-Expected-Stream, 10060.
//  7. Nats-TTL valid and non-zero: 10166 (no per-message TTL).
//  8. Nats-Expected-Last-Subject-Sequence[-Subject], 10071 or 10193.
//  9. Nats-Expected-Last-Sequence, 10071.
//  10. Nats-Schedule and its fields (checkSchedule: 10223, 10189, 10188,
//     10191, 10192, 10166, 10190, 10203; "Nats-Rollup: sub" added to a
//     schedule), then Nats-Schedule-Next and Nats-Scheduler
//     (checkScheduler: 10212, 10188); schedule.go.
//  11. Nats-Stream-Source, 10227.
//  12. Nats-Msg-Id seen in the window: a duplicate (success).
//  13. Nats-Expected-Last-Msg-Id, 10070.
//  14. Nats-Rollup: 10111 when not allowed or not "sub"/"all" (any case).
//  15. A counter stream (allow_msg_counter): Nats-Incr missing, 10169;
//     the last message on the subject not a counter, 10172; the counter
//     message built (counter.go) over the entry's max_payload, then over
//     max_msg_size, 10054; its header over 65535 bytes, 10097.
//  16. Nats-TTL unparsable or under 1 s, 10165. Then a TTL below
//     subject_delete_marker_ttl is raised to it (raiseTTL).
//
// Checks 5 to 14 run only when the message has a header.

// Size limits of a stored message.
const (
	maxHeaderLen    = math.MaxUint16 // bytes of a stored header block (10097)
	fileRecordLimit = 32 << 20       // bytes of a file store record (nats-server rlBadThresh)
)

// Rollup kinds, the lowercased Nats-Rollup values.
const (
	rollupSub = "sub"
	rollupAll = "all"
)

// pub is a publish being checked.
type pub struct {
	subject string
	hdr     []byte // after stripStatus, then without Nats-Request-Info
	data    []byte
	time    int64
	msgID   string // Nats-Msg-Id, "" when none
	rollup  string // rollupSub, rollupAll or ""
	badTTL  bool   // Nats-TTL present but invalid (check 15)
	ttl     int64  // Nats-TTL in seconds when valid (store.ParseTTL)
	sourced bool   // copied from another stream (Entry.Sourced)
	// incr is Nats-Incr when valid (checkIncr); maxPayload the entry's
	// MaxPayload; counter the value a counter stream stores (applyCounter).
	incr       *big.Int
	maxPayload int64
	counter    string
	schedule   bool // holds a valid schedule (checkSchedule)
}

func newPub(e Entry) *pub {
	return &pub{subject: e.Subject, hdr: stripStatus(e.Header), data: e.Data, time: e.Time, sourced: e.Sourced, maxPayload: e.MaxPayload}
}

// value returns the header field key of m.
func (m *pub) value(key string) []byte {
	v, _ := headerValue(m.hdr, key)
	return v
}

// checkBatch answers a publish that is part of an atomic batch (check 1).
func (s *Stream) checkBatch(m *pub) *jserr.Error {
	switch {
	case s.cfg.Sealed:
		return jserr.New(jserr.StreamSealed)
	case s.tooBig(m):
		return jserr.New(jserr.StreamMessageExceedsMaximum)
	}
	return jserr.New(jserr.AtomicPublishDisabled)
}

// checkBeforeDedupe runs checks 2 to 11 and reads the Nats-Msg-Id.
func (s *Stream) checkBeforeDedupe(m *pub) *jserr.Error {
	if s.cfg.Storage == FileStorage && fileRecordSize(m) > fileRecordLimit {
		return jserr.New(jserr.StreamStoreFailed, jserr.Sub("err", "message too large"))
	}
	if s.cfg.Sealed {
		return jserr.New(jserr.StreamSealed)
	}
	m.hdr = removeHeader(m.hdr, hdrRequestInfo)
	if s.tooBig(m) {
		return jserr.New(jserr.StreamMessageExceedsMaximum)
	}
	if len(m.hdr) > maxHeaderLen {
		return jserr.New(jserr.StreamHeaderExceedsMaximum)
	}
	if len(m.hdr) == 0 {
		return nil
	}
	for _, check := range headerChecks {
		if err := check(s, m); err != nil {
			return err
		}
	}
	m.msgID = string(m.value(hdrMsgID))
	return nil
}

// headerChecks are checks 5 to 11.
var headerChecks = []func(*Stream, *pub) *jserr.Error{
	(*Stream).checkIncr,
	(*Stream).checkExpectedStream,
	(*Stream).checkTTL,
	(*Stream).checkLastSubjectSeq,
	(*Stream).checkLastSeq,
	(*Stream).checkSchedule,
	func(s *Stream, m *pub) *jserr.Error { return s.checkScheduler(m, nil) },
	(*Stream).checkSourceHeader,
}

// checkAfterDedupe runs checks 13 to 16.
func (s *Stream) checkAfterDedupe(m *pub) *jserr.Error {
	if len(m.hdr) > 0 {
		if err := s.checkLastMsgID(m); err != nil {
			return err
		}
		if err := s.checkRollup(m); err != nil {
			return err
		}
	}
	if s.cfg.AllowMsgCounter {
		if err := s.applyCounter(m, nil, false); err != nil {
			return err
		}
		if s.tooBig(m) {
			return jserr.New(jserr.StreamMessageExceedsMaximum)
		}
		if len(m.hdr) > maxHeaderLen {
			return jserr.New(jserr.StreamHeaderExceedsMaximum)
		}
	}
	if m.badTTL {
		return jserr.New(jserr.MessageTTLInvalid)
	}
	s.raiseTTL(m)
	return nil
}

// fileRecordSize is the size of m as a nats-server file store record
// (fileStoreMsgSizeRaw).
func fileRecordSize(m *pub) uint64 {
	return recordSize(m.subject, m.hdr, m.data)
}

// entryRecordSize is fileRecordSize of an entry as published.
func entryRecordSize(e *Entry) uint64 { return recordSize(e.Subject, e.Header, e.Data) }

// errFileRecordTooLarge is the answer to a record over fileRecordLimit,
// nats-server's NewJSStreamStoreFailedError(ErrMsgTooLarge).
func errFileRecordTooLarge() *jserr.Error {
	return jserr.New(jserr.StreamStoreFailed, jserr.Sub("err", "message too large"))
}

// recordSize is nats-server's fileStoreMsgSizeRaw: a record's fixed 22
// bytes and 8 of checksum, the subject, the data, and the header with
// its 4-byte length when there is one.
func recordSize(subject string, hdr, data []byte) uint64 {
	n := uint64(22 + len(subject) + len(data) + 8)
	if len(hdr) > 0 {
		n += uint64(4 + len(hdr))
	}
	return n
}

// tooBig reports whether header and payload exceed max_msg_size.
func (s *Stream) tooBig(m *pub) bool {
	limit := int64(s.cfg.MaxMsgSize)
	return limit > 0 && int64(len(m.hdr))+int64(len(m.data)) > limit
}

func (s *Stream) checkExpectedStream(m *pub) *jserr.Error {
	if v := m.value(hdrExpectedStream); len(v) > 0 && string(v) != s.cfg.Name {
		return jserr.New(jserr.StreamNotMatch)
	}
	return nil
}

// checkTTL refuses a valid non-zero Nats-TTL on a stream without
// allow_msg_ttl and notes an invalid one for check 15.
func (s *Stream) checkTTL(m *pub) *jserr.Error {
	v := m.value(hdrTTL)
	if len(v) == 0 {
		return nil
	}
	ttl, ok := store.ParseTTL(string(v))
	if !ok {
		m.badTTL = true
		return nil
	}
	if ttl != 0 && !s.cfg.AllowMsgTTL && !m.sourced {
		return jserr.New(jserr.MessageTTLDisabled)
	}
	m.ttl = ttl
	return nil
}

// raiseTTL raises a TTL shorter than subject_delete_marker_ttl to it
// (whole seconds), so that a subject's marker cannot outlive the message
// it stands for, and rewrites the stored header as nats-server v2.15.2
// processJetStreamMsg does: the Nats-TTL field is removed and
// "Nats-TTL: <seconds>" added as the last field. "never" and streams with
// max_msgs_per_subject 1 are left alone.
func (s *Stream) raiseTTL(m *pub) {
	floor := int64(s.cfg.SubjectDeleteMarkerTTL.Seconds())
	if m.ttl <= 0 || floor <= 0 || s.cfg.MaxMsgsPerSubject == 1 || m.ttl >= floor {
		return
	}
	m.ttl = floor
	m.hdr = setHeader(m.hdr, hdrTTL, strconv.FormatInt(floor, 10))
}

// checkLastSubjectSeq checks Nats-Expected-Last-Subject-Sequence against
// the last message on the publish subject, or on the subject (wildcards
// allowed) of Nats-Expected-Last-Subject-Sequence-Subject. With no message
// there, 0 is the expected value.
func (s *Stream) checkLastSubjectSeq(m *pub) *jserr.Error {
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
	want := parseSeq(v)
	have, err := s.lastSeqOn(filter)
	if errors.Is(err, store.ErrNotFound) && want == 0 {
		return nil
	}
	if err != nil || have != want {
		return jserr.New(jserr.StreamWrongLastSequence, jserr.Sub("seq", have))
	}
	return nil
}

// lastSeqOn returns the sequence of the last stored message matching
// filter, or store.ErrNotFound. A literal subject is looked up in the
// subject index, so that the message is not loaded.
func (s *Stream) lastSeqOn(filter string) (uint64, error) {
	if subject.ValidLiteral(filter) {
		if ss, ok := s.store.SubjectsState(filter)[filter]; ok && ss.Msgs > 0 {
			return ss.Last, nil
		}
		return 0, store.ErrNotFound
	}
	last, err := s.store.LoadLast(filter)
	if err != nil {
		return 0, err
	}
	return last.Seq, nil
}

// checkLastSeq checks Nats-Expected-Last-Sequence against the stream's
// last assigned sequence (state.last_seq, which purges never lower).
func (s *Stream) checkLastSeq(m *pub) *jserr.Error {
	v := m.value(hdrExpectedLastSeq)
	if len(v) == 0 {
		return nil
	}
	if have := s.store.State(false).LastSeq; parseSeq(v) != have {
		return jserr.New(jserr.StreamWrongLastSequence, jserr.Sub("seq", have))
	}
	return nil
}

// checkSourceHeader refuses Nats-Stream-Source, reserved for sourcing.
func (s *Stream) checkSourceHeader(m *pub) *jserr.Error {
	if !m.sourced && len(m.value(hdrStreamSource)) > 0 {
		return jserr.New(jserr.MessageSourceHdrNotAllowed)
	}
	return nil
}

func (s *Stream) checkLastMsgID(m *pub) *jserr.Error {
	if v := m.value(hdrExpectedLastMsgID); len(v) > 0 && string(v) != s.lastMsgID {
		return jserr.New(jserr.StreamWrongLastMsgID, jserr.Sub("id", s.lastMsgID))
	}
	return nil
}

// checkRollup reads Nats-Rollup into m.rollup.
func (s *Stream) checkRollup(m *pub) *jserr.Error {
	v := m.value(hdrRollup)
	if len(v) == 0 {
		return nil
	}
	if !s.cfg.AllowRollup || s.cfg.DenyPurge {
		if m.sourced {
			return nil // stored as is, without the purge (nats-server allowRollupPurge)
		}
		return jserr.New(jserr.StreamRollupFailed, jserr.Sub("err", "rollup not permitted"))
	}
	switch r := strings.ToLower(string(v)); r {
	case rollupSub, rollupAll:
		m.rollup = r
		return nil
	default:
		return jserr.New(jserr.StreamRollupFailed, jserr.Sub("err", fmt.Sprintf("rollup value invalid: %q", r)))
	}
}
