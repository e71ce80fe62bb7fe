package subject

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Matching cases follow docs/protocol.md section 1.7: "*" is one token, ">" is
// one or more trailing tokens, wildcards in a published subject are literal.
var matchCases = []struct {
	literal, pattern string
	want             bool
}{
	{"foo", "foo", true},
	{"foo", "bar", false},
	{"foo.bar", "foo.bar", true},
	{"foo.bar", "foo", false},
	{"foo", "foo.bar", false},
	{"Foo", "foo", false},
	{"foo.bar", "foo.*", true},
	{"foo.bar", "*.bar", true},
	{"foo.bar", "*.*", true},
	{"foo.bar", "*", false},
	{"foo", "*", true},
	{"foo.bar.baz", "foo.*", false},
	{"foo.bar.baz", "foo.*.baz", true},
	{"foo.bar", "foo.>", true},
	{"foo.bar.baz", "foo.>", true},
	{"foo", "foo.>", false},
	{"foo", ">", true},
	{"foo.bar", ">", true},
	{"foo.bar.baz", "*.>", true},
	{"foo", "*.>", false},
	{"foo.bar", "foo.*.>", false},
	{"foo.bar.baz", "foo.*.>", true},
	{"foo*", "foo*", true},
	{"foo*", "foo", false},
	{"foobar", "foo*", false},
	{"foo.bar", "foo.b>", false},
	// Wildcard tokens in a published subject are literal tokens.
	{"foo.*", "foo.*", true},
	{"foo.*", "foo.>", true},
	{"foo.*", "foo.bar", false},
	{"foo.>", "foo.>", true},
	{"foo.>", "foo.*", true},
	{"foo.>", "foo.bar", false},
	{"foo.>.bar", "foo.*.bar", true},
	{"*", "foo", false},
	{">", ">", true},
	{"$JS.API.CONSUMER.CREATE.S.C.foo.>", "$JS.API.CONSUMER.CREATE.*.>", true},
	// Malformed arguments never match.
	{"", "", false},
	{"", ">", false},
	{"foo", "", false},
	{"foo..bar", "foo.*.bar", false},
	{"foo..bar", ">", false},
	{"foo.bar.", "foo.>", false},
	{".foo", ">", false},
	{"foo.bar", "foo..bar", false},
	{"foo.bar.baz", "foo.>.baz", false},
	{"foo.bar", "foo.", false},
}

func TestMatch(t *testing.T) {
	for _, c := range matchCases {
		if got := Match(c.literal, c.pattern); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.literal, c.pattern, got, c.want)
		}
		if got := refMatch(c.literal, c.pattern); got != c.want {
			t.Errorf("refMatch(%q, %q) = %v, want %v", c.literal, c.pattern, got, c.want)
		}
	}
}

func TestSubsetOf(t *testing.T) {
	cases := []struct {
		sub, super string
		want       bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"foo.bar", "foo.*", true},
		{"foo.*", "foo.bar", false},
		{"foo.*", "foo.*", true},
		{"foo.*", "foo.>", true},
		{"foo.>", "foo.*", false},
		{"foo.>", "foo.>", true},
		{"foo.>", ">", true},
		{">", "foo.>", false},
		{">", ">", true},
		{"*", ">", true},
		{"*.*", "*.>", true},
		{"*.>", "*.*", false},
		{"foo.bar.baz", "foo.>", true},
		{"foo", "foo.>", false},
		{"foo.>", "foo", false},
		{"foo.*.baz", "*.*.*", true},
		{"foo.*.baz", "foo.bar.*", false},
		{"a.*", "*.b", false},
		{"foo..bar", ">", false},
		{"foo", "", false},
	}
	for _, c := range cases {
		if got := SubsetOf(c.sub, c.super); got != c.want {
			t.Errorf("SubsetOf(%q, %q) = %v, want %v", c.sub, c.super, got, c.want)
		}
	}
}

func TestOverlap(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"foo.*", "*.bar", true},
		{"foo.*", "bar.*", false},
		{"foo.>", "foo", false},
		{"foo.>", "foo.bar.baz", true},
		{"foo.>", "*.bar.>", true},
		{">", "a.b.c", true},
		{"*", "a.b", false},
		{"*.*", "a.>", true},
		{"*.*", "a.b.>", false},
		{"a.*.c", "a.b.d", false},
		{"a.*.c", "*.b.*", true},
		{"foo.bar", "foo.bar.>", false},
		{"foo..bar", "foo.*.bar", false},
		{"", ">", false},
	}
	for _, c := range cases {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Overlap(c.b, c.a); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}

// TestRelationsExhaustive checks SubsetOf and Overlap against their
// definitions over every published subject that can tell two patterns
// apart: all subjects of up to maxLen+1 tokens over the patterns' alphabet,
// one token outside it, and the literal wildcard tokens.
func TestRelationsExhaustive(t *testing.T) {
	const seed = 20260815
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	universe := allSubjects([]string{"a", "b", "z", "*", ">"}, 4)
	for range 3000 {
		a, b := randPattern(rng, 3), randPattern(rng, 3)
		sub, ovl := true, false
		for _, l := range universe {
			ma, mb := Match(l, a), Match(l, b)
			sub = sub && (!ma || mb)
			ovl = ovl || (ma && mb)
		}
		if got := SubsetOf(a, b); got != sub {
			t.Fatalf("SubsetOf(%q, %q) = %v, want %v", a, b, got, sub)
		}
		if got := Overlap(a, b); got != ovl {
			t.Fatalf("Overlap(%q, %q) = %v, want %v", a, b, got, ovl)
		}
	}
}

// randPattern returns a valid pattern of 1..maxLen tokens over {a, b, *},
// ending in ">" a quarter of the time.
func randPattern(rng *rand.Rand, maxLen int) string {
	toks := make([]string, 1+rng.IntN(maxLen))
	for i := range toks {
		toks[i] = []string{"a", "b", "*"}[rng.IntN(3)]
	}
	if rng.IntN(4) == 0 {
		toks[len(toks)-1] = ">"
	}
	return strings.Join(toks, ".")
}

// allSubjects returns every subject of 1..maxLen tokens drawn from alphabet.
func allSubjects(alphabet []string, maxLen int) []string {
	var out, level []string
	level = []string{""}
	for range maxLen {
		var next []string
		for _, prefix := range level {
			for _, tok := range alphabet {
				next = append(next, strings.TrimPrefix(prefix+"."+tok, "."))
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// refMatch is the obvious matcher used as an oracle: split both sides and
// compare token by token.
func refMatch(literal, pattern string) bool {
	lt, pt := strings.Split(literal, "."), strings.Split(pattern, ".")
	if hasEmpty(lt) || hasEmpty(pt) {
		return false
	}
	for i, p := range pt {
		switch {
		case p == ">":
			return i == len(pt)-1 && len(lt) > i
		case i >= len(lt), p != "*" && p != lt[i]:
			return false
		}
	}
	return len(lt) == len(pt)
}

func hasEmpty(toks []string) bool {
	for _, t := range toks {
		if t == "" {
			return true
		}
	}
	return false
}
