package memstore

import (
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/subject"
)

// scanBudget is how many sequences LoadNext walks before it turns to the
// subject index; the walk wins when matches are dense, the index when
// they are sparse.
const scanBudget = 64

// Load returns a copy of the message at seq, or store.ErrNotFound.
func (s *Store) Load(seq uint64) (*store.StoredMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, store.ErrClosed
	}
	return s.loadLocked(seq)
}

// LoadNext returns a copy of the first message at or after start whose
// subject matches any of filters, or store.ErrEOF.
func (s *Store) LoadNext(filters []string, start uint64) (*store.StoredMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, store.ErrClosed
	}
	if seq := s.nextLocked(filters, start); seq != 0 {
		return s.loadLocked(seq)
	}
	return nil, store.ErrEOF
}

// LoadLast returns a copy of the last message whose subject matches
// filter ("" or ">": the last stored message), or store.ErrNotFound.
func (s *Store) LoadLast(filter string) (*store.StoredMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, store.ErrClosed
	}
	return s.loadLocked(s.lastLocked(filter))
}

// SubjectsState returns the state of every stored subject matching
// filter ("" or ">" for all); nil after Close.
func (s *Store) SubjectsState(filter string) map[string]store.SubjectState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	l := &s.mu.log
	out := make(map[string]store.SubjectState)
	for subj, x := range s.matchingSubjectsLocked(filter) {
		out[subj] = store.SubjectState{Msgs: x.live, First: x.first(l), Last: x.last(l)}
	}
	return out
}

// loadLocked returns a copy of the message at seq.
func (s *Store) loadLocked(seq uint64) (*store.StoredMsg, error) {
	e := s.mu.log.get(seq)
	if e == nil {
		return nil, store.ErrNotFound
	}
	return &store.StoredMsg{Subject: e.subj, Header: clone(e.hdr), Data: clone(e.data), Seq: seq, Time: e.time}, nil
}

// nextLocked returns the first stored sequence >= start matching
// filters, or 0. It walks up to a budget of sequences, then asks the
// subject index for the rest.
func (s *Store) nextLocked(filters []string, start uint64) uint64 {
	l := &s.mu.log
	if store.FiltersAll(filters) {
		return l.next(start)
	}
	start = max(start, l.first)
	if l.count == 0 || start > l.last {
		return 0
	}
	end := min(l.last+1, start+scanBudget+2*s.indexCost(filters))
	for seq := start; seq < end; seq++ {
		if e := l.get(seq); e != nil && store.MatchFilters(e.subj, filters) {
			return seq
		}
	}
	return s.indexedNextLocked(filters, end)
}

// indexCost estimates the work of indexedNextLocked for filters.
func (s *Store) indexCost(filters []string) uint64 {
	for _, f := range filters {
		if !subject.IsLiteral(f) {
			return uint64(len(s.mu.subjects))
		}
	}
	return uint64(len(filters))
}

// indexedNextLocked returns the first stored sequence >= start matching
// filters (none of which matches all), or 0, from the subject index.
func (s *Store) indexedNextLocked(filters []string, start uint64) uint64 {
	var best uint64
	consider := func(x *subjIndex) {
		if seq := x.next(&s.mu.log, start); seq != 0 && (best == 0 || seq < best) {
			best = seq
		}
	}
	wild := false
	for _, f := range filters {
		if !subject.IsLiteral(f) {
			wild = true
		} else if x := s.mu.subjects[f]; x != nil {
			consider(x)
		}
	}
	if wild {
		for subj, x := range s.mu.subjects {
			if store.MatchFilters(subj, filters) {
				consider(x)
			}
		}
	}
	return best
}

// lastLocked returns the last stored sequence matching filter, or 0.
func (s *Store) lastLocked(filter string) uint64 {
	if store.IsFilterAll(filter) {
		return s.mu.log.prev()
	}
	var best uint64
	for _, x := range s.matchingSubjectsLocked(filter) {
		best = max(best, x.last(&s.mu.log))
	}
	return best
}

// matchingSubjectsLocked returns the index entries of the stored subjects
// matching filter.
func (s *Store) matchingSubjectsLocked(filter string) map[string]*subjIndex {
	if store.IsFilterAll(filter) {
		return s.mu.subjects
	}
	out := make(map[string]*subjIndex)
	if subject.IsLiteral(filter) {
		if x := s.mu.subjects[filter]; x != nil {
			out[filter] = x
		}
		return out
	}
	for subj, x := range s.mu.subjects {
		if store.MatchFilter(subj, filter) {
			out[subj] = x
		}
	}
	return out
}
