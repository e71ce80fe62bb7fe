package filestore

import (
	"fmt"
	"testing"
)

// check verifies every invariant of the index (docs/architecture.md rule 5:
// the expensive whole-structure check, run by tests after each mutation).
func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkSegmentsLocked(); err != nil {
		return err
	}
	if err := s.checkSubjectsLocked(); err != nil {
		return err
	}
	if err := s.checkLostLocked(); err != nil {
		return err
	}
	return s.checkEndsLocked()
}

// checkSegmentsLocked verifies each segment's slots and the totals.
func (s *Store) checkSegmentsLocked() error {
	var msgs, bytes uint64
	for k, g := range s.mu.segs {
		if k+1 < len(s.mu.segs) && (g.end() > s.mu.segs[k+1].base || !g.sealed) {
			return fmt.Errorf("segment %d (base %d, end %d, sealed %v) before base %d", k, g.base, g.end(), g.sealed, s.mu.segs[k+1].base)
		}
		live, lost := 0, 0
		for i := range g.offs {
			seq := g.base + uint64(i)
			if _, ok := s.lostAtLocked(seq); ok {
				lost++
			}
			if g.isDead(i) {
				continue
			}
			if g.offs[i] == 0 || seq < s.mu.lw {
				return fmt.Errorf("live slot %d without record or below low water %d", seq, s.mu.lw)
			}
			live++
			msgs++
			bytes += g.msgSize(i)
		}
		if live != g.live || lost != g.lost {
			return fmt.Errorf("segment %d counts live %d lost %d, slots say %d, %d", g.base, g.live, g.lost, live, lost)
		}
	}
	if msgs != s.mu.msgs || bytes != s.mu.bytes {
		return fmt.Errorf("msgs %d bytes %d, slots say %d, %d", s.mu.msgs, s.mu.bytes, msgs, bytes)
	}
	if s.activeLocked().sealed {
		return fmt.Errorf("active segment sealed")
	}
	return nil
}

// checkSubjectsLocked verifies the subject map against the live slots.
func (s *Store) checkSubjectsLocked() error {
	type agg struct{ n, first, last uint64 }
	want := map[string]*agg{}
	for _, g := range s.mu.segs {
		for j := g.nextLive(0); j >= 0; j = g.nextLive(j + 1) {
			subj := s.mu.subj.name(g.sids[j])
			seq := g.base + uint64(j)
			a := want[subj]
			if a == nil {
				a = &agg{first: seq}
				want[subj] = a
			}
			a.n++
			a.last = seq
		}
	}
	if len(want) != len(s.mu.subj.byName) {
		return fmt.Errorf("%d subjects in the map, %d stored", len(s.mu.subj.byName), len(want))
	}
	for subj, a := range want {
		info := s.mu.subj.get(subj)
		switch {
		case info == nil || info.msgs != a.n || info.first != a.first:
			return fmt.Errorf("subject %q: info %+v, slots say %+v", subj, info, *a)
		case info.lastStale && info.last < a.last, !info.lastStale && info.last != a.last:
			return fmt.Errorf("subject %q: last %d (stale %v), slots say %d", subj, info.last, info.lastStale, a.last)
		}
	}
	return nil
}

// checkLostLocked verifies the lost spans.
func (s *Store) checkLostLocked() error {
	prev := uint64(0)
	for _, l := range s.mu.lost {
		if l.first > l.last || l.first <= prev || l.first < s.mu.lw || l.last > s.mu.last {
			return fmt.Errorf("bad lost span %d-%d (low water %d, last %d)", l.first, l.last, s.mu.lw, s.mu.last)
		}
		for seq := l.first; seq <= l.last; seq++ {
			if s.liveLocked(seq) {
				return fmt.Errorf("lost sequence %d is stored", seq)
			}
		}
		prev = l.last
	}
	return nil
}

// checkEndsLocked verifies FirstSeq, LastSeq and the low water.
func (s *Store) checkEndsLocked() error {
	want := s.firstLiveLocked()
	if len(s.mu.lost) > 0 && (want == 0 || s.mu.lost[0].first < want) {
		want = s.mu.lost[0].first
	}
	if want == 0 {
		want = s.mu.last + 1
		if s.mu.first == 0 && s.mu.last == 0 && s.mu.lw == 0 {
			want = 0
		}
	}
	if s.mu.first != want {
		return fmt.Errorf("first %d, want %d", s.mu.first, want)
	}
	g := s.activeLocked()
	if g.end() > s.mu.last+1 || s.mu.lw > s.mu.last+1 {
		return fmt.Errorf("last %d below active end %d or low water %d", s.mu.last, g.end(), s.mu.lw)
	}
	return nil
}

// mustCheck fails the test when s breaks an invariant.
func mustCheck(t testing.TB, s *Store, after string) {
	t.Helper()
	if err := s.check(); err != nil {
		t.Fatalf("after %s: %v", after, err)
	}
}
