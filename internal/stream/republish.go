package stream

import (
	"strconv"
	"time"

	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/transform"
)

// RePublished is the copy of a stored message that a stream with
// republish publishes (the direct get headers, ADR-31): to Subject, with Header
// (the stored header followed by Nats-Stream, Nats-Subject,
// Nats-Sequence, Nats-Time-Stamp, Nats-Last-Sequence and, with
// headers_only, Nats-Msg-Size) and Data (nil with headers_only).
type RePublished struct {
	Subject string
	Header  []byte
	Data    []byte
}

// compileRePublish returns the transform of cfg's republish, or nil.
// Validate has checked that it compiles.
func compileRePublish(cfg *Config) *transform.Transform {
	if cfg.RePublish == nil {
		return nil
	}
	src := cfg.RePublish.Source
	if src == "" {
		src = ">"
	}
	t, err := transform.New(src, cfg.RePublish.Destination)
	if err != nil {
		return nil
	}
	return t
}

// rePublishTarget returns the subject m is republished to and the last
// sequence stored on m's subject before it (Nats-Last-Sequence, 0 for
// none), read before m is stored; ok is false when m is not republished
// (nats-server v2.15.2 processJetStreamMsg: no republish, no match, or a
// mapped subject that is not a valid publish subject).
func (s *Stream) rePublishTarget(m *pub) (subj string, last uint64, ok bool) {
	if s.rp == nil {
		return "", 0, false
	}
	subj, ok = s.rp.Map(m.subject)
	if !ok || !subject.ValidLiteral(subj) {
		return "", 0, false
	}
	if ss, found := s.store.SubjectsState(m.subject)[m.subject]; found {
		last = ss.Last
	}
	return subj, last, true
}

// rePublish builds the copy of m, stored at seq, for subject subj.
func (s *Stream) rePublish(m *pub, subj string, seq, last uint64) *RePublished {
	b := AppendStoredFields(nil, m.hdr, s.cfg.Name, m.subject, seq, m.time)
	b = append(b, "Nats-Last-Sequence: "...)
	b = strconv.AppendUint(b, last, 10)
	b = append(b, crlf...)
	rp := &RePublished{Subject: subj}
	if s.cfg.RePublish.HeadersOnly {
		b = append(b, "Nats-Msg-Size: "...)
		b = strconv.AppendInt(b, int64(len(m.data)), 10)
		b = append(b, crlf...)
	} else {
		rp.Data = m.data
	}
	rp.Header = append(b, crlf...)
	return rp
}

// AppendStoredFields appends to b the header block hdr without its
// closing blank line (a bare "NATS/1.0" line when hdr has no block),
// then the fields that say where a message is stored, each ending in
// CRLF: Nats-Stream (streamName), Nats-Subject (subj), Nats-Sequence
// (seq) and Nats-Time-Stamp (t, unix nanoseconds, written in RFC 3339
// with nanoseconds, UTC). The caller appends its own fields and the
// closing CRLF. nats-server v2.15.2 starts a republished message and a
// direct get reply alike (nats-server v2.15.2's enumerations; the direct get headers, ADR-31).
func AppendStoredFields(b, hdr []byte, streamName, subj string, seq uint64, t int64) []byte {
	if len(hdr) >= len(emptyBlock) {
		b = append(b, hdr[:len(hdr)-len(crlf)]...)
	} else {
		b = append(b, hdrVersion+crlf...)
	}
	b = append(b, "Nats-Stream: "...)
	b = append(b, streamName...)
	b = append(b, crlf+"Nats-Subject: "...)
	b = append(b, subj...)
	b = append(b, crlf+"Nats-Sequence: "...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, crlf+"Nats-Time-Stamp: "...)
	b = time.Unix(0, t).UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, crlf...)
}
