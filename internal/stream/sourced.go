package stream

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// SourcedEntry returns the entry a sourcing stream applies for msg, a
// message of the origin stream taken through the source whose
// IndexName is iname (nats-server v2.15.2 processInboundSourceMsg,
// nats-server v2.15.2 StreamSource; ADR-59): the subject is subj (msg's subject, or as the
// source's transform mapped it); the header is msg's without its
// Nats-Stream-Source (a daisy chain), Nats-Expected-* and Nats-Batch-*
// fields, followed by
//
//	Nats-Stream-Source: <origin> <origin seq> <filters> <destinations> <msg subject> <ident>
//
// where ident is the origin's identity (Identity); the time is now (unix
// nanoseconds): a sourced message is a new message of the sourcing
// stream.
func SourcedEntry(msg *store.StoredMsg, iname, ident, subj string, now int64) Entry {
	hdr := removeHeaderPrefix(msg.Header, "Nats-Expected-")
	hdr = removeHeaderPrefix(hdr, "Nats-Batch-")
	name, rest, _ := strings.Cut(iname, " ")
	var v strings.Builder
	v.WriteString(name)
	v.WriteByte(' ')
	v.WriteString(strconv.FormatUint(msg.Seq, 10))
	v.WriteByte(' ')
	v.WriteString(rest)
	v.WriteByte(' ')
	v.WriteString(msg.Subject)
	if ident != "" {
		v.WriteByte(' ')
		v.WriteString(ident)
	}
	return Entry{Subject: subj, Header: setHeader(hdr, hdrStreamSource, v.String()), Data: msg.Data, Time: now, Sourced: true}
}

// MirroredHeader returns the header a mirror stores for a message of its
// origin: without the Nats-Expected-* and Nats-Batch-* fields, as
// nats-server v2.15.2 removes them from what its mirror consumer
// delivers (a mirror validates nothing and takes no batch). hdr itself
// is not modified.
func MirroredHeader(hdr []byte) []byte {
	if len(hdr) == 0 {
		return hdr
	}
	return removeHeaderPrefix(removeHeaderPrefix(hdr, "Nats-Expected-"), "Nats-Batch-")
}

// SourcedFrom reads the Nats-Stream-Source header of a stored message: the
// IndexName of the source it came through, its sequence in the origin and
// the origin's identity ("" when the header has none). ok is false when
// hdr has no such header or it cannot be read.
func SourcedFrom(hdr []byte) (iname string, seq uint64, ident string, ok bool) {
	v, found := headerValue(hdr, hdrStreamSource)
	if !found {
		return "", 0, "", false
	}
	// Split on spaces only, as nats-server v2.15.2 (streamAndSeq): the
	// index name of a source with several transforms joins them with
	// form feeds, which strings.Fields would split too.
	f := strings.Split(string(v), " ")
	if len(f) < 4 {
		return "", 0, "", false
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return "", 0, "", false
	}
	if len(f) >= 6 {
		ident = f[5]
	}
	return f[0] + " " + f[2] + " " + f[3], seq, ident, true
}

// Identity is a stream's identity as nats-server v2.15.2 computes it
// (stream.identity, getHash): the first 8 bytes of the SHA-256 of its
// creation time in RFC 3339 with nanoseconds (UTC), each mapped to a
// base-62 digit. It tells a recreated origin from the one a source read.
func Identity(created time.Time) string {
	return Hash8(created.UTC().Format(time.RFC3339Nano))
}

// Hash8 is nats-server v2.15.2's getHash: the first 8 bytes of the
// SHA-256 of s, each mapped to a base-62 digit.
func Hash8(s string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(s))
	b := make([]byte, 8)
	for i := range b {
		b[i] = digits[int(sum[i]%62)]
	}
	return string(b)
}

// ApplyMirror stores a message of the origin stream in a mirror at the
// origin's sequence seq (nats-server v2.15.2 processInboundMirrorMsg):
// a sequence at or below the mirror's last is already there (Duplicate,
// nothing stored); a gap is skipped (store.Store.SkipTo), so the
// sequences between are never stored, as in the origin. No header check
// or Nats-Msg-Id window applies: the origin made those decisions; the
// mirror's own limits do apply, and so does its subject_transform, as
// nats-server's processJetStreamMsg applies it to every message. Errors
// are those of Apply's store step (10077, 10054). A stored message is
// republished like any (Result.RePublish), as nats-server's mirror
// stores through processJetStreamMsg.
func (s *Stream) ApplyMirror(e Entry, seq uint64) Result {
	e.Subject = s.mapSubject(e.Subject)
	m := &pub{subject: e.Subject, hdr: e.Header, data: e.Data, time: e.Time}
	rpSubj, rpLast, rpOK := s.rePublishTarget(m)
	last := s.store.State(false).LastSeq
	if seq <= last {
		return Result{Seq: seq, Duplicate: true}
	}
	if seq > last+1 {
		if err := s.store.SkipTo(seq); err != nil {
			return Result{Err: storeError(err), StoreErr: err}
		}
	}
	got, err := s.store.Append(store.Msg{Subject: e.Subject, Header: e.Header, Data: e.Data, Time: e.Time})
	if err != nil {
		return Result{Err: storeError(err), StoreErr: err}
	}
	if got != seq {
		err := errors.New("mirror sequence mismatch")
		return Result{Seq: got, Err: storeError(err), StoreErr: err}
	}
	r := Result{Seq: got, Subject: e.Subject}
	if ttl := store.MsgTTL(e.Header); ttl > 0 {
		r.Expires = store.TTLDeadline(e.Time, ttl)
	}
	if rpOK {
		r.RePublish = s.rePublish(m, rpSubj, got, rpLast)
	}
	return r
}

// removeHeaderPrefix returns hdr without the fields whose names start
// with prefix (nats-server removeHeaderIfPrefixPresent), or nil when no
// field is left. hdr itself is never modified.
func removeHeaderPrefix(hdr []byte, prefix string) []byte {
	if !bytes.Contains(hdr, []byte(crlf+prefix)) {
		return hdr
	}
	return removeFields(hdr, func(line []byte) bool { return bytes.HasPrefix(line, []byte(prefix)) })
}
