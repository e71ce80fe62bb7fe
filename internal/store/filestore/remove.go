package filestore

import (
	"slices"

	"github.com/cairnmq/cairn/internal/store"
)

// Delete removes the message at seq and returns once the removal is
// durable. A lost sequence (State().Lost) may be deleted too, which
// acknowledges its loss. It returns store.ErrNotFound when there is
// neither.
func (s *Store) Delete(seq uint64) error {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	before := s.mu.changes
	ok := s.removeLocked(seq) || s.forgetLostLocked(seq)
	gen := s.markLocked(before)
	s.mu.Unlock()
	if !ok {
		return store.ErrNotFound
	}
	return s.awaitGen(gen)
}

// DeleteMany removes the messages (and lost sequences, as Delete) at
// seqs, skipping those that hold neither, and returns how many it
// removed once all the removals are durable: one flusher batch holds
// them, so they cost one fsync rather than one each. Errors: those of
// Delete other than store.ErrNotFound.
func (s *Store) DeleteMany(seqs []uint64) (uint64, error) {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	before := s.mu.changes
	var n uint64
	for _, seq := range seqs {
		if s.removeLocked(seq) || s.forgetLostLocked(seq) {
			n++
		}
	}
	gen := s.markLocked(before)
	s.mu.Unlock()
	return n, s.awaitGen(gen)
}

// Purge removes what req selects (store.PlanPurge) and returns the number
// of messages removed once the removal is durable, a removal another
// caller made first too (markSettledLocked).
func (s *Store) Purge(req store.PurgeRequest) (uint64, error) {
	return s.mutateSettled(func() (uint64, error) {
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
	})
}

// Compact removes every message below seq and returns the number removed
// once the removal is durable, a removal another caller made first too
// (markSettledLocked: a Compact finding nothing left below seq returned
// at once while a concurrent one's removal was not yet durable, and a
// power loss then brought the messages back); Compact(0) removes
// everything, and a seq past LastSeq makes FirstSeq seq (LastSeq
// seq-1), like nats-server.
func (s *Store) Compact(seq uint64) (uint64, error) {
	return s.mutateSettled(func() (uint64, error) { return s.compactLocked(seq), nil })
}

// ExpireUpTo removes what has expired at now under store.Expire's rules
// (MaxAge, then per-message TTLs, leaving the last message of a subject
// for a marker when the limits ask for markers) and returns once the
// removals are durable.
func (s *Store) ExpireUpTo(now int64) (store.Expiry, error) {
	var res store.Expiry
	_, err := s.mutate(func() (uint64, error) {
		var err error
		res, err = store.Expire(s.mu.limits, &s.mu.expiry, expireView{s}, now)
		return res.Removed, err
	})
	return res, err
}

// mutate runs fn under the store lock and waits until what it changed is
// durable.
func (s *Store) mutate(fn func() (uint64, error)) (uint64, error) {
	return s.mutateMarked(fn, s.markLocked)
}

// mutateSettled is mutate for a change whose result is a state
// (markSettledLocked).
func (s *Store) mutateSettled(fn func() (uint64, error)) (uint64, error) {
	return s.mutateMarked(fn, s.markSettledLocked)
}

// mutateMarked runs fn under the store lock, then waits for the batch
// mark (markLocked or markSettledLocked) names.
func (s *Store) mutateMarked(fn func() (uint64, error), mark func(before uint64) uint64) (uint64, error) {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	before := s.mu.changes
	n, err := fn()
	gen := mark(before)
	s.mu.Unlock()
	if err != nil {
		return n, err
	}
	return n, s.awaitGen(gen)
}

// removeLocked removes the stored message at seq and reports whether there
// was one. The removal is recorded by raising the low water when seq was
// the first sequence, by a delete record otherwise.
func (s *Store) removeLocked(seq uint64) bool {
	g, i, ok := s.slotLocked(seq)
	if !ok || g.isDead(i) {
		return false
	}
	s.dropLocked(g, i, seq)
	s.mu.removals++
	s.recordRemovalLocked(seq)
	return true
}

// dropLocked removes the live slot i of g (sequence seq) from the index
// and the counts, recording nothing.
func (s *Store) dropLocked(g *segment, i int, seq uint64) {
	g.kill(i)
	s.mu.msgs--
	s.mu.bytes -= g.msgSize(i)
	s.unlinkLocked(g, i, seq)
}

// recordRemovalLocked moves FirstSeq past a removed seq and records the
// removal for the log: a raised low water or a delete record.
func (s *Store) recordRemovalLocked(seq uint64) {
	s.mu.changes++
	if seq == s.mu.first {
		s.advanceFirstLocked()
	}
	if seq < s.mu.first {
		s.raiseLowWaterLocked(s.mu.first)
		return
	}
	s.appendMarkerLocked(recDelete, seq)
}

// unlinkLocked updates the subject of the removed slot i (sequence seq).
func (s *Store) unlinkLocked(g *segment, i int, seq uint64) {
	info := s.mu.subj.get(s.mu.subj.name(g.sids[i]))
	info.msgs--
	switch {
	case info.msgs == 0:
		s.mu.subj.drop(info)
	case seq == info.first && info.msgs == 1 && !info.lastStale:
		info.first = info.last
	case seq == info.first:
		info.first = s.nextOfSubjectLocked(info, g, i)
	case seq == info.last:
		info.lastStale = true
		if info.msgs == 1 {
			info.last = info.first
			info.lastStale = false
		}
	}
}

// appendMarkerLocked appends a delete or compact record to the active
// segment, starting a new one when the active one is full (and holds a
// message, so that the new base differs).
func (s *Store) appendMarkerLocked(typ byte, seq uint64) {
	g := s.activeLocked()
	if len(g.offs) > 0 && g.size+RecordOverhead > s.cfg.BlockSize {
		g = s.rollLocked(s.mu.last + 1)
	}
	s.reserveLocked(g, RecordOverhead)
	g.appendMarker(typ, seq)
}

// raiseLowWaterLocked records that every sequence below lw is removed,
// forgets lost sequences below it, and dooms the front segments it
// covers. The compact record is written with the flusher's next batch.
func (s *Store) raiseLowWaterLocked(lw uint64) {
	if lw <= s.mu.lw {
		return
	}
	s.mu.lw = lw
	s.mu.changes++
	s.dropLostBelowLocked(lw)
	s.doomFrontLocked()
}

// doomFrontLocked moves the sealed front segments that hold no message
// and no lost sequence, and lie below the low water, to the doomed list:
// they are removed once the batch holding the low water is durable. A
// segment's sequences run up to the next segment's base: those past its
// last slot may be lost (its last records damaged), and its file holds
// what is left of them.
func (s *Store) doomFrontLocked() {
	for len(s.mu.segs) > 1 {
		g := s.mu.segs[0]
		if g.live > 0 || g.lost > 0 || s.mu.segs[1].base > s.mu.lw {
			return
		}
		s.mu.segs = s.mu.segs[1:]
		s.mu.doomed = append(s.mu.doomed, doomedSeg{seg: g, gen: s.mu.taken + 1, after: s.mu.posTaken})
	}
}

// advanceFirstLocked moves FirstSeq to the lowest stored or lost sequence
// at or after it, or past LastSeq when there is none.
func (s *Store) advanceFirstLocked() {
	next := s.nextLiveLocked(s.mu.first)
	if len(s.mu.lost) > 0 && (next == 0 || s.mu.lost[0].first < next) {
		next = s.mu.lost[0].first
	}
	if next == 0 {
		next = s.mu.last + 1
	}
	s.mu.first = next
}

// nextLiveLocked returns the lowest stored sequence >= seq, or 0.
func (s *Store) nextLiveLocked(seq uint64) uint64 {
	k := max(s.segIndexLocked(seq), 0)
	for ; k < len(s.mu.segs); k++ {
		g := s.mu.segs[k]
		i := 0
		if seq > g.base {
			i = int(min(seq-g.base, uint64(len(g.offs))))
		}
		if j := g.nextLive(i); j >= 0 {
			return g.base + uint64(j)
		}
	}
	return 0
}

// firstLiveLocked returns the lowest stored sequence, or 0.
func (s *Store) firstLiveLocked() uint64 {
	if s.mu.msgs == 0 {
		return 0
	}
	return s.nextLiveLocked(s.mu.first)
}

// purgeAllLocked removes everything and makes FirstSeq LastSeq+1.
func (s *Store) purgeAllLocked() uint64 {
	return s.emptyFromLocked(s.mu.last + 1)
}

// compactLocked removes every message below seq, following memstore:
// seq 0 purges all, seq past LastSeq purges all and makes FirstSeq seq,
// seq at or below FirstSeq removes nothing.
func (s *Store) compactLocked(seq uint64) uint64 {
	switch {
	case seq == 0:
		return s.purgeAllLocked()
	case seq > s.mu.last:
		return s.emptyFromLocked(seq)
	}
	var n uint64
	for live := s.firstLiveLocked(); live != 0 && live < seq; live = s.firstLiveLocked() {
		s.removeLocked(live)
		n++
	}
	if seq > s.mu.first && len(s.mu.lost) > 0 && s.mu.lost[0].first < seq {
		s.dropLostBelowLocked(seq)
		s.advanceFirstLocked()
		s.raiseLowWaterLocked(s.mu.first)
	}
	return n
}

// emptyFromLocked removes every message and lost sequence and makes
// FirstSeq first (raising LastSeq to first-1 when first is past it). A new
// active segment starts at first, its header holding the new low water, so
// that every older segment can be removed.
func (s *Store) emptyFromLocked(first uint64) uint64 {
	n := s.mu.msgs
	s.mu.removals += n
	s.mu.last = max(s.mu.last, first-1)
	s.mu.msgs, s.mu.bytes, s.mu.first = 0, 0, first
	s.mu.subj.reset()
	s.mu.lost = nil
	s.mu.lw = max(s.mu.lw, first)
	s.mu.changes++
	if g := s.activeLocked(); len(g.offs) > 0 || g.base != first {
		s.rollLocked(first)
	}
	for _, g := range s.mu.segs[:len(s.mu.segs)-1] {
		g.live, g.lost = 0, 0
	}
	s.doomFrontLocked()
	return n
}

// purgeMatchingLocked carries out a store.PurgeMatching plan.
func (s *Store) purgeMatchingLocked(plan store.PurgePlan) uint64 {
	m := s.newMatcherLocked([]string{plan.Filter})
	var n uint64
	for seq := s.mu.first; ; seq++ {
		seq = s.nextMatchLocked(m, seq)
		if seq == 0 || (plan.Below > 0 && seq >= plan.Below) {
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

// countLocked returns the number of stored messages matching filter.
func (s *Store) countLocked(filter string) uint64 {
	if store.IsFilterAll(filter) {
		return s.mu.msgs
	}
	var n uint64
	for subj, info := range s.mu.subj.byName {
		if store.MatchFilter(subj, filter) {
			n += info.msgs
		}
	}
	return n
}

// expireView lets store.Expire work on a locked Store.
type expireView struct{ s *Store }

func (v expireView) NextStored(seq uint64) uint64 {
	if v.s.mu.msgs == 0 {
		return 0
	}
	return v.s.nextLiveLocked(max(seq, v.s.mu.first))
}

// AgeExpired reads the message's time unless its whole segment has
// expired; a record found corrupt becomes a lost sequence (gone).
func (v expireView) AgeExpired(seq uint64, now int64) (bool, bool, int64, error) {
	s := v.s
	g, _, _ := s.slotLocked(seq)
	if store.Expired(s.mu.limits, g.maxTime, now) {
		return true, false, 0, nil
	}
	t, cerr, err := s.msgTimeLocked(seq)
	if err != nil {
		return false, false, 0, err
	}
	if cerr != nil {
		s.markCorruptLocked(seq, cerr)
		return false, true, 0, nil
	}
	return store.Expired(s.mu.limits, t, now), false, t, nil
}

func (v expireView) Subject(seq uint64) string {
	g, i, _ := v.s.slotLocked(seq)
	return v.s.mu.subj.name(g.sids[i])
}

func (v expireView) SubjectMsgs(subj string) uint64 { return v.s.subjectMsgsLocked(subj) }

// IsMarker reads the message's header; a message stored without one is
// no marker, and a record found corrupt is treated as none.
func (v expireView) IsMarker(seq uint64) (bool, error) {
	g, i, _ := v.s.slotLocked(seq)
	if g.lens[i]&hdrBit == 0 {
		return false, nil
	}
	rec, cerr, err := v.s.recordLocked(seq)
	if err != nil || cerr != nil {
		return false, err
	}
	return store.IsDeleteMarker(rec.hdr), nil
}

func (v expireView) Stored(seq uint64) bool { return v.s.liveLocked(seq) }

func (v expireView) Remove(seq uint64) { v.s.removeLocked(seq) }

// rebuildTTLLocked makes the TTL index hold the TTLs of the stored
// messages when on (reading every record stored with a header), nothing
// when off. A record that cannot be read contributes nothing; reads
// report it.
func (s *Store) rebuildTTLLocked(on bool) {
	s.mu.expiry = store.ExpireState{}
	if !on {
		return
	}
	for seq := s.firstLiveLocked(); seq != 0; seq = s.nextLiveLocked(seq + 1) {
		g, i, _ := s.slotLocked(seq)
		if g.lens[i]&hdrBit == 0 {
			continue
		}
		if rec, cerr, err := s.recordLocked(seq); err == nil && cerr == nil {
			s.mu.expiry.TTL.Add(seq, rec.time, rec.hdr)
		}
	}
}

// enforcer lets package store's limit functions work on a locked Store.
type enforcer struct{ s *Store }

func (e enforcer) Totals() (uint64, uint64) { return e.s.mu.msgs, e.s.mu.bytes }

func (e enforcer) SubjectMsgs(subj string) uint64 { return e.s.subjectMsgsLocked(subj) }

func (e enforcer) SubjectsOver(n uint64) []string {
	var out []string
	for subj, info := range e.s.mu.subj.byName {
		if info.msgs > n {
			out = append(out, subj)
		}
	}
	slices.Sort(out)
	return out
}

func (e enforcer) RemoveOldest() error {
	e.s.removeLocked(e.s.firstLiveLocked())
	return nil
}

func (e enforcer) RemoveSubjectOldest(subj string) error {
	if info := e.s.mu.subj.get(subj); info != nil {
		e.s.removeLocked(info.first)
	}
	return nil
}
