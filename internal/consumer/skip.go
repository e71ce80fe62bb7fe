package consumer

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

// DropGone drops the pending deliveries whose message the stream no
// longer holds (gone reports that for a stream sequence), as nats-server
// does when a message is deleted or purged (protocol.md section 5.4,
// stream removal), and returns how many it dropped.
func (s *State) DropGone(gone func(sseq uint64) bool) int {
	n := 0
	for sseq := range s.pending {
		if gone(sseq) {
			delete(s.pending, sseq)
			n++
		}
	}
	if n > 0 {
		s.moveAckFloor()
	}
	return n
}
