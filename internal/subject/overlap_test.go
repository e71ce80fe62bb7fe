package subject

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// randPattern draws a pattern of 1 to 4 tokens from a small alphabet, so
// that overlaps are frequent.
func randOverlapPattern(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	toks := make([]string, n)
	for i := range toks {
		switch k := r.IntN(10); {
		case k == 0 && i == n-1:
			toks[i] = ">"
		case k <= 2:
			toks[i] = "*"
		default:
			toks[i] = string(rune('a' + r.IntN(3)))
		}
	}
	return strings.Join(toks, ".")
}

// The index answers exactly as comparing with every member (Overlap).
func TestOverlapIndexMatchesPairwise(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var x OverlapIndex
		var set []string
		for range r.IntN(8) {
			p := randOverlapPattern(r)
			x.Add(p)
			set = append(set, p)
		}
		q := randOverlapPattern(r)
		want := false
		for _, p := range set {
			want = want || Overlap(p, q)
		}
		if got := x.Overlaps(q); got != want {
			t.Fatalf("round %d: set %q, query %q: got %v, want %v", round, set, q, got, want)
		}
	}
}

// FirstOverlap finds the pair the pairwise loop finds first.
func TestFirstOverlapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 2000 {
		ps := make([]string, 1+r.IntN(8))
		for k := range ps {
			ps[k] = randOverlapPattern(r)
		}
		wi, wj, wok := 0, 0, false
	outer:
		for i := range ps {
			for j := i + 1; j < len(ps); j++ {
				if Overlap(ps[j], ps[i]) {
					wi, wj, wok = i, j, true
					break outer
				}
			}
		}
		if i, j, ok := FirstOverlap(ps); i != wi || j != wj || ok != wok {
			t.Fatalf("round %d: %q: got (%d,%d,%v), want (%d,%d,%v)", round, ps, i, j, ok, wi, wj, wok)
		}
	}
	if _, _, ok := FirstOverlap([]string{"a.b", "bad..subject", "a.c"}); ok {
		t.Fatal("an invalid pattern overlapped")
	}
}

// 60,000 subjects are checked with one query each; a comparison per pair
// (1.8e9 of them) would run into the test binary's timeout.
func TestFirstOverlapManySubjects(t *testing.T) {
	ps := make([]string, 60000)
	for i := range ps {
		ps[i] = "orders.region" + strconv.Itoa(i%50) + ".x" + strconv.Itoa(i)
	}
	ps = append(ps, "orders.*.x7") // overlaps ps[7]
	start := time.Now()
	i, j, ok := FirstOverlap(ps)
	if !ok || i != 7 || j != len(ps)-1 {
		t.Fatalf("got (%d,%d,%v), want (7,%d,true)", i, j, ok, len(ps)-1)
	}
	t.Logf("60,001 subjects checked in %v", time.Since(start))
}
