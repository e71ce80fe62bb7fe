package filestore

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/cairnmq/cairn/internal/store"
)

// skipSlotsPerByte is the share of Config.BlockSize that bounds the
// slots of a segment a skip may fill with removed slots (16 bytes each,
// like a deleted message): BlockSize/64 slots, whose index takes a
// quarter of BlockSize (128Ki slots, 2 MiB, with the default 8 MiB). A
// skip that would take the active segment past it leaves its sequences
// without a slot, at no cost per sequence, and the next append starts a
// new segment. nats-server's SkipMsgs likewise starts a new block past
// 64Ki deletes.
const skipSlotsPerByte = 64

// SkipTo makes seq the sequence the next Append assigns
// (store.Store.SkipTo). In a store with no message and nothing lost it
// raises the low water to seq, like Compact past the end: FirstSeq
// becomes seq. Otherwise it appends a skip record naming LastSeq+1 ..
// seq-1, which stay gaps. seq = LastSeq+1 changes nothing; seq <= LastSeq
// or seq = math.MaxUint64 is store.ErrBadRequest; after an I/O error it
// returns store.ErrFenced. Like Append it does no I/O: WaitDurable(seq-1)
// waits for the record (DurableSeq then reports at least seq-1).
func (s *Store) SkipTo(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	from := s.mu.last + 1
	switch {
	case seq < from || seq == math.MaxUint64:
		return fmt.Errorf("%w: skip to sequence %d with last sequence %d", store.ErrBadRequest, seq, s.mu.last)
	case seq == from:
		return nil
	}
	if s.mu.msgs == 0 && len(s.mu.lost) == 0 {
		s.mu.first = seq
		s.raiseLowWaterLocked(seq)
	} else {
		s.appendSkipLocked(from, seq)
	}
	s.mu.last = seq - 1
	s.fillSkipLocked(from, seq)
	s.mu.changes++
	s.kickLocked()
	return nil
}

// appendSkipLocked appends the skip record of from..seq-1 to the active
// segment, starting a new one (at from) when the active one is full.
func (s *Store) appendSkipLocked(from, seq uint64) {
	g := s.activeLocked()
	if len(g.offs) > 0 && g.size+skipRecordSize > s.cfg.BlockSize {
		g = s.rollLocked(from)
	}
	s.reserveLocked(g, skipRecordSize)
	var p [8]byte
	le.PutUint64(p[:], from)
	g.appendRec(recSkip, 0, seq, 0, "", nil, p[:])
}

// fillSkipLocked gives the skipped sequences from..seq-1 removed slots in
// the active segment when its slots reach from and the skip fits the
// budget (skipSlotsPerByte), so that the next append continues the segment. Otherwise they
// get no slot.
func (s *Store) fillSkipLocked(from, seq uint64) {
	g := s.activeLocked()
	if g.end() != from || uint64(len(g.offs))+(seq-from) > uint64(s.cfg.BlockSize/skipSlotsPerByte) {
		return
	}
	g.reserveSlots(int(seq - from))
	for g.end() < seq {
		g.addSlot(0, 0, 0)
	}
}

// appendSkipRecord appends a skip record to buf (see appendRecord): seq
// is the next sequence to assign, the payload the first one skipped. The
// store appends skip records with segment.appendRec, as appendSkipLocked
// does; the tests build records with this.
func appendSkipRecord(buf []byte, base, from, seq uint64) []byte {
	var p [8]byte
	le.PutUint64(p[:], from)
	return appendRecord(buf, base, recSkip, seq, 0, "", nil, p[:])
}

// validSkip reports whether the record r (which passed the generic
// checks) has a skip record's shape: no subject or header, a u64 payload
// F with 1 <= F < seq.
func validSkip(r []byte) bool {
	if len(r) != skipRecordSize || le.Uint16(r[6:]) != 0 || le.Uint32(r[24:]) != 0 {
		return false
	}
	from := le.Uint64(r[recordFixed:])
	return from >= 1 && from < le.Uint64(r[8:])
}

// seqSpan is an inclusive range of sequences.
type seqSpan struct{ first, last uint64 }

// skip replays a skip record: its sequences are accounted for, and
// LastSeq is at least its seq-1.
func (r *recovery) skip(rec record) {
	r.skips = append(r.skips, seqSpan{first: le.Uint64(rec.data), last: rec.seq - 1})
	r.skipEnd = max(r.skipEnd, rec.seq)
}

// sortSkips sorts the skipped spans and merges those that touch, so that
// skippedThrough can search them.
func (r *recovery) sortSkips() {
	slices.SortFunc(r.skips, func(a, b seqSpan) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	out := r.skips[:0]
	for _, sp := range r.skips {
		if n := len(out); n > 0 && sp.first <= out[n-1].last+1 {
			out[n-1].last = max(out[n-1].last, sp.last)
			continue
		}
		out = append(out, sp)
	}
	r.skips = out
}

// skippedThrough returns the last sequence of the skipped span holding
// seq, or 0 when no skip record names seq.
func (r *recovery) skippedThrough(seq uint64) uint64 {
	k := sort.Search(len(r.skips), func(i int) bool { return r.skips[i].last >= seq })
	if k < len(r.skips) && r.skips[k].first <= seq {
		return r.skips[k].last
	}
	return 0
}
