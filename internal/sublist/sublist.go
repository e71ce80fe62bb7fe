// Package sublist is the subject index: it stores values (subscriptions, to
// the server) under subscription subjects, wildcards allowed, optionally in
// a named queue group, and finds every value whose subject matches a
// published subject. Matching follows docs/protocol.md section 1.7 and
// nats-server v2.15.2 server/sublist.go; the package knows nothing of
// connections, accounts or delivery.
//
// The index is a trie with one level per token; "*" and ">" tokens have
// their own slots in each level. Removing the last entry of a node prunes
// it, so the trie holds only nodes on the path to a live entry and memory
// follows the live entries, not the history of subjects ever used.
//
// In front of the trie sits a cache of match results keyed by published
// subject and bounded to 1024 entries; when it is full, caching a new
// result evicts one arbitrary old one. A result is cached on the second
// miss of its subject, not the first, so subjects published once (reply
// inboxes) neither pay for a store nor evict results of subjects
// published again and again. Insert and Remove drop every
// cached result their subject can affect before they return, and a result
// computed concurrently with an Insert or Remove is never cached, so Match
// never returns a result older than the last completed Insert or Remove.
//
// How to use it:
//
//  1. Create it with New; the zero value is not usable.
//  2. Insert(subject, queue, v) on SUB, Remove with the same three
//     arguments on UNSUB or when the connection closes. v identifies the
//     entry: use a distinct value per subscription (a *subscription, or a
//     (connection, sid) pair), because the index stores each
//     (subject, queue, v) at most once.
//  3. Match(published) on every PUB and deliver to every Result.Plain entry
//     and to one member of each Result.Queues group. Do not modify the
//     result: it is shared with other callers and with the cache.
//
// All methods are safe for concurrent use. A Sublist has one RWMutex: cache
// hits and HasInterest take it shared, a cache miss walks the trie shared
// and then, if the result is admitted to the cache, takes it exclusively
// for a moment to store the result, Insert and
// Remove take it exclusively (an Insert or Remove of a wildcard subject
// scans the whole cache while holding it). It is a leaf lock: no code
// outside the package runs while it is held, so callers may hold their own
// locks when calling any method.
package sublist

import (
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/cairnmq/cairn/internal/subject"
)

// Errors returned by Insert and Remove; test for them with errors.Is.
var (
	// ErrInvalidSubject means the subject is not a valid subscription
	// subject per subject.ValidSubject. The server answers such a SUB with
	// -ERR 'Invalid Subject' and keeps the connection (docs/protocol.md 1.7).
	ErrInvalidSubject = errors.New("sublist: invalid subject")
	// ErrInvalidQueue means the queue name is not "" and not valid per
	// subject.ValidQueue (non-empty, no whitespace). nats-server v2.15.2
	// cannot produce this case because its parser splits on whitespace.
	ErrInvalidQueue = errors.New("sublist: invalid queue")
	// ErrNotFound means Remove found no entry for (subject, queue, v)
	// (nats-server v2.15.2 returns its ErrNotFound in the same case). The
	// server ignores it on UNSUB of an unknown sid.
	ErrNotFound = errors.New("sublist: not found")
)

// Sublist is a concurrent subject index of values of type T with a match
// cache. Create it with New. T is compared with == to identify entries.
type Sublist[T comparable] struct {
	// empty is the result of every match that finds nothing; it is shared
	// and never modified.
	empty *Result[T]

	// mu guards the trie, the counters and the cache. Match and
	// HasInterest take it shared; Insert, Remove and cache stores take it
	// exclusively.
	mu struct {
		sync.RWMutex
		// root is the first level of the trie.
		root level[T]
		// count is the number of entries stored in the trie.
		count int
		// inserts and removes count the Inserts and Removes that
		// changed the trie, since New.
		inserts, removes uint64
		// gen changes on every Insert or Remove that changes the trie; a
		// result computed under an older gen is not cached.
		gen uint64
		// cache maps published subjects to their results; it never holds
		// more than cacheMax entries, and every result in it equals what
		// a walk of the trie would return now.
		cache map[string]*Result[T]
	}

	// seen admits a result into the cache on its subject's second miss;
	// it has its own atomics and is used without mu.
	seen *seenFilter

	// matches and hits count the calls of Match and those answered from
	// the cache (Stats); atomics, so counting takes no lock.
	matches, hits atomic.Uint64
}

// Stats are the index's counters (nats-server v2.15.2 SublistStats):
// Count entries stored, Cached results in the cache, and since New the
// Inserts and Removes that changed the index, the Matches, and the
// CacheHits among them; MaxFanout and TotalFanout are the largest and
// the sum of the cached results' sizes (plain entries plus queue groups),
// from which nats-server derives max_fanout and avg_fanout.
type Stats struct {
	Count       int
	Cached      int
	Inserts     uint64
	Removes     uint64
	Matches     uint64
	CacheHits   uint64
	MaxFanout   int
	TotalFanout int
}

// Stats returns the index's counters; it walks the cache (at most 1024
// results) under the shared lock.
func (s *Sublist[T]) Stats() Stats {
	s.mu.RLock()
	st := Stats{Count: s.mu.count, Cached: len(s.mu.cache), Inserts: s.mu.inserts, Removes: s.mu.removes}
	for _, r := range s.mu.cache {
		n := len(r.Plain) + len(r.Queues)
		st.TotalFanout += n
		st.MaxFanout = max(st.MaxFanout, n)
	}
	s.mu.RUnlock()
	st.Matches, st.CacheHits = s.matches.Load(), s.hits.Load()
	return st
}

// New returns an empty Sublist with an empty match cache bounded to 1024
// results (nats-server v2.15.2 NewSublistWithCache).
func New[T comparable]() *Sublist[T] {
	s := &Sublist[T]{empty: &Result[T]{}, seen: &seenFilter{seed: maphash.MakeSeed()}}
	s.mu.cache = make(map[string]*Result[T])
	return s
}

// Insert stores v under the subscription subject subj (wildcards allowed)
// as a plain entry when queue is "", or as a member of the queue group
// queue. It returns ErrInvalidSubject when subj fails subject.ValidSubject
// and ErrInvalidQueue when queue is neither "" nor subject.ValidQueue.
//
// Entries form a set: inserting a (subj, queue, v) that is already stored
// changes nothing, returns nil and does not change Count, and a single
// Remove then deletes it. (nats-server v2.15.2 keys its entries by
// subscription pointer the same way; its clients never insert a sid twice.)
// The same v may be stored under different subjects or queues; it then
// appears once per matching entry in a Result.
//
// When Insert returns, every later Match sees the entry. Insert retains
// substrings of subj and queue.
func (s *Sublist[T]) Insert(subj, queue string, v T) error {
	if err := validate(subj, queue); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.root.insert(subj, queue, v) {
		return nil
	}
	s.mu.count++
	s.mu.inserts++
	s.changedLocked(subj)
	return nil
}

// Remove deletes the entry stored by Insert(subj, queue, v) and prunes the
// trie nodes it leaves empty. It returns ErrInvalidSubject or
// ErrInvalidQueue for arguments Insert would reject, and ErrNotFound when no
// such entry is stored. When Remove returns, no later Match sees the entry.
func (s *Sublist[T]) Remove(subj, queue string, v T) error {
	if err := validate(subj, queue); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.root.remove(subj, queue, v) {
		return ErrNotFound
	}
	s.mu.count--
	s.mu.removes++
	s.changedLocked(subj)
	return nil
}

// Count returns the number of stored entries: Inserts of new entries minus
// successful Removes (nats-server v2.15.2 Sublist.Count, which unlike this
// one also counts duplicate inserts).
func (s *Sublist[T]) Count() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.count
}

// validate checks Insert and Remove arguments.
func validate(subj, queue string) error {
	if !subject.ValidSubject(subj) {
		return ErrInvalidSubject
	}
	if queue != "" && !subject.ValidQueue(queue) {
		return ErrInvalidQueue
	}
	return nil
}
