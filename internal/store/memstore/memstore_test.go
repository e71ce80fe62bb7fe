package memstore_test

import (
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Engine{
		Name: "memstore",
		New: func(t *testing.T, cfg store.Config) store.Store {
			cfg.MemSizes = true
			return memstore.New(cfg)
		},
		MemSizes: true,
	})
}

// TestMillion appends a million messages and walks them with literal,
// wildcard and sparse filters; every step must stay cheap (no quadratic
// scans).
func TestMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	const n = 1_000_000
	s := memstore.New(store.Config{MaxMsgsPerSubject: 5000})
	subjects := make([]string, 1000)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("s.%d", i)
	}
	for i := range n {
		subj := subjects[i%len(subjects)]
		if i == n-10 {
			subj = "rare.x"
		}
		if _, err := s.Append(store.Msg{Subject: subj, Data: []byte("x"), Time: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.State(false); st.Msgs != n || st.NumSubjects != 1001 {
		t.Fatalf("State = %+v", st)
	}
	if got := walk(s, []string{"s.7"}); got != 1000 {
		t.Fatalf("walking s.7 found %d", got)
	}
	if got := walk(s, []string{"s.*"}); got != n-1 {
		t.Fatalf("walking s.* found %d", got)
	}
	for i := range 2000 { // a consumer polling a sparse filter
		sm, err := s.LoadNext([]string{"rare.*"}, uint64(i))
		if err != nil || sm.Seq != n-9 {
			t.Fatalf("LoadNext(rare.*) = %v, %v", sm, err)
		}
	}
	if sm, err := s.LoadLast("s.*"); err != nil || sm.Seq != n {
		t.Fatalf("LoadLast(s.*) = %v, %v", sm, err)
	}
	if k, err := s.Purge(store.PurgeRequest{Subject: "s.3", Keep: 1}); err != nil || k != 999 {
		t.Fatalf("Purge = %d, %v", k, err)
	}
}

// BenchmarkNumPending counts on a store of 1,000,000 messages on 100
// subjects (like the file store's benchmark): unfiltered, a literal
// subject holding one message in 99, one holding one in 1000, and a
// wildcard matching all, each over the whole stream, from the middle, and
// over the last 10 sequences.
func BenchmarkNumPending(b *testing.B) {
	const n = 1_000_000
	s := memstore.New(store.Config{})
	data := make([]byte, 128)
	for i := range n {
		subj := fmt.Sprintf("big.%d", 1+i%99)
		if i%1000 == 0 {
			subj = "big.0"
		}
		if _, err := s.Append(store.Msg{Subject: subj, Data: data, Time: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	filters := map[string][]string{"all": nil, "literal": {"big.5"}, "sparse": {"big.0"}, "wildcard": {"big.*"}}
	ranges := []struct {
		name       string
		start, end uint64
	}{{"deliver-all", 1, 0}, {"from-middle", n / 2, 0}, {"new-10", n - 9, 0}}
	for _, name := range []string{"all", "literal", "sparse", "wildcard"} {
		for _, rg := range ranges {
			b.Run(name+"/"+rg.name, func(b *testing.B) {
				for b.Loop() {
					s.NumPending(filters[name], rg.start, rg.end)
				}
			})
		}
	}
}

// walk counts the messages LoadNext finds from the start with filters.
func walk(s store.Store, filters []string) int {
	count := 0
	for sm, err := s.LoadNext(filters, 0); err == nil; sm, err = s.LoadNext(filters, sm.Seq+1) {
		count++
	}
	return count
}
