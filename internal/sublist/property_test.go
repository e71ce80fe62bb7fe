package sublist

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/subject"
)

// propSeed seeds TestAgainstBruteForce; change it to explore, keep it fixed
// in the tree so failures reproduce.
const propSeed = 0x5ab115

// propConfig shapes the random workload of TestAgainstBruteForce.
type propConfig struct {
	tokens []string // literal tokens of patterns and published subjects
	values int      // entry values are drawn from [0, values)
	maxLen int      // at most this many tokens per pattern
}

// TestAgainstBruteForce interleaves random inserts, removes and matches and
// compares every Match (as a multiset) and HasInterest with a brute-force
// scan of the live entries using subject.Match (docs/protocol.md section 1.7).
// The trie invariants are checked after every mutation, the whole cache
// every 128 operations. "wide" spreads entries over many subjects; "dense"
// piles them onto few subjects so sets outgrow linearMax and get indexed.
func TestAgainstBruteForce(t *testing.T) {
	configs := map[string]propConfig{
		"wide":  {tokens: []string{"a", "b", "c"}, values: 8, maxLen: 4},
		"dense": {tokens: []string{"a"}, values: 3 * linearMax, maxLen: 2},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			t.Logf("seed %#x", propSeed)
			runProperty(t, cfg, rand.New(rand.NewPCG(propSeed, 1)), 6000)
		})
	}
}

// runProperty runs ops random operations against a Sublist and a model.
func runProperty(t *testing.T, cfg propConfig, rng *rand.Rand, ops int) {
	s := New[int]()
	live := map[entry]bool{}
	for op := range ops {
		if op%128 == 0 {
			s.check(t)
		}
		switch k := rng.IntN(10); {
		case k < 4:
			e := cfg.randEntry(rng)
			mustInsert(t, s, e)
			live[e] = true
		case k < 6:
			e := cfg.pickEntry(rng, live)
			err := s.Remove(e.subj, e.queue, e.v)
			if live[e] != (err == nil) || err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("op %d: Remove(%v) = %v, live %v", op, e, err, live[e])
			}
			delete(live, e)
		default:
			checkMatch(t, op, s, live, cfg.randPublished(rng))
			continue
		}
		if s.Count() != len(live) {
			t.Fatalf("op %d: Count = %d, want %d", op, s.Count(), len(live))
		}
		s.checkTrie(t)
	}
	s.check(t)
}

// checkMatch compares Match and HasInterest for subj with brute force.
func checkMatch(t *testing.T, op int, s *Sublist[int], live map[entry]bool, subj string) {
	t.Helper()
	want := bruteForce(live, subj)
	checkInterest(t, op, s, subj, !want.isEmpty()) // maybe uncached
	if got := canon(s.Match([]byte(subj))); got != canon(want) {
		t.Fatalf("op %d: Match(%q) = %s, want %s", op, subj, got, canon(want))
	}
	checkInterest(t, op, s, subj, !want.isEmpty()) // cached
}

func checkInterest(t *testing.T, op int, s *Sublist[int], subj string, want bool) {
	t.Helper()
	if got := s.HasInterest([]byte(subj)); got != want {
		t.Fatalf("op %d: HasInterest(%q) = %v, want %v", op, subj, got, want)
	}
}

// bruteForce computes the result for subj by testing every live entry.
func bruteForce(live map[entry]bool, subj string) *Result[int] {
	r := &Result[int]{}
	for e := range live {
		switch {
		case !subject.Match(subj, e.subj):
		case e.queue == "":
			r.Plain = append(r.Plain, e.v)
		default:
			r.addQueue(e.queue, []int{e.v})
		}
	}
	return r
}

// randEntry returns a random valid pattern over cfg.tokens and "*", ending
// in ">" a quarter of the time, a queue among "", "q1", "q2", and a value.
func (cfg propConfig) randEntry(rng *rand.Rand) entry {
	toks := make([]string, 1+rng.IntN(cfg.maxLen))
	for i := range toks {
		toks[i] = pick(rng, append(cfg.tokens, "*"))
	}
	if rng.IntN(4) == 0 {
		toks[len(toks)-1] = ">"
	}
	return entry{strings.Join(toks, "."), pick(rng, []string{"", "", "q1", "q2"}), rng.IntN(cfg.values)}
}

// pickEntry returns a live entry most of the time, else a random one.
func (cfg propConfig) pickEntry(rng *rand.Rand, live map[entry]bool) entry {
	if len(live) == 0 || rng.IntN(5) == 0 {
		return cfg.randEntry(rng)
	}
	i := rng.IntN(len(live))
	for e := range live {
		if i == 0 {
			return e
		}
		i--
	}
	panic("unreachable")
}

// randPublished returns a published subject of up to maxLen+1 tokens over
// cfg.tokens, another token and literal "*" and ">", and now and then a
// malformed one.
func (cfg propConfig) randPublished(rng *rand.Rand) string {
	toks := make([]string, 1+rng.IntN(cfg.maxLen+1))
	for i := range toks {
		toks[i] = pick(rng, append(cfg.tokens, "*", ">", "z", cfg.tokens[0]))
	}
	if rng.IntN(50) == 0 {
		toks[rng.IntN(len(toks))] = ""
	}
	return strings.Join(toks, ".")
}

func pick(rng *rand.Rand, from []string) string { return from[rng.IntN(len(from))] }
