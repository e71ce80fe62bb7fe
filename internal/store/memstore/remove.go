package memstore

import (
	"slices"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/subject"
)

// Delete removes the message at seq, or returns store.ErrNotFound.
func (s *Store) Delete(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return store.ErrClosed
	}
	if !s.removeLocked(seq) {
		return store.ErrNotFound
	}
	return nil
}

// DeleteMany removes the messages at seqs, skipping sequences that hold
// none, and returns how many it removed; store.ErrClosed after Close.
func (s *Store) DeleteMany(seqs []uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, store.ErrClosed
	}
	var n uint64
	for _, seq := range seqs {
		if s.removeLocked(seq) {
			n++
		}
	}
	return n, nil
}

// Purge removes what req selects (store.PlanPurge).
func (s *Store) Purge(req store.PurgeRequest) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, store.ErrClosed
	}
	plan, err := store.PlanPurge(req, s.countLocked)
	if err != nil {
		return 0, err
	}
	switch plan.Kind {
	case store.PurgeAll:
		return s.purgeAllLocked(), nil
	case store.PurgeCompact:
		return s.compactLocked(plan.Seq), nil
	case store.PurgeMatching:
		return s.purgeMatchingLocked(plan), nil
	}
	return 0, nil
}

// Compact removes every message below seq (Compact(0) removes all).
func (s *Store) Compact(seq uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, store.ErrClosed
	}
	return s.compactLocked(seq), nil
}

// ExpireUpTo removes what has expired at now under store.Expire's rules
// (MaxAge, then per-message TTLs, leaving the last message of a subject
// for a marker when the config asks for markers).
func (s *Store) ExpireUpTo(now int64) (store.Expiry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return store.Expiry{}, store.ErrClosed
	}
	return store.Expire(s.mu.cfg, &s.mu.expiry, expireView{s}, now)
}

// expireView lets store.Expire work on a locked Store.
type expireView struct{ s *Store }

func (v expireView) NextStored(seq uint64) uint64 {
	l := &v.s.mu.log
	if l.count == 0 {
		return 0
	}
	return l.next(max(seq, l.first))
}

func (v expireView) AgeExpired(seq uint64, now int64) (bool, bool, int64, error) {
	t := v.s.mu.log.get(seq).time
	return store.Expired(v.s.mu.cfg, t, now), false, t, nil
}

func (v expireView) Subject(seq uint64) string { return v.s.mu.log.get(seq).subj }

func (v expireView) SubjectMsgs(subj string) uint64 { return v.s.subjectMsgsLocked(subj) }

func (v expireView) IsMarker(seq uint64) (bool, error) {
	return store.IsDeleteMarker(v.s.mu.log.get(seq).hdr), nil
}

func (v expireView) Stored(seq uint64) bool { return v.s.mu.log.has(seq) }

func (v expireView) Remove(seq uint64) { v.s.removeLocked(seq) }

// removeLocked removes the message at seq and reports whether there was
// one.
func (s *Store) removeLocked(seq uint64) bool {
	l := &s.mu.log
	e := l.get(seq)
	if e == nil {
		return false
	}
	l.remove(seq)
	s.mu.removals++
	s.mu.bytes -= e.size
	x := s.mu.subjects[e.subj]
	x.removed(l)
	if x.live == 0 {
		delete(s.mu.subjects, e.subj)
	}
	return true
}

// purgeAllLocked removes everything; FirstSeq becomes LastSeq+1.
func (s *Store) purgeAllLocked() uint64 {
	n := s.mu.log.count
	s.mu.removals += n
	s.mu.log.emptyFrom(s.mu.log.last + 1)
	s.mu.subjects = make(map[string]*subjIndex)
	s.mu.bytes = 0
	return n
}

// compactLocked removes every message below seq, following nats-server:
// seq 0 purges all, seq past LastSeq purges all and makes FirstSeq seq
// (raising LastSeq to seq-1), seq below FirstSeq does nothing.
func (s *Store) compactLocked(seq uint64) uint64 {
	l := &s.mu.log
	if seq == 0 {
		return s.purgeAllLocked()
	}
	if seq > l.last {
		n := s.purgeAllLocked()
		l.emptyFrom(seq)
		return n
	}
	var n uint64
	for l.count > 0 && l.first < seq {
		s.removeLocked(l.first)
		n++
	}
	return n
}

// purgeMatchingLocked carries out a store.PurgeMatching plan.
func (s *Store) purgeMatchingLocked(plan store.PurgePlan) uint64 {
	var n uint64
	for _, seq := range s.matchingLocked(plan.Filter) {
		if plan.Below > 0 && seq >= plan.Below {
			break
		}
		s.removeLocked(seq)
		n++
		if plan.Max > 0 && n >= plan.Max {
			break
		}
	}
	return n
}

// matchingLocked returns the stored sequences whose subject matches
// filter, ascending.
func (s *Store) matchingLocked(filter string) []uint64 {
	l := &s.mu.log
	if store.IsFilterAll(filter) {
		var out []uint64
		for seq := l.next(l.first); seq != 0; seq = l.next(seq + 1) {
			out = append(out, seq)
		}
		return out
	}
	if subject.IsLiteral(filter) {
		if x := s.mu.subjects[filter]; x != nil {
			return x.stored(l)
		}
		return nil
	}
	var out []uint64
	for subj, x := range s.mu.subjects {
		if store.MatchFilter(subj, filter) {
			out = append(out, x.stored(l)...)
		}
	}
	slices.Sort(out)
	return out
}

// countLocked returns the number of stored messages matching filter.
func (s *Store) countLocked(filter string) uint64 {
	if store.IsFilterAll(filter) {
		return s.mu.log.count
	}
	if subject.IsLiteral(filter) {
		return s.subjectMsgsLocked(filter)
	}
	var n uint64
	for subj, x := range s.mu.subjects {
		if store.MatchFilter(subj, filter) {
			n += x.live
		}
	}
	return n
}

// enforcer lets the store's limit functions work on a locked Store.
type enforcer struct{ s *Store }

// Totals returns the stored message and byte counts.
func (e enforcer) Totals() (uint64, uint64) { return e.s.mu.log.count, e.s.mu.bytes }

// SubjectMsgs returns the number of messages stored on subj.
func (e enforcer) SubjectMsgs(subj string) uint64 { return e.s.subjectMsgsLocked(subj) }

// SubjectsOver returns the subjects holding more than n messages, sorted.
func (e enforcer) SubjectsOver(n uint64) []string {
	var out []string
	for subj, x := range e.s.mu.subjects {
		if x.live > n {
			out = append(out, subj)
		}
	}
	slices.Sort(out)
	return out
}

// RemoveOldest removes the first stored message.
func (e enforcer) RemoveOldest() error {
	e.s.removeLocked(e.s.mu.log.first)
	return nil
}

// RemoveSubjectOldest removes the first stored message on subj.
func (e enforcer) RemoveSubjectOldest(subj string) error {
	if x := e.s.mu.subjects[subj]; x != nil {
		e.s.removeLocked(x.first(&e.s.mu.log))
	}
	return nil
}
