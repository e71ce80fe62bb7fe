package consumer

import (
	"cmp"
	"slices"
)

// SkipTo notes that the stream holds nothing below seq any more (after a
// purge or compact): deliveries pending below seq are dropped (as if
// terminated, protocol.md section 5.4), and when the delivered stream
// sequence is below seq-1 it moves to seq-1; the ack floor follows.
func (s *State) SkipTo(seq uint64) {
	if seq == 0 {
		return
	}
	dropped := false
	for sseq := range s.pending {
		if sseq < seq {
			delete(s.pending, sseq)
			dropped = true
		}
	}
	if s.delivered.Stream < seq-1 {
		s.delivered.Stream = seq - 1
		dropped = true
	}
	if dropped {
		s.moveAckFloor()
	}
}

// Dropped is a pending delivery dropped because the stream no longer
// holds its message: its stream sequence, the consumer sequence of its
// first delivery and the number of deliveries, the fields of the
// MSG_TERMINATED advisory nats-server v2.15.2 sends for it
// (decStreamPending).
type Dropped struct {
	Stream, Consumer, Deliveries uint64
}

// DropGone drops the pending deliveries whose message the stream no
// longer holds (gone reports that for a stream sequence), as nats-server
// does when a message is deleted, expires or is purged (protocol.md
// section 5.4, stream removal), and returns them by stream sequence.
func (s *State) DropGone(gone func(sseq uint64) bool) []Dropped {
	var out []Dropped
	for sseq, m := range s.pending {
		if gone(sseq) {
			out = append(out, Dropped{Stream: sseq, Consumer: m.cseq, Deliveries: m.deliveries})
			delete(s.pending, sseq)
		}
	}
	if len(out) > 0 {
		s.moveAckFloor()
		slices.SortFunc(out, func(a, b Dropped) int { return cmp.Compare(a.Stream, b.Stream) })
	}
	return out
}
