package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// Per-message TTL and subject delete markers (store/ttl.go and
// store/expire.go; docs/protocol.md section 4.2, Nats-TTL; nats-server v2.15.2
// memstore.go and filestore.go expireMsgs).
var ttlTests = []test{
	{name: "TTLExpires", fn: testTTLExpires},
	{name: "TTLNeedsMsgTTL", fn: testTTLNeedsMsgTTL},
	{name: "TTLValues", fn: testTTLValues},
	{name: "TTLNeverSkipsMaxAge", fn: testTTLNeverSkipsMaxAge},
	{name: "TTLAndMaxAge", fn: testTTLAndMaxAge},
	{name: "TTLAfterRemovals", fn: testTTLAfterRemovals},
	{name: "TTLTurnedOn", fn: testTTLTurnedOn},
	{name: "TTLMarkers", fn: testTTLMarkers},
	{name: "TTLMarkersByMaxAge", fn: testTTLMarkersByMaxAge},
	{name: "TTLReopen", fn: testTTLReopen, reopen: true},
	{name: "TTLNeverReopen", fn: testTTLNeverReopen, reopen: true},
}

// withTTL returns the harness's next message on subj with a Nats-TTL
// header of value v, stamped t.
func (h *harness) withTTL(subj, v string, t int64) store.Msg {
	m := h.next(subj)
	m.Header = fmt.Appendf(nil, "NATS/1.0\r\nNats-TTL: %s\r\n\r\n", v)
	m.Time = t
	return m
}

// expireWant calls ExpireUpTo and fails unless the outcome is want.
func (h *harness) expireWant(now int64, want store.Expiry) {
	h.t.Helper()
	got, err := h.s.ExpireUpTo(now)
	if err != nil || !reflect.DeepEqual(got, want) {
		h.t.Fatalf("ExpireUpTo(t0%+d) = %+v, %v; want %+v", now-t0, got, err, want)
	}
}

// A message is removed once its TTL has passed since its stored time, the
// deadline included; ExpireUpTo tells the next deadline of a stored
// message.
func testTTLExpires(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true})
	h.mustAppend(h.withTTL("a", "5s", t0), 1)
	h.mustAppend(h.next("b"), 2)
	h.mustAppend(h.withTTL("c", "2", t0+sec), 3)
	h.expireWant(t0+3*sec-1, store.Expiry{Next: t0 + 3*sec})
	h.check(1, 3, 1, 2, 3)
	h.expireWant(t0+3*sec, store.Expiry{Removed: 1, Next: t0 + 5*sec})
	h.check(1, 3, 1, 2)
	h.expireWant(t0+100*sec, store.Expiry{Removed: 1})
	h.check(2, 3, 2)
}

// Without Config.MsgTTL the header is only a header.
func testTTLNeedsMsgTTL(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.mustAppend(h.withTTL("a", "1s", t0), 1)
	h.expireWant(t0+100*sec, store.Expiry{})
	h.check(1, 1, 1)
}

// Values nats-server's parseMessageTTL refuses, or reads as 0, give no
// TTL; whole seconds are kept and a plain number is seconds.
func testTTLValues(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true})
	for i, v := range []string{"500ms", "0", "0s", "-5s", "abc", "1.5x", "00", ""} {
		h.mustAppend(h.withTTL("no", v, t0), uint64(i+1))
	}
	h.mustAppend(h.withTTL("a", "1.9s", t0), 9)
	h.mustAppend(h.withTTL("b", "1m", t0), 10)
	h.mustAppend(h.withTTL("c", "90", t0), 11)
	h.expireWant(t0+sec, store.Expiry{Removed: 1, Next: t0 + 60*sec})
	h.expireWant(t0+60*sec, store.Expiry{Removed: 1, Next: t0 + 90*sec})
	h.expireWant(t0+90*sec, store.Expiry{Removed: 1})
	h.check(1, 11, 1, 2, 3, 4, 5, 6, 7, 8)
}

// "never" (any case) exempts a message from MaxAge: the walk passes over
// it and still stops at the first other message that has not expired,
// whose MaxAge deadline it reports (NextAge).
func testTTLNeverSkipsMaxAge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true, MaxAge: 10 * time.Second})
	h.mustAppend(h.withTTL("a", "never", t0), 1)
	h.appendAt("b", t0, 2)
	h.mustAppend(h.withTTL("a", "NEVER", t0+sec), 3)
	h.appendAt("b", t0+5*sec, 4)
	h.appendAt("b", t0+sec, 5)
	h.expireWant(t0+12*sec, store.Expiry{Removed: 1, NextAge: t0 + 15*sec})
	h.check(1, 5, 1, 3, 4, 5)
	h.expireWant(t0+15*sec, store.Expiry{Removed: 2})
	h.check(1, 5, 1, 3)
	h.appendAt("b", t0+20*sec, 6)
	h.expireWant(t0+1000*sec, store.Expiry{Removed: 1})
	h.check(1, 6, 1, 3)
}

// A TTL longer than MaxAge does not keep a message past MaxAge.
func testTTLAndMaxAge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true, MaxAge: 10 * time.Second})
	h.mustAppend(h.withTTL("a", "1h", t0), 1)
	h.expireWant(t0+10*sec, store.Expiry{Removed: 1})
	h.check(2, 1)
	h.expireWant(t0+3600*sec, store.Expiry{})
}

// Messages removed by other means leave nothing due behind, however many
// there were.
func testTTLAfterRemovals(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true, MaxMsgsPerSubject: 1})
	const n = 3000
	for i := range n {
		h.mustAppend(h.withTTL("k", fmt.Sprint(10+i), t0), uint64(i+1))
	}
	h.mustAppend(h.withTTL("x", "5s", t0), n+1)
	h.del(n)
	h.expireWant(t0+4*sec, store.Expiry{Next: t0 + 5*sec})
	h.expireWant(t0+10_000*sec, store.Expiry{Removed: 1})
	h.check(n+2, n+1)
}

// Turning MsgTTL on honours the headers of messages already stored.
func testTTLTurnedOn(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.mustAppend(h.withTTL("a", "2s", t0), 1)
	h.expireWant(t0+5*sec, store.Expiry{})
	h.update(store.Config{MsgTTL: true})
	h.expireWant(t0+5*sec, store.Expiry{Removed: 1})
	h.check(2, 1)
}

// With SubjectDeleteMarkers an expired message that is the last on its
// subject stays for the marker, and is reported (and stays due) until
// something removes it; a marker itself (Nats-Marker-Reason, or
// KV-Operation: PURGE) is simply removed.
func testTTLMarkers(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true, SubjectDeleteMarkers: true})
	h.mustAppend(h.withTTL("a", "1s", t0), 1)
	h.mustAppend(h.withTTL("a", "1s", t0), 2)
	h.mustAppend(h.withTTL("b", "1s", t0), 3)
	m := h.next("c")
	m.Header, m.Time = []byte("NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1s\r\n\r\n"), t0
	h.mustAppend(m, 4)
	m = h.next("d")
	m.Header, m.Time = []byte("NATS/1.0\r\nKV-Operation: PURGE\r\nNats-TTL: 1\r\n\r\n"), t0
	h.mustAppend(m, 5)
	h.mustAppend(h.withTTL("e", "9s", t0), 6)
	left := []store.Marker{{Seq: 2, Subject: "a"}, {Seq: 3, Subject: "b"}}
	h.expireWant(t0+sec, store.Expiry{Removed: 3, Markers: left, Next: t0 + sec})
	h.check(2, 6, 2, 3, 6)
	h.expireWant(t0+2*sec, store.Expiry{Markers: left, Next: t0 + sec})
	h.del(2)
	h.expireWant(t0+2*sec, store.Expiry{Markers: left[1:], Next: t0 + sec})
	h.update(store.Config{MsgTTL: true})
	h.expireWant(t0+2*sec, store.Expiry{Removed: 1, Next: t0 + 9*sec})
	h.check(6, 6, 6)
}

// MaxAge leaves markers too, and a message due by both rules is reported
// once.
func testTTLMarkersByMaxAge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true, SubjectDeleteMarkers: true, MaxAge: 10 * time.Second})
	h.appendAt("a", t0, 1)
	h.appendAt("a", t0, 2)
	h.mustAppend(h.withTTL("b", "1s", t0), 3)
	h.appendAt("c", t0+5*sec, 4)
	h.expireWant(t0+10*sec, store.Expiry{Removed: 1, Markers: []store.Marker{{Seq: 2, Subject: "a"}, {Seq: 3, Subject: "b"}}, Next: t0 + sec, NextAge: t0 + 15*sec})
	h.check(2, 4, 2, 3, 4)
	h.expireWant(t0+15*sec, store.Expiry{Markers: []store.Marker{{Seq: 2, Subject: "a"}, {Seq: 3, Subject: "b"}, {Seq: 4, Subject: "c"}}, Next: t0 + sec})
}

// TTLs are rebuilt from the stored headers when the store is opened again.
func testTTLReopen(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true})
	h.mustAppend(h.withTTL("a", "5s", t0), 1)
	h.mustAppend(h.withTTL("b", "3s", t0), 2)
	h.mustAppend(h.next("c"), 3)
	h.del(2)
	h.reopen()
	h.expireWant(t0+4*sec, store.Expiry{Next: t0 + 5*sec})
	h.expireWant(t0+5*sec, store.Expiry{Removed: 1})
	h.check(3, 3, 3)
}

// "never" survives a reopen too.
func testTTLNeverReopen(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MsgTTL: true, MaxAge: time.Second})
	h.mustAppend(h.withTTL("a", "never", t0), 1)
	h.appendAt("b", t0, 2)
	h.reopen()
	h.expireWant(t0+5*sec, store.Expiry{Removed: 1})
	h.check(1, 2, 1)
}
