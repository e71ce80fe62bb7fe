package storetest

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

var configTests = []test{
	{name: "UpdateShrinkMaxMsgs", fn: testUpdateShrinkMaxMsgs},
	{name: "UpdateShrinkMaxBytes", fn: testUpdateShrinkMaxBytes},
	{name: "UpdateShrinkPerSubject", fn: testUpdateShrinkPerSubject},
	{name: "UpdateStreamBeforeSubject", fn: testUpdateStreamBeforeSubject},
	{name: "UpdateRaise", fn: testUpdateRaise},
	{name: "UpdateDiscardNewKeeps", fn: testUpdateDiscardNewKeeps},
	{name: "UpdateDiscardNewPerSubject", fn: testUpdateDiscardNewPerSubject},
	{name: "UpdateMaxAge", fn: testUpdateMaxAge},
}

// Lowering max_msgs under discard old removes the oldest.
func testUpdateShrinkMaxMsgs(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c", "d", "e")
	h.update(store.Config{MaxMsgs: 2})
	h.check(4, 5, 4, 5)
	h.mustAppend(h.next("f"), 6)
	h.check(5, 6, 5, 6)
}

// Lowering max_bytes under discard old removes the oldest.
func testUpdateShrinkMaxBytes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	for i := uint64(1); i <= 5; i++ {
		h.mustAppend(h.fixed("a", 10), i)
	}
	h.update(store.Config{MaxBytes: 100})
	h.check(4, 5, 4, 5)
}

// Lowering max_msgs_per_subject removes each subject's oldest.
func testUpdateShrinkPerSubject(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "a", "b", "a", "c")
	h.update(store.Config{MaxMsgsPerSubject: 2})
	h.check(2, 6, 2, 3, 4, 5, 6)
	h.update(store.Config{MaxMsgsPerSubject: 1})
	h.check(4, 6, 4, 5, 6)
}

// UpdateConfig applies the stream limits first, then the per-subject one
// (nats-server UpdateConfig): a1 b2 b3 with MaxMsgs 2 and
// MaxMsgsPerSubject 1 keeps only b3, where appending b3 under the same
// limits keeps a1 and b3 (PerSubjectBeforeStream).
func testUpdateStreamBeforeSubject(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "b")
	h.update(store.Config{MaxMsgs: 2, MaxMsgsPerSubject: 1})
	h.check(3, 3, 3)
}

// Raising or removing limits removes nothing.
func testUpdateRaise(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 3, MaxMsgsPerSubject: 2})
	h.add("a", "a", "b")
	h.update(store.Config{MaxMsgs: 10, MaxMsgsPerSubject: 5})
	h.check(1, 3, 1, 2, 3)
	h.update(store.Config{})
	h.add("a", "a", "a", "a")
	h.check(1, 7, seqs(1, 7)...)
}

// Under discard new, lowering max_msgs or max_bytes removes nothing; the
// next append is refused.
func testUpdateDiscardNewKeeps(t *testing.T, e Engine) {
	h := open(t, e, store.Config{Discard: store.DiscardNew})
	h.add("a", "b", "c", "d")
	h.update(store.Config{MaxMsgs: 2, Discard: store.DiscardNew})
	h.check(1, 4, 1, 2, 3, 4)
	h.refuse(h.next("e"), store.ErrMaxMsgs)
	h.update(store.Config{MaxBytes: 10, Discard: store.DiscardNew})
	h.check(1, 4, 1, 2, 3, 4)
	h.refuse(h.next("e"), store.ErrMaxBytes)
}

// Under discard new, lowering the per-subject limit still removes.
func testUpdateDiscardNewPerSubject(t *testing.T, e Engine) {
	h := open(t, e, store.Config{Discard: store.DiscardNew})
	h.add("a", "a", "b")
	h.update(store.Config{MaxMsgsPerSubject: 1, Discard: store.DiscardNew, DiscardNewPerSubject: true})
	h.check(2, 3, 2, 3)
	h.refuse(h.next("a"), store.ErrMaxMsgsPerSubject)
}

// UpdateConfig removes nothing by age; a later ExpireUpTo uses the new
// max_age.
func testUpdateMaxAge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.appendAt("a", t0, 1)
	h.appendAt("a", t0+5*sec, 2)
	h.update(store.Config{MaxAge: time.Second})
	h.check(1, 2, 1, 2)
	h.expire(t0+sec, 1)
	h.check(2, 2, 2)
	h.update(store.Config{MaxAge: time.Hour})
	h.expire(t0+10*sec, 0)
}
