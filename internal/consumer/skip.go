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
