package storetest

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

var removeTests = []test{
	{name: "Delete", fn: testDelete},
	{name: "DeleteAll", fn: testDeleteAll},
	{name: "DeleteMany", fn: testDeleteMany},
	{name: "Compact", fn: testCompact},
	{name: "CompactZero", fn: testCompactZero},
	{name: "CompactToEnd", fn: testCompactToEnd},
	{name: "CompactPastEnd", fn: testCompactPastEnd},
	{name: "CompactNewStore", fn: testCompactNewStore},
	{name: "ExpireUpTo", fn: testExpireUpTo},
	{name: "ExpireStopsAtUnexpired", fn: testExpireStopsAtUnexpired},
	{name: "ExpireNoMaxAge", fn: testExpireNoMaxAge},
}

// del deletes seq and fails on error.
func (h *harness) del(seq uint64) {
	h.t.Helper()
	if err := h.s.Delete(seq); err != nil {
		h.t.Fatalf("Delete(%d): %v", seq, err)
	}
}

// Delete of the first, an interior and the last message; FirstSeq moves
// past gaps, LastSeq never goes down, and a second delete is ErrNotFound.
func testDelete(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c", "d", "e")
	h.del(1)
	h.check(2, 5, 2, 3, 4, 5)
	h.del(3)
	h.check(2, 5, 2, 4, 5)
	h.del(5)
	h.check(2, 5, 2, 4) // the last sequence stays; 5 counts as deleted
	for _, seq := range []uint64{0, 1, 3, 5, 6, math.MaxUint64} {
		if err := h.s.Delete(seq); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Delete(%d) = %v, want ErrNotFound", seq, err)
		}
	}
	h.del(2) // FirstSeq skips the gap at 3
	h.check(4, 5, 4)
	h.mustAppend(h.next("f"), 6)
	h.check(4, 6, 4, 6)
}

// Deleting every message leaves FirstSeq = LastSeq+1 and no deleted count.
func testDeleteAll(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	for _, seq := range []uint64{2, 3, 1} {
		h.del(seq)
	}
	h.wantState(store.State{FirstSeq: 4, LastSeq: 3, LastTime: h.lastTime})
	h.check(4, 3)
	h.mustAppend(h.next("d"), 4)
	h.check(4, 4, 4)
}

// DeleteMany removes what is there, in any order, skips what is not
// (repeats, gaps, sequences out of range) and counts only what it
// removed; FirstSeq moves past the gaps as with Delete.
func testDeleteMany(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c", "d", "e", "f")
	deleteMany := func(seqs []uint64, want uint64) {
		t.Helper()
		if n, err := h.s.DeleteMany(seqs); err != nil || n != want {
			t.Fatalf("DeleteMany(%v) = %d, %v; want %d", seqs, n, err, want)
		}
	}
	deleteMany(nil, 0)
	deleteMany([]uint64{5, 1, 9, 3, 3, 0, math.MaxUint64}, 3)
	h.check(2, 6, 2, 4, 6)
	deleteMany([]uint64{1, 3, 5}, 0)
	h.check(2, 6, 2, 4, 6)
	deleteMany([]uint64{4, 2}, 2)
	h.check(6, 6, 6)
	h.mustAppend(h.next("g"), 7)
	h.check(6, 7, 6, 7)
}

// compact calls Compact and fails unless it removes want.
func (h *harness) compact(seq, want uint64) {
	h.t.Helper()
	if n, err := h.s.Compact(seq); err != nil || n != want {
		h.t.Fatalf("Compact(%d) = %d, %v; want %d", seq, n, err, want)
	}
}

// Compact removes below seq; FirstSeq becomes the first stored sequence
// at or above seq; a seq below FirstSeq does nothing.
func testCompact(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	h.del(5)
	h.del(6)
	h.compact(1, 0)
	h.check(1, 10, 1, 2, 3, 4, 7, 8, 9, 10)
	h.compact(3, 2)
	h.check(3, 10, 3, 4, 7, 8, 9, 10)
	h.compact(2, 0)
	h.compact(5, 2) // 5 and 6 were deleted: FirstSeq becomes 7
	h.check(7, 10, 7, 8, 9, 10)
	h.compact(11, 4)
	h.check(11, 10)
	h.compact(11, 0)
	h.check(11, 10)
}

// Compact(0) removes everything.
func testCompactZero(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	h.compact(0, 3)
	h.check(4, 3)
}

// Compact up to the last sequence and to LastSeq+1.
func testCompactToEnd(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	h.compact(3, 2)
	h.check(3, 3, 3)
	h.compact(4, 1)
	h.check(4, 3)
	h.mustAppend(h.next("d"), 4)
	h.check(4, 4, 4)
}

// Compact past LastSeq+1 empties the store and raises LastSeq to seq-1, so
// the next message gets seq (nats-server purge(fseq)); LastTime stays.
func testCompactPastEnd(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	h.del(2)
	h.compact(10, 2)
	h.wantState(store.State{FirstSeq: 10, LastSeq: 9, LastTime: h.lastTime})
	h.mustAppend(h.next("d"), 10)
	h.check(10, 10, 10)
}

// Compact on a store that never held a message.
func testCompactNewStore(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.compact(1, 0)
	h.wantState(store.State{FirstSeq: 1, LastSeq: 0})
	h.compact(5, 0)
	h.wantState(store.State{FirstSeq: 5, LastSeq: 4})
	h.mustAppend(h.next("a"), 5)
	h.check(5, 5, 5)
}

// expire calls ExpireUpTo and fails unless it removes want.
func (h *harness) expire(now int64, want uint64) {
	h.t.Helper()
	if x, err := h.s.ExpireUpTo(now); err != nil || x.Removed != want {
		h.t.Fatalf("ExpireUpTo(t0%+d) = %+v, %v; want %d removed", now-t0, x, err, want)
	}
}

// appendAt appends a message on subj stamped t and fails unless it gets
// sequence want.
func (h *harness) appendAt(subj string, t int64, want uint64) {
	h.t.Helper()
	m := h.next(subj)
	m.Time = t
	h.mustAppend(m, want)
}

// A message expires when Time <= now - MaxAge: the boundary is included.
func testExpireUpTo(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxAge: 10 * time.Second})
	for i := range int64(4) {
		h.appendAt("a", t0+i*sec, uint64(i+1))
	}
	h.expire(t0+10*sec-1, 0)
	h.check(1, 4, 1, 2, 3, 4)
	h.expire(t0+10*sec, 1)
	h.check(2, 4, 2, 3, 4)
	h.expire(t0+11*sec+sec/2, 1)
	h.check(3, 4, 3, 4)
	h.expire(t0+100*sec, 2)
	h.check(5, 4)
	h.expire(t0+200*sec, 0)
}

// Expiry walks in sequence order and stops at the first message that has
// not expired, even when a later one has (nats-server expireMsgs).
func testExpireStopsAtUnexpired(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxAge: 10 * time.Second})
	h.appendAt("a", t0+5*sec, 1)
	h.appendAt("a", t0, 2)
	h.appendAt("a", t0+6*sec, 3)
	h.del(1)
	h.appendAt("a", t0+1*sec, 4)
	h.expire(t0+11*sec, 1) // 2 and 4 have expired, 3 has not: 4 stays
	h.check(3, 4, 3, 4)
	h.expire(t0+16*sec, 2)
	h.check(5, 4)
}

// Without MaxAge nothing expires.
func testExpireNoMaxAge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b")
	h.expire(math.MaxInt64, 0)
	h.check(1, 2, 1, 2)
}
