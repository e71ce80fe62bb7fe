package filestore

import (
	"fmt"

	"github.com/cairnmq/cairn/internal/store"
)

// lostSpan is a range of sequences found damaged or missing: they are
// never served, and every load of them fails with a *store.CorruptError.
type lostSpan struct {
	first, last uint64 // inclusive
	bytes       uint64 // damaged bytes, as far as known
	where       string
	reason      string
}

// corruptError returns the error that reports the span, narrowed to the
// sequences from seq on.
func (l lostSpan) corruptError(seq uint64) error {
	return &store.CorruptError{First: max(l.first, seq), Last: l.last, Where: l.where, Reason: l.reason}
}

// lostAtLocked returns the lost span holding seq.
func (s *Store) lostAtLocked(seq uint64) (lostSpan, bool) {
	for _, l := range s.mu.lost {
		if seq >= l.first && seq <= l.last {
			return l, true
		}
	}
	return lostSpan{}, false
}

// lostFromLocked returns the first lost span ending at or after seq.
func (s *Store) lostFromLocked(seq uint64) (lostSpan, bool) {
	for _, l := range s.mu.lost {
		if l.last >= seq {
			return l, true
		}
	}
	return lostSpan{}, false
}

// addLostLocked records a lost span (kept sorted; spans never overlap) and
// counts it in the segments whose slots it covers.
func (s *Store) addLostLocked(l lostSpan) {
	i := 0
	for i < len(s.mu.lost) && s.mu.lost[i].first < l.first {
		i++
	}
	s.mu.lost = append(s.mu.lost, lostSpan{})
	copy(s.mu.lost[i+1:], s.mu.lost[i:])
	s.mu.lost[i] = l
	s.countLostLocked(l.first, l.last, 1)
}

// countLostLocked adds d to the lost count of every slot in first..last.
func (s *Store) countLostLocked(first, last uint64, d int) {
	for _, g := range s.mu.segs {
		lo, hi := max(first, g.base), min(last+1, g.end())
		if lo < hi {
			g.lost += d * int(hi-lo)
		}
	}
}

// forgetLostLocked removes seq from the lost spans, records its removal
// (a delete record or a raised low water) and reports whether it was lost.
func (s *Store) forgetLostLocked(seq uint64) bool {
	for i, l := range s.mu.lost {
		if seq < l.first || seq > l.last {
			continue
		}
		s.countLostLocked(seq, seq, -1)
		var parts []lostSpan
		if seq > l.first {
			parts = append(parts, lostSpan{first: l.first, last: seq - 1, where: l.where, reason: l.reason})
		}
		if seq < l.last {
			parts = append(parts, lostSpan{first: seq + 1, last: l.last, where: l.where, reason: l.reason})
		}
		s.mu.lost = append(s.mu.lost[:i], append(parts, s.mu.lost[i+1:]...)...)
		s.recordRemovalLocked(seq)
		return true
	}
	return false
}

// dropLostBelowLocked forgets every lost sequence below lw: a removal at
// the front (limits, Compact, purge) covers them.
func (s *Store) dropLostBelowLocked(lw uint64) {
	keep := s.mu.lost[:0]
	for _, l := range s.mu.lost {
		if l.first < lw {
			s.countLostLocked(l.first, min(l.last, lw-1), -1)
			l.first = lw
		}
		if l.first <= l.last {
			keep = append(keep, l)
		}
	}
	s.mu.lost = keep
}

// lostReportLocked returns State().Lost: every lost sequence and the
// damaged bytes, or nil.
func (s *Store) lostReportLocked() *store.Lost {
	if len(s.mu.lost) == 0 {
		return nil
	}
	out := &store.Lost{}
	for _, l := range s.mu.lost {
		for seq := l.first; seq <= l.last; seq++ {
			out.Msgs = append(out.Msgs, seq)
		}
		out.Bytes += l.bytes
	}
	return out
}

// String describes the span for logs.
func (l lostSpan) String() string {
	return fmt.Sprintf("%s at %s: %s", store.SeqRange(l.first, l.last), l.where, l.reason)
}
