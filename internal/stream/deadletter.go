package stream

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/subject"
)

// Dead-letter subjects (docs/dead-letter.md): cairn's own extension,
// configured through metadata so that unmodified clients and the CLI
// can set it. nats-server v2.15.2 has no such thing; it only sends the
// MAX_DELIVERIES advisory.

// MetaDeadLetterSubject is the metadata key of a stream or consumer that
// names its dead-letter subject. A stream's applies to each of its
// consumers; a consumer's own overrides it, and an empty value turns it
// off for that consumer.
const MetaDeadLetterSubject = "cairn.dead_letter_subject"

// The headers a dead-letter copy carries besides the original's
// (DeadLetterHeader). Their names are in the canonical MIME form, so
// that clients that canonicalize header names find them as written.
const (
	HdrDeadLetterStream     = "Cairn-Dlq-Stream"     // the origin stream
	HdrDeadLetterConsumer   = "Cairn-Dlq-Consumer"   // the consumer that gave up on it
	HdrDeadLetterSequence   = "Cairn-Dlq-Sequence"   // its stream sequence in the origin stream
	HdrDeadLetterSubject    = "Cairn-Dlq-Subject"    // its subject in the origin stream
	HdrDeadLetterTimeStamp  = "Cairn-Dlq-Time-Stamp" // when the origin stream stored it (RFC 3339, UTC)
	HdrDeadLetterDeliveries = "Cairn-Dlq-Deliveries" // how many times the consumer delivered it
	HdrDeadLetterReason     = "Cairn-Dlq-Reason"     // max_deliver or term
	HdrDeadLetterMsgID      = "Cairn-Dlq-Msg-Id"     // the original's Nats-Msg-Id, when it had one
	hdrDeadLetterPrefix     = "Cairn-Dlq-"
)

// DeadLetterSubject returns the dead-letter subject named in metadata and
// whether the key is set (an empty value is set: it means none).
func DeadLetterSubject(meta map[string]string) (string, bool) {
	v, ok := meta[MetaDeadLetterSubject]
	return v, ok
}

// CheckDeadLetter checks the dead-letter subject that metadata names
// (if any), for a stream or one of its consumers, the stream being
// streamName capturing subjects. It returns 10052 (nats-server's error
// for an invalid stream or consumer config) when the subject is not a
// valid subject to publish to (wildcards, empty tokens, whitespace),
// starts with '$' (reserved for the server's own APIs: a copy sent to
// $JS.API would be a request), or is captured by the stream itself (each
// copy would be stored in the stream it was moved out of). An empty
// value is valid.
func CheckDeadLetter(meta map[string]string, streamName string, subjects []string) *jserr.Error {
	subj, ok := DeadLetterSubject(meta)
	if !ok || subj == "" {
		return nil
	}
	what := fmt.Sprintf("dead letter subject %q (metadata %s)", subj, MetaDeadLetterSubject)
	switch {
	case !subject.ValidLiteral(subj):
		return invalid(what + " is not a valid subject to publish to")
	case strings.HasPrefix(subj, "$"):
		return invalid(what + " must not start with '$'")
	case Captures(subjects, subj):
		return invalid(what + " is captured by stream " + streamName + " itself")
	}
	return nil
}

// Captures reports whether a stream with subjects stores what is
// published to the literal subject subj.
func Captures(subjects []string, subj string) bool {
	for _, s := range subjects {
		if subject.Match(subj, s) {
			return true
		}
	}
	return false
}

func (c *Config) checkDeadLetter() *jserr.Error {
	return CheckDeadLetter(c.Metadata, c.Name, c.Subjects)
}

// DeadLetterMsgID returns the Nats-Msg-Id of the dead-letter copy of
// stream sequence seq of the named stream moved by the named consumer:
// "<stream>.<consumer>.<seq>". A stream capturing the dead-letter
// subject stores it once however often the move is retried within its
// duplicate window.
func DeadLetterMsgID(stream, consumer string, seq uint64) string {
	return stream + "." + consumer + "." + strconv.FormatUint(seq, 10)
}

// MsgID returns the Nats-Msg-Id of a header block, "" when none.
func MsgID(hdr []byte) string { return headerString(hdr, hdrMsgID) }

// DeadLetterTime returns the original's stored time (unix ns) that a
// dead-letter copy's header names (HdrDeadLetterTimeStamp), 0 when it
// has none or it does not parse.
func DeadLetterTime(hdr []byte) int64 {
	t, err := time.Parse(time.RFC3339Nano, headerString(hdr, HdrDeadLetterTimeStamp))
	if err != nil {
		return 0
	}
	return t.UnixNano()
}

// DeadLetterOrigin is where a dead-letter copy comes from: the origin
// stream, consumer, stream sequence, subject and stored time (unix ns)
// of the message, the consumer's delivery count and the reason
// (store.DeadLetterReason's name).
type DeadLetterOrigin struct {
	Stream, Consumer string
	Seq              uint64
	Subject          string
	Time             int64
	Deliveries       uint64
	Reason           string
}

// DeadLetterHeader returns the header block of the dead-letter copy of a
// message stored with header hdr (nil for none): hdr without the fields
// a stream acts on when it stores a publish (Nats-Msg-Id, the
// Nats-Expected-* checks, Nats-Rollup, Nats-TTL, Nats-Marker-Reason,
// Nats-Incr, Nats-Batch-*, Nats-Schedule*, Nats-Scheduler,
// Nats-Stream-Source, Nats-Request-Info, Nats-Required-Api-Level:
// replayed on the copy they would refuse it, purge the dead-letter
// stream or expire the copy) and without earlier Cairn-Dlq-* fields,
// followed by the HdrDeadLetter* fields of o and Nats-Msg-Id =
// DeadLetterMsgID. hdr is not modified.
func DeadLetterHeader(hdr []byte, o DeadLetterOrigin) []byte {
	origID := MsgID(hdr)
	var b []byte
	if len(hdr) > 0 {
		b = removeFields(hdr, func(line []byte) bool {
			name, _, ok := bytes.Cut(line, []byte(":"))
			return ok && strippedOnCopy(string(name))
		})
	}
	if len(b) > len(crlf) {
		b = append([]byte(nil), b[:len(b)-len(crlf)]...)
	} else {
		b = []byte(hdrVersion + crlf)
	}
	add := func(k, v string) { b = append(append(append(append(b, k...), ": "...), v...), crlf...) }
	add(HdrDeadLetterStream, o.Stream)
	add(HdrDeadLetterConsumer, o.Consumer)
	add(HdrDeadLetterSequence, strconv.FormatUint(o.Seq, 10))
	add(HdrDeadLetterSubject, o.Subject)
	add(HdrDeadLetterTimeStamp, time.Unix(0, o.Time).UTC().Format(time.RFC3339Nano))
	add(HdrDeadLetterDeliveries, strconv.FormatUint(o.Deliveries, 10))
	add(HdrDeadLetterReason, o.Reason)
	if origID != "" {
		add(HdrDeadLetterMsgID, origID)
	}
	add(hdrMsgID, DeadLetterMsgID(o.Stream, o.Consumer, o.Seq))
	return append(b, crlf...)
}

// strippedOnCopy reports whether a dead-letter copy leaves out the
// field named name (DeadLetterHeader).
func strippedOnCopy(name string) bool {
	switch name {
	case hdrMsgID, hdrRollup, hdrTTL, hdrMarkerReason, hdrIncr, hdrScheduler,
		hdrStreamSource, hdrRequestInfo, "Nats-Required-Api-Level":
		return true
	}
	for _, p := range []string{"Nats-Expected-", "Nats-Batch-", hdrSchedule, hdrDeadLetterPrefix} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
