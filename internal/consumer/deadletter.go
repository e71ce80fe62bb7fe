package consumer

import (
	"maps"
	"math"
	"slices"

	"github.com/cairnmq/cairn/internal/store"
)

// Dead-letter marks (docs/dead-letter.md): a pending delivery whose
// message is being moved to the consumer's dead-letter subject, or a
// message out of deliveries (held, State) that a +TERM moves. The
// state machine only keeps the marks; the caller publishes the copies,
// waits for them to be durable and ends each mark with DeadLettered. A
// mark is stored with the state (store.ConsumerState.DeadLetter), so a
// move interrupted by a crash resumes after the restart.

// Move describes a dead-letter mark: the pending delivery's stream
// sequence, the consumer sequence of its first delivery (0 for a held
// message), its delivery count, the reason, and After
// (store.DeadLetter.After).
type Move struct {
	Stream     uint64
	Consumer   uint64
	Deliveries uint64
	Reason     store.DeadLetterReason
	After      uint64
}

// mark puts a dead-letter mark with reason on the pending delivery m at
// now (unix ns): it leaves the redelivery queue and is armed at its ack
// wait (at least 1 ns ahead, so that the Expire that marked it does not
// return it again), a safety net until the caller arms it
// (RetryMoveAt). The stored timestamp becomes the time of the mark.
func (s *State) mark(m *pendingMsg, reason store.DeadLetterReason, now int64) {
	m.setDead(reason)
	s.setMark(m.sseq, 0)
	if m.queued() {
		m.setQueued(false)
		s.rdq = slices.DeleteFunc(s.rdq, func(q uint64) bool { return q == m.sseq })
	}
	m.last = now
	m.deadline = now + max(int64(s.wait(m.count())), 1)
	m.flags |= pendingArmed
	s.deadlines.push(deadline{at: m.deadline, sseq: m.sseq})
}

// setMark records that sseq has a dead-letter mark, with after
// (State.marks).
func (s *State) setMark(sseq, after uint64) {
	if s.marks == nil {
		s.marks = map[uint64]uint64{}
	}
	s.marks[sseq] = after
}

// holdMark puts a dead-letter mark with reason and after on the held
// message sseq (out of deliveries, State), due at deadline (unix ns).
func (s *State) holdMark(sseq uint64, reason store.DeadLetterReason, after uint64, at int64) {
	if s.held == nil {
		s.held = map[uint64]*pendingMsg{}
	}
	m := &pendingMsg{sseq: sseq, deliveries: uint32(min(s.exhausted[sseq], math.MaxUint32)), deadline: at, flags: pendingArmed}
	m.setDead(reason)
	s.held[sseq] = m
	s.setMark(sseq, after)
	s.deadlines.push(deadline{at: at, sseq: sseq})
}

// MarkDeadLetter puts a dead-letter mark with reason on the pending
// delivery of sseq at now (unix ns), as +TERM does for a consumer whose
// dead-letter subject a stream captures, and reports whether it did:
// false when sseq is neither pending nor held, or is marked already. A
// message out of deliveries (held, State) was never moved, so a +TERM
// of it moves it too: it stays held, not pending (it does not count
// against max_ack_pending), with the mark armed like a delivery's
// (at least 1 ns ahead) until the caller arms it.
func (s *State) MarkDeadLetter(sseq uint64, reason store.DeadLetterReason, now int64) bool {
	if m := s.pending.get(sseq); m != nil {
		if m.dead() != 0 {
			return false
		}
		s.mark(m, reason, now)
		return true
	}
	if _, ok := s.exhausted[sseq]; !ok || s.held[sseq] != nil {
		return false
	}
	s.holdMark(sseq, reason, 0, now+max(int64(s.wait(s.exhausted[sseq])), 1))
	return true
}

// markOf returns the dead-letter mark of sseq (a pending delivery's or a
// held message's), nil when it has none.
func (s *State) markOf(sseq uint64) *pendingMsg {
	if _, ok := s.marks[sseq]; !ok {
		return nil
	}
	if m := s.pending.get(sseq); m != nil {
		if m.dead() == 0 {
			return nil
		}
		return m
	}
	return s.held[sseq]
}

// SetMoveAfter records After for the mark of sseq and reports whether
// sseq has a mark.
func (s *State) SetMoveAfter(sseq, after uint64) bool {
	if s.markOf(sseq) == nil {
		return false
	}
	s.marks[sseq] = after
	return true
}

// RetryMoveAt arms the mark of sseq for Expire to return (Retry) at at
// (unix ns), replacing its earlier time, and reports whether sseq has a
// mark.
func (s *State) RetryMoveAt(sseq uint64, at int64) bool {
	m := s.markOf(sseq)
	if m == nil {
		return false
	}
	m.deadline = at
	m.flags |= pendingArmed
	s.deadlines.push(deadline{at: at, sseq: sseq})
	return true
}

// Move returns the mark of sseq, false when it has none.
func (s *State) Move(sseq uint64) (Move, bool) {
	m := s.markOf(sseq)
	if m == nil {
		return Move{}, false
	}
	return Move{Stream: sseq, Consumer: m.cseq, Deliveries: m.count(), Reason: m.dead(), After: s.marks[sseq]}, true
}

// Moves returns every mark, by stream sequence.
func (s *State) Moves() []Move {
	var out []Move
	for _, sseq := range slices.Sorted(maps.Keys(s.marks)) {
		if mv, ok := s.Move(sseq); ok {
			out = append(out, mv)
		}
	}
	return out
}

// DeadLettered ends the mark of sseq once its copy is durable: the
// delivery counts as acknowledged, and the stream sequences acknowledged
// are returned (for interest and workqueue retention). A +TERM with ack
// policy all acknowledges like the +TERM it answers (Ack: everything
// pending at or below sseq that has no mark); otherwise only sseq leaves
// pending. A held message's mark releases it (also with ack policy all:
// its copy is stored, the move is done). Nil when sseq has no mark.
func (s *State) DeadLettered(sseq uint64) []uint64 {
	if s.held[sseq] != nil {
		s.release(sseq)
		return []uint64{sseq}
	}
	m := s.markOf(sseq)
	if m == nil {
		return nil
	}
	delete(s.marks, sseq)
	if m.dead() == store.DeadLetterTerm && (s.policy.Ack == AckAll || s.policy.Ack == AckFlowControl) {
		m.setDead(0)
		return s.Ack(sseq, m.cseq).Acked
	}
	s.pending.remove(sseq)
	s.moveAckFloor()
	return []uint64{sseq}
}

// Unmark ends the mark of sseq without a move, when no stream captures
// the dead-letter subject (any more), as if the consumer had no
// dead-letter subject: a delivery marked at max_deliver leaves pending
// for the messages out of deliveries (held, State; the ack floor
// stays), and a +TERM's mark acknowledges like the +TERM (DeadLettered:
// a held message is released). It returns the stream sequences
// acknowledged, for retention.
func (s *State) Unmark(sseq uint64) []uint64 {
	m := s.markOf(sseq)
	switch {
	case m == nil:
		return nil
	case m.dead() == store.DeadLetterTerm:
		return s.DeadLettered(sseq)
	case s.held[sseq] != nil:
		delete(s.held, sseq) // (not made by this build: a held message's mark is a +TERM's)
		delete(s.marks, sseq)
		return nil
	}
	n := m.count()
	delete(s.marks, sseq)
	s.pending.remove(sseq)
	s.exhaust(sseq, n)
	return nil
}

// forgetMarks drops from marks the stream sequences that no longer have
// a mark, after pending deliveries or held messages were dropped
// wholesale (SkipTo, DropGone).
func (s *State) forgetMarks() {
	for sseq := range s.marks {
		if m := s.pending.get(sseq); (m == nil || m.dead() == 0) && s.held[sseq] == nil {
			delete(s.marks, sseq)
		}
	}
}
