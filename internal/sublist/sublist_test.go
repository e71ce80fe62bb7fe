package sublist

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
)

type entry struct {
	subj, queue string
	v           int
}

// standard is the subscription set used by TestMatchTable.
var standard = []entry{
	{"foo", "", 1},
	{"foo.bar", "", 2},
	{"foo.*", "", 3},
	{"*.bar", "", 4},
	{"foo.>", "", 5},
	{">", "", 6},
	{"foo.bar.baz", "", 7},
	{"foo.*.baz", "", 8},
	{"foo*", "", 9},
	{"foo.bar", "q1", 10},
	{"foo.bar", "q1", 11},
	{"foo.*", "q1", 12},
	{"foo.bar", "q2", 13},
	{"foo.>", "q.x", 14},
}

// Matching rules from docs/protocol.md section 1.7: "*" is one token, ">" is one
// or more tokens ("foo.>" does not match "foo"), wildcards in a published
// subject are literal tokens, queue groups merge across matching subjects.
func TestMatchTable(t *testing.T) {
	cases := []struct{ subj, want string }{
		{"foo", "plain[1 6]"},
		{"foo.bar", "plain[2 3 4 5 6] q.x[14] q1[10 11 12] q2[13]"},
		{"foo.baz", "plain[3 5 6] q.x[14] q1[12]"},
		{"bar.bar", "plain[4 6]"},
		{"foo.bar.baz", "plain[5 6 7 8] q.x[14]"},
		{"foo.x.y.z", "plain[5 6] q.x[14]"},
		{"foo*", "plain[6 9]"},
		{"bar", "plain[6]"},
		{"foo.*", "plain[3 5 6] q.x[14] q1[12]"},
		{"foo.>", "plain[3 5 6] q.x[14] q1[12]"},
		{"*.bar", "plain[4 6]"},
		{"*", "plain[6]"},
		{">", "plain[6]"},
		{"foo.*.baz", "plain[5 6 8] q.x[14]"},
		{"", "plain[]"},
		{"foo..bar", "plain[]"},
		{".foo", "plain[]"},
		{"foo.", "plain[]"},
	}
	s := New[int]()
	for _, e := range standard {
		mustInsert(t, s, e)
	}
	// The first pass caches nothing, the second caches every result (a
	// second miss), the third is served from the cache.
	for pass := range 3 {
		for _, c := range cases {
			r := s.Match([]byte(c.subj))
			if got := canon(r); got != c.want {
				t.Errorf("pass %d: Match(%q) = %s, want %s", pass, c.subj, got, c.want)
			}
			if got, want := s.HasInterest([]byte(c.subj)), c.want != "plain[]"; got != want {
				t.Errorf("pass %d: HasInterest(%q) = %v, want %v", pass, c.subj, got, want)
			}
		}
		s.check(t)
	}
}

func TestInsertRemoveErrors(t *testing.T) {
	s := New[int]()
	for _, subj := range []string{"", "foo.", "foo..bar", "foo.>.bar", "foo bar", "a\fb"} {
		if err := s.Insert(subj, "", 1); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("Insert(%q) = %v, want ErrInvalidSubject", subj, err)
		}
		if err := s.Remove(subj, "", 1); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("Remove(%q) = %v, want ErrInvalidSubject", subj, err)
		}
	}
	for _, q := range []string{" ", "a b", "a\tb", "a\fb"} {
		if err := s.Insert("foo", q, 1); !errors.Is(err, ErrInvalidQueue) {
			t.Errorf("Insert(foo, %q) = %v, want ErrInvalidQueue", q, err)
		}
	}
	mustInsert(t, s, entry{"foo", "", 1})
	for _, e := range []entry{{"foo", "", 2}, {"foo", "q", 1}, {"foo.bar", "", 1}, {"bar", "", 1}, {"*", "", 1}} {
		if err := s.Remove(e.subj, e.queue, e.v); !errors.Is(err, ErrNotFound) {
			t.Errorf("Remove(%v) = %v, want ErrNotFound", e, err)
		}
	}
	if s.Count() != 1 {
		t.Fatalf("Count = %d, want 1", s.Count())
	}
	s.check(t)
}

// Entries form a set: a duplicate Insert is a no-op and one Remove deletes.
func TestDuplicateInsert(t *testing.T) {
	s := New[int]()
	for range 3 {
		mustInsert(t, s, entry{"foo.*", "", 1})
		mustInsert(t, s, entry{"foo.*", "q", 1})
	}
	if s.Count() != 2 {
		t.Fatalf("Count = %d, want 2", s.Count())
	}
	if got := canon(s.Match([]byte("foo.bar"))); got != "plain[1] q[1]" {
		t.Fatalf("Match = %s", got)
	}
	mustRemove(t, s, entry{"foo.*", "", 1})
	mustRemove(t, s, entry{"foo.*", "q", 1})
	if err := s.Remove("foo.*", "", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Remove = %v, want ErrNotFound", err)
	}
	if s.Count() != 0 || numNodes(&s.mu.root) != 0 {
		t.Fatalf("Count = %d, nodes = %d, want 0, 0", s.Count(), numNodes(&s.mu.root))
	}
}

// A value under several matching subjects appears once per entry, and
// queue groups merge across subjects (nats-server v2.15.2 findQSlot).
func TestSameValueSeveralSubjects(t *testing.T) {
	s := New[int]()
	for _, subj := range []string{"a.b", "a.*", "a.>", ">"} {
		mustInsert(t, s, entry{subj, "", 7})
		mustInsert(t, s, entry{subj, "g", 7})
	}
	want := "plain[7 7 7 7] g[7 7 7 7]"
	if got := canon(s.Match([]byte("a.b"))); got != want {
		t.Fatalf("Match = %s, want %s", got, want)
	}
}

// Results are immutable: later changes build new results.
func TestResultNotMutated(t *testing.T) {
	s := New[int]()
	mustInsert(t, s, entry{"foo", "", 1})
	mustInsert(t, s, entry{"foo", "q", 1})
	r := s.Match([]byte("foo"))
	before := canon(r)
	for i := 2; i < 50; i++ {
		mustInsert(t, s, entry{"foo", "", i})
		mustInsert(t, s, entry{"foo", "q", i})
		s.Match([]byte("foo"))
	}
	mustRemove(t, s, entry{"foo", "", 1})
	mustRemove(t, s, entry{"foo", "q", 1})
	if got := canon(r); got != before {
		t.Fatalf("returned result changed from %s to %s", before, got)
	}
	if r.Plain[0] != 1 || r.Queues[0].Members[0] != 1 {
		t.Fatalf("returned result slices changed: %v", r)
	}
}

// Sets big enough to use the map index behave like small ones.
func TestLargeMembers(t *testing.T) {
	s := New[int]()
	const n = 200
	for i := range n {
		mustInsert(t, s, entry{"big", "", i})
		mustInsert(t, s, entry{"big", "q", i})
	}
	s.check(t)
	for i := 0; i < n; i += 2 {
		mustRemove(t, s, entry{"big", "", i})
		mustRemove(t, s, entry{"big", "q", i})
		s.check(t)
	}
	r := s.Match([]byte("big"))
	if len(r.Plain) != n/2 || len(r.Queues) != 1 || len(r.Queues[0].Members) != n/2 {
		t.Fatalf("Match: %d plain, %d queues", len(r.Plain), len(r.Queues))
	}
}

// The cache stays bounded and correct when more subjects are published
// than it can hold.
func TestCacheBound(t *testing.T) {
	s := New[int]()
	mustInsert(t, s, entry{"a.*", "", 1})
	for i := range 3 * cacheMax {
		subj := fmt.Sprintf("a.%d", i)
		for range 2 { // the second miss caches the result
			if got := canon(s.Match([]byte(subj))); got != "plain[1]" {
				t.Fatalf("Match(%s) = %s", subj, got)
			}
		}
	}
	if len(s.mu.cache) != cacheMax {
		t.Fatalf("cache holds %d results, want %d", len(s.mu.cache), cacheMax)
	}
	s.check(t)
	mustRemove(t, s, entry{"a.*", "", 1})
	s.check(t)
	if len(s.mu.cache) != 0 {
		t.Fatalf("cache holds %d results after removing the only entry", len(s.mu.cache))
	}
}

// A result is cached on the second miss of its subject, not the first, so
// a stream of subjects published once (PubAck and request reply inboxes)
// leaves the cache alone: a subject published again and again stays
// cached, and the unique ones are matched right without being stored.
func TestCacheAdmission(t *testing.T) {
	s := New[int]()
	mustInsert(t, s, entry{"bench.js", "", 1})
	mustInsert(t, s, entry{"_INBOX.abc.*", "", 2})
	hot := []byte("bench.js")
	s.Match(hot)
	if _, ok := s.mu.cache["bench.js"]; ok {
		t.Fatal("cached after one miss")
	}
	s.Match(hot)
	hit, ok := s.mu.cache["bench.js"]
	if !ok {
		t.Fatal("not cached after two misses")
	}
	for i := range 10 * cacheMax {
		subj := fmt.Appendf(nil, "_INBOX.abc.%d", i)
		if got := canon(s.Match(subj)); got != "plain[2]" {
			t.Fatalf("Match(%s) = %s", subj, got)
		}
		if s.Match(hot) != hit {
			t.Fatalf("after %d unique subjects the hot subject is no longer cached", i+1)
		}
	}
	if len(s.mu.cache) != 1 {
		t.Fatalf("cache holds %d results, want only the hot subject's", len(s.mu.cache))
	}
	s.check(t)
}

// One million SUB/UNSUB of unique inboxes leave the trie empty: removal
// prunes nodes, so memory follows live entries, not history.
func TestInboxChurnPrunes(t *testing.T) {
	s := New[int]()
	n := 1_000_000
	if testing.Short() {
		n = 50_000
	}
	const window = 100 // live inboxes at any time
	for i := range n + window {
		if i < n {
			mustInsert(t, s, entry{inbox(i), "", i})
			s.Match([]byte(inbox(i)))
		}
		if j := i - window; j >= 0 {
			mustRemove(t, s, entry{inbox(j), "", j})
		}
		if i == n/2 {
			if got := numNodes(&s.mu.root); got != window+1 {
				t.Fatalf("nodes with %d live inboxes = %d, want %d", window, got, window+1)
			}
		}
	}
	if s.Count() != 0 || numNodes(&s.mu.root) != 0 || !s.mu.root.empty() {
		t.Fatalf("after churn: Count = %d, nodes = %d", s.Count(), numNodes(&s.mu.root))
	}
	s.check(t)
}

func inbox(i int) string { return "_INBOX." + strconv.Itoa(i) }

func mustInsert(t testing.TB, s *Sublist[int], e entry) {
	t.Helper()
	if err := s.Insert(e.subj, e.queue, e.v); err != nil {
		t.Fatalf("Insert(%v): %v", e, err)
	}
}

func mustRemove(t testing.TB, s *Sublist[int], e entry) {
	t.Helper()
	if err := s.Remove(e.subj, e.queue, e.v); err != nil {
		t.Fatalf("Remove(%v): %v", e, err)
	}
}

func TestLiteralPrefix(t *testing.T) {
	cases := map[string]string{
		"*": "", ">": "", "*.a": "", "a.*": "a.", "a.b.>": "a.b.",
		"orders.*.eu.>": "orders.", "a*.b.*": "a*.b.", "a>.>": "a>.", "a.b": "a.b",
	}
	for subj, want := range cases {
		if got := literalPrefix(subj); got != want {
			t.Errorf("literalPrefix(%q) = %q, want %q", subj, got, want)
		}
	}
}
