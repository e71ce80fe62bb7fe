package memstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// check verifies every invariant of s (docs/architecture.md rule 5: the
// expensive whole-structure check, run by tests after each mutation).
func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.mu.log.check(); err != nil {
		return err
	}
	return s.checkContentsLocked()
}

// check verifies the msgLog invariants.
func (l *msgLog) check() error {
	end := uint64(0)
	for k, r := range l.runs {
		if len(r.msgs) == 0 || r.base < end || (k > 0 && r.base == end) {
			return fmt.Errorf("run %d (base %d, %d entries) after end %d", k, r.base, len(r.msgs), end)
		}
		end = r.end()
	}
	if end > l.last+1 {
		return fmt.Errorf("runs end at %d past last %d", end, l.last)
	}
	if l.count == 0 {
		if len(l.runs) != 0 || (l.first != l.last+1 && (l.first != 0 || l.last != 0)) {
			return fmt.Errorf("empty log: first %d last %d runs %d", l.first, l.last, len(l.runs))
		}
		return nil
	}
	if l.runs[0].msgs[0] == nil || l.first != l.runs[0].base {
		return fmt.Errorf("first %d, base %d, head stored %v", l.first, l.runs[0].base, l.runs[0].msgs[0] != nil)
	}
	return nil
}

// checkContentsLocked verifies counts, bytes and the subject index
// against the log.
func (s *Store) checkContentsLocked() error {
	l := &s.mu.log
	var n, size uint64
	bySubj := map[string][]uint64{}
	for _, r := range l.runs {
		for i, e := range r.msgs {
			if e != nil {
				n++
				size += e.size
				bySubj[e.subj] = append(bySubj[e.subj], r.base+uint64(i))
			}
		}
	}
	if n != l.count || size != s.mu.bytes {
		return fmt.Errorf("count %d bytes %d, log holds %d, %d", l.count, s.mu.bytes, n, size)
	}
	if len(bySubj) != len(s.mu.subjects) {
		return fmt.Errorf("%d subjects indexed, %d stored", len(s.mu.subjects), len(bySubj))
	}
	for subj, want := range bySubj {
		x := s.mu.subjects[subj]
		if x == nil || x.live != uint64(len(want)) || !slices.Equal(x.stored(l), want) {
			return fmt.Errorf("subject %q index disagrees with log %v", subj, want)
		}
	}
	return nil
}

// mustCheck fails the test when s breaks an invariant.
func mustCheck(t *testing.T, s *Store, after string) {
	t.Helper()
	if err := s.check(); err != nil {
		t.Fatalf("after %s: %v", after, err)
	}
}

// bruteNext finds LoadNext's answer by loading every sequence.
func bruteNext(s *Store, filters []string, start uint64) uint64 {
	st := s.State(false)
	for seq := max(start, st.FirstSeq); seq <= st.LastSeq && seq != 0; seq++ {
		if sm, err := s.Load(seq); err == nil && store.MatchFilters(sm.Subject, filters) {
			return seq
		}
	}
	return 0
}

// bruteLast finds LoadLast's answer by loading every sequence.
func bruteLast(s *Store, filter string) uint64 {
	st := s.State(false)
	for seq := st.LastSeq; seq >= st.FirstSeq && seq != 0; seq-- {
		if sm, err := s.Load(seq); err == nil && store.MatchFilter(sm.Subject, filter) {
			return seq
		}
	}
	return 0
}

// randomFilters are the filters the randomized test queries.
var randomFilters = [][]string{
	nil, {">"}, {"s.0"}, {"s.1"}, {"rare"}, {"s.*"}, {"*"}, {"s.>"}, {"rare", "s.2"},
	{"s.3", "s.4"}, {"nope"}, {"*", "s.0"}, {"s.*.x"},
}

// purgeSubjects are the filters the randomized test purges with.
var purgeSubjects = []string{"", ">", "s.0", "s.*", "rare", "nope"}

// TestRandomOps drives a store with random operations and checks its
// invariants and its indexed lookups against brute force after each one.
func TestRandomOps(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, rand.New(rand.NewPCG(seed, 7))) })
	}
}

// randomRun is one randomized run.
func randomRun(t *testing.T, r *rand.Rand) {
	s := New(store.Config{})
	now := int64(0)
	for step := range 600 {
		now += int64(r.IntN(3))
		op := randomOp(t, s, r, now)
		mustCheck(t, s, fmt.Sprintf("step %d (%s)", step, op))
		compareLookups(t, s, r)
	}
}

// randomOp applies one random operation and names it.
func randomOp(t *testing.T, s *Store, r *rand.Rand, now int64) string {
	st := s.State(false)
	subj := fmt.Sprintf("s.%d", r.IntN(5))
	if r.IntN(40) == 0 {
		subj = "rare"
	}
	switch k := r.IntN(100); {
	case k < 5:
		seq := st.LastSeq + 1 + uint64(r.IntN(8))
		if r.IntN(4) == 0 {
			seq += uint64(r.IntN(40)) // past maxNilFill: a new run
		}
		if err := s.SkipTo(seq); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint("skip to ", seq)
	case k < 70:
		_, err := s.Append(store.Msg{Subject: subj, Data: make([]byte, r.IntN(20)), Time: now})
		if err != nil && !errors.Is(err, store.ErrMaxMsgs) && !errors.Is(err, store.ErrMaxBytes) && !errors.Is(err, store.ErrMaxMsgsPerSubject) {
			t.Fatal(err)
		}
		return "append " + subj
	case k < 85:
		seq := st.FirstSeq + uint64(r.IntN(int(st.LastSeq-st.FirstSeq+2)))
		s.Delete(seq)
		return fmt.Sprint("delete ", seq)
	case k < 89:
		req := store.PurgeRequest{Subject: purgeSubjects[r.IntN(len(purgeSubjects))]}
		if r.IntN(2) == 0 {
			req.Keep = uint64(r.IntN(4))
		} else {
			req.Seq = st.FirstSeq + uint64(r.IntN(30))
		}
		s.Purge(req)
		return fmt.Sprintf("purge %+v", req)
	case k < 92:
		seq := st.FirstSeq + uint64(r.IntN(20))
		s.Compact(seq)
		return fmt.Sprint("compact ", seq)
	case k < 95:
		s.ExpireUpTo(now)
		return "expire"
	default:
		cfg := randomConfig(r)
		if err := s.UpdateConfig(cfg); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("update %+v", cfg)
	}
}

// randomConfig returns random limits, often none.
func randomConfig(r *rand.Rand) store.Config {
	cfg := store.Config{Discard: store.DiscardPolicy(r.IntN(2)), DiscardNewPerSubject: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		cfg.MaxMsgs = int64(50 + r.IntN(300))
	}
	if r.IntN(3) == 0 {
		cfg.MaxBytes = int64(2000 + r.IntN(10000))
	}
	if r.IntN(3) == 0 {
		cfg.MaxMsgsPerSubject = int64(1 + r.IntN(80))
	}
	if r.IntN(3) == 0 {
		cfg.MaxAge = time.Duration(50 + r.IntN(200))
	}
	return cfg
}

// compareLookups checks LoadNext and LoadLast against brute force for a
// few random filters and starts.
func compareLookups(t *testing.T, s *Store, r *rand.Rand) {
	st := s.State(false)
	for range 4 {
		filters := randomFilters[r.IntN(len(randomFilters))]
		start := st.FirstSeq + uint64(r.IntN(int(st.LastSeq-st.FirstSeq+3))) - 1
		want := bruteNext(s, filters, start)
		sm, err := s.LoadNext(filters, start)
		if got := seqOf(sm, err, store.ErrEOF); got != want {
			t.Fatalf("LoadNext(%q, %d) = %d (%v), brute force %d", filters, start, got, err, want)
		}
		f := ""
		if len(filters) > 0 {
			f = filters[0]
		}
		sm, err = s.LoadLast(f)
		if got, want := seqOf(sm, err, store.ErrNotFound), bruteLast(s, f); got != want {
			t.Fatalf("LoadLast(%q) = %d (%v), brute force %d", f, got, err, want)
		}
		end := start + uint64(r.IntN(300))
		for _, rg := range [][2]uint64{{start, 0}, {start, end}, {0, end}} {
			if got, want := s.NumPending(filters, rg[0], rg[1]), brutePending(s, filters, rg[0], rg[1]); got != want {
				t.Fatalf("NumPending(%q, %d, %d) = %d, brute force %d", filters, rg[0], rg[1], got, want)
			}
		}
	}
}

// brutePending finds NumPending's answer by loading every sequence.
func brutePending(s *Store, filters []string, start, end uint64) uint64 {
	st := s.State(false)
	if end == 0 {
		end = st.LastSeq
	}
	var n uint64
	for seq := max(start, st.FirstSeq); seq <= min(end, st.LastSeq) && seq != 0; seq++ {
		if sm, err := s.Load(seq); err == nil && store.MatchFilters(sm.Subject, filters) {
			n++
		}
	}
	return n
}

// seqOf returns the sequence of a loaded message, or 0 for the expected
// not-found error.
func seqOf(sm *store.StoredMsg, err, none error) uint64 {
	if errors.Is(err, none) {
		return 0
	}
	if err != nil {
		return ^uint64(0)
	}
	return sm.Seq
}

// TestLoadNextEveryStart compares LoadNext with brute force from every
// start around sparse matches, so that both the walk and the subject index
// answer at every distance.
func TestLoadNextEveryStart(t *testing.T) {
	s := New(store.Config{})
	for i := 1; i <= 1000; i++ {
		subj := fmt.Sprintf("s.%d", i%5)
		if i == 500 || i == 900 {
			subj = "rare"
		}
		if _, err := s.Append(store.Msg{Subject: subj, Time: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint64{300, 301, 899} {
		if err := s.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, filters := range [][]string{{"rare"}, {"rare", "nope"}, {"*"}, {"rare", "s.*.x"}, {"s.2"}} {
		for start := uint64(0); start <= 1002; start++ {
			sm, err := s.LoadNext(filters, start)
			if got, want := seqOf(sm, err, store.ErrEOF), bruteNext(s, filters, start); got != want {
				t.Fatalf("LoadNext(%q, %d) = %d (%v), brute force %d", filters, start, got, err, want)
			}
		}
	}
}
