package storetest

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

// The SkipTo tests: a mirror stores each message at its origin's sequence
// (nats-server v2.15.2 stream.go processInboundMirrorMsg, SkipMsgs in
// server/memstore.go and server/filestore.go).
var skipTests = []test{
	{name: "SkipEmpty", fn: testSkipEmpty},
	{name: "SkipFirstSeq", fn: testSkipFirstSeq},
	{name: "SkipAfterMessages", fn: testSkipAfterMessages},
	{name: "SkipAfterPurge", fn: testSkipAfterPurge},
	{name: "SkipMirrorPattern", fn: testSkipMirrorPattern},
	{name: "SkipLimits", fn: testSkipLimits},
	{name: "SkipHuge", fn: testSkipHuge},
	{name: "SkipHugeEmpty", fn: testSkipHugeEmpty},
	{name: "SkipClosed", fn: testSkipClosed},
	{name: "ReopenSkip", fn: testReopenSkip, reopen: true},
	{name: "ReopenSkipEmpty", fn: testReopenSkipEmpty, reopen: true},
}

// skip calls SkipTo and fails on error.
func (h *harness) skip(seq uint64) {
	h.t.Helper()
	if err := h.s.SkipTo(seq); err != nil {
		h.t.Fatalf("SkipTo(%d): %v", seq, err)
	}
}

// refuseSkip fails unless SkipTo(seq) is ErrBadRequest and changes nothing.
func (h *harness) refuseSkip(seq uint64) {
	h.t.Helper()
	before := h.s.State(false)
	if err := h.s.SkipTo(seq); !errors.Is(err, store.ErrBadRequest) {
		h.t.Fatalf("SkipTo(%d) = %v with LastSeq %d, want ErrBadRequest", seq, err, before.LastSeq)
	}
	if after := h.s.State(false); after.FirstSeq != before.FirstSeq || after.LastSeq != before.LastSeq {
		h.t.Fatalf("refused SkipTo(%d) changed the state: %+v, then %+v", seq, before, after)
	}
}

// An empty store starts at the skipped-to sequence: nothing counts as
// deleted. LastSeq+1 is a no-op; at or below LastSeq is refused.
func testSkipEmpty(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.skip(1)
	h.wantState(store.State{})
	h.refuseSkip(0)
	h.skip(10)
	h.wantState(store.State{FirstSeq: 10, LastSeq: 9})
	h.skip(10)
	h.refuseSkip(9)
	h.refuseSkip(5)
	h.refuseSkip(math.MaxUint64)
	h.skip(12)
	h.check(12, 11)
	h.mustAppend(h.next("a"), 12)
	h.check(12, 12, 12)
	h.refuseSkip(12)
}

// A store created with a first sequence skips from it.
func testSkipFirstSeq(t *testing.T, e Engine) {
	h := open(t, e, store.Config{FirstSeq: 50})
	h.skip(50)
	h.wantState(store.State{FirstSeq: 50, LastSeq: 49})
	h.refuseSkip(49)
	h.skip(60)
	h.wantState(store.State{FirstSeq: 60, LastSeq: 59})
	h.mustAppend(h.next("a"), 60)
	h.check(60, 60, 60)
}

// Behind stored messages the skipped sequences are interior gaps: counted
// and listed as deleted, never loaded, never removals; appends continue
// at the skipped-to sequence; removing the messages before the gap moves
// FirstSeq past it.
func testSkipAfterMessages(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a.x", "b", "a.y")
	h.skip(8)
	h.check(1, 7, 1, 2, 3)
	h.wantRemovalsAre(0)
	for _, seq := range []uint64{4, 7} {
		if err := h.s.Delete(seq); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Delete(%d) of a skipped sequence = %v, want ErrNotFound", seq, err)
		}
	}
	h.mustAppend(h.next("a.x"), 8)
	h.check(1, 8, 1, 2, 3, 8)
	h.wantNext([]nextCase{{nil, 4, 8}, {[]string{"a.x"}, 2, 8}, {[]string{"a.*"}, 4, 8}, {[]string{"b"}, 3, 0}})
	h.wantLast(map[string]uint64{"": 8, "a.y": 3, "b": 2})
	h.wantSubjects("", map[string]store.SubjectState{"a.x": ss(2, 1, 8), "b": ss(1, 2, 2), "a.y": ss(1, 3, 3)})
	h.del(3)
	h.check(1, 8, 1, 2, 8)
	h.del(1)
	h.del(2)
	h.check(8, 8, 8)
	h.wantRemovalsAre(3)
}

// After a purge the store is empty: the skip moves FirstSeq, nothing
// counts as deleted, and LastTime stays.
func testSkipAfterPurge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c")
	h.purge(store.PurgeRequest{}, 3, nil)
	h.skip(100)
	h.wantState(store.State{FirstSeq: 100, LastSeq: 99, LastTime: h.lastTime})
	h.mustAppend(h.next("d"), 100)
	h.check(100, 100, 100)
	h.del(100)
	h.skip(200)
	h.wantState(store.State{FirstSeq: 200, LastSeq: 199, LastTime: h.lastTime})
	h.check(200, 199)
}

// A mirror of an origin with deletes skips small gaps between appends,
// sometimes twice in a row; counts, loads, compaction into a gap and a
// purge below one all agree.
func testSkipMirrorPattern(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	origin := []struct {
		seq  uint64
		subj string
	}{{1, "a.x"}, {2, "b.x"}, {5, "a.y"}, {6, "a.x"}, {9, "b.x"}, {20, "a.x"}, {21, "a.y"}, {40, "b.y"}}
	var stored []uint64
	for _, m := range origin {
		if m.seq == 20 {
			h.skip(15) // a skip that the next one continues
		}
		h.skip(m.seq)
		h.mustAppend(h.next(m.subj), m.seq)
		stored = append(stored, m.seq)
	}
	h.check(1, 40, stored...)
	h.compact(12, 5)
	h.check(20, 40, 20, 21, 40)
	h.purge(store.PurgeRequest{Subject: "a.*"}, 2, nil)
	h.check(40, 40, 40)
}

// Limits apply to the stored messages only: a skip neither counts nor
// removes, and discard old steps over the gap.
func testSkipLimits(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 3, MaxMsgsPerSubject: 2})
	h.add("a", "b", "a")
	h.skip(10)
	h.check(1, 9, 1, 2, 3)
	h.mustAppend(h.next("c"), 10)
	h.check(2, 10, 2, 3, 10)
	h.mustAppend(h.next("a"), 11)
	h.check(3, 11, 3, 10, 11)
	h.add("a") // per subject: removes 3
	h.check(10, 12, 10, 11, 12)
	h.add("d")
	h.check(11, 13, 11, 12, 13)
	h.wantRemovalsAre(4)
}

// hugeSkip is a skip no engine may pay for per sequence.
const hugeSkip = 1_000_000_000

// maxSkipAlloc bounds the bytes a huge skip, with the appends and reads
// around it, may allocate.
const maxSkipAlloc = 64 << 20

// A skip of a billion sequences behind a message costs nothing per
// sequence: appends, loads, counts and State(false) stay cheap and
// exact, and survive a reopen.
func testSkipHuge(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b")
	to := uint64(2 + hugeSkip + 1)
	allocated := allocatedBy(func() {
		h.skip(to)
		h.mustAppend(h.next("a"), to)
		h.wantHuge(to)
		h.wantNext([]nextCase{{nil, 3, to}, {[]string{"a"}, 2, to}, {[]string{"b"}, 3, 0}})
		h.wantLast(map[string]uint64{"": to, "b": 2})
	})
	if allocated > maxSkipAlloc {
		t.Fatalf("SkipTo(%d) and the reads after it allocated %d bytes", to, allocated)
	}
	if h.e.Reopen != nil {
		h.reopenPlain()
		h.wantHuge(to)
		h.mustAppend(h.next("c"), to+1)
	}
	h.del(1)
	h.del(2)
	h.check(to, to+h.count(to+1), h.storedFrom(to)...)
}

// wantHuge checks a store holding 1, 2 and to, the gap between skipped,
// without listing the gap (State(true) would allocate per sequence).
func (h *harness) wantHuge(to uint64) {
	h.t.Helper()
	st := h.s.State(false)
	last := to + h.count(to+1)
	msgs := 3 + h.count(to+1)
	if st.FirstSeq != 1 || st.LastSeq != last || st.Msgs != msgs || st.NumDeleted != int(last-msgs) || st.Deleted != nil {
		h.t.Fatalf("State(false) = %+v; want 1..%d, %d messages, %d deleted", st, last, msgs, last-msgs)
	}
	for _, seq := range []uint64{3, to / 2, to - 1} {
		h.wantLoad(seq, false)
	}
	h.wantLoad(to, true)
	pending := map[[2]uint64]uint64{{0, 0}: msgs, {3, 0}: msgs - 2, {3, to - 1}: 0, {2, to}: 2, {to / 2, 0}: msgs - 2}
	for rg, want := range pending {
		if got := h.s.NumPending(nil, rg[0], rg[1]); got != want {
			h.t.Fatalf("NumPending(nil, %d, %d) = %d, want %d", rg[0], rg[1], got, want)
		}
	}
	if got := h.s.NumPending([]string{"a"}, 2, 0); got != 1 {
		h.t.Fatalf("NumPending(a, 2, 0) = %d, want 1", got)
	}
}

// count returns 1 when a message was appended at seq, else 0.
func (h *harness) count(seq uint64) uint64 {
	if _, ok := h.sent[seq]; ok {
		return 1
	}
	return 0
}

// storedFrom returns the appended sequences from seq on that are still
// in the store, ascending.
func (h *harness) storedFrom(seq uint64) []uint64 {
	var out []uint64
	for sm, err := h.s.LoadNext(nil, seq); err == nil; sm, err = h.s.LoadNext(nil, sm.Seq+1) {
		out = append(out, sm.Seq)
	}
	return out
}

// An empty store skips a billion sequences and more at no cost.
func testSkipHugeEmpty(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	to := uint64(1) << 62
	allocated := allocatedBy(func() {
		h.skip(hugeSkip)
		h.skip(to)
		h.mustAppend(h.next("a"), to)
	})
	if allocated > maxSkipAlloc {
		t.Fatalf("SkipTo(%d) allocated %d bytes", to, allocated)
	}
	h.check(to, to, to)
}

// allocatedBy returns the bytes the process allocated while fn ran.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// reopenPlain reopens the store without the snapshot comparison of
// reopen, which lists every gap.
func (h *harness) reopenPlain() {
	h.t.Helper()
	before := h.s.State(false)
	h.s = h.e.Reopen(h.t, h.s, h.cfg)
	h.opened, h.appended = before.Msgs, 0
	if after := h.s.State(false); !reflect.DeepEqual(after, before) {
		h.t.Fatalf("State(false) changed across reopen:\nbefore %+v\n after %+v", before, after)
	}
}

// SkipTo on a closed store is ErrClosed.
func testSkipClosed(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a")
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	h.closed = true
	if err := h.s.SkipTo(5); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("SkipTo after Close = %v, want ErrClosed", err)
	}
}

// A skip with no message after it survives a reopen: the next append
// still gets the skipped-to sequence, and the gap stays a gap.
func testReopenSkip(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b")
	h.skip(5)
	h.reopen()
	h.check(1, 4, 1, 2)
	h.mustAppend(h.next("c"), 5)
	h.skip(7)
	h.skip(9)
	h.reopen()
	h.check(1, 8, 1, 2, 5)
	h.mustAppend(h.next("d"), 9)
	h.reopen()
	h.check(1, 9, 1, 2, 5, 9)
}

// A skip of an empty store survives a reopen.
func testReopenSkipEmpty(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.skip(10)
	h.reopen()
	h.wantState(store.State{FirstSeq: 10, LastSeq: 9})
	h.mustAppend(h.next("a"), 10)
	h.del(10)
	h.skip(20)
	h.reopen()
	h.wantState(store.State{FirstSeq: 20, LastSeq: 19, LastTime: h.lastTime})
	h.mustAppend(h.next("b"), 20)
	h.check(20, 20, 20)
}
