package memstore

import (
	"slices"
	"sort"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/subject"
)

// NumPending returns the number of stored messages with start <= seq <=
// end (end 0: through LastSeq) whose subject matches any of filters
// (store.Store.NumPending); 0 after Close. Unfiltered, it counts the
// stored entries of the range or of its complement, whichever is
// shorter; literal filters count each subject's sequences in the range
// (its live count when the range holds all of them); wildcard filters
// walk the range when it is shorter than the subject list, else count
// each matching subject.
func (s *Store) NumPending(filters []string, start, end uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.mu.log
	if s.mu.closed || l.count == 0 {
		return 0
	}
	lo, hi := max(start, l.first), l.last
	if end != 0 {
		hi = min(hi, end)
	}
	if lo > hi {
		return 0
	}
	switch {
	case store.FiltersAll(filters):
		return l.countIn(lo, hi)
	case allLiteral(filters):
		return s.literalPendingLocked(filters, lo, hi)
	case hi-lo < uint64(len(s.mu.subjects)):
		return s.walkPendingLocked(filters, lo, hi)
	}
	var n uint64
	for subj, x := range s.mu.subjects {
		if store.MatchFilters(subj, filters) {
			n += x.countIn(l, lo, hi)
		}
	}
	return n
}

// literalPendingLocked counts the messages in lo..hi on the distinct
// subjects of literal filters.
func (s *Store) literalPendingLocked(filters []string, lo, hi uint64) uint64 {
	var n uint64
	for i, f := range filters {
		if x := s.mu.subjects[f]; x != nil && !slices.Contains(filters[:i], f) {
			n += x.countIn(&s.mu.log, lo, hi)
		}
	}
	return n
}

// walkPendingLocked counts the messages in lo..hi matching filters by
// looking at each one.
func (s *Store) walkPendingLocked(filters []string, lo, hi uint64) uint64 {
	var n uint64
	for seq := lo; seq <= hi; seq++ {
		if e := s.mu.log.get(seq); e != nil && store.MatchFilters(e.subj, filters) {
			n++
		}
	}
	return n
}

// countIn returns the number of stored messages in lo..hi, which lie
// within first..last: it counts the range or, when that is longer, the
// rest of the log, and subtracts.
func (l *msgLog) countIn(lo, hi uint64) uint64 {
	if hi-lo <= (lo-l.first)+(l.last-hi) {
		return l.countRange(lo, hi)
	}
	n := l.count
	if lo > l.first {
		n -= l.countRange(l.first, lo-1)
	}
	if hi < l.last {
		n -= l.countRange(hi+1, l.last)
	}
	return n
}

// countRange returns the number of stored messages in lo..hi, visiting
// only the runs that overlap it.
func (l *msgLog) countRange(lo, hi uint64) uint64 {
	var n uint64
	for k := max(l.runAt(lo), 0); k < len(l.runs) && l.runs[k].base <= hi; k++ {
		r := &l.runs[k]
		i, j := max(lo, r.base), min(hi+1, r.end())
		if i < j {
			n += countStored(r.msgs[i-r.base : j-r.base])
		}
	}
	return n
}

// countStored returns the number of stored entries of es.
func countStored(es []*entry) uint64 {
	var n uint64
	for _, e := range es {
		if e != nil {
			n++
		}
	}
	return n
}

// countIn returns the number of the subject's stored messages in lo..hi
// (live > 0).
func (x *subjIndex) countIn(l *msgLog, lo, hi uint64) uint64 {
	if lo <= x.first(l) && hi >= x.last(l) {
		return x.live
	}
	var n uint64
	i := sort.Search(len(x.seqs), func(i int) bool { return x.seqs[i] >= lo })
	for ; i < len(x.seqs) && x.seqs[i] <= hi; i++ {
		if l.has(x.seqs[i]) {
			n++
		}
	}
	return n
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
