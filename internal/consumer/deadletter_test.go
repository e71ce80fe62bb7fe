package consumer

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// The dead-letter marks of docs/dead-letter.md: with a dead-letter
// subject, an exhausted delivery stays pending, is never redelivered nor
// acknowledged by a client, and leaves pending only through
// DeadLettered.

// TestDeadLetterKeepsExhausted: an expiry past max_deliver keeps the
// delivery pending with a mark (Kept), and the ack floor stays below it.
func TestDeadLetterKeepsExhausted(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
	s.SetDeadLetter(true)
	deliver(s, t0, 1, 2)
	out := s.Expire(t0 + 10*sec)
	if want := []Exhausted{{Stream: 1, Deliveries: 1, Kept: true}, {Stream: 2, Deliveries: 1, Kept: true}}; !slices.Equal(out, want) {
		t.Fatalf("Expire = %+v, want %+v", out, want)
	}
	if !s.IsPending(1) || s.NumAckPending() != 2 {
		t.Fatalf("marked deliveries left pending: %d pending", s.NumAckPending())
	}
	wantFloors(t, s, pair(2, 2), pair(0, 0))
	wantQueue(t, s, t0+10*sec)
	// The safety deadline: one ack wait after the mark.
	wantDeadline(t, s, t0+20*sec, true)
	mv, ok := s.Move(1)
	if want := (Move{Stream: 1, Consumer: 1, Deliveries: 1, Reason: store.DeadLetterMaxDeliver}); !ok || mv != want {
		t.Fatalf("Move(1) = %+v %v, want %+v", mv, ok, want)
	}
	if got := s.DeadLettered(2); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("DeadLettered(2) = %v", got)
	}
	wantFloors(t, s, pair(2, 2), pair(0, 0))
	if got := s.DeadLettered(1); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("DeadLettered(1) = %v", got)
	}
	wantFloors(t, s, pair(2, 2), pair(2, 2))
	if got := s.DeadLettered(1); got != nil {
		t.Fatalf("DeadLettered of an ended mark = %v", got)
	}
}

// TestDeadLetterMarkIgnoresClients: a marked delivery ignores +ACK, -NAK,
// +WPI and a second exhaustion; only DropRedelivery (its message is gone)
// and DeadLettered end it.
func TestDeadLetterMarkIgnoresClients(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 2}, 1)
	s.SetDeadLetter(true)
	deliver(s, t0, 1)
	s.Nak(1, 0, t0)
	redeliverAll(s, t0+sec)
	e, ok := s.ExhaustedByNak(1, t0+2*sec)
	if want := (Exhausted{Stream: 1, Deliveries: 2, Kept: true}); !ok || e != want {
		t.Fatalf("ExhaustedByNak = %+v %v, want %+v", e, ok, want)
	}
	if r := s.Ack(1, 1); len(r.Acked) != 0 || !s.IsPending(1) {
		t.Fatalf("Ack of a mark acked %v", r.Acked)
	}
	if s.Nak(1, 0, t0) || s.Progress(1, t0) {
		t.Fatal("NAK or +WPI of a mark reported pending")
	}
	if _, ok := s.ExhaustedByNak(1, t0); ok {
		t.Fatal("a mark exhausted again")
	}
	if s.MarkDeadLetter(1, store.DeadLetterTerm, t0) {
		t.Fatal("a mark marked again")
	}
	wantQueue(t, s, t0+time.Hour.Nanoseconds())
	for _, op := range []store.ConsumerOp{{Kind: store.OpAck, Stream: 1, Consumer: 1}, {Kind: store.OpTerm, Stream: 1, Consumer: 1}, {Kind: store.OpNak, Stream: 1}} {
		if got := s.Replay(op, t0); len(got) != 0 || !s.IsPending(1) {
			t.Fatalf("Replay(%+v) of a mark acked %v", op, got)
		}
	}
	if _, ok := s.DropRedelivery(1); !ok || s.IsPending(1) {
		t.Fatal("DropRedelivery left the mark")
	}
}

// TestDeadLetterRetry: RetryMoveAt arms the mark; Expire returns it with
// Retry at that time, not before, and does not arm it again.
func TestDeadLetterRetry(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second}, 1)
	deliver(s, t0, 1)
	if !s.MarkDeadLetter(1, store.DeadLetterTerm, t0+sec) {
		t.Fatal("MarkDeadLetter of a pending delivery refused")
	}
	if !s.RetryMoveAt(1, t0+3*sec) || !s.SetMoveAfter(1, 41) {
		t.Fatal("RetryMoveAt or SetMoveAfter of a mark refused")
	}
	if out := s.Expire(t0 + 3*sec - 1); len(out) != 0 {
		t.Fatalf("Expire before the retry time = %+v", out)
	}
	wantDeadline(t, s, t0+3*sec, true)
	if out := s.Expire(t0 + 3*sec); !slices.Equal(out, []Exhausted{{Stream: 1, Deliveries: 1, Retry: true}}) {
		t.Fatalf("Expire at the retry time = %+v", out)
	}
	wantDeadline(t, s, 0, false)
	if out := s.Expire(t0 + time.Hour.Nanoseconds()); len(out) != 0 {
		t.Fatalf("a retried mark came back unarmed: %+v", out)
	}
	if mv, _ := s.Move(1); mv.After != 41 || mv.Reason != store.DeadLetterTerm {
		t.Fatalf("Move = %+v", mv)
	}
	if s.RetryMoveAt(2, t0) || s.SetMoveAfter(2, 1) {
		t.Fatal("RetryMoveAt or SetMoveAfter of nothing pending accepted")
	}
}

// TestDeadLetterSurvivesSnapshot: a mark is in the snapshot, and a state
// restored from it returns the mark at the first Expire (Retry), so that
// the move resumes after a restart.
func TestDeadLetterSurvivesSnapshot(t *testing.T) {
	p := Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}
	s := NewState(p, 1)
	s.SetDeadLetter(true)
	deliver(s, t0, 1, 2)
	s.Expire(t0 + 10*sec) // 1 and 2 marked
	s.SetMoveAfter(1, 7)
	s.DeadLettered(2)
	snap := s.Snapshot()
	want := map[uint64]store.DeadLetter{1: {Reason: store.DeadLetterMaxDeliver, After: 7}}
	if p1, _ := snap.PendingAt(1); !reflect.DeepEqual(snap.DeadLetter, want) || p1.Timestamp != t0+10*sec {
		t.Fatalf("snapshot %+v, want dead letters %+v marked at t0+10s", snap, want)
	}
	if err := store.CheckConsumerState(snap); err != nil {
		t.Fatal(err)
	}
	r := RestoreState(p, snap)
	if out := r.Expire(t0 + 10*sec); !slices.Equal(out, []Exhausted{{Stream: 1, Deliveries: 1, Retry: true}}) {
		t.Fatalf("first Expire after restore = %+v", out)
	}
	if got := r.Moves(); !slices.Equal(got, []Move{{Stream: 1, Consumer: 1, Deliveries: 1, Reason: store.DeadLetterMaxDeliver, After: 7}}) {
		t.Fatalf("Moves after restore = %+v", got)
	}
	if got := s.Snapshot(); !reflect.DeepEqual(got, snap) {
		t.Fatalf("snapshot changed: %+v", got)
	}
}

// TestDeadLetterTermAckAll: with ack policy all, an ack above a mark
// acknowledges the rest but holds the floor below the mark; ending a
// +TERM mark acknowledges like the +TERM (everything at or below it).
func TestDeadLetterTermAckAll(t *testing.T) {
	s := NewState(Policy{Ack: AckAll, AckWait: 10 * time.Second}, 1)
	deliver(s, t0, 1, 2, 3, 4)
	if !s.MarkDeadLetter(2, store.DeadLetterTerm, t0) {
		t.Fatal("mark refused")
	}
	got := s.Ack(3, 3).Acked
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("Ack(3) acked %v", got)
	}
	wantFloors(t, s, pair(4, 4), pair(1, 1))
	if got := s.DeadLettered(2); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("DeadLettered(2) = %v", got)
	}
	wantFloors(t, s, pair(4, 4), pair(3, 3))
	if !s.IsPending(4) {
		t.Fatal("4 acknowledged by the +TERM of 2")
	}
}

// TestDeadLetterOff: without a dead-letter subject an exhausted delivery
// leaves pending and is held (State), as before.
func TestDeadLetterOff(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
	s.SetDeadLetter(true)
	s.SetDeadLetter(false)
	deliver(s, t0, 1)
	if out := s.Expire(t0 + 10*sec); !slices.Equal(out, []Exhausted{{Stream: 1, Deliveries: 1}}) || s.IsPending(1) || !s.IsExhausted(1) {
		t.Fatalf("Expire = %+v, pending %v, held %v", out, s.IsPending(1), s.IsExhausted(1))
	}
	if s.Snapshot().DeadLetter != nil {
		t.Fatal("a mark without a dead-letter subject")
	}
}

// TestDeadLetterUnmark: a move given up (no stream captures the subject)
// leaves the state as without a dead-letter subject: a max_deliver mark
// becomes a held message out of deliveries (the floor stays, an explicit
// ack releases it), a +TERM mark acknowledges.
func TestDeadLetterUnmark(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
	s.SetDeadLetter(true)
	deliver(s, t0, 1, 2, 3)
	s.Expire(t0 + 10*sec) // 1, 2 and 3 marked
	if s.DeadLettered(3) == nil {
		t.Fatal("DeadLettered(3) refused")
	}
	if s.MarkDeadLetter(4, store.DeadLetterTerm, t0) {
		t.Fatal("MarkDeadLetter of nothing delivered accepted")
	}
	if got := s.Unmark(1); got != nil {
		t.Fatalf("Unmark of a max_deliver mark acked %v", got)
	}
	if s.IsPending(1) || !s.IsExhausted(1) || s.NumExhausted() != 1 {
		t.Fatal("an unmarked max_deliver mark is not held")
	}
	wantFloors(t, s, pair(3, 3), pair(0, 0))
	if _, ok := s.Move(1); ok || s.Unmark(1) != nil {
		t.Fatal("a mark left after Unmark")
	}
	if r := s.Ack(1, 1); !slices.Equal(r.Acked, []uint64{1}) || s.IsExhausted(1) {
		t.Fatalf("ack of the held message acked %v", r.Acked)
	}

	u := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second}, 1)
	deliver(u, t0, 1, 2)
	u.MarkDeadLetter(1, store.DeadLetterTerm, t0)
	if got := u.Unmark(1); !slices.Equal(got, []uint64{1}) || u.IsPending(1) || u.IsExhausted(1) {
		t.Fatalf("Unmark of a +TERM mark acked %v", got)
	}
	wantFloors(t, u, pair(2, 2), pair(1, 1))
}

// TestDeadLetterHeldTerm: a +TERM of a message out of deliveries (held,
// never moved) marks it without making it pending again: client acks
// leave it alone, the mark is in the snapshot as a Redelivered entry
// without a Pending entry, survives a restore (due at once), and
// DeadLettered releases it; the ack floor never moves for it.
func TestDeadLetterHeldTerm(t *testing.T) {
	p := Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}
	s := NewState(p, 1)
	deliver(s, t0, 1, 2)
	s.Expire(t0 + 10*sec) // 1 and 2 held
	s.SetDeadLetter(true)
	if !s.MarkDeadLetter(1, store.DeadLetterTerm, t0+11*sec) || s.MarkDeadLetter(1, store.DeadLetterTerm, t0+11*sec) {
		t.Fatal("MarkDeadLetter of a held message refused, or accepted twice")
	}
	if s.IsPending(1) || !s.IsExhausted(1) || s.NumAckPending() != 0 || s.NumExhausted() != 2 {
		t.Fatal("a held message's mark made it pending or released it")
	}
	if r := s.Ack(1, 1); len(r.Acked) != 0 || !s.IsExhausted(1) {
		t.Fatalf("an ack of a held mark acked %v", r.Acked)
	}
	if got := s.Replay(store.ConsumerOp{Kind: store.OpTerm, Stream: 1, Consumer: 1}, t0); len(got) != 0 {
		t.Fatalf("a replayed +TERM of a held mark acked %v", got)
	}
	wantDeadline(t, s, t0+21*sec, true)
	if !s.SetMoveAfter(1, 9) || !s.RetryMoveAt(1, t0+12*sec) {
		t.Fatal("SetMoveAfter or RetryMoveAt of a held mark refused")
	}
	if out := s.Expire(t0 + 12*sec); !slices.Equal(out, []Exhausted{{Stream: 1, Deliveries: 1, Retry: true}}) {
		t.Fatalf("Expire at the retry time = %+v", out)
	}
	want := Move{Stream: 1, Deliveries: 1, Reason: store.DeadLetterTerm, After: 9}
	if got := s.Moves(); !slices.Equal(got, []Move{want}) {
		t.Fatalf("Moves = %+v, want %+v", got, []Move{want})
	}
	snap := s.Snapshot()
	if len(snap.Pending) != 0 || !reflect.DeepEqual(snap.Redelivered, map[uint64]uint64{1: 0, 2: 0}) ||
		!reflect.DeepEqual(snap.DeadLetter, map[uint64]store.DeadLetter{1: {Reason: store.DeadLetterTerm, After: 9}}) {
		t.Fatalf("snapshot %+v", snap)
	}
	if err := store.CheckConsumerState(snap); err != nil {
		t.Fatal(err)
	}
	r := RestoreState(p, snap)
	if out := r.Expire(t0); !slices.Equal(out, []Exhausted{{Stream: 1, Deliveries: 1, Retry: true}}) {
		t.Fatalf("first Expire after restore = %+v", out)
	}
	if got := r.Moves(); !slices.Equal(got, []Move{want}) || !reflect.DeepEqual(r.Snapshot(), snap) {
		t.Fatalf("restored Moves = %+v, snapshot %+v", got, r.Snapshot())
	}
	for _, st := range []*State{s, r} {
		if got := st.DeadLettered(1); !slices.Equal(got, []uint64{1}) || st.IsExhausted(1) || !st.IsExhausted(2) {
			t.Fatalf("DeadLettered(1) = %v, held 1 %v", got, st.IsExhausted(1))
		}
		if _, ok := st.Move(1); ok || st.Snapshot().DeadLetter != nil {
			t.Fatal("a mark left after DeadLettered")
		}
		wantFloors(t, st, pair(2, 2), pair(0, 0))
	}
}

// TestDeadLetterHeldGone: a held message's mark ends with the message:
// DropRedelivery, DropGone and SkipTo release it (Exhausted, no
// consumer sequence), and Unmark of its +TERM mark releases it as the
// +TERM would have.
func TestDeadLetterHeldGone(t *testing.T) {
	mk := func() *State {
		s := NewState(Policy{Ack: AckAll, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
		deliver(s, t0, 1, 2, 3, 4)
		s.Expire(t0 + 10*sec)
		for seq := uint64(1); seq <= 4; seq++ {
			if !s.MarkDeadLetter(seq, store.DeadLetterTerm, t0+10*sec) {
				t.Fatalf("mark %d refused", seq)
			}
		}
		return s
	}
	s := mk()
	if d, ok := s.DropRedelivery(1); !ok || d != (Dropped{Stream: 1, Deliveries: 1, Exhausted: true}) {
		t.Fatalf("DropRedelivery(1) = %+v %v", d, ok)
	}
	if ds := s.DropGone(func(seq uint64) bool { return seq == 2 }); len(ds) != 1 || !ds[0].Exhausted {
		t.Fatalf("DropGone = %+v", ds)
	}
	if !s.SkipTo(4) {
		t.Fatal("SkipTo(4) changed nothing")
	}
	if got := s.Moves(); !slices.Equal(got, []Move{{Stream: 4, Deliveries: 1, Reason: store.DeadLetterTerm}}) {
		t.Fatalf("Moves = %+v", got)
	}
	if got := s.Unmark(4); !slices.Equal(got, []uint64{4}) || s.NumExhausted() != 0 || s.Moves() != nil {
		t.Fatalf("Unmark(4) = %v, %d held", got, s.NumExhausted())
	}
	if out := s.Expire(t0 + time.Hour.Nanoseconds()); len(out) != 0 {
		t.Fatalf("Expire after every mark ended = %+v", out)
	}
}
