package sublist

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// benchSublist returns a Sublist shaped like a busy account: many literal
// subjects four tokens deep, a few wildcards, queue groups, and inboxes.
func benchSublist(tb testing.TB) *Sublist[int] {
	s := New[int]()
	v := 0
	add := func(subj, queue string) {
		v++
		if err := s.Insert(subj, queue, v); err != nil {
			tb.Fatal(err)
		}
	}
	for a := range 10 {
		for b := range 10 {
			for c := range 10 {
				add(fmt.Sprintf("orders.r%d.c%d.t%d", a, b, c), "")
			}
			add(fmt.Sprintf("orders.r%d.c%d.*", a, b), "workers")
		}
		add(fmt.Sprintf("orders.r%d.>", a), "")
	}
	add("orders.>", "")
	add("orders.*.*.t1", "audit")
	for i := range 1000 {
		add(fmt.Sprintf("_INBOX.%d.*", i), "")
	}
	return s
}

// TestMatchHitNoAllocs: a cache-hit Match and HasInterest allocate nothing
// (docs/architecture.md rule 6).
func TestMatchHitNoAllocs(t *testing.T) {
	s := benchSublist(t)
	subj := []byte("orders.r1.c2.t1")
	s.Match(subj)
	s.Match(subj) // cached on the second miss
	if n := testing.AllocsPerRun(1000, func() { s.Match(subj) }); n != 0 {
		t.Fatalf("Match cache hit: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { s.HasInterest(subj) }); n != 0 {
		t.Fatalf("HasInterest cache hit: %v allocs, want 0", n)
	}
	miss := []byte("orders.r1.c2.nope.x")
	if n := testing.AllocsPerRun(1000, func() { s.HasInterest(miss) }); n != 0 {
		t.Fatalf("HasInterest uncached: %v allocs, want 0", n)
	}
}

// TestMatchOnceOneAlloc: matching a subject published once, such as a
// PubAck's reply inbox, allocates only its result.
func TestMatchOnceOneAlloc(t *testing.T) {
	s := benchSublist(t)
	i := 0
	n := testing.AllocsPerRun(1000, func() {
		s.Match(replies[i%len(replies)])
		i++
	})
	if n != 1 {
		t.Fatalf("Match of a new reply subject: %v allocs, want 1", n)
	}
}

// replies are unique PubAck reply subjects, each matched by the
// "_INBOX.7.*" entry of benchSublist (nats.go's muxed reply inbox).
var replies = func() [][]byte {
	r := make([][]byte, 64*cacheMax)
	for i := range r {
		r[i] = fmt.Appendf(nil, "_INBOX.7.%08x", i)
	}
	return r
}()

func BenchmarkMatchHit(b *testing.B) {
	s := benchSublist(b)
	subj := []byte("orders.r1.c2.t1")
	s.Match(subj)
	s.Match(subj)
	b.ReportAllocs()
	for b.Loop() {
		s.Match(subj)
	}
}

func BenchmarkMatchHitParallel(b *testing.B) {
	s := benchSublist(b)
	subjs := make([][]byte, 64)
	for i := range subjs {
		subjs[i] = fmt.Appendf(nil, "orders.r%d.c%d.t1", i%10, i/10%10)
		s.Match(subjs[i])
		s.Match(subjs[i])
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			s.Match(subjs[i%len(subjs)])
		}
	})
}

// BenchmarkMatchMiss publishes to more distinct subjects than the cache
// holds, in a cycle, so every Match walks the trie and builds a result;
// about one in seven subjects is still in the admission filter when it
// comes round again, and its result is stored, evicting another.
func BenchmarkMatchMiss(b *testing.B) {
	s := benchSublist(b)
	subjs := make([][]byte, 8*cacheMax)
	for i := range subjs {
		subjs[i] = fmt.Appendf(nil, "orders.r%d.c%d.t%d.x%d", i%10, i/10%10, i/100%10, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Match(subjs[i%len(subjs)])
		i++
	}
}

// BenchmarkMatchReplies is the PubAck path of a JetStream publisher: every
// Match is of a new reply subject (cache misses that find one wildcard
// entry), and every 8th of the stream's subject (a cache hit).
func BenchmarkMatchReplies(b *testing.B) {
	s := benchSublist(b)
	hot := []byte("orders.r1.c2.t1")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%8 == 0 {
			s.Match(hot)
		} else {
			s.Match(replies[i%len(replies)])
		}
		i++
	}
}

// BenchmarkMatchRepliesParallel is BenchmarkMatchReplies from every
// processor at once, as several connections publish acks.
func BenchmarkMatchRepliesParallel(b *testing.B) {
	s := benchSublist(b)
	hot := []byte("orders.r1.c2.t1")
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * len(replies) / 16
		for ; pb.Next(); i++ {
			if i%8 == 0 {
				s.Match(hot)
			} else {
				s.Match(replies[i%len(replies)])
			}
		}
	})
}

// BenchmarkHasInterestMiss walks the trie for a reply subject that is not
// cached, as the server does when deciding on a no-responders reply.
func BenchmarkHasInterestMiss(b *testing.B) {
	s := benchSublist(b)
	subj := []byte("_INBOX.999.abcdefgh")
	b.ReportAllocs()
	for b.Loop() {
		s.HasInterest(subj)
	}
}

// BenchmarkInsertRemove is a SUB and UNSUB of an old-style inbox.
func BenchmarkInsertRemove(b *testing.B) {
	s := benchSublist(b)
	subjs := make([]string, 1024)
	for i := range subjs {
		subjs[i] = fmt.Sprintf("_INBOX.req%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		subj := subjs[i%len(subjs)]
		if err := s.Insert(subj, "", -i); err != nil {
			b.Fatal(err)
		}
		if err := s.Remove(subj, "", -i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkInsertRemoveWildcard is a SUB and UNSUB of a wildcard subject
// with a full cache: each one scans the cache for results to drop. With
// "orders" every cached subject shares the pattern's literal prefix; with
// "inbox" (a new connection's muxed inbox) none does.
func BenchmarkInsertRemoveWildcard(b *testing.B) {
	for name, subj := range map[string]string{"orders": "orders.*.c1.>", "inbox": "_INBOX.newconn.*"} {
		b.Run(name, func(b *testing.B) {
			s := benchSublist(b)
			for i := range cacheMax {
				subj := fmt.Appendf(nil, "orders.r%d.c%d.t%d", i%10, i/10%10, i/100%10)
				s.Match(subj)
				s.Match(subj) // cached on the second miss
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Insert(subj, "", -1); err != nil {
					b.Fatal(err)
				}
				if err := s.Remove(subj, "", -1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
