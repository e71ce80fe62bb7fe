package storetest

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

// The reopen tests run only for persistent engines. Every other subtest
// also reopens its final state (harness.finish); these check shapes that
// recovery must rebuild explicitly, then keep using the store.
var reopenTests = []test{
	{name: "ReopenNew", fn: testReopenNew, reopen: true},
	{name: "ReopenFirstSeq", fn: testReopenFirstSeq, reopen: true},
	{name: "ReopenMessages", fn: testReopenMessages, reopen: true},
	{name: "ReopenDeletes", fn: testReopenDeletes, reopen: true},
	{name: "ReopenDeleteLast", fn: testReopenDeleteLast, reopen: true},
	{name: "ReopenPurged", fn: testReopenPurged, reopen: true},
	{name: "ReopenFilteredPurge", fn: testReopenFilteredPurge, reopen: true},
	{name: "ReopenCompactPastEnd", fn: testReopenCompactPastEnd, reopen: true},
	{name: "ReopenLimits", fn: testReopenLimits, reopen: true},
	{name: "ReopenConsumers", fn: testReopenConsumers, reopen: true},
	{name: "ReopenTwice", fn: testReopenTwice, reopen: true},
}

// A store that never held a message reopens as new.
func testReopenNew(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.reopen()
	h.wantState(store.State{})
	h.mustAppend(h.next("a"), 1)
}

// An empty store with a first sequence keeps it.
func testReopenFirstSeq(t *testing.T, e Engine) {
	h := open(t, e, store.Config{FirstSeq: 50})
	h.reopen()
	h.wantState(store.State{FirstSeq: 50, LastSeq: 49})
	h.mustAppend(h.next("a"), 50)
	h.reopen()
	h.check(50, 50, 50)
}

// Messages, headers and times survive; appends continue the sequence.
func testReopenMessages(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a.b", "c")
	m := h.next("a.b")
	m.Header = []byte("NATS/1.0\r\nK: v\r\n\r\n")
	h.mustAppend(m, 3)
	h.reopen()
	h.check(1, 3, 1, 2, 3)
	h.mustAppend(h.next("d"), 4)
	h.check(1, 4, 1, 2, 3, 4)
}

// Deletes survive, including of the first message.
func testReopenDeletes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c", "d", "e")
	h.del(1)
	h.del(3)
	h.reopen()
	h.check(2, 5, 2, 4, 5)
	h.wantSubjects("", map[string]store.SubjectState{"b": ss(1, 2, 2), "d": ss(1, 4, 4), "e": ss(1, 5, 5)})
}

// Deleting the last message does not lower LastSeq across a reopen.
func testReopenDeleteLast(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	h.del(3)
	h.reopen()
	h.check(1, 3, 1, 2)
	h.del(2)
	h.del(1)
	h.reopen()
	h.check(4, 3)
	h.mustAppend(h.next("d"), 4)
}

// A full purge keeps LastSeq and LastTime across a reopen.
func testReopenPurged(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	h.purge(store.PurgeRequest{}, 3, nil)
	h.reopen()
	h.wantState(store.State{FirstSeq: 4, LastSeq: 3, LastTime: h.lastTime})
	h.mustAppend(h.next("d"), 4)
}

// Filtered and keep purges survive.
func testReopenFilteredPurge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add(purgeFixture...)
	h.purge(store.PurgeRequest{Subject: "a.x", Keep: 1}, 3, nil)
	h.purge(store.PurgeRequest{Subject: "b.*", Seq: 6}, 2, nil)
	h.reopen()
	h.check(3, 10, 3, 6, 8, 9, 10)
}

// Compacting past the end keeps the raised sequences across a reopen.
func testReopenCompactPastEnd(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b")
	h.compact(100, 2)
	h.reopen()
	h.wantState(store.State{FirstSeq: 100, LastSeq: 99, LastTime: h.lastTime})
	h.mustAppend(h.next("a"), 100)
}

// Limit removals survive and limits keep applying after a reopen.
func testReopenLimits(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 3, MaxMsgsPerSubject: 2})
	h.add("a", "a", "a", "b", "c")
	h.reopen()
	h.check(3, 5, 3, 4, 5)
	h.add("b", "b")
	h.check(5, 7, 5, 6, 7)
}

// Consumer states survive; a deleted consumer stays deleted.
func testReopenConsumers(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	a, b := h.consumer("a"), h.consumer("b")
	updateState(t, a, sampleState())
	updateState(t, b, sampleState())
	if err := b.Delete(); err != nil {
		t.Fatal(err)
	}
	delete(h.consumers, "b")
	h.reopen()
	wantConsumer(t, h.consumer("a"), sampleState())
	wantConsumer(t, h.consumer("b"), &store.ConsumerState{})
}

// Two reopens in a row change nothing.
func testReopenTwice(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	h.del(2)
	h.reopen()
	h.reopen()
	h.check(1, 3, 1, 3)
}
