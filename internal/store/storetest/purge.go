package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

var purgeTests = []test{
	{name: "Purge", fn: testPurge},
	{name: "PurgeWithDeletes", fn: testPurgeWithDeletes},
	{name: "PurgeEmpty", fn: testPurgeEmpty},
	{name: "PurgeEmptyFirstSeq", fn: testPurgeEmptyFirstSeq},
}

// purgeFixture is the subject of each of the 10 messages of the purge
// cases: a.x at 1 4 7 10, b.x at 2 5 8, a.y at 3 6 9.
var purgeFixture = []string{"a.x", "b.x", "a.y", "a.x", "b.x", "a.y", "a.x", "b.x", "a.y", "a.x"}

// purgeCase is a Purge request on purgeFixture and its outcome.
type purgeCase struct {
	req         store.PurgeRequest
	removed     uint64
	err         error // the error wanted, nothing removed
	first, last uint64
	stored      []uint64
}

// purgeCases cover every shape of docs/protocol.md 6.3 and nats-server PurgeEx.
var purgeCases = []purgeCase{
	{req: store.PurgeRequest{}, removed: 10, first: 11, last: 10},
	{req: store.PurgeRequest{Subject: ">"}, removed: 10, first: 11, last: 10},
	{req: store.PurgeRequest{Subject: "a.x"}, removed: 4, first: 2, last: 10, stored: []uint64{2, 3, 5, 6, 8, 9}},
	{req: store.PurgeRequest{Subject: "a.*"}, removed: 7, first: 2, last: 10, stored: []uint64{2, 5, 8}},
	{req: store.PurgeRequest{Subject: "*.x"}, removed: 7, first: 3, last: 10, stored: []uint64{3, 6, 9}},
	{req: store.PurgeRequest{Subject: "c"}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Seq: 5}, removed: 4, first: 5, last: 10, stored: seqs(5, 10)},
	{req: store.PurgeRequest{Seq: 1}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Seq: 10}, removed: 9, first: 10, last: 10, stored: []uint64{10}},
	{req: store.PurgeRequest{Seq: 11}, removed: 10, first: 11, last: 10},
	{req: store.PurgeRequest{Seq: 20}, removed: 10, first: 20, last: 19},
	{req: store.PurgeRequest{Subject: ">", Seq: 5}, removed: 4, first: 5, last: 10, stored: seqs(5, 10)},
	{req: store.PurgeRequest{Subject: "a.x", Seq: 7}, removed: 2, first: 2, last: 10, stored: []uint64{2, 3, 5, 6, 7, 8, 9, 10}},
	{req: store.PurgeRequest{Subject: "a.x", Seq: 1}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Subject: "a.x", Seq: 100}, removed: 4, first: 2, last: 10, stored: []uint64{2, 3, 5, 6, 8, 9}},
	{req: store.PurgeRequest{Subject: "b.x", Seq: 2}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Subject: "a.*", Seq: 5}, removed: 3, first: 2, last: 10, stored: []uint64{2, 5, 6, 7, 8, 9, 10}},
	{req: store.PurgeRequest{Keep: 3}, removed: 7, first: 8, last: 10, stored: []uint64{8, 9, 10}},
	{req: store.PurgeRequest{Keep: 10}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Keep: 11}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Subject: ">", Keep: 1}, removed: 9, first: 10, last: 10, stored: []uint64{10}},
	{req: store.PurgeRequest{Subject: "a.x", Keep: 1}, removed: 3, first: 2, last: 10, stored: []uint64{2, 3, 5, 6, 8, 9, 10}},
	{req: store.PurgeRequest{Subject: "a.*", Keep: 2}, removed: 5, first: 2, last: 10, stored: []uint64{2, 5, 8, 9, 10}},
	{req: store.PurgeRequest{Subject: "a.x", Keep: 4}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Subject: "b.x", Keep: 5}, removed: 0, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Subject: "*.x", Keep: 3}, removed: 4, first: 3, last: 10, stored: []uint64{3, 6, 7, 8, 9, 10}},
	{req: store.PurgeRequest{Seq: 5, Keep: 1}, err: store.ErrBadRequest, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Seq: 1, Keep: 1}, err: store.ErrBadRequest, first: 1, last: 10, stored: seqs(1, 10)},
	{req: store.PurgeRequest{Subject: "a.x", Seq: 5, Keep: 1}, err: store.ErrBadRequest, first: 1, last: 10, stored: seqs(1, 10)},
}

// Every purge variant on the same ten messages, then one more append.
func testPurge(t *testing.T, e Engine) {
	for _, c := range purgeCases {
		name := fmt.Sprintf("%q_seq%d_keep%d", c.req.Subject, c.req.Seq, c.req.Keep)
		t.Run(name, func(t *testing.T) {
			h := open(t, e, store.Config{})
			h.add(purgeFixture...)
			h.purge(c.req, c.removed, c.err)
			h.check(c.first, c.last, c.stored...)
			h.mustAppend(h.next("z"), c.last+1)
			if len(c.stored) == 0 {
				h.check(c.last+1, c.last+1, c.last+1)
			}
		})
	}
}

// purge calls Purge and fails unless it removes want, or fails with
// wantErr.
func (h *harness) purge(req store.PurgeRequest, want uint64, wantErr error) {
	h.t.Helper()
	n, err := h.s.Purge(req)
	if wantErr != nil {
		if !errors.Is(err, wantErr) || n != 0 {
			h.t.Fatalf("Purge(%+v) = %d, %v; want 0, %v", req, n, err, wantErr)
		}
		return
	}
	if err != nil || n != want {
		h.t.Fatalf("Purge(%+v) = %d, %v; want %d", req, n, err, want)
	}
}

// Purges over interior deletes count only stored messages.
func testPurgeWithDeletes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add(purgeFixture...)
	h.del(1)
	h.del(5)
	h.purge(store.PurgeRequest{Subject: "a.x", Keep: 1}, 2, nil) // a.x left: 4 7 10
	h.check(2, 10, 2, 3, 6, 8, 9, 10)
	h.purge(store.PurgeRequest{Subject: "b.x", Seq: 9}, 2, nil) // b.x left: 2 8
	h.check(3, 10, 3, 6, 9, 10)
	h.purge(store.PurgeRequest{Keep: 2}, 2, nil)
	h.check(9, 10, 9, 10)
	h.purge(store.PurgeRequest{}, 2, nil)
	h.check(11, 10)
}

// Purging a store that never held a message sets FirstSeq to LastSeq+1.
func testPurgeEmpty(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.purge(store.PurgeRequest{}, 0, nil)
	h.wantState(store.State{FirstSeq: 1, LastSeq: 0})
	h.mustAppend(h.next("a"), 1)
	h.check(1, 1, 1)
}

// The same with a configured first sequence.
func testPurgeEmptyFirstSeq(t *testing.T, e Engine) {
	h := open(t, e, store.Config{FirstSeq: 5})
	h.purge(store.PurgeRequest{}, 0, nil)
	h.wantState(store.State{FirstSeq: 5, LastSeq: 4})
	h.mustAppend(h.next("a"), 5)
	h.check(5, 5, 5)
}
