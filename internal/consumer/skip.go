package consumer

import (
	"cmp"
	"slices"
)

// SkipTo notes that the stream holds nothing below seq any more (after a
// purge or compact): deliveries pending below seq are dropped (as if
// terminated, nats-server v2.15.2's ack wait, backoff and max_deliver redelivery) and messages out of deliveries
// below seq are released; when the delivered stream sequence is below
// seq-1 it moves to seq-1, and the ack floor follows. It reports whether
// the state changed.
func (s *State) SkipTo(seq uint64) bool {
	if seq == 0 {
		return false
	}
	gone, _ := s.pending.removeUpTo(seq-1, 0)
	dropped := len(gone) > 0
	released := false
	for sseq := range s.exhausted {
		if sseq < seq {
			s.release(sseq)
			released = true
		}
	}
	if s.delivered.Stream < seq-1 {
		s.delivered.Stream = seq - 1
		dropped = true
	}
	if dropped || released {
		s.forgetMarks()
	}
	if dropped {
		s.moveAckFloor()
	}
	return dropped || released
}

// Dropped is a pending delivery dropped because the stream no longer
// holds its message: its stream sequence, the consumer sequence of its
// first delivery and the number of deliveries, the fields of the
// MSG_TERMINATED advisory nats-server v2.15.2 sends for it
// (decStreamPending). Exhausted marks a message that had run out of
// deliveries (State): it was not pending, Consumer is 0, and nats-server
// sends no advisory for it.
type Dropped struct {
	Stream, Consumer, Deliveries uint64
	Exhausted                    bool
}

// DropGone drops the pending deliveries whose message the stream no
// longer holds (gone reports that for a stream sequence), as nats-server
// does when a message is deleted, expires or is purged (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery, stream removal), and releases the messages out of
// deliveries that are gone; it returns both by stream sequence.
func (s *State) DropGone(gone func(sseq uint64) bool) []Dropped {
	var out []Dropped
	moved := s.pending.removeIf(func(m *pendingMsg) bool {
		if !gone(m.sseq) {
			return false
		}
		out = append(out, Dropped{Stream: m.sseq, Consumer: m.cseq, Deliveries: m.count()})
		return true
	}) > 0
	for sseq, n := range s.exhausted {
		if gone(sseq) {
			out = append(out, Dropped{Stream: sseq, Deliveries: n, Exhausted: true})
			s.release(sseq)
		}
	}
	if len(out) > 0 {
		s.forgetMarks()
	}
	if moved {
		s.moveAckFloor()
	}
	if len(out) > 0 {
		slices.SortFunc(out, func(a, b Dropped) int { return cmp.Compare(a.Stream, b.Stream) })
	}
	return out
}
