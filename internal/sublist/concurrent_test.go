package sublist

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentVisibility runs Match and HasInterest from several
// goroutines, on hot cached subjects and on a stream of unique ones (cache
// misses, stores and evictions), while writers insert and remove entries
// whose subjects match the hot subjects. After Insert returns, a Match by
// the writer and by another goroutine it hands the value to must see the
// entry; after Remove returns, they must not. Run it with -race.
func TestConcurrentVisibility(t *testing.T) {
	const writers, readers, rounds = 2, 3, 2000
	s := New[int]()
	mustInsert(t, s, entry{"hot.base", "", -1})
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() { readLoop(t, s, i, &stop) })
	}
	var writersWG sync.WaitGroup
	for w := range writers {
		writersWG.Go(func() { writeLoop(t, s, w, rounds) })
	}
	writersWG.Wait()
	stop.Store(true)
	wg.Wait()
	if s.Count() != 1 {
		t.Fatalf("Count = %d, want 1", s.Count())
	}
	s.check(t)
}

// readLoop matches hot and unique subjects until stop, checking that the
// permanent entry is always seen.
func readLoop(t *testing.T, s *Sublist[int], id int, stop *atomic.Bool) {
	hot := [][]byte{[]byte("hot.base"), []byte("hot.x")}
	for i := 0; !stop.Load(); i++ {
		if r := s.Match(hot[0]); !slices.Contains(r.Plain, -1) {
			t.Errorf("reader %d: Match(hot.base) lost the permanent entry: %s", id, canon(r))
			return
		}
		s.Match(hot[1])
		s.HasInterest(hot[i%2])
		unique := fmt.Appendf(nil, "hot.r%d.%d", id, i)
		s.Match(unique)
		s.Match(unique) // cached on the second miss: stores and evictions
	}
}

// patterns are the subjects writers use; each matches "hot.x".
var patterns = []entry{{"hot.x", "", 0}, {"hot.*", "", 0}, {"hot.>", "", 0}, {">", "", 0}, {"*.x", "g", 0}, {"hot.x", "g", 0}}

// writeLoop inserts and removes rounds unique values, checking visibility
// itself and through a second goroutine after each step.
func writeLoop(t *testing.T, s *Sublist[int], w, rounds int) {
	ask, ans := make(chan int), make(chan bool)
	defer close(ask)
	go func() {
		for v := range ask {
			ans <- contains(s.Match([]byte("hot.x")), v)
		}
	}()
	for i := range rounds {
		e := patterns[i%len(patterns)]
		e.v = w*rounds + i
		mustInsert(t, s, e)
		ask <- e.v
		if !contains(s.Match([]byte("hot.x")), e.v) || !<-ans || !s.HasInterest([]byte("hot.x")) {
			t.Errorf("writer %d: entry %v not visible after Insert", w, e)
			return
		}
		mustRemove(t, s, e)
		ask <- e.v
		if contains(s.Match([]byte("hot.x")), e.v) || <-ans {
			t.Errorf("writer %d: entry %v visible after Remove", w, e)
			return
		}
	}
}

// contains reports whether v is anywhere in r.
func contains(r *Result[int], v int) bool {
	if slices.Contains(r.Plain, v) {
		return true
	}
	for _, q := range r.Queues {
		if slices.Contains(q.Members, v) {
			return true
		}
	}
	return false
}
