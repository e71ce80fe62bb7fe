package consumer

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

// SkipTo after a purge: pending deliveries below the new first sequence
// go, the delivered and ack floor stream sequences move up, and a
// delivery above it stays pending.
func TestSkipTo(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 30e9}, 1)
	for seq := uint64(1); seq <= 5; seq++ {
		s.DeliverNew(seq, 0)
	}
	s.SkipTo(4)
	if s.NumAckPending() != 2 || s.IsPending(3) || !s.IsPending(4) || !s.IsPending(5) {
		t.Fatalf("pending after SkipTo(4): %d", s.NumAckPending())
	}
	if got := s.AckFloor(); got.Stream != 3 {
		t.Errorf("ack floor %+v, want stream 3", got)
	}
	s.SkipTo(10)
	want := store.SequencePair{Consumer: 5, Stream: 9}
	if s.NumAckPending() != 0 || s.Delivered() != want || s.AckFloor() != want {
		t.Errorf("after SkipTo(10): pending %d delivered %+v floor %+v, want %+v", s.NumAckPending(), s.Delivered(), s.AckFloor(), want)
	}
	if s.NextSeq() != 10 {
		t.Errorf("NextSeq %d, want 10", s.NextSeq())
	}
	s.SkipTo(3) // below: nothing changes
	if s.Delivered() != want {
		t.Errorf("SkipTo below moved delivered to %+v", s.Delivered())
	}
}

// DropGone: deliveries of deleted messages leave pending, so they no
// longer count against max_ack_pending.
func TestDropGone(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 30e9, MaxAckPending: 2}, 1)
	s.DeliverNew(1, 0)
	s.DeliverNew(2, 0)
	if !s.AtAckLimit() {
		t.Fatal("not at the ack limit with 2 pending")
	}
	if ds := s.DropGone(func(seq uint64) bool { return seq == 1 }); len(ds) != 1 || ds[0] != (Dropped{Stream: 1, Consumer: 1, Deliveries: 1}) {
		t.Fatalf("dropped %+v, want stream 1, consumer 1, 1 delivery", ds)
	}
	if s.AtAckLimit() || s.IsPending(1) || !s.IsPending(2) {
		t.Errorf("after dropping 1: at limit %v, pending 1 %v, 2 %v", s.AtAckLimit(), s.IsPending(1), s.IsPending(2))
	}
	if got := s.AckFloor(); got.Stream != 1 {
		t.Errorf("ack floor %+v, want stream 1", got)
	}
}
