package subject

import "strings"

// OverlapIndex is a set of subject patterns that answers, for another
// pattern, whether some published subject matches both it and a pattern
// of the set (Overlap with any member), without comparing it with every
// member: the patterns are kept in a token tree, and a query follows only
// the branches that can still match. A literal token visits at most three
// children per level (itself, "*" and ">"); a "*" in the query visits every
// child of its level, so a set of many patterns queried with many leading
// wildcards still costs up to one comparison per pair. JetStream uses it
// to check a stream's subjects against each other and against the other
// streams' (nats-server v2.15.2 compares every pair, which a 60,000-subject
// stream turns into minutes).
//
// The zero value is an empty set. It is not safe for concurrent use.
type OverlapIndex struct {
	root overlapNode
}

type overlapNode struct {
	next map[string]*overlapNode
	end  bool // a pattern ends here
}

// Add puts pattern p in the set; an invalid pattern (not ValidSubject) is
// ignored, as Overlap ignores it.
func (x *OverlapIndex) Add(p string) {
	if !ValidSubject(p) {
		return
	}
	n := &x.root
	for p != "" {
		tok, rest, _ := strings.Cut(p, ".")
		if n.next == nil {
			n.next = map[string]*overlapNode{}
		}
		c := n.next[tok]
		if c == nil {
			c = &overlapNode{}
			n.next[tok] = c
		}
		n, p = c, rest
	}
	n.end = true
}

// Overlaps reports whether p overlaps a pattern of the set (Overlap); false
// when p is not ValidSubject.
func (x *OverlapIndex) Overlaps(p string) bool {
	if !ValidSubject(p) {
		return false
	}
	return x.root.overlaps(p)
}

// overlaps matches the tokens of p (at least one) against n's children.
func (n *overlapNode) overlaps(p string) bool {
	tok, rest, more := strings.Cut(p, ".")
	if tok == ">" {
		return len(n.next) > 0 // any pattern with one more token or more
	}
	if n.next[">"] != nil {
		return true
	}
	step := func(c *overlapNode) bool {
		if !more {
			return c.end
		}
		return c.overlaps(rest)
	}
	if tok == "*" {
		for _, c := range n.next {
			if step(c) {
				return true
			}
		}
		return false
	}
	for _, key := range [2]string{tok, "*"} {
		if c := n.next[key]; c != nil && step(c) {
			return true
		}
	}
	return false
}

// FirstOverlap returns the first pair (i, j), i < j, of patterns that
// overlap in the order nats-server's pairwise check finds it: the lowest
// i that overlaps a later pattern, and the lowest such j; ok is false
// when no two overlap. It costs one index query per pattern, plus one
// Overlap per pattern after i.
func FirstOverlap(patterns []string) (i, j int, ok bool) {
	var x OverlapIndex
	i = -1
	for k := len(patterns) - 1; k >= 0; k-- {
		if x.Overlaps(patterns[k]) {
			i = k
		}
		x.Add(patterns[k])
	}
	if i < 0 {
		return 0, 0, false
	}
	for j = i + 1; j < len(patterns); j++ {
		if Overlap(patterns[j], patterns[i]) {
			return i, j, true
		}
	}
	return 0, 0, false // unreachable: the index found one
}
