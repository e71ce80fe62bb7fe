package storetest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

var pendingTests = []test{
	{name: "NumPending", fn: testNumPending},
	{name: "NumPendingRandom", fn: testNumPendingRandom},
	{name: "NumPendingManySubjects", fn: testNumPendingManySubjects},
	{name: "Removals", fn: testRemovals},
	{name: "DurableSeq", fn: testDurableSeq},
	{name: "ReopenCounters", fn: testReopenCounters, reopen: true},
}

// pendingCase is a NumPending call and its answer.
type pendingCase struct {
	filters    []string
	start, end uint64
	want       uint64
}

// wantPendingCases runs NumPending cases.
func (h *harness) wantPendingCases(cases []pendingCase) {
	h.t.Helper()
	for _, c := range cases {
		if got := h.s.NumPending(c.filters, c.start, c.end); got != c.want {
			h.t.Fatalf("NumPending(%q, %d, %d) = %d, want %d", c.filters, c.start, c.end, got, c.want)
		}
	}
}

// NumPending counts stored messages in start..end (end 0: to the last)
// under LoadNext's filter rules, skipping removed ones.
func testNumPending(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	loadFixture(h) // 1 a.x, 2 b.x, 3 a.y, 4 a.x, 5 b.y, 6 c
	h.wantPendingCases([]pendingCase{
		{nil, 0, 0, 6}, {nil, 1, 0, 6}, {nil, 3, 0, 4}, {nil, 3, 4, 2}, {nil, 7, 0, 0}, {nil, 4, 2, 0},
		{nil, 0, 3, 3}, {nil, 6, 100, 1}, {nil, math.MaxUint64, 0, 0}, {nil, 0, math.MaxUint64, 6},
		{[]string{}, 5, 0, 2}, {[]string{""}, 2, 0, 5}, {[]string{">"}, 0, 1, 1},
		{[]string{"a.x"}, 0, 0, 2}, {[]string{"a.x"}, 2, 0, 1}, {[]string{"a.x"}, 0, 3, 1}, {[]string{"a.x"}, 4, 4, 1},
		{[]string{"a.*"}, 0, 0, 3}, {[]string{"*.x"}, 2, 4, 2}, {[]string{"*.y"}, 4, 0, 1}, {[]string{"b.>"}, 1, 5, 2},
		{[]string{"c"}, 0, 5, 0}, {[]string{"*"}, 0, 0, 1}, {[]string{"nope"}, 0, 0, 0}, {[]string{"a.x.>"}, 0, 0, 0},
		{[]string{"a.x", "a.x"}, 0, 0, 2}, {[]string{"a.x", "a.*"}, 0, 0, 3}, {[]string{"a.x", ">"}, 2, 0, 5},
		{[]string{"a.x", "b.y"}, 2, 5, 2}, {[]string{"nope", "c"}, 0, 0, 1}, {[]string{"c"}, math.MaxUint64, 0, 0},
	})
	for _, seq := range []uint64{1, 4, 6} {
		h.del(seq)
	}
	h.wantPendingCases([]pendingCase{
		{nil, 0, 0, 3}, {nil, 2, 5, 3}, {nil, 4, 4, 0}, {nil, 6, 0, 0}, {nil, 0, 2, 1},
		{[]string{"a.x"}, 0, 0, 0}, {[]string{"a.*"}, 0, 0, 1}, {[]string{"*"}, 0, 0, 0}, {[]string{"b.*", "c"}, 3, 0, 1},
	})
	h.add("a.x")
	h.wantPendingCases([]pendingCase{{nil, 7, 0, 1}, {[]string{"a.x"}, 0, 0, 1}, {[]string{"a.*"}, 3, 7, 2}, {[]string{"a.*"}, 4, 7, 1}})
}

// pendingSubjects are the subjects the randomized NumPending test appends
// to, "rare" seldom.
var pendingSubjects = []string{"a", "b.x", "b.y", "c.1.z", "b.x", "a", "a", "b.y"}

// pendingFilters are the filter lists the randomized test counts with.
var pendingFilters = [][]string{
	nil, {""}, {">"}, {"a"}, {"b.x"}, {"rare"}, {"b.*"}, {"*"}, {"b.>"}, {"*.x"}, {"c.*.z"}, {"c.>"},
	{"a", "b.y"}, {"a", "a"}, {"b.*", "a"}, {"nope"}, {"b.x", ">"}, {"rare", "nope"}, {"*", "rare"},
}

// NumPending agrees with a count of what LoadNext walks through, for
// every filter and random ranges, while appends, deletes, purges and
// compactions change the stream.
func testNumPendingRandom(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 8 {
		for range 300 {
			subj := pendingSubjects[r.IntN(len(pendingSubjects))]
			if r.IntN(50) == 0 {
				subj = "rare"
			}
			h.add(subj)
		}
		st := h.s.State(false)
		for range 40 + r.IntN(100) {
			h.s.Delete(st.FirstSeq + r.Uint64N(st.LastSeq-st.FirstSeq+1)) // ErrNotFound is fine
		}
		switch round % 4 {
		case 1:
			h.purge(store.PurgeRequest{Subject: "b.x", Keep: 20}, mustCount(h, "b.x", 20), nil)
		case 2:
			seq := st.FirstSeq + uint64(r.IntN(200))
			h.compact(seq, countIn(h.loadNextAll(nil), 0, seq-1))
		}
		h.wantPendingBrute(r)
	}
}

// mustCount returns how many messages a purge of subj keeping keep removes.
func mustCount(h *harness, subj string, keep uint64) uint64 {
	n := uint64(len(h.loadNextAll([]string{subj})))
	return n - min(n, keep)
}

// loadNextAll returns the sequences LoadNext walks through with filters.
func (h *harness) loadNextAll(filters []string) []uint64 {
	h.t.Helper()
	var out []uint64
	sm, err := h.s.LoadNext(filters, 0)
	for ; err == nil; sm, err = h.s.LoadNext(filters, sm.Seq+1) {
		out = append(out, sm.Seq)
	}
	if !errors.Is(err, store.ErrEOF) {
		h.t.Fatalf("LoadNext(%q): %v", filters, err)
	}
	return out
}

// wantPendingBrute compares NumPending with counts over LoadNext for
// every pendingFilters list: the whole stream, the tail, and random
// ranges, short and long.
func (h *harness) wantPendingBrute(r *rand.Rand) {
	h.t.Helper()
	st := h.s.State(false)
	for _, filters := range pendingFilters {
		found := h.loadNextAll(filters)
		ranges := [][2]uint64{{0, 0}, {st.FirstSeq, 0}, {st.LastSeq, 0}, {st.LastSeq - 3, 0}, {st.LastSeq + 1, 0}}
		for range 30 {
			a := st.FirstSeq + r.Uint64N(st.LastSeq-st.FirstSeq+3) - 1
			b := a + r.Uint64N(1+r.Uint64N(st.LastSeq-st.FirstSeq+3))
			ranges = append(ranges, [2]uint64{a, b}, [2]uint64{a, 0}, [2]uint64{0, b})
		}
		for _, rg := range ranges {
			want := countIn(found, rg[0], rg[1])
			if got := h.s.NumPending(filters, rg[0], rg[1]); got != want {
				h.t.Fatalf("NumPending(%q, %d, %d) = %d, LoadNext finds %d (state %+v)", filters, rg[0], rg[1], got, want, st)
			}
		}
	}
}

// countIn returns how many of seqs lie in start..end (end 0: no bound).
func countIn(seqs []uint64, start, end uint64) uint64 {
	var n uint64
	for _, seq := range seqs {
		if seq >= start && (end == 0 || seq <= end) {
			n++
		}
	}
	return n
}

// wantPending checks NumPending on a store holding exactly stored
// (ascending) between first and last, for a few filters and ranges,
// against a count over what was appended.
func (h *harness) wantPending(first, last uint64, stored []uint64) {
	h.t.Helper()
	filters := [][]string{nil, {">"}, {"*"}, {"*.>"}, {"a.*"}, {"nope"}}
	seen := map[string]bool{}
	for _, seq := range stored {
		if subj := h.sent[seq].Subject; !seen[subj] && len(seen) < 3 {
			seen[subj] = true
			filters = append(filters, []string{subj}, []string{"nope", subj})
		}
	}
	mid := first
	if last > first {
		mid += (last - first) / 2
	}
	for _, filter := range filters {
		for _, start := range []uint64{0, first, mid, last, last + 1} {
			for _, end := range []uint64{0, first, mid, last, last + 5} {
				var want uint64
				for _, seq := range stored {
					if seq >= start && (end == 0 || seq <= end) && store.MatchFilters(h.sent[seq].Subject, filter) {
						want++
					}
				}
				if got := h.s.NumPending(filter, start, end); got != want {
					h.t.Fatalf("NumPending(%q, %d, %d) = %d, want %d", filter, start, end, got, want)
				}
			}
		}
	}
}

// With more subjects than an engine may resolve at once, wildcard counts
// still agree with LoadNext.
func testNumPendingManySubjects(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	for i := range 5000 {
		h.add(fmt.Sprintf("m.%d", i), fmt.Sprintf("x.%d", i%3))
	}
	for seq := uint64(1); seq <= 10000; seq += 7 {
		h.del(seq)
	}
	r := rand.New(rand.NewPCG(3, 5))
	for _, filters := range [][]string{{"m.*"}, {"x.*"}, {"*.1"}, {"m.>", "x.1"}, {"m.17"}, {"*.*", "m.4"}} {
		found := h.loadNextAll(filters)
		for range 40 {
			a := r.Uint64N(10002)
			b := a + r.Uint64N(1+r.Uint64N(10002))
			for _, rg := range [][2]uint64{{a, b}, {a, 0}, {0, b}, {a, a + 3}} {
				if got, want := h.s.NumPending(filters, rg[0], rg[1]), countIn(found, rg[0], rg[1]); got != want {
					t.Fatalf("NumPending(%q, %d, %d) = %d, LoadNext finds %d", filters, rg[0], rg[1], got, want)
				}
			}
		}
	}
}

// wantRemovalsAre fails unless Removals returns want.
func (h *harness) wantRemovalsAre(want uint64) {
	h.t.Helper()
	if got := h.s.Removals(); got != want {
		h.t.Fatalf("Removals() = %d, want %d", got, want)
	}
}

// Removals counts every message removed, whatever removed it; refusals,
// failed requests and removals of nothing count nothing.
func testRemovals(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgsPerSubject: 3})
	h.wantRemovalsAre(0)
	h.add("a", "a", "a", "a") // the per-subject limit removes 1
	h.wantRemovalsAre(1)
	h.del(2)
	if err := h.s.Delete(2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Delete(2) again = %v", err)
	}
	h.wantRemovalsAre(2)
	h.add("b", "b", "b", "b") // 5..8; 5 goes
	h.wantRemovalsAre(3)
	h.purge(store.PurgeRequest{Subject: "b", Keep: 1}, 2, nil) // a rollup: 6, 7
	h.purge(store.PurgeRequest{Seq: 5, Keep: 1}, 0, store.ErrBadRequest)
	h.purge(store.PurgeRequest{Subject: "nope"}, 0, nil)
	h.wantRemovalsAre(5)
	h.compact(4, 1) // 3
	h.compact(2, 0)
	h.wantRemovalsAre(6)
	h.update(store.Config{MaxMsgs: 1}) // 4
	h.wantRemovalsAre(7)
	h.update(store.Config{MaxMsgs: 1, Discard: store.DiscardNew})
	h.refuse(h.next("c"), store.ErrMaxMsgs)
	h.wantRemovalsAre(7)
	h.update(store.Config{MaxAge: time.Second})
	h.add("c", "c")
	h.expire(h.lastTime+10*sec, 3)
	h.wantRemovalsAre(10)
	h.add("d", "d")
	h.purge(store.PurgeRequest{}, 2, nil)
	h.compact(h.s.State(false).LastSeq+10, 0)
	h.wantRemovalsAre(12)
	h.add("e")
	h.compact(0, 1)
	h.wantRemovalsAre(13)
	h.add("f", "f")
	h.compact(100, 2) // past the end
	h.wantRemovalsAre(15)
	h.check(100, 99)
}

// DurableSeq never passes LastSeq and reaches it once WaitDurable
// returned; a new store shows its LastSeq.
func testDurableSeq(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	if got := h.s.DurableSeq(); got != 0 {
		t.Fatalf("new store: DurableSeq() = %d, want 0", got)
	}
	for range 50 {
		seq := h.add("a")
		if got := h.s.DurableSeq(); got > seq {
			t.Fatalf("DurableSeq() = %d past LastSeq %d", got, seq)
		}
	}
	h.wantDurable()
	h.compact(80, 50) // LastSeq becomes 79
	h.wantDurable()
	h.add("b")
	h.wantDurable()
	g := open(t, e, store.Config{FirstSeq: 100})
	if got := g.s.DurableSeq(); got != 99 {
		t.Fatalf("new store with FirstSeq 100: DurableSeq() = %d, want 99", got)
	}
}

// A reopened store counts removals from 0 and is durable through LastSeq;
// NumPending is unchanged.
func testReopenCounters(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MaxMsgs: 8})
	h.add("a", "b", "a", "b", "a", "b", "a", "b", "a", "c") // 1 and 2 go
	h.del(5)
	h.wantRemovalsAre(3)
	before := h.s.NumPending([]string{"a"}, 0, 0)
	h.reopen()
	h.wantRemovalsAre(0)
	if got := h.s.DurableSeq(); got != 10 {
		t.Fatalf("DurableSeq() after reopen = %d, want 10", got)
	}
	if got := h.s.NumPending([]string{"a"}, 0, 0); got != before || got != 3 {
		t.Fatalf("NumPending(a) after reopen = %d, before %d, want 3", got, before)
	}
	h.add("a", "a") // 3 goes
	h.wantRemovalsAre(1)
	h.check(4, 12, slices.DeleteFunc(seqs(4, 12), func(s uint64) bool { return s == 5 })...)
}
