package filestore

import "math/bits"

// NumPending returns the number of stored messages with start <= seq <=
// end (end 0: through LastSeq) whose subject matches any of filters
// (store.Store.NumPending); 0 after Close. It reads only the index: the
// per-segment live counts and removed bitmaps, the slots' subject ids and
// the per-subject counts. A range that holds every match is answered from
// the counts; otherwise it counts the range or, when that is shorter, the
// rest of the stream and subtracts (see pendingLocked). Filters that match
// every stored subject count as no filter.
func (s *Store) NumPending(filters []string, start, end uint64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed || s.mu.msgs == 0 {
		return 0
	}
	lo, hi := max(start, 1), s.mu.last
	if end != 0 {
		hi = min(hi, end)
	}
	if lo > hi {
		return 0
	}
	m := s.newMatcherLocked(filters)
	if m.exact && m.n == len(s.mu.subj.byName) {
		m = matchAll // it matches every stored subject
	}
	return s.pendingLocked(m, lo, hi)
}

// pendingLocked counts the stored messages in lo..hi that m matches. The
// matches lie in a span (the stream, or m.lo..m.hi for literal filters);
// a range holding the span is answered by the total. Otherwise it either
// scans the range or scans the span outside the range and subtracts from
// the total, whichever visits fewer slots; the total costs a pass over
// the subjects for wildcard filters, counted against the second way.
func (s *Store) pendingLocked(m *matcher, lo, hi uint64) uint64 {
	if m.exact && m.n == 0 {
		return 0
	}
	first, last := s.mu.first, s.mu.last
	if m.bounded {
		first, last = m.lo, m.hi
	}
	lo, hi = max(lo, first), min(hi, last)
	switch {
	case lo > hi:
		return 0
	case lo == first && hi == last && (m.all || m.bounded):
		return s.matchTotalLocked(m)
	}
	outside := (lo - first) + (last - hi)
	if !m.all && !m.bounded {
		outside += uint64(len(s.mu.subj.byName))
	}
	if hi-lo+1 <= outside {
		return s.countRangeLocked(m, lo, hi)
	}
	n := s.matchTotalLocked(m)
	n -= s.countRangeLocked(m, first, lo-1)
	return n - s.countRangeLocked(m, hi+1, last)
}

// matchTotalLocked returns the number of stored messages m matches.
func (s *Store) matchTotalLocked(m *matcher) uint64 {
	switch {
	case m.all:
		return s.mu.msgs
	case m.bounded:
		return m.msgs
	}
	var n uint64
	for _, info := range s.mu.subj.byName {
		if s.matchLocked(m, info.id) {
			n += info.msgs
		}
	}
	return n
}

// countRangeLocked counts the stored messages in lo..hi that m matches,
// skipping segments whose subject filter rules m out and taking whole
// segments' live counts when m matches all.
func (s *Store) countRangeLocked(m *matcher, lo, hi uint64) uint64 {
	if lo > hi {
		return 0
	}
	var n uint64
	for k := max(s.segIndexLocked(lo), 0); k < len(s.mu.segs); k++ {
		g := s.mu.segs[k]
		if g.base > hi {
			break
		}
		if g.live == 0 || (m.exact && !g.mayHold(&m.mask)) {
			continue
		}
		i, j := g.slotRange(lo, hi)
		switch {
		case i >= j:
		case m.all:
			n += uint64(g.liveIn(i, j))
		default:
			n += s.countInLocked(m, g, i, j)
		}
	}
	return n
}

// countInLocked counts the live slots i..j-1 of g that m matches. An
// exact matcher tests the subject id first, which rules out most slots
// of a sparse subject with one sequential read.
func (s *Store) countInLocked(m *matcher, g *segment, i, j int) uint64 {
	var n uint64
	switch {
	case m.exact && m.n == 1:
		for k, sid := range g.sids[i:j] {
			if sid == m.id && !g.isDead(i+k) {
				n++
			}
		}
	case m.exact:
		for k, sid := range g.sids[i:j] {
			if m.has(sid) && !g.isDead(i+k) {
				n++
			}
		}
	default:
		for k := g.nextLive(i); k >= 0 && k < j; k = g.nextLive(k + 1) {
			if s.matchLocked(m, g.sids[k]) {
				n++
			}
		}
	}
	return n
}

// slotRange returns the slots i..j-1 of g that hold sequences in lo..hi.
func (g *segment) slotRange(lo, hi uint64) (int, int) {
	n := uint64(len(g.offs))
	i, j := uint64(0), n
	if lo > g.base {
		i = min(lo-g.base, n)
	}
	if hi < g.end() {
		j = min(hi+1-g.base, n) // hi >= g.base: the caller stops before
	}
	return int(i), int(j)
}

// liveIn returns the number of live slots among i..j-1 (i < j), from the
// removed bitmap.
func (g *segment) liveIn(i, j int) int {
	if i == 0 && j == len(g.offs) {
		return g.live
	}
	dead := 0
	for w := i >> 6; w <= (j-1)>>6; w++ {
		word := g.dead[w]
		if w == i>>6 {
			word &= ^uint64(0) << (i & 63)
		}
		if w == (j-1)>>6 {
			word &= ^uint64(0) >> (63 - ((j - 1) & 63))
		}
		dead += bits.OnesCount64(word)
	}
	return j - i - dead
}
