package storetest

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

var limitTests = []test{
	{name: "DiscardOldMaxMsgs", fn: testDiscardOldMaxMsgs},
	{name: "DiscardOldMaxBytes", fn: testDiscardOldMaxBytes},
	{name: "DiscardOldOversized", fn: testDiscardOldOversized},
	{name: "PerSubject", fn: testPerSubject},
	{name: "PerSubjectBeforeStream", fn: testPerSubjectBeforeStream},
	{name: "DiscardNewMaxMsgs", fn: testDiscardNewMaxMsgs},
	{name: "DiscardNewMaxBytes", fn: testDiscardNewMaxBytes},
	{name: "DiscardNewPerSubjectLimit", fn: testDiscardNewPerSubjectLimit},
	{name: "DiscardNewReplacesAtMaxMsgs", fn: testDiscardNewReplacesAtMaxMsgs},
	{name: "DiscardNewReplacesAtMaxBytes", fn: testDiscardNewReplacesAtMaxBytes},
	{name: "DiscardNewPerSubject", fn: testDiscardNewPerSubject},
	{name: "DiscardNewPerSubjectRollup", fn: testDiscardNewPerSubjectRollup},
	{name: "DiscardOldIgnoresNewPerSubject", fn: testDiscardOldIgnoresNewPerSubject},
	{name: "MaxMsgSize", fn: testMaxMsgSize},
}

// Discard old: store, then remove the oldest until within max_msgs.
func testDiscardOldMaxMsgs(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 3})
	for i := uint64(1); i <= 5; i++ {
		h.mustAppend(h.next("a"), i)
	}
	h.check(3, 5, 3, 4, 5)
}

// Discard old: store, then remove the oldest until within max_bytes.
func testDiscardOldMaxBytes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxBytes: 123}) // three messages of 41
	for i := uint64(1); i <= 5; i++ {
		h.mustAppend(h.fixed("a", 10), i)
	}
	h.check(3, 5, 3, 4, 5)
	h.mustAppend(h.fixed("a", 51), 6) // 82 bytes push out two of 41
	h.check(5, 6, 5, 6)
	h.update(store.Config{MaxBytes: 122})
	h.check(6, 6, 6)
}

// A message larger than max_bytes is stored, then removed at once with
// everything else; its sequence is used up (nats-server has no
// store-level refusal for it under discard old).
func testDiscardOldOversized(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxBytes: 50})
	h.mustAppend(h.fixed("a", 10), 1)
	h.mustAppend(h.fixed("a", 51), 2)
	h.check(3, 2)
	h.mustAppend(h.fixed("a", 10), 3)
	h.check(3, 3, 3)
}

// Per-subject limit: the subject's oldest goes, under either policy.
func testPerSubject(t *testing.T, e Engine) {
	for _, d := range []store.DiscardPolicy{store.DiscardOld, store.DiscardNew} {
		h := open(t, e, store.Config{MaxMsgsPerSubject: 2, Discard: d})
		h.add("a", "a", "a", "b", "a")
		h.check(3, 5, 3, 4, 5)
	}
}

// After an append the per-subject limit applies before max_msgs: with
// a1 b2 and MaxMsgs 2, MaxMsgsPerSubject 1, appending b3 removes b2 only.
func testPerSubjectBeforeStream(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 2, MaxMsgsPerSubject: 1})
	h.add("a", "b", "b")
	h.check(1, 3, 1, 3)
}

// Discard new refuses at max_msgs; a refused message uses no sequence.
func testDiscardNewMaxMsgs(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 3, Discard: store.DiscardNew})
	h.add("a", "b", "c")
	h.refuse(h.next("d"), store.ErrMaxMsgs)
	h.check(1, 3, 1, 2, 3)
	h.del(1)
	h.mustAppend(h.next("d"), 4)
	h.check(2, 4, 2, 3, 4)
}

// Discard new refuses when the bytes would exceed max_bytes; exactly
// reaching it is allowed.
func testDiscardNewMaxBytes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxBytes: 123, Discard: store.DiscardNew})
	h.mustAppend(h.fixed("a", 10), 1)
	h.mustAppend(h.fixed("a", 10), 2)
	h.refuse(h.fixed("a", 11), store.ErrMaxBytes) // 82+42 > 123
	h.mustAppend(h.fixed("a", 10), 3)             // 123 == 123
	h.refuse(h.fixed("a", 0), store.ErrMaxBytes)
	h.check(1, 3, 1, 2, 3)
}

// Under discard new, the per-subject limit without discard_new_per_subject
// replaces the subject's oldest (docs/protocol.md 6.2).
func testDiscardNewPerSubjectLimit(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgsPerSubject: 1, Discard: store.DiscardNew})
	h.add("a", "b", "a")
	h.check(2, 3, 2, 3)
}

// At max_msgs, a message whose subject is at its per-subject limit
// replaces that subject's oldest and is accepted (docs/protocol.md 6.2).
func testDiscardNewReplacesAtMaxMsgs(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 3, MaxMsgsPerSubject: 1, Discard: store.DiscardNew})
	h.add("a", "b", "c")
	h.mustAppend(h.next("a"), 4)
	h.check(2, 4, 2, 3, 4)
	h.refuse(h.next("d"), store.ErrMaxMsgs)
	h.check(2, 4, 2, 3, 4)
}

// At max_bytes, a message at its subject's limit is accepted when the
// subject's oldest message is at least as large as it (nats-server's exact
// test, even where the new total would fit).
func testDiscardNewReplacesAtMaxBytes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxBytes: 123, MaxMsgsPerSubject: 1, Discard: store.DiscardNew})
	h.mustAppend(h.fixed("a", 10), 1)
	h.mustAppend(h.fixed("b", 10), 2)
	h.mustAppend(h.fixed("c", 10), 3)
	h.mustAppend(h.fixed("a", 10), 4) // replaces 41 with 41
	h.check(2, 4, 2, 3, 4)
	h.refuse(h.fixed("a", 11), store.ErrMaxBytes) // 42 > 41
	h.mustAppend(h.fixed("a", 9), 5)              // replaces 41 with 40: 122 bytes
	h.check(2, 5, 2, 3, 5)
	h.refuse(h.fixed("b", 11), store.ErrMaxBytes) // 122-41+42 fits, but 41 < 42
	h.refuse(h.fixed("d", 0), store.ErrMaxBytes)  // not at its limit
	h.check(2, 5, 2, 3, 5)
}

// discard_new_per_subject refuses at the per-subject limit.
func testDiscardNewPerSubject(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgsPerSubject: 2, Discard: store.DiscardNew, DiscardNewPerSubject: true})
	h.add("a", "a", "b")
	h.refuse(h.next("a"), store.ErrMaxMsgsPerSubject)
	h.mustAppend(h.next("b"), 4)
	h.refuse(h.next("b"), store.ErrMaxMsgsPerSubject)
	h.check(1, 4, 1, 2, 3, 4)
}

// Rollup messages (Nats-Rollup header with a value) pass
// discard_new_per_subject and replace the subject's oldest.
func testDiscardNewPerSubjectRollup(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgsPerSubject: 1, Discard: store.DiscardNew, DiscardNewPerSubject: true})
	h.add("a")
	m := h.next("a")
	m.Header = []byte("NATS/1.0\r\nNats-Rollup:\r\n\r\n")
	h.refuse(m, store.ErrMaxMsgsPerSubject)
	m.Header = []byte("NATS/1.0\r\nnats-rollup: sub\r\n\r\n")
	h.refuse(m, store.ErrMaxMsgsPerSubject)
	m.Header = []byte("NATS/1.0\r\nX: 1\r\nNats-Rollup: sub\r\n\r\n")
	h.mustAppend(m, 2)
	h.check(2, 2, 2)
}

// discard_new_per_subject means nothing under discard old.
func testDiscardOldIgnoresNewPerSubject(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgsPerSubject: 1, DiscardNewPerSubject: true})
	h.add("a", "a")
	h.check(2, 2, 2)
}

// max_msg_size bounds header plus payload (not the subject), under both
// policies; a refused message uses no sequence.
func testMaxMsgSize(t *testing.T, e Engine) {
	for _, d := range []store.DiscardPolicy{store.DiscardOld, store.DiscardNew} {
		h := open(t, e, store.Config{MaxMsgSize: 10, Discard: d})
		h.mustAppend(h.payload("a.very.long.subject.name", 10), 1)
		h.refuse(h.payload("a", 11), store.ErrMaxMsgSize)
		m := h.payload("a", 5)
		m.Header = []byte("NATS/")
		h.mustAppend(m, 2)
		m.Header = []byte("NATS/1")
		h.refuse(m, store.ErrMaxMsgSize)
		h.check(1, 2, 1, 2)
	}
}
