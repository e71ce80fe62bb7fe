package filestore

import (
	"slices"
	"sync"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/subject"
)

// exactLimit is the number of stored subjects up to which a wildcard
// filter is resolved to the full set of matching subject ids at once.
const exactLimit = 4096

// matcher decides which subject ids a filter list matches. An exact
// matcher holds every matching id in a bitset, with their segment-filter
// bits in mask; with literal filters it is also bounded: lo..hi bounds
// the matching stored sequences, lo being a stored match, and msgs is
// their number (bounded matchers are built per call, never cached). A
// lazy matcher (many subjects, wildcards) decides ids as it meets them.
type matcher struct {
	all     bool
	exact   bool
	bounded bool
	filters []string
	set     []uint64 // exact: bitset of matching ids
	n       int      // exact: number of matching ids
	id      uint32   // exact: the first id added (the only one when n is 1)
	mask    [4]uint64
	lo, hi  uint64
	msgs    uint64 // bounded: stored messages on the matching subjects
	lazy    map[uint32]bool
}

// matchCache keeps the last exact wildcard matcher, which stays valid
// while no subject is added or dropped (subjects.gen).
type matchCache struct {
	mu struct {
		sync.Mutex
		gen uint64
		m   *matcher
	}
}

// matchAll is the matcher of filters that match every subject; like
// every matcher but a lazy one, it is never changed.
var matchAll = &matcher{all: true}

// newMatcherLocked returns the matcher of filters.
func (s *Store) newMatcherLocked(filters []string) *matcher {
	switch {
	case store.FiltersAll(filters):
		return matchAll
	case allLiteral(filters):
		return s.literalMatcherLocked(filters)
	case len(s.mu.subj.byName) > exactLimit:
		return &matcher{filters: filters, lazy: make(map[uint32]bool)}
	}
	if m := s.mcache.get(filters, s.mu.subj.gen); m != nil {
		return m
	}
	m := &matcher{exact: true, filters: slices.Clone(filters)}
	for subj, info := range s.mu.subj.byName {
		if store.MatchFilters(subj, filters) {
			m.add(info)
		}
	}
	s.mcache.put(m, s.mu.subj.gen)
	return m
}

// literalMatcherLocked returns the bounded matcher of literal filters.
func (s *Store) literalMatcherLocked(filters []string) *matcher {
	m := &matcher{exact: true, bounded: true, filters: filters}
	for _, f := range filters {
		info := s.mu.subj.get(f)
		if info == nil || m.has(info.id) {
			continue
		}
		m.add(info)
		m.msgs += info.msgs
		if m.lo == 0 || info.first < m.lo {
			m.lo = info.first
		}
		m.hi = max(m.hi, info.last) // a bound even when lastStale
	}
	return m
}

// add puts a subject in an exact matcher.
func (m *matcher) add(info *subjInfo) {
	for int(info.id>>6) >= len(m.set) {
		m.set = append(m.set, 0)
	}
	m.set[info.id>>6] |= 1 << (info.id & 63)
	if m.n == 0 {
		m.id = info.id
	}
	m.n++
	b := bloomBit(info.id)
	m.mask[b>>6] |= 1 << (b & 63)
}

// has reports whether an exact matcher holds id.
func (m *matcher) has(id uint32) bool {
	return int(id>>6) < len(m.set) && m.set[id>>6]&(1<<(id&63)) != 0
}

// get returns the cached matcher of filters if it is still valid.
func (c *matchCache) get(filters []string, gen uint64) *matcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.m != nil && c.mu.gen == gen && slices.Equal(c.mu.m.filters, filters) {
		return c.mu.m
	}
	return nil
}

// put caches an exact matcher, which is never changed once built.
func (c *matchCache) put(m *matcher, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.m, c.mu.gen = m, gen
}

// allLiteral reports whether no filter has a wildcard.
func allLiteral(filters []string) bool {
	for _, f := range filters {
		if !subject.IsLiteral(f) {
			return false
		}
	}
	return true
}

// matchLocked reports whether the live subject id matches.
func (s *Store) matchLocked(m *matcher, id uint32) bool {
	switch {
	case m.all:
		return true
	case m.exact:
		return m.has(id)
	}
	ok, seen := m.lazy[id]
	if !seen {
		ok = store.MatchFilters(s.mu.subj.name(id), m.filters)
		m.lazy[id] = ok
	}
	return ok
}

// nextMatchLocked returns the lowest stored sequence >= seq that m
// matches, or 0. Segments whose subject filter rules out every matching
// id are skipped.
func (s *Store) nextMatchLocked(m *matcher, seq uint64) uint64 {
	switch {
	case m.all:
		return s.nextLiveLocked(seq)
	case m.exact && m.n == 0, m.bounded && seq > m.hi:
		return 0
	case m.bounded && seq <= m.lo:
		return m.lo
	}
	if m.bounded && m.n == 1 {
		if next, ok := s.followLocked(m, seq); ok {
			return next
		}
	}
	for k := max(s.segIndexLocked(seq), 0); k < len(s.mu.segs); k++ {
		g := s.mu.segs[k]
		if m.bounded && g.base > m.hi {
			return 0
		}
		if m.exact && !g.mayHold(&m.mask) {
			continue
		}
		if found := s.matchInLocked(m, g, seq); found != 0 {
			return found
		}
	}
	return 0
}

// matchInLocked returns the lowest stored sequence >= seq of g that m
// matches, or 0.
func (s *Store) matchInLocked(m *matcher, g *segment, seq uint64) uint64 {
	i := 0
	if seq > g.base {
		i = int(min(seq-g.base, uint64(len(g.offs))))
	}
	for j := g.nextLive(i); j >= 0; j = g.nextLive(j + 1) {
		if s.matchLocked(m, g.sids[j]) {
			return g.base + uint64(j)
		}
	}
	return 0
}

// followLocked finds the next match of a one-subject matcher from the
// slot before seq when that slot held the subject (a consumer reading on
// from its last message): it follows the same-subject links. It reports
// false when the links do not answer.
func (s *Store) followLocked(m *matcher, seq uint64) (uint64, bool) {
	g, i, ok := s.slotLocked(seq - 1)
	if !ok || g.offs[i] == 0 || !m.has(g.sids[i]) {
		return 0, false
	}
	id := g.sids[i]
	for at := seq - 1; g.next[i] != 0; {
		at += uint64(g.next[i])
		if g, i, ok = s.slotLocked(at); !ok || g.sids[i] != id {
			return 0, false
		}
		if !g.isDead(i) {
			return at, true
		}
	}
	return 0, false
}

// nextOfSubjectLocked returns the subject's next stored sequence after the
// (just removed) slot i of g, following the same-subject links and falling
// back to a scan where a link is unknown.
func (s *Store) nextOfSubjectLocked(info *subjInfo, g *segment, i int) uint64 {
	seq := g.base + uint64(i)
	for g.next[i] != 0 {
		seq += uint64(g.next[i])
		var ok bool
		if g, i, ok = s.slotLocked(seq); !ok || g.sids[i] != info.id {
			break
		}
		if !g.isDead(i) {
			return seq
		}
	}
	return s.scanSubjectLocked(info.id, seq+1)
}

// scanSubjectLocked returns the lowest stored sequence >= seq with the
// subject id, or 0.
func (s *Store) scanSubjectLocked(id uint32, seq uint64) uint64 {
	m := &matcher{exact: true}
	m.add(&subjInfo{id: id})
	for k := max(s.segIndexLocked(seq), 0); k < len(s.mu.segs); k++ {
		g := s.mu.segs[k]
		if !g.mayHold(&m.mask) {
			continue
		}
		if found := s.matchInLocked(m, g, seq); found != 0 {
			return found
		}
	}
	return 0
}

// subjectLastLocked returns the subject's last stored sequence, finding
// it (backwards from the stale bound) when a removal made it unknown.
func (s *Store) subjectLastLocked(info *subjInfo) uint64 {
	if !info.lastStale {
		return info.last
	}
	b := bloomBit(info.id)
	for k := s.segIndexLocked(info.last); k >= 0; k-- {
		g := s.mu.segs[k]
		if g.bloom[b>>6]&(1<<(b&63)) == 0 {
			continue
		}
		j := min(len(g.offs)-1, int(min(info.last-g.base, uint64(len(g.offs)))))
		for ; j >= 0; j-- {
			if !g.isDead(j) && g.sids[j] == info.id {
				info.last, info.lastStale = g.base+uint64(j), false
				return info.last
			}
		}
	}
	info.last, info.lastStale = info.first, false
	return info.last
}
