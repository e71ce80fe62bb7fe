package consumer

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

func applyOp(s *State, op Op) Outcome {
	var out Outcome
	s.ApplyOp(op, &out)
	return out
}

// ApplyOp reports what each operation did: an ack-none delivery is
// acknowledged as delivered; a NAK at max_deliver ends the deliveries;
// a +TERM of nothing pending changes nothing; Drop drops what it names.
func TestApplyOpOutcomes(t *testing.T) {
	none := NewState(Policy{Ack: AckNone}, 1)
	if out := applyOp(none, &Deliver{Stream: 1, Time: t0}); len(out.Acked) != 1 || out.Acked[0] != 1 || out.Delivery.ConsumerSeq != 1 {
		t.Fatalf("ack none delivery: %+v, want seq 1 acknowledged", out)
	}

	s := NewState(Policy{Ack: AckExplicit, AckWait: time.Second, MaxDeliver: 2}, 1)
	for seq := uint64(1); seq <= 3; seq++ {
		if out := applyOp(s, &Deliver{Stream: seq, Time: t0}); out.Delivery.ConsumerSeq != seq || len(out.Acked) != 0 {
			t.Fatalf("delivery %d: %+v", seq, out)
		}
	}
	if out := applyOp(s, &Nak{Stream: 1, Time: t0}); !out.Changed || len(out.Exhausted) != 0 {
		t.Fatalf("first nak: %+v, want redelivery", out)
	}
	if out := applyOp(s, &Redeliver{Stream: 1, Time: t0 + sec}); out.Delivery.Deliveries != 2 {
		t.Fatalf("redelivery: %+v", out)
	}
	if out := applyOp(s, &Nak{Stream: 1, Time: t0 + sec}); len(out.Exhausted) != 1 || out.Exhausted[0].Stream != 1 {
		t.Fatalf("nak at max_deliver: %+v, want exhausted", out)
	}
	if out := applyOp(s, &Term{Stream: 9, Consumer: 9}); out.Changed || len(out.Acked) != 0 {
		t.Fatalf("term of nothing: %+v", out)
	}
	if out := applyOp(s, &Term{Stream: 2, Consumer: 2}); !out.Changed || len(out.Acked) != 1 {
		t.Fatalf("term of 2: %+v", out)
	}
	if out := applyOp(s, &Drop{Seqs: []uint64{3, 1}}); len(out.Dropped) != 2 || out.Dropped[0].Stream != 1 || !out.Dropped[0].Exhausted || out.Dropped[1].Stream != 3 {
		t.Fatalf("drop: %+v, want 1 (held) and 3 (pending)", out)
	}
	if s.NumAckPending() != 0 || s.NumExhausted() != 0 || s.AckFloor().Stream != 3 {
		t.Fatalf("after the drop: %d pending, %d held, floor %+v", s.NumAckPending(), s.NumExhausted(), s.AckFloor())
	}
	applyOp(s, &Pause{Until: t0 + 60*sec})
	if s.PausedUntil() != t0+60*sec {
		t.Fatalf("paused until %d", s.PausedUntil())
	}
	if out := applyOp(s, &Pause{Until: t0 + 60*sec}); out.Changed {
		t.Fatal("the same pause again changed the state")
	}
	if got := s.Select(func(uint64) bool { return true }); len(got) != 0 {
		t.Fatalf("Select on an empty state: %v", got)
	}
}

// Select lists pending and held sequences, ascending, and changes
// nothing.
func TestSelect(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: time.Second, MaxDeliver: 1}, 1)
	for seq := uint64(1); seq <= 5; seq++ {
		applyOp(s, &Deliver{Stream: seq, Time: t0})
	}
	applyOp(s, &ExpireAcks{Time: t0 + 2*sec}) // all five out of deliveries
	applyOp(s, &Deliver{Stream: 6, Time: t0 + 2*sec})
	before := s.Snapshot()
	got := s.Select(func(seq uint64) bool { return seq%2 == 0 })
	if !reflect.DeepEqual(got, []uint64{2, 4, 6}) {
		t.Fatalf("Select: %v, want [2 4 6]", got)
	}
	if !reflect.DeepEqual(before, s.Snapshot()) {
		t.Fatal("Select changed the state")
	}
}

// Replaying the same operations, one state directly and one through
// their byte form, gives the same state: a replica fed the log reaches
// the leader's state (docs/engine.md).
func TestApplyOpDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 13))
		p := Policy{Ack: AckPolicy(1 + rng.IntN(2)), AckWait: time.Duration(1+rng.IntN(5)) * time.Second, MaxDeliver: rng.IntN(4) - 1, MaxAckPending: rng.IntN(20)}
		a, b := NewState(p, 1), NewState(p, 1)
		now, next := t0, uint64(1)
		for range 400 {
			now += int64(rng.IntN(1500)) * int64(time.Millisecond)
			op := randomOp(rng, a, &next, now)
			applyOp(a, op)
			enc, err := AppendOp(nil, op)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := DecodeOp(enc)
			if err != nil {
				t.Fatal(err)
			}
			applyOp(b, dec)
		}
		if !reflect.DeepEqual(a.Snapshot(), b.Snapshot()) || a.PausedUntil() != b.PausedUntil() {
			t.Fatalf("seed %d: states differ:\n%+v\n%+v", seed, a.Snapshot(), b.Snapshot())
		}
	}
}

// A Reset operation empties the delivery state and restarts it at its
// sequence; the policy, the pause and the dead-letter switch stay, and
// the stored state changed (Dirty).
func TestApplyOpReset(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: time.Second, MaxDeliver: 1}, 1)
	s.SetDeadLetter(true)
	for seq := uint64(1); seq <= 3; seq++ {
		applyOp(s, &Deliver{Stream: seq, Time: t0})
	}
	applyOp(s, &ExpireAcks{Time: t0 + 2*sec})
	applyOp(s, &Pause{Until: t0 + 60*sec})
	out := applyOp(s, &Reset{Stream: 2})
	if !out.Changed || !out.Dirty {
		t.Fatalf("reset: %+v, want changed and dirty", out)
	}
	if s.NumAckPending() != 0 || s.NumExhausted() != 0 || s.Delivered() != (store.SequencePair{Stream: 1}) || s.AckFloor() != (store.SequencePair{Stream: 1}) {
		t.Fatalf("after the reset: %d pending, %d held, delivered %+v, floor %+v", s.NumAckPending(), s.NumExhausted(), s.Delivered(), s.AckFloor())
	}
	if s.PausedUntil() != t0+60*sec || !s.DeadLetterOn() {
		t.Fatalf("the reset lost the pause (%d) or the dead-letter switch (%v)", s.PausedUntil(), s.DeadLetterOn())
	}
	if d := applyOp(s, &Deliver{Stream: 2, Time: t0 + 3*sec}).Delivery; d.ConsumerSeq != 1 {
		t.Fatalf("first delivery after the reset: consumer sequence %d, want 1", d.ConsumerSeq)
	}
}

// randomOp returns a random consumer operation for state s at now,
// delivering from *next on.
func randomOp(rng *rand.Rand, s *State, next *uint64, now int64) Op {
	var op Op
	switch rng.IntN(11) {
	case 0, 1:
		op = &Deliver{Stream: *next, Time: now}
		*next++
	case 2:
		if seq, ok := s.NextRedelivery(); ok {
			op = &Redeliver{Stream: seq, Time: now}
		} else {
			op = &ExpireAcks{Time: now}
		}
	case 3:
		op = &Ack{Stream: 1 + rng.Uint64N(*next), Consumer: 1 + rng.Uint64N(*next)}
	case 4:
		op = &Nak{Stream: 1 + rng.Uint64N(*next), Delay: time.Duration(rng.IntN(3)) * time.Second, Time: now}
	case 5:
		op = &Term{Stream: 1 + rng.Uint64N(*next)}
	case 6:
		op = &Progress{Stream: 1 + rng.Uint64N(*next), Time: now}
	case 7:
		op = &ExpireAcks{Time: now}
	case 8:
		op = &Drop{Seqs: []uint64{1 + rng.Uint64N(*next), 1 + rng.Uint64N(*next)}}
	case 9:
		op = &SkipTo{Stream: rng.Uint64N(*next)}
	case 10:
		op = &DeadLetter{Step: DeadLetterMark, Stream: 1 + rng.Uint64N(*next), Reason: store.DeadLetterTerm, Value: now}
	}
	return op
}
