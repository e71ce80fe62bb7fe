package consumer

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/cairnmq/cairn/internal/store"
)

// TestPendingEntrySize: a pending delivery is one 40-byte entry without
// pointers, so that a million of them are 40 MB in one block the garbage
// collector does not scan (before: a map of pointers to 48-byte objects,
// about 100 bytes each and a million objects to mark).
func TestPendingEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(pendingMsg{}); n != 40 {
		t.Fatalf("pendingMsg is %d bytes, want 40", n)
	}
	typ := reflect.TypeFor[pendingMsg]()
	for i := range typ.NumField() {
		switch typ.Field(i).Type.Kind() {
		case reflect.Uint64, reflect.Int64, reflect.Uint32:
		default:
			t.Fatalf("pendingMsg.%s is a %s: pendingMsg must hold no pointer", typ.Field(i).Name, typ.Field(i).Type)
		}
	}
}

// TestDeliverNewAllocates: recording a first delivery allocates nothing
// of its own; only the pending list and the deadline heap grow, by
// doubling, which amounts to less than one allocation per delivery.
func TestDeliverNewAllocates(t *testing.T) {
	s := NewState(explicit(time.Minute), 1)
	seq := uint64(0)
	allocs := testing.AllocsPerRun(20000, func() {
		seq++
		s.DeliverNew(seq, t0)
	})
	if allocs != 0 {
		t.Fatalf("DeliverNew: %v allocations per delivery, want 0 (amortized)", allocs)
	}
	// Acknowledging them one by one, in order, allocates only the result
	// (AckResult.Acked): the list compacts in place.
	next := uint64(0)
	allocs = testing.AllocsPerRun(20000, func() {
		next++
		s.Ack(next, next)
	})
	if allocs > 1 {
		t.Fatalf("Ack: %v allocations per ack, want at most 1", allocs)
	}
}

// TestFirstDeliveriesNeedNoHeap: first deliveries with one ack wait keep
// their deadline in the pending list alone (16 bytes less each than an
// entry in the deadline heap); the heap holds only re-armed ones. They
// still expire in order.
func TestFirstDeliveriesNeedNoHeap(t *testing.T) {
	s := NewState(explicit(30*time.Second), 1)
	for seq := uint64(1); seq <= 10_000; seq++ {
		s.DeliverNew(seq, t0+int64(seq))
	}
	s.Progress(5000, t0+sec) // re-armed: due at t0+31s
	if n := len(s.deadlines); n != 1 {
		t.Fatalf("deadline heap holds %d entries after 10,000 first deliveries and one +WPI, want 1", n)
	}
	if at, ok := s.NextDeadline(); !ok || at != t0+30*sec+1 {
		t.Fatalf("NextDeadline = t0%+d ns, %v", at-t0, ok)
	}
	s.Expire(t0 + 30*sec + 6000)
	if got := redeliverAll(s, t0+31*sec); len(got) != 5999 || got[0] != 1 || got[4998] != 4999 || got[4999] != 5001 {
		t.Fatalf("redelivered %d: %v ... %v", len(got), got[:3], got[len(got)-3:])
	}
}

// capacity returns the entries p's blocks have room for.
func (p *pendingList) capacity() int {
	n := 0
	for _, b := range p.blocks {
		n += cap(b.e)
	}
	return n
}

// TestPendingListMemory: a pending list costs 40 bytes per entry and at
// most one partly filled block; once most of a large pending set is
// acknowledged, in order or not, its memory follows it down (before, a
// map never shrank).
func TestPendingListMemory(t *testing.T) {
	var p pendingList
	const n = 100_000
	for seq := uint64(1); seq <= n; seq++ {
		p.add(pendingMsg{sseq: seq, deliveries: 1})
	}
	if c := p.capacity(); c >= n+pendingBlockLen {
		t.Fatalf("%d pending in blocks of room for %d, want less than %d", p.len(), c, n+pendingBlockLen)
	}
	for seq := uint64(1); seq <= n; seq++ {
		if seq%10_000 != 0 { // scattered survivors: no block empties
			p.remove(seq)
		}
	}
	survivors := map[uint64]uint64{}
	for seq := uint64(10_000); seq <= n; seq += 10_000 {
		survivors[seq] = 0
	}
	checkPendingList(t, &p, survivors)
	// Holes stay below max(live, minCompact): a compaction removes them.
	if p.len() != 10 || p.capacity() > minCompact+pendingBlockLen {
		t.Fatalf("%d pending in blocks of room for %d, want 10 in room for at most %d", p.len(), p.capacity(), minCompact+pendingBlockLen)
	}
	for seq := uint64(n + 1); seq <= 2*n; seq++ {
		p.add(pendingMsg{sseq: seq, deliveries: 1})
	}
	p.removeUpTo(2*n-5, 0) // in order
	if p.len() != 5 || p.capacity() > pendingBlockLen {
		t.Fatalf("%d pending in blocks of room for %d, want 5 in one block", p.len(), p.capacity())
	}
	checkPendingList(t, &p, map[uint64]uint64{2*n - 4: 0, 2*n - 3: 0, 2*n - 2: 0, 2*n - 1: 0, 2 * n: 0})
}

// TestPendingListOneAtATime: a consumer that has one delivery pending at
// a time reuses one block instead of allocating one per delivery.
func TestPendingListOneAtATime(t *testing.T) {
	var p pendingList
	seq := uint64(0)
	allocs := testing.AllocsPerRun(10_000, func() {
		seq++
		p.add(pendingMsg{sseq: seq, deliveries: 1})
		p.remove(seq)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per delivery and ack, want 0", allocs)
	}
}

// TestPendingListModel drives a pendingList and a map with the same
// random operations, mostly in the order a consumer makes them (new
// sequences ascending, acks anywhere, ack-all prefixes that keep the
// entries with a dead-letter mark), and compares them after each.
func TestPendingListModel(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for round := range 20 {
		var p pendingList
		model := map[uint64]uint64{} // sseq -> cseq
		marked := map[uint64]bool{}  // sseqs of model with a dead-letter mark
		next := uint64(1)
		for op := range 3000 {
			switch k := r.IntN(20); {
			case k < 8: // new deliveries
				n := 1 + r.IntN(5)
				for range n {
					next += 1 + uint64(r.IntN(3))
					p.add(pendingMsg{sseq: next, cseq: next * 10, deliveries: 1})
					model[next] = next * 10
				}
			case k < 15: // an ack anywhere
				seq := 1 + uint64(r.Int64N(int64(next)))
				_, ok := p.remove(seq)
				if _, want := model[seq]; ok != want {
					t.Fatalf("round %d op %d: remove(%d) = %v, want %v", round, op, seq, ok, want)
				}
				delete(model, seq)
				delete(marked, seq)
			case k < 16: // ack all up to
				upTo := 1 + uint64(r.Int64N(int64(next)))
				got, kept := p.removeUpTo(upTo, pendingDeadMask)
				var want []uint64
				wantKept := false
				for seq := range model {
					if seq <= upTo {
						if marked[seq] {
							wantKept = true
							continue
						}
						want = append(want, seq)
						delete(model, seq)
					}
				}
				slices.Sort(want)
				if !slices.Equal(got, want) || kept != wantKept {
					t.Fatalf("round %d op %d: removeUpTo(%d) = %v, %v, want %v, %v", round, op, upTo, got, kept, want, wantKept)
				}
			case k < 17: // drop those a predicate picks
				m := uint64(2 + r.IntN(5))
				p.removeIf(func(e *pendingMsg) bool { return e.sseq%m == 0 })
				for seq := range model {
					if seq%m == 0 {
						delete(model, seq)
						delete(marked, seq)
					}
				}
			case k < 18: // an out-of-order insert (a restored or replayed delivery)
				seq := 1 + uint64(r.Int64N(int64(next)))
				p.add(pendingMsg{sseq: seq, cseq: seq * 10, deliveries: 1})
				model[seq] = seq * 10
				delete(marked, seq)
			case k < 19: // a dead-letter mark
				seq := 1 + uint64(r.Int64N(int64(next)))
				if e := p.get(seq); e != nil {
					e.setDead(1 + store.DeadLetterReason(r.IntN(2)))
					marked[seq] = true
				}
			default: // lookups
				seq := 1 + uint64(r.Int64N(int64(next+5)))
				e := p.get(seq)
				if cseq, ok := model[seq]; ok != (e != nil) || ok && e.cseq != cseq {
					t.Fatalf("round %d op %d: get(%d) = %+v, model has %v %d", round, op, seq, e, ok, cseq)
				}
			}
			checkPendingList(t, &p, model)
		}
	}
}

// checkPendingList fails unless p holds exactly model, in order, with a
// correct lowest entry and count.
func checkPendingList(t *testing.T, p *pendingList, model map[uint64]uint64) {
	t.Helper()
	var got []uint64
	p.each(func(m *pendingMsg) bool {
		got = append(got, m.sseq)
		return true
	})
	want := make([]uint64, 0, len(model))
	for seq := range model {
		want = append(want, seq)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) || p.len() != len(want) {
		t.Fatalf("list holds %v (len %d), want %v", got, p.len(), want)
	}
	if low := p.lowest(); (low == nil) != (len(want) == 0) || low != nil && low.sseq != want[0] {
		t.Fatalf("lowest = %+v, want %v", low, want)
	}
	live, holes, prev := 0, 0, uint64(0)
	for k, b := range p.blocks {
		if len(b.e) == 0 || cap(b.e) != pendingBlockLen || b.live == 0 && k != len(p.blocks)-1 {
			t.Fatalf("block %d of %d: %d entries, room for %d, %d live", k, len(p.blocks), len(b.e), cap(b.e), b.live)
		}
		n := 0
		for i, m := range b.e {
			if (k > 0 || i > 0) && m.sseq <= prev {
				t.Fatalf("block %d entry %d: sequence %d after %d", k, i, m.sseq, prev)
			}
			prev = m.sseq
			if m.flags&pendingGone == 0 {
				n++
				if i < b.head {
					t.Fatalf("block %d: live entry %d before head %d", k, i, b.head)
				}
			} else if i >= b.head {
				holes++
			}
		}
		if n != b.live {
			t.Fatalf("block %d counts %d live, holds %d", k, b.live, n)
		}
		live += n
	}
	if live != p.live || holes != p.holes {
		t.Fatalf("list counts %d live %d holes, blocks hold %d and %d", p.live, p.holes, live, holes)
	}
}
