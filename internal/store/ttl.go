package store

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// Per-message TTL (docs/protocol.md section 4.2, the Nats-TTL row; nats-server
// v2.15.2 server/stream.go getMessageTTL and parseMessageTTL,
// memstore.go and filestore.go expireMsgs). A store whose Config has
// MsgTTL reads the Nats-TTL header of every message it stores (and, on
// recovery, of every message it finds), so the TTL lives in the stored
// header alone: no engine writes anything else for it.

// Header names the store reads (nats-server JSMessageTTL, JSMarkerReason,
// KVOperation).
const (
	TTLHeader          = "Nats-TTL"
	MarkerReasonHeader = "Nats-Marker-Reason"
	kvOperationHeader  = "KV-Operation"
	kvOperationPurge   = "PURGE"
)

// TTLNever is the TTL of a message whose Nats-TTL is "never": it never
// expires, not even by MaxAge.
const TTLNever = -1

// ParseTTL reads a Nats-TTL value as nats-server's parseMessageTTL does
// and returns whole seconds: "never" (any case) is TTLNever; a Go
// duration (time.ParseDuration, so "0" is one) must be at least 1 s and
// gives its whole seconds; anything else must be ASCII digits, read as
// seconds (nats-server parseInt64, overflow wrapping as there; "00" is 0,
// no TTL). ok is false for a duration under 1 s and for anything else,
// which a stream answers with 10165.
func ParseTTL(v string) (ttl int64, ok bool) {
	if strings.EqualFold(v, "never") {
		return TTLNever, true
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < time.Second {
			return 0, false
		}
		return int64(d.Seconds()), true
	}
	if v == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n < 0 {
		return 0, false
	}
	return n, true
}

// MsgTTL returns the TTL in seconds the NATS header block hdr gives its
// message: > 0 seconds, TTLNever, or 0 for no TTL (no Nats-TTL field, or
// one ParseTTL refuses), as nats-server's getMessageTTL.
func MsgTTL(hdr []byte) int64 {
	v, ok := headerValue(hdr, TTLHeader)
	if !ok || len(v) == 0 {
		return 0
	}
	ttl, _ := ParseTTL(string(v))
	return ttl
}

// IsDeleteMarker reports whether hdr is the header of a subject delete
// marker: a non-empty Nats-Marker-Reason, or KV-Operation: PURGE
// (nats-server isSubjectDeleteMarker). Expiring a marker leaves no new
// marker.
func IsDeleteMarker(hdr []byte) bool {
	if v, _ := headerValue(hdr, MarkerReasonHeader); len(v) > 0 {
		return true
	}
	v, _ := headerValue(hdr, kvOperationHeader)
	return string(v) == kvOperationPurge
}

// TTLDeadline returns the time (unix nanoseconds) at which a message
// stored at t with a TTL of ttl seconds (> 0) expires: t + ttl s, the
// largest int64 when that overflows.
func TTLDeadline(t, ttl int64) int64 {
	if ttl > (math.MaxInt64-max(t, 0))/int64(time.Second) {
		return math.MaxInt64
	}
	return t + ttl*int64(time.Second)
}

// headerValue returns the value of the first field named key in the NATS
// header block hdr, read as nats-server's sliceHeader reads it: the name
// starts a line after the status line, matches exactly and is followed by
// ':'; leading spaces of the value are skipped.
func headerValue(hdr []byte, key string) ([]byte, bool) {
	_, rest, ok := bytes.Cut(hdr, []byte("\r\n"))
	for ok && len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(line) > len(key) && line[len(key)] == ':' && string(line[:len(key)]) == key {
			return bytes.TrimLeft(line[len(key)+1:], " "), true
		}
	}
	return nil, false
}

// TTLIndex is what a store knows of its messages' TTLs: the deadlines of
// the messages with a positive TTL, in a min-heap (16 bytes a message),
// and the ascending sequences of the messages with TTLNever (8 bytes a
// message). Messages without a TTL cost nothing. An engine owns one
// under its lock and rebuilds it from the stored headers on open.
//
// Removals by other means (Delete, Purge, limits, MaxAge) leave their
// entries behind: users of the index check that a sequence is still
// stored, and Prune drops the stale entries once they could outnumber the
// stored messages (MaybePrune), so the index never holds more than about
// twice as many entries as the store holds messages.
type TTLIndex struct {
	heap  []ttlEntry
	never []uint64
}

// ttlEntry is one message's deadline.
type ttlEntry struct {
	at  int64 // unix nanoseconds
	seq uint64
}

// pruneSlack is the number of entries the index may hold beyond twice
// the stored messages before MaybePrune prunes it.
const pruneSlack = 1024

// Add records the TTL of the message seq stored at t with header hdr
// (MsgTTL). Sequences must be added in ascending order.
func (x *TTLIndex) Add(seq uint64, t int64, hdr []byte) {
	if len(hdr) == 0 {
		return
	}
	switch ttl := MsgTTL(hdr); {
	case ttl > 0:
		x.push(ttlEntry{at: TTLDeadline(t, ttl), seq: seq})
	case ttl == TTLNever:
		x.never = append(x.never, seq)
	}
}

// Never reports whether the message seq was added with TTLNever.
func (x *TTLIndex) Never(seq uint64) bool {
	_, found := slices.BinarySearch(x.never, seq)
	return found
}

// Next returns the earliest deadline in the index, and false when there is
// none. The message it belongs to may have been removed since.
func (x *TTLIndex) Next() (int64, bool) {
	if len(x.heap) == 0 {
		return 0, false
	}
	return x.heap[0].at, true
}

// nextStored drops the earliest deadlines of messages no longer stored
// and returns the earliest left, 0 when there is none.
func (x *TTLIndex) nextStored(stored func(seq uint64) bool) int64 {
	for len(x.heap) > 0 {
		if stored(x.heap[0].seq) {
			return x.heap[0].at
		}
		x.pop()
	}
	return 0
}

// popDue removes from the index every deadline at or before now and
// returns them, ascending by sequence.
func (x *TTLIndex) popDue(now int64) []ttlEntry {
	var due []ttlEntry
	for len(x.heap) > 0 && x.heap[0].at <= now {
		due = append(due, x.pop())
	}
	slices.SortFunc(due, func(a, b ttlEntry) int { return cmp.Compare(a.seq, b.seq) })
	return due
}

// Len returns the number of entries, stale ones included.
func (x *TTLIndex) Len() int { return len(x.heap) + len(x.never) }

// MaybePrune prunes the index when it holds more than twice stored
// entries plus a constant, so that stale entries cost at most amortised
// O(1) per removal.
func (x *TTLIndex) MaybePrune(stored uint64, live func(seq uint64) bool) {
	if uint64(x.Len()) > 2*stored+pruneSlack {
		x.Prune(live)
	}
}

// Prune drops the entries of sequences live reports as no longer stored.
func (x *TTLIndex) Prune(live func(seq uint64) bool) {
	x.never = slices.DeleteFunc(x.never, func(seq uint64) bool { return !live(seq) })
	x.heap = slices.DeleteFunc(x.heap, func(e ttlEntry) bool { return !live(e.seq) })
	for i := len(x.heap)/2 - 1; i >= 0; i-- {
		x.down(i)
	}
}

// Reset empties the index.
func (x *TTLIndex) Reset() {
	x.heap, x.never = nil, nil
}

func (x *TTLIndex) push(e ttlEntry) {
	x.heap = append(x.heap, e)
	x.up(len(x.heap) - 1)
}

func (x *TTLIndex) pop() ttlEntry {
	h := x.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	x.heap = h[:last]
	x.down(0)
	return top
}

func (x *TTLIndex) less(i, j int) bool {
	a, b := x.heap[i], x.heap[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (x *TTLIndex) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !x.less(i, p) {
			return
		}
		x.heap[i], x.heap[p] = x.heap[p], x.heap[i]
		i = p
	}
}

func (x *TTLIndex) down(i int) {
	n := len(x.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && x.less(r, l) {
			m = r
		}
		if !x.less(m, i) {
			return
		}
		x.heap[i], x.heap[m] = x.heap[m], x.heap[i]
		i = m
	}
}
