package sublist

import (
	"bytes"
	"strings"
)

// linearMax is the size up to which a members set is searched linearly;
// above it the set keeps a map index. Most nodes hold one or two entries
// (inboxes, per-connection subjects), and a map per node would dominate
// their memory.
const linearMax = 16

// members is an unordered set of distinct values.
//
// Invariant: list holds no duplicates; idx is nil or maps every element of
// list to its position.
type members[T comparable] struct {
	list []T
	idx  map[T]int
}

// find returns the position of v in m.list, or -1.
func (m *members[T]) find(v T) int {
	if m.idx != nil {
		if i, ok := m.idx[v]; ok {
			return i
		}
		return -1
	}
	for i, x := range m.list {
		if x == v {
			return i
		}
	}
	return -1
}

// add inserts v and reports whether it was absent.
func (m *members[T]) add(v T) bool {
	if m.find(v) >= 0 {
		return false
	}
	m.list = append(m.list, v)
	if m.idx != nil {
		m.idx[v] = len(m.list) - 1
	} else if len(m.list) > linearMax {
		m.reindex()
	}
	return true
}

// remove deletes v and reports whether it was present. The last element
// takes v's place, so the order of list is not stable.
func (m *members[T]) remove(v T) bool {
	i := m.find(v)
	if i < 0 {
		return false
	}
	last := len(m.list) - 1
	m.list[i] = m.list[last]
	var zero T
	m.list[last] = zero // let a removed pointer be collected
	m.list = m.list[:last]
	if m.idx == nil {
		return true
	}
	delete(m.idx, v)
	if i < last {
		m.idx[m.list[i]] = i
	}
	if len(m.list) <= linearMax/2 {
		m.idx = nil
	}
	return true
}

// reindex builds idx from list.
func (m *members[T]) reindex() {
	m.idx = make(map[T]int, len(m.list))
	for i, x := range m.list {
		m.idx[x] = i
	}
}

// node holds the entries stored under one subject (the path from the root
// to it) and the level of longer subjects that pass through it.
//
// Invariant: a node reachable from the root has at least one entry or a
// non-nil next; next, when non-nil, is not empty; queue sets are non-empty.
type node[T comparable] struct {
	next   *level[T]
	plain  members[T]
	queues map[string]*members[T]
}

// add inserts v into the plain set or the named queue group and reports
// whether it was absent.
func (n *node[T]) add(queue string, v T) bool {
	if queue == "" {
		return n.plain.add(v)
	}
	if n.queues == nil {
		n.queues = make(map[string]*members[T])
	}
	q := n.queues[queue]
	if q == nil {
		q = &members[T]{}
		n.queues[queue] = q
	}
	return q.add(v)
}

// remove deletes v from the plain set or the named queue group, dropping
// the group once empty, and reports whether v was present.
func (n *node[T]) remove(queue string, v T) bool {
	if queue == "" {
		return n.plain.remove(v)
	}
	q := n.queues[queue]
	if q == nil || !q.remove(v) {
		return false
	}
	if len(q.list) == 0 {
		delete(n.queues, queue)
	}
	if len(n.queues) == 0 {
		n.queues = nil
	}
	return true
}

// hasEntries reports whether any value is stored at n itself.
func (n *node[T]) hasEntries() bool {
	return len(n.plain.list) > 0 || len(n.queues) > 0
}

// level holds the children of one node, keyed by the next token. Wildcard
// pattern tokens live in pwc and fwc, never in nodes, so a "*" or ">" token
// of a published subject finds nothing in nodes and reaches only wildcard
// subscriptions (docs/protocol.md section 1.7).
type level[T comparable] struct {
	nodes    map[string]*node[T]
	pwc, fwc *node[T]
}

// empty reports whether l has no children.
func (l *level[T]) empty() bool {
	return len(l.nodes) == 0 && l.pwc == nil && l.fwc == nil
}

// child returns the node for the pattern token tok, or nil.
func (l *level[T]) child(tok string) *node[T] {
	switch tok {
	case "*":
		return l.pwc
	case ">":
		return l.fwc
	}
	return l.nodes[tok]
}

// ensure returns the node for the pattern token tok, creating it.
func (l *level[T]) ensure(tok string) *node[T] {
	if n := l.child(tok); n != nil {
		return n
	}
	n := &node[T]{}
	switch tok {
	case "*":
		l.pwc = n
	case ">":
		l.fwc = n
	default:
		if l.nodes == nil {
			l.nodes = make(map[string]*node[T])
		}
		l.nodes[tok] = n
	}
	return n
}

// drop unlinks the node for the pattern token tok.
func (l *level[T]) drop(tok string) {
	switch tok {
	case "*":
		l.pwc = nil
	case ">":
		l.fwc = nil
	default:
		delete(l.nodes, tok)
	}
}

// insert stores v under the pattern subj below l and reports whether it was
// absent. subj must be a valid subject.
func (l *level[T]) insert(subj, queue string, v T) bool {
	for {
		tok, rest, more := strings.Cut(subj, ".")
		n := l.ensure(tok)
		if !more {
			return n.add(queue, v)
		}
		if n.next == nil {
			n.next = &level[T]{}
		}
		l, subj = n.next, rest
	}
}

// remove deletes v from under the pattern subj below l, pruning every node
// left empty on the way back up, and reports whether v was present.
func (l *level[T]) remove(subj, queue string, v T) bool {
	tok, rest, more := strings.Cut(subj, ".")
	n := l.child(tok)
	if n == nil {
		return false
	}
	var found bool
	if more {
		found = n.next != nil && n.next.remove(rest, queue, v)
		if n.next != nil && n.next.empty() {
			n.next = nil
		}
	} else {
		found = n.remove(queue, v)
	}
	if !n.hasEntries() && n.next == nil {
		l.drop(tok)
	}
	return found
}

// cut splits a published subject at its first '.', like bytes.Cut.
func cut(subj []byte) (tok, rest []byte, more bool) {
	i := bytes.IndexByte(subj, '.')
	if i < 0 {
		return subj, nil, false
	}
	return subj[:i], subj[i+1:], true
}

// collect appends to r every entry below l whose pattern matches the
// published subject subj (nats-server v2.15.2 matchLevel semantics).
func (l *level[T]) collect(subj []byte, r *Result[T]) {
	tok, rest, more := cut(subj)
	if l.fwc != nil {
		r.addNode(l.fwc)
	}
	if l.pwc != nil {
		l.pwc.collectRest(rest, more, r)
	}
	if n := l.nodes[string(tok)]; n != nil {
		n.collectRest(rest, more, r)
	}
}

// collectRest continues collect past n: n's own entries when the subject
// ended at n, else the matches of rest in n's next level.
func (n *node[T]) collectRest(rest []byte, more bool, r *Result[T]) {
	if !more {
		r.addNode(n)
	} else if n.next != nil {
		n.next.collect(rest, r)
	}
}

// any reports whether some entry below l matches the published subject
// subj. A ">" node always has entries: nothing can be stored below it.
func (l *level[T]) any(subj []byte) bool {
	tok, rest, more := cut(subj)
	if l.fwc != nil {
		return true
	}
	if l.pwc != nil && l.pwc.anyRest(rest, more) {
		return true
	}
	n := l.nodes[string(tok)]
	return n != nil && n.anyRest(rest, more)
}

// anyRest continues any past n.
func (n *node[T]) anyRest(rest []byte, more bool) bool {
	if !more {
		return n.hasEntries()
	}
	return n.next != nil && n.next.any(rest)
}
