package sublist

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// check verifies the whole structure (docs/architecture.md rule 5): the trie
// invariants (checkTrie) and that every cached result equals a fresh walk
// of the trie.
func (s *Sublist[T]) check(t testing.TB) {
	t.Helper()
	s.checkTrie(t)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, r := range s.mu.cache {
		if got, want := canon(r), canon(s.walkLocked([]byte(k))); got != want {
			t.Fatalf("stale cache for %q: cached %s, trie %s", k, got, want)
		}
	}
}

// checkTrie verifies the trie node, members and count invariants, the
// cache bound and the shared empty result.
func (s *Sublist[T]) checkTrie(t testing.TB) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, err := checkLevel(&s.mu.root, "")
	if err != nil {
		t.Fatal(err)
	}
	if n != s.mu.count {
		t.Fatalf("trie holds %d entries, count is %d", n, s.mu.count)
	}
	if len(s.mu.cache) > cacheMax {
		t.Fatalf("cache holds %d results, max %d", len(s.mu.cache), cacheMax)
	}
	if !s.empty.isEmpty() {
		t.Fatal("shared empty result was modified")
	}
}

// checkLevel checks the nodes below l and returns how many entries they
// hold.
func checkLevel[T comparable](l *level[T], path string) (int, error) {
	total := 0
	for tok, n := range l.nodes {
		if tok == "*" || tok == ">" || tok == "" {
			return 0, fmt.Errorf("%q: token %q in nodes", path, tok)
		}
		c, err := checkNode(n, path+"."+tok)
		if err != nil {
			return 0, err
		}
		total += c
	}
	for tok, n := range map[string]*node[T]{"*": l.pwc, ">": l.fwc} {
		if n == nil {
			continue
		}
		c, err := checkNode(n, path+"."+tok)
		if err != nil {
			return 0, err
		}
		total += c
	}
	if l.fwc != nil && l.fwc.next != nil {
		return 0, fmt.Errorf("%q: level below >", path)
	}
	return total, nil
}

// checkNode checks n and everything below it.
func checkNode[T comparable](n *node[T], path string) (int, error) {
	if !n.hasEntries() && n.next == nil {
		return 0, fmt.Errorf("%q: empty node not pruned", path)
	}
	if n.next != nil && n.next.empty() {
		return 0, fmt.Errorf("%q: empty next level not pruned", path)
	}
	total, err := checkMembers(&n.plain, path)
	if err != nil {
		return 0, err
	}
	if n.queues != nil && len(n.queues) == 0 {
		return 0, fmt.Errorf("%q: empty queue map kept", path)
	}
	for name, q := range n.queues {
		if len(q.list) == 0 {
			return 0, fmt.Errorf("%q: empty queue %q", path, name)
		}
		c, err := checkMembers(q, path+" "+name)
		if err != nil {
			return 0, err
		}
		total += c
	}
	if n.next != nil {
		c, err := checkLevel(n.next, path)
		if err != nil {
			return 0, err
		}
		total += c
	}
	return total, nil
}

// checkMembers checks the members invariant and returns the set size.
func checkMembers[T comparable](m *members[T], path string) (int, error) {
	seen := make(map[T]bool, len(m.list))
	for i, v := range m.list {
		if seen[v] {
			return 0, fmt.Errorf("%q: duplicate %v", path, v)
		}
		seen[v] = true
		if m.idx != nil && m.idx[v] != i {
			return 0, fmt.Errorf("%q: idx[%v] = %d, want %d", path, v, m.idx[v], i)
		}
	}
	if m.idx != nil && len(m.idx) != len(m.list) {
		return 0, fmt.Errorf("%q: idx has %d keys for %d members", path, len(m.idx), len(m.list))
	}
	return len(m.list), nil
}

// canon renders a result in a canonical form (sorted plain entries, groups
// sorted by name with sorted members) so results compare as multisets.
func canon[T comparable](r *Result[T]) string {
	if r == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "plain%v", sorted(r.Plain))
	qs := slices.Clone(r.Queues)
	slices.SortFunc(qs, func(a, b Queue[T]) int { return strings.Compare(a.Name, b.Name) })
	for _, q := range qs {
		fmt.Fprintf(&b, " %s%v", q.Name, sorted(q.Members))
	}
	return b.String()
}

// sorted returns the elements of vs rendered and sorted.
func sorted[T comparable](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprint(v)
	}
	slices.Sort(out)
	return out
}

// numNodes counts the trie nodes below l.
func numNodes[T comparable](l *level[T]) int {
	total := 0
	for _, n := range l.nodes {
		total += 1 + nodeBelow(n)
	}
	for _, n := range []*node[T]{l.pwc, l.fwc} {
		if n != nil {
			total += 1 + nodeBelow(n)
		}
	}
	return total
}

func nodeBelow[T comparable](n *node[T]) int {
	if n.next == nil {
		return 0
	}
	return numNodes(n.next)
}
