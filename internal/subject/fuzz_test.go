package subject

import (
	"strings"
	"testing"
)

// FuzzMatch checks that validation and matching agree with each other and
// with the reference matcher (docs/protocol.md section 1.7):
//
//  1. the string and []byte validators agree;
//  2. ValidLiteral implies ValidSubject and IsLiteral;
//  3. Match agrees with refMatch;
//  4. a Match implies the pattern is structurally valid;
//  5. a valid pattern, published as is, matches itself;
//  6. for a valid literal subject, Match, SubsetOf and Overlap agree.
func FuzzMatch(f *testing.F) {
	for _, c := range matchCases {
		f.Add(c.literal, c.pattern)
	}
	f.Add("foo.bar", "foo.\t")
	f.Add("a b", "a b")
	f.Fuzz(func(t *testing.T, literal, pattern string) {
		checkValidators(t, literal)
		checkValidators(t, pattern)
		m := Match(literal, pattern)
		if m != refMatch(literal, pattern) {
			t.Fatalf("Match(%q, %q) = %v, refMatch disagrees", literal, pattern, m)
		}
		if m && !ValidSubject(stripSpace(pattern)) {
			t.Fatalf("Match(%q, %q) with invalid pattern", literal, pattern)
		}
		if ValidSubject(pattern) && !Match(pattern, pattern) {
			t.Fatalf("valid pattern %q does not match itself", pattern)
		}
		if ValidLiteral(literal) && ValidSubject(pattern) {
			if SubsetOf(literal, pattern) != m || Overlap(literal, pattern) != m {
				t.Fatalf("Match, SubsetOf, Overlap disagree on (%q, %q)", literal, pattern)
			}
		}
	})
}

func checkValidators(t *testing.T, s string) {
	b := []byte(s)
	if ValidSubject(s) != ValidSubjectBytes(b) || ValidLiteral(s) != ValidLiteralBytes(b) ||
		IsLiteral(s) != IsLiteralBytes(b) || ValidQueue(s) != ValidQueueBytes(b) {
		t.Fatalf("string and []byte validators disagree on %q", s)
	}
	if ValidLiteral(s) && (!ValidSubject(s) || !IsLiteral(s)) {
		t.Fatalf("ValidLiteral(%q) without ValidSubject and IsLiteral", s)
	}
	if ValidSubject(s) && Tokens(s) != len(strings.Split(s, ".")) {
		t.Fatalf("Tokens(%q) = %d", s, Tokens(s))
	}
}

// stripSpace replaces whitespace with 'x', since Match does not look for it.
func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && isSpace(byte(r)) {
			return 'x'
		}
		return r
	}, s)
}
