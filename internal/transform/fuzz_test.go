package transform

import (
	"strings"
	"testing"
)

// FuzzTransform checks that New, Validate and Map never panic and keep
// their contracts:
//
//  1. what Validate accepts, New compiles (for an empty destination
//     Validate leaves the source to the caller);
//  2. a subject that does not match comes back as it is;
//  3. without random, mapping is a pure function of the subject;
//  4. a subject with an empty or wildcard token never matches, except
//     with the ">" to ">" transform.
func FuzzTransform(f *testing.F) {
	for _, c := range mapCases {
		f.Add(c.src, c.dest, c.subject)
	}
	for _, c := range errorCases {
		f.Add(c.src, c.dest, "a.b")
	}
	f.Add(".", "", "a")
	f.Add("*.*.>", "{{partition(3,2,1)}}.{{splitfromright(2,1)}}.>", "a.bc.d.e")
	f.Fuzz(func(t *testing.T, src, dest, subject string) {
		verr := Validate(src, dest)
		tr, err := New(src, dest)
		if verr == nil && err != nil && dest != "" {
			t.Fatalf("Validate(%q, %q) accepts, New says %v", src, dest, err)
		}
		if err != nil {
			return
		}
		got, ok := tr.Map(subject)
		if !ok && got != subject {
			t.Fatalf("Map(%q) did not match but returned %q", subject, got)
		}
		if !strings.Contains(strings.ToLower(dest), "random") {
			if again, ok2 := tr.Map(subject); again != got || ok2 != ok {
				t.Fatalf("Map(%q) = %q, %v, then %q, %v", subject, got, ok, again, ok2)
			}
		}
		if ok && !tr.any && !literal(subject) {
			t.Fatalf("Map(%q) matched a subject with an empty or wildcard token", subject)
		}
	})
}

func literal(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
	}
	return true
}
