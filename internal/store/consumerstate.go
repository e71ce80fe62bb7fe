package store

import (
	"fmt"
	"maps"
	"slices"
)

// CheckConsumerState returns an error wrapping ErrBadRequest when st is
// inconsistent, as nats-server's consumer stores refuse it: an ack floor
// above the delivered pair, or a pending stream sequence at or below the
// ack floor or above the delivered stream sequence; cairn's own rule
// for its slice, pending entries out of order or repeated; and, for
// cairn's dead-letter marks, a mark of a sequence that is neither pending
// nor a message out of deliveries (a Redelivered entry without a Pending
// entry), or with an unknown reason. ConsumerStore.Update calls it
// before storing anything.
func CheckConsumerState(st *ConsumerState) error {
	if st == nil {
		return fmt.Errorf("%w: nil consumer state", ErrBadRequest)
	}
	if st.AckFloor.Consumer > st.Delivered.Consumer {
		return fmt.Errorf("%w: bad ack floor for consumer", ErrBadRequest)
	}
	if st.AckFloor.Stream > st.Delivered.Stream {
		return fmt.Errorf("%w: bad ack floor for stream", ErrBadRequest)
	}
	for i, p := range st.Pending {
		if seq := p.Stream; seq <= st.AckFloor.Stream || seq > st.Delivered.Stream {
			return fmt.Errorf("%w: bad pending entry, sequence [%d] out of range", ErrBadRequest, seq)
		}
		if i > 0 && p.Stream <= st.Pending[i-1].Stream {
			return fmt.Errorf("%w: pending entries out of order at sequence [%d]", ErrBadRequest, p.Stream)
		}
	}
	for seq, dl := range st.DeadLetter {
		if !st.Markable(seq) {
			return fmt.Errorf("%w: dead-letter entry [%d] neither pending nor out of deliveries", ErrBadRequest, seq)
		}
		if dl.Reason.String() == "" {
			return fmt.Errorf("%w: dead-letter entry [%d] with reason %d", ErrBadRequest, seq, dl.Reason)
		}
	}
	return nil
}

// Markable reports whether a dead-letter mark of seq is consistent with
// st: seq is pending, or ran out of deliveries (a Redelivered entry
// without a Pending entry; docs/dead-letter.md).
func (st *ConsumerState) Markable(seq uint64) bool {
	if _, ok := st.PendingAt(seq); ok {
		return true
	}
	_, ok := st.Redelivered[seq]
	return ok
}

// CloneConsumerState returns a deep copy of st whose Pending,
// Redelivered and DeadLetter are nil when empty, the form
// ConsumerStore.State returns.
func CloneConsumerState(st *ConsumerState) *ConsumerState {
	c := &ConsumerState{Delivered: st.Delivered, AckFloor: st.AckFloor}
	if len(st.Pending) > 0 {
		c.Pending = slices.Clone(st.Pending)
	}
	if len(st.Redelivered) > 0 {
		c.Redelivered = make(map[uint64]uint64, len(st.Redelivered))
		for k, v := range st.Redelivered {
			c.Redelivered[k] = v
		}
	}
	if len(st.DeadLetter) > 0 {
		c.DeadLetter = maps.Clone(st.DeadLetter)
	}
	return c
}
