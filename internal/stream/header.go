package stream

import (
	"bytes"
	"strconv"
)

// The publish headers the stream acts on (the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg;
// nats-server v2.15.2 server/stream.go). Names are matched exactly, case
// included.
const (
	hdrMsgID             = "Nats-Msg-Id"
	hdrExpectedStream    = "Nats-Expected-Stream"
	hdrExpectedLastSeq   = "Nats-Expected-Last-Sequence"
	hdrExpectedSubjSeq   = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectedSubjSubj  = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrExpectedLastMsgID = "Nats-Expected-Last-Msg-Id"
	hdrRollup            = "Nats-Rollup"
	hdrTTL               = "Nats-TTL"
	hdrMarkerReason      = "Nats-Marker-Reason"
	hdrIncr              = "Nats-Incr"
	hdrBatchID           = "Nats-Batch-Id"
	hdrSchedule          = "Nats-Schedule"
	hdrScheduleTimeZone  = "Nats-Schedule-Time-Zone"
	hdrScheduleNext      = "Nats-Schedule-Next"
	hdrScheduler         = "Nats-Scheduler"
	hdrStreamSource      = "Nats-Stream-Source"
	hdrRequestInfo       = "Nats-Request-Info"
)

// Header block framing (the NATS header block (ADR-4)).
const (
	hdrVersion = "NATS/1.0"
	crlf       = "\r\n"
	emptyBlock = hdrVersion + crlf + crlf // the smallest block, 12 bytes
)

// headerValue returns the value of the first field named key in the NATS
// header block hdr, and whether there is one. It reads the block as
// nats-server's sliceHeader does: the name must start a line after the
// first (status) line and be followed at once by ':'; the name is matched
// exactly (case-sensitive); spaces (not tabs) before the value are
// skipped; the value runs to the end of its line, trailing spaces kept.
// The value aliases hdr.
func headerValue(hdr []byte, key string) ([]byte, bool) {
	_, rest, ok := bytes.Cut(hdr, []byte(crlf))
	for ok && len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte(crlf))
		if v, found := fieldValue(line, key); found {
			return v, true
		}
	}
	return nil, false
}

// fieldValue returns the value of line when it is the field key.
func fieldValue(line []byte, key string) ([]byte, bool) {
	if len(line) <= len(key) || line[len(key)] != ':' || string(line[:len(key)]) != key {
		return nil, false
	}
	return bytes.TrimLeft(line[len(key)+1:], " "), true
}

// HdrStreamIdentity is the header of a stream's identity (Identity) in a
// consumer create or reset request and its answer (nats-server v2.15.2
// JSStreamIdentity).
const HdrStreamIdentity = "Nats-Stream-Identity"

// HeaderValue returns the value of the field key of hdr and whether the
// field is there (headerValue); the value aliases hdr.
func HeaderValue(hdr []byte, key string) ([]byte, bool) { return headerValue(hdr, key) }

// HeaderString returns the value of the field key of the header block
// hdr, "" when absent, read as nats-server's sliceHeader reads it
// (headerValue).
func HeaderString(hdr []byte, key string) string { return headerString(hdr, key) }

// headerString returns the value of key as a string, "" when absent.
func headerString(hdr []byte, key string) string {
	v, _ := headerValue(hdr, key)
	return string(v)
}

// stripStatus removes an inline status ("NATS/1.0 503 ...") from the first
// line of hdr, as nats-server does to every message a stream ingests
// (removeHeaderStatusIfPresent). A block left with no field becomes nil.
// hdr itself is never modified.
func stripStatus(hdr []byte) []byte {
	i := bytes.IndexByte(hdr, '\r')
	if !bytes.HasPrefix(hdr, []byte(hdrVersion)) || i <= len(hdrVersion) {
		return hdr
	}
	out := append([]byte(hdrVersion), hdr[i:]...)
	if len(out) == len(emptyBlock) {
		return nil
	}
	return out
}

// removeHeader returns hdr without its fields named key (nats-server
// removeHeaderIfPresent), or nil when no field is left. hdr itself is
// never modified; when there is no such field hdr is returned as is.
func removeHeader(hdr []byte, key string) []byte {
	if _, ok := headerValue(hdr, key); !ok {
		return hdr
	}
	return removeFields(hdr, func(line []byte) bool {
		_, drop := fieldValue(line, key)
		return drop
	})
}

// removeFields returns a copy of hdr without the field lines drop
// selects, or nil when no field is left.
func removeFields(hdr []byte, drop func(line []byte) bool) []byte {
	first, rest, _ := bytes.Cut(hdr, []byte(crlf))
	out := append(append(make([]byte, 0, len(hdr)), first...), crlf...)
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte(crlf))
		if len(line) == 0 || !drop(line) {
			out = append(append(out, line...), crlf...)
		}
	}
	if len(out) <= len(emptyBlock) {
		return nil
	}
	return out
}

// parseSeq reads a header number as nats-server's parseInt64 does: ASCII
// digits only, no sign; anything else (or an empty value) gives -1, which
// as a sequence is the largest uint64. Overflow wraps as in nats-server.
func parseSeq(v []byte) uint64 {
	if len(v) == 0 {
		return ^uint64(0)
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return ^uint64(0)
		}
		n = n*10 + int64(c-'0')
	}
	return uint64(n)
}

// setHeader returns hdr with its fields named key replaced by one
// "key: value" field at the end of the block, as nats-server's
// removeHeaderIfPresent followed by genHeader build it; a nil hdr gets a
// new block. hdr itself is never modified.
func setHeader(hdr []byte, key, value string) []byte {
	hdr = removeHeader(hdr, key)
	out := make([]byte, 0, len(hdr)+len(key)+len(value)+len(emptyBlock)+4)
	if len(hdr) > len(crlf) {
		out = append(out, hdr[:len(hdr)-len(crlf)]...)
	} else {
		out = append(out, hdrVersion+crlf...)
	}
	out = append(append(append(append(out, key...), ": "...), value...), crlf...)
	return append(out, crlf...)
}

// RequiredLevelAbove reports whether hdr carries a Nats-Required-Api-Level
// that is not a number or is above level, as nats-server v2.15.2
// errorOnRequiredApiLevel decides for direct gets and pull requests
// (answered "NATS/1.0 412 Required Api Level").
func RequiredLevelAbove(hdr []byte, level int) bool {
	v, ok := headerValue(hdr, "Nats-Required-Api-Level")
	if !ok || len(v) == 0 {
		return false
	}
	n, err := strconv.Atoi(string(v))
	return err != nil || n > level
}

// replaceHeader returns hdr with the value of its first field named key
// replaced by value, where it stands (the single space after the colon,
// if there was one, kept), or, without such a field, with "key: value"
// added at the end of the block. It is nats-server v2.15.2's setHeader
// (client.go), which counters use for Nats-Incr and Nats-Counter-Sources;
// the field is found as its getHeaderKeyIndex finds it. A field whose
// line has no CR is left alone. hdr itself is never modified.
func replaceHeader(hdr []byte, key, value string) []byte {
	if start := headerKeyIndex(hdr, key); start >= 0 {
		vs := start + len(key) + 1
		if vs < len(hdr) && hdr[vs] == ' ' {
			vs++
		}
		ve := bytes.IndexByte(hdr[vs:], '\r')
		if ve < 0 {
			return hdr
		}
		ve += vs
		out := make([]byte, 0, len(hdr)-(ve-vs)+len(value))
		out = append(append(append(out, hdr[:vs]...), value...), hdr[ve:]...)
		return out
	}
	base := hdr
	tail := crlf
	if bytes.HasSuffix(hdr, []byte(crlf)) {
		base, tail = hdr[:len(hdr)-len(crlf)], crlf+crlf
	}
	out := make([]byte, 0, len(base)+len(key)+len(value)+6)
	out = append(append(append(append(out, base...), key...), ": "...), value...)
	return append(out, tail...)
}

// headerKeyIndex returns where the field key starts in hdr, -1 when
// there is none, as nats-server v2.15.2's getHeaderKeyIndex finds it:
// the name must follow a CRLF and be followed by ':'; a candidate
// found within the first two bytes of what is left to search ends the
// search.
func headerKeyIndex(hdr []byte, key string) int {
	offset := 0
	for len(hdr) > 0 {
		i := bytes.Index(hdr[offset:], []byte(key))
		if i < 2 {
			return -1
		}
		i += offset
		if i >= len(hdr)-1 || hdr[i-1] != '\n' || hdr[i-2] != '\r' {
			offset = i + len(key)
			continue
		}
		if i+len(key) >= len(hdr) {
			return -1
		}
		if hdr[i+len(key)] != ':' {
			offset = i + len(key)
			continue
		}
		return i
	}
	return -1
}

// SetHeader returns hdr with its fields named key replaced by one
// "key: value" field at the end of the block (setHeader; nats-server
// v2.15.2 setHeader as its message tracing uses it); a nil hdr gets a new
// block. hdr itself is never modified.
func SetHeader(hdr []byte, key, value string) []byte { return setHeader(hdr, key, value) }
