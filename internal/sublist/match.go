package sublist

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cairnmq/cairn/internal/subject"
)

// cacheMax bounds the number of cached match results (the value nats-server
// v2.15.2 uses, slCacheMax). When the cache is full, storing a result first
// evicts one arbitrary entry, so no single Match pays for a large sweep.
const cacheMax = 1024

// seenSize is the number of slots of the admission filter (a power of
// two): a subject's result is cached only when the subject was published
// before, recently enough that its slot still holds its hash. Four times
// cacheMax, so that a subject published again within a few thousand
// distinct subjects gets in.
const seenSize = 4 * cacheMax

// seenFilter remembers the hashes of recently missed published subjects,
// one per slot, a later subject overwriting an earlier one in its slot. A
// false positive (two subjects with the same hash) only lets a result into
// the cache on its first miss, which is always correct. Its slots are
// atomics, read and written without s.mu.
type seenFilter struct {
	seed  maphash.Seed
	slots [seenSize]atomic.Uint64
}

// admit reports whether subj was seen before (its slot holds its hash);
// if not, it records subj and reports false.
func (f *seenFilter) admit(subj []byte) bool {
	h := maphash.Bytes(f.seed, subj) | 1 // 0 marks an empty slot
	slot := &f.slots[h>>32&(seenSize-1)]
	if slot.Load() == h {
		return true
	}
	slot.Store(h)
	return false
}

// Result is the set of entries matching one published subject. Every
// matching plain entry is in Plain, and every matching queue entry is in
// the Queue of its group name; a value stored under several matching
// subjects appears once per entry. Queues holds at most one Queue per
// name, with entries from all matching subjects merged (nats-server
// v2.15.2 findQSlot). The order of Plain, Queues and Members is
// unspecified.
//
// A Result returned by Match is shared and read-only: callers must not
// modify it or its slices. The index never modifies a Result after
// returning it.
type Result[T comparable] struct {
	// Plain holds the entries inserted with queue "".
	Plain []T
	// Queues holds one element per queue group with a matching entry.
	Queues []Queue[T]
	// one backs Plain when the result has a single plain entry (the
	// common case: an inbox, a stream subject), so such a result is one
	// allocation.
	one [1]T
}

// Queue is one queue group of a Result: the server delivers a message to
// exactly one of its Members (docs/protocol.md section 1.7).
type Queue[T comparable] struct {
	// Name is the queue group name given to Insert.
	Name string
	// Members is non-empty.
	Members []T
}

// addNode appends the entries stored at n to r, copying them so r never
// aliases the trie.
func (r *Result[T]) addNode(n *node[T]) {
	if r.Plain == nil && len(n.plain.list) == 1 {
		r.one[0] = n.plain.list[0]
		r.Plain = r.one[:1:1] // a later append copies it out
	} else {
		r.Plain = append(r.Plain, n.plain.list...)
	}
	for name, q := range n.queues {
		r.addQueue(name, q.list)
	}
}

// addQueue appends members to the group called name, adding the group if
// r lacks it.
func (r *Result[T]) addQueue(name string, members []T) {
	for i := range r.Queues {
		if r.Queues[i].Name == name {
			r.Queues[i].Members = append(r.Queues[i].Members, members...)
			return
		}
	}
	r.Queues = append(r.Queues, Queue[T]{Name: name, Members: slices.Clone(members)})
}

// isEmpty reports whether r has no entries.
func (r *Result[T]) isEmpty() bool {
	return len(r.Plain) == 0 && len(r.Queues) == 0
}

// Match returns the entries whose subscription subject matches the
// published subject subj; tokens of subj are literal, so a "*" or ">" token
// in it reaches only wildcard subscriptions (docs/protocol.md section 1.7). A
// subject with an empty token (including the empty subject) matches
// nothing. Match never returns nil; a subject with no interest gets an
// empty Result.
//
// The result is shared and read-only (see Result). It reflects every Insert
// and Remove that returned before Match was called. A cache hit takes only
// the shared lock and does not allocate. A miss caches its result only if
// subj missed before, recently (seenFilter): a subject published once,
// such as the unique reply inbox of a request or a PubAck, costs a walk
// but no exclusive lock and evicts nothing. Match does not retain subj.
func (s *Sublist[T]) Match(subj []byte) *Result[T] {
	s.matches.Add(1)
	s.mu.RLock()
	if r, ok := s.mu.cache[string(subj)]; ok {
		s.mu.RUnlock()
		s.hits.Add(1)
		return r
	}
	gen := s.mu.gen
	r := s.walkLocked(subj)
	s.mu.RUnlock()
	if r == nil {
		return s.empty
	}
	if s.seen.admit(subj) {
		s.store(subj, gen, r)
	}
	return r
}

// walkLocked computes the result for subj from the trie, or nil when subj
// has an empty token. It needs s.mu held, shared or exclusive.
func (s *Sublist[T]) walkLocked(subj []byte) *Result[T] {
	if !wellFormed(subj) {
		return nil
	}
	r := &Result[T]{}
	s.mu.root.collect(subj, r)
	if r.isEmpty() {
		return s.empty
	}
	return r
}

// store caches r as the result for subj, unless the trie changed since gen
// was read together with the walk that produced r.
func (s *Sublist[T]) store(subj []byte, gen uint64, r *Result[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.gen != gen {
		return
	}
	if _, ok := s.mu.cache[string(subj)]; !ok && len(s.mu.cache) >= cacheMax {
		for k := range s.mu.cache {
			delete(s.mu.cache, k)
			break
		}
	}
	s.mu.cache[string(subj)] = r
}

// changedLocked records a change of the entries stored under the pattern
// subj: it bumps gen and drops the cached results of every published
// subject subj matches. It needs s.mu held exclusively.
func (s *Sublist[T]) changedLocked(subj string) {
	s.mu.gen++
	if subject.IsLiteral(subj) {
		delete(s.mu.cache, subj)
		return
	}
	prefix := literalPrefix(subj)
	for k := range s.mu.cache {
		if strings.HasPrefix(k, prefix) && subject.Match(k, subj) {
			delete(s.mu.cache, k)
		}
	}
}

// literalPrefix returns the part of the pattern subj before its first
// wildcard token ("orders." for "orders.*.eu.>"): every subject the pattern
// matches starts with it, so it rejects most cache keys cheaply.
func literalPrefix(subj string) string {
	for i := 0; i < len(subj); i++ {
		if (subj[i] == '*' || subj[i] == '>') && (i == 0 || subj[i-1] == '.') &&
			(i+1 == len(subj) || subj[i+1] == '.') {
			return subj[:i]
		}
	}
	return subj
}

// HasInterest reports whether Match(subj) would return a non-empty result.
// It answers from the cache when it can and otherwise walks the trie,
// stopping at the first matching entry, without caching; it does not
// allocate (nats-server v2.15.2 Sublist.HasInterest).
func (s *Sublist[T]) HasInterest(subj []byte) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if r, ok := s.mu.cache[string(subj)]; ok {
		return !r.isEmpty()
	}
	return wellFormed(subj) && s.mu.root.any(subj)
}

// wellFormed reports whether the published subject subj is non-empty and
// has no empty token.
func wellFormed(subj []byte) bool {
	if len(subj) == 0 || subj[0] == '.' || subj[len(subj)-1] == '.' {
		return false
	}
	for i := 1; i < len(subj); i++ {
		if subj[i] == '.' && subj[i-1] == '.' {
			return false
		}
	}
	return true
}
