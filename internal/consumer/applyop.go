package consumer

import "slices"

// Outcome is what ApplyOp decided. Which fields an operation fills:
//
//   - Deliver, Redeliver: Delivery (the delivery count and consumer
//     sequence for the ack reply subject); with ack policy none a
//     Deliver also lists the stream sequence in Acked (delivered is
//     acknowledged).
//   - Ack, Term: Acked, the stream sequences acknowledged (for interest
//     and work-queue retention), ascending; Changed when a Term found the
//     delivery pending or held (a MSG_TERMINATED advisory is due).
//   - Nak: Exhausted (one entry) when the delivery reached max_deliver;
//     else Changed when it was scheduled for redelivery (MSG_NAKED).
//   - Progress, SkipTo, Pause, UpdatePolicy, DeadLetter mark, after and
//     retry: Changed when the state changed.
//   - ExpireAcks: Exhausted, the deliveries that reached max_deliver and
//     the dead-letter marks due for a retry (Exhausted.Retry).
//   - Drop: Dropped, by stream sequence.
//   - DeadLetter moved and unmark: Acked.
//   - Reset: Changed (always).
//
// Dirty says that what Snapshot returns may have changed, so a durable
// consumer has something new to store (a pause and a policy are stored
// with the config, not the state).
type Outcome struct {
	Delivery  Delivery
	Acked     []uint64
	Exhausted []Exhausted
	Dropped   []Dropped
	Changed   bool
	Dirty     bool
}

// ApplyOp applies one operation to the consumer's delivery state and
// writes what it decided into out (reused). It is the consumer's one
// apply function (docs/engine.md): the outcome depends only on the state
// and op, never on a clock or the server's settings, so every replica
// applying the same operations reaches the same state (Snapshot).
func (s *State) ApplyOp(op Op, out *Outcome) {
	*out = Outcome{Acked: out.Acked[:0]}
	switch o := op.(type) {
	case *Deliver:
		out.Delivery = s.DeliverNew(o.Stream, o.Time)
		if s.policy.Ack == AckNone {
			out.Acked = append(out.Acked, o.Stream)
		}
	case *Redeliver:
		out.Delivery = s.Redeliver(o.Stream, o.Time)
	case *Ack:
		out.Acked = append(out.Acked, s.Ack(o.Stream, o.Consumer).Acked...)
	case *Nak:
		if ex, done := s.ExhaustedByNak(o.Stream, o.Time); done {
			out.Exhausted = []Exhausted{ex}
		} else {
			out.Changed = s.Nak(o.Stream, o.Delay, o.Time)
		}
	case *Term:
		if s.IsPending(o.Stream) || s.IsExhausted(o.Stream) {
			out.Changed = true
			out.Acked = append(out.Acked, s.Ack(o.Stream, o.Consumer).Acked...)
		}
	case *Progress:
		out.Changed = s.Progress(o.Stream, o.Time)
	case *ExpireAcks:
		out.Exhausted = s.Expire(o.Time)
	case *SkipTo:
		out.Changed = s.SkipTo(o.Stream)
	case *Drop:
		seqs := slices.Clone(o.Seqs)
		slices.Sort(seqs)
		out.Dropped = s.DropGone(func(sseq uint64) bool {
			_, found := slices.BinarySearch(seqs, sseq)
			return found
		})
	case *Pause:
		out.Changed = s.paused != o.Until
		s.paused = o.Until
	case *UpdatePolicy:
		s.SetPolicy(o.Policy)
		s.SetDeadLetter(o.DeadLetter)
		out.Changed = true
	case *DeadLetter:
		s.applyDeadLetter(o, out)
	case *Reset:
		s.Reset(o.Stream)
		out.Changed = true
	}
	slices.Sort(out.Acked)
	out.Dirty = dirties(op, out)
}

// dirties reports whether applying op, with outcome out, may have
// changed the state's Snapshot.
func dirties(op Op, out *Outcome) bool {
	switch o := op.(type) {
	case *Deliver, *Redeliver:
		return true
	case *Nak:
		return out.Changed || len(out.Exhausted) > 0
	case *Progress, *SkipTo, *Reset:
		return out.Changed
	case *ExpireAcks:
		return len(out.Exhausted) > 0
	case *Drop:
		return len(out.Dropped) > 0
	case *DeadLetter:
		return o.Step != DeadLetterRetryAt && (out.Changed || o.Step == DeadLetterMoved || o.Step == DeadLetterUnmark)
	case *Pause, *UpdatePolicy:
		return false
	}
	return len(out.Acked) > 0
}

func (s *State) applyDeadLetter(o *DeadLetter, out *Outcome) {
	switch o.Step {
	case DeadLetterMark:
		out.Changed = s.MarkDeadLetter(o.Stream, o.Reason, o.Value)
	case DeadLetterAfter:
		out.Changed = s.SetMoveAfter(o.Stream, uint64(o.Value))
	case DeadLetterRetryAt:
		out.Changed = s.RetryMoveAt(o.Stream, o.Value)
	case DeadLetterMoved:
		out.Acked = append(out.Acked, s.DeadLettered(o.Stream)...)
	case DeadLetterUnmark:
		out.Acked = append(out.Acked, s.Unmark(o.Stream)...)
	}
}

// PausedUntil returns when the pause the last Pause operation set ends
// (unix ns), 0 when none was set or it was lifted.
func (s *State) PausedUntil() int64 { return s.paused }

// DeadLetterOn reports whether the consumer has a dead-letter subject
// (SetDeadLetter, UpdatePolicy).
func (s *State) DeadLetterOn() bool { return s.deadLetter }

// Select returns, ascending, the stream sequences the state holds (its
// pending deliveries and its messages out of deliveries) for which f
// reports true: the proposer of a Drop looks up with it which of them
// the stream no longer holds. It changes nothing.
func (s *State) Select(f func(sseq uint64) bool) []uint64 {
	var out []uint64
	// DropGone visits every pending delivery and every message out of
	// deliveries, and drops none when told none is gone.
	s.DropGone(func(sseq uint64) bool {
		if f(sseq) {
			out = append(out, sseq)
		}
		return false
	})
	slices.Sort(out)
	return out
}
