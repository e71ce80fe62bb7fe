package consumer

import (
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// State is the delivery state machine of one consumer (the ack kinds of nats-server v2.15.2's processAck; nats-server v2.15.2's ack wait, backoff and max_deliver redelivery): the delivered and ack floor sequence pairs, the
// deliveries awaiting acknowledgement with their delivery counts and
// deadlines, the queue of messages to redeliver, and the messages that
// ran out of deliveries (max_deliver) unacknowledged. It reads no clock
// and does no I/O: every call that depends on time takes now (unix
// nanoseconds), and the caller loads the messages from the store.
//
// A message that ran out of deliveries is never delivered again, but the
// consumer still holds it (IsExhausted): interest and workqueue retention
// keep it in the stream, so that it can be read by sequence after the
// MAX_DELIVERIES advisory, until an explicit ack or +TERM of it, or its
// removal from the stream, releases it. Running out of deliveries does
// not move the ack floor. This is nats-server v2.15.2's redelivered-count
// entry without a pending entry (consumer.needAck, hasMaxDeliveries; its
// stored state keeps the entry, so this one's Snapshot does too).
//
// A State is not safe for concurrent use; the consumer's runner owns it.
type State struct {
	policy    Policy
	delivered store.SequencePair
	ackFloor  store.SequencePair
	pending   pendingList
	// deadlines holds the deadlines of the deliveries marked pendingArmed:
	// redeliveries, +WPI, delayed NAKs, restored deliveries. A first
	// delivery keeps its deadline in its pending entry only: first
	// deliveries are made in stream order, all with the same wait, so
	// their deadlines ascend with the stream sequence and the pending
	// list is their queue. firstDue is the stream sequence from which the
	// next such deadline is looked for, and lastFirst the latest deadline
	// given to one (a first delivery whose deadline would come before it,
	// after a clock step back or a shorter ack wait, is armed instead).
	// This saves the heap's 16 bytes per pending delivery in the common
	// case: a million deliveries awaiting their first ack.
	deadlines deadlineHeap
	firstDue  uint64
	firstPos  pendingPos // where firstDue's entry was last seen, a hint for nextFirst
	lastFirst int64
	rdq       []uint64          // stream sequences ready for redelivery, oldest first
	exhausted map[uint64]uint64 // stream sequence to deliveries, of messages out of deliveries; nil when none
	// held are the dead-letter marks of messages out of deliveries (each
	// also in exhausted): a +TERM of such a message moves it
	// (MarkDeadLetter); nil when none. Only sseq, deliveries, deadline
	// and flags are used.
	held map[uint64]*pendingMsg
	// marks holds the After (store.DeadLetter.After) of every dead-letter
	// mark, of a pending delivery or a held message, by stream sequence:
	// a stream sequence is a key exactly while it has a mark. Marks are
	// few; keeping After here keeps it out of every pending entry. Nil
	// when none.
	marks map[uint64]uint64
	// deadLetter: the consumer has a dead-letter subject, so a delivery
	// that reaches max_deliver stays pending, marked, for the caller to
	// move (SetDeadLetter).
	deadLetter bool
	// paused is when a pause ends (unix ns; 0: not paused) (Pause).
	paused int64
}

// Policy is the part of the config the state machine needs: the ack
// policy, the ack wait and backoff (time.Duration), max_deliver (-1 or 0
// for no limit) and max_ack_pending (-1 or 0 for no limit).
type Policy struct {
	Ack           AckPolicy
	AckWait       time.Duration
	BackOff       []time.Duration
	MaxDeliver    int
	MaxAckPending int
}

// PolicyOf returns the Policy of a config that has had SetDefaults.
func PolicyOf(c *Config) Policy {
	return Policy{Ack: c.AckPolicy, AckWait: c.AckWait, BackOff: c.BackOff, MaxDeliver: c.MaxDeliver, MaxAckPending: c.MaxAckPending}
}

// NewState returns the state of a new consumer whose first delivery will
// be at stream sequence start or later (nats-server v2.15.2 selectStartingSeqNo): the
// delivered stream sequence is start-1, as nats-server reports it.
func NewState(p Policy, start uint64) *State {
	s := &State{policy: p}
	if start > 0 {
		s.delivered.Stream = start - 1
		s.ackFloor.Stream = start - 1
	}
	return s
}

// RestoreState returns the state stored in st. Pending deliveries keep
// their deadlines: those already past are redelivered first. A
// redelivery count without a pending entry is a message that ran out of
// deliveries (Snapshot). A dead-letter mark is due at once: the first
// Expire returns it (Retry), so that the caller resumes the move.
func RestoreState(p Policy, st *store.ConsumerState) *State {
	s := &State{policy: p, delivered: st.Delivered, ackFloor: st.AckFloor}
	s.deadlines = make(deadlineHeap, 0, len(st.Pending))
	for _, pm := range st.Pending {
		m := pendingMsg{sseq: pm.Stream, cseq: pm.Sequence, deliveries: uint32(min(1+st.Redelivered[pm.Stream], math.MaxUint32)), last: pm.Timestamp, flags: pendingArmed}
		m.deadline = pm.Timestamp + int64(s.wait(m.count()))
		if dl, ok := st.DeadLetter[pm.Stream]; ok {
			m.setDead(dl.Reason)
			m.deadline = pm.Timestamp
			s.setMark(pm.Stream, dl.After)
		}
		s.pending.add(m) // ascending: an append
		s.deadlines = append(s.deadlines, deadline{at: m.deadline, sseq: pm.Stream})
	}
	heap.Init(&s.deadlines)
	for sseq, n := range st.Redelivered {
		if _, ok := st.PendingAt(sseq); !ok {
			s.exhaust(sseq, 1+n)
			if dl, ok := st.DeadLetter[sseq]; ok {
				s.holdMark(sseq, dl.Reason, dl.After, 0)
			}
		}
	}
	return s
}

// Reset restarts the delivery state at stream sequence seq (ADR-60, the
// consumer reset; nats-server v2.15.2 resetLocalStartingSeq): nothing is
// pending, redelivered or out of deliveries any more, the consumer
// sequence starts again at 1, and the delivered and ack floor stream
// sequences are seq-1, so the next delivery is at seq or after. seq 0 is
// taken as 1.
// The policy, the dead-letter switch and the pause stay.
func (s *State) Reset(seq uint64) {
	dl, paused := s.deadLetter, s.paused
	*s = *NewState(s.policy, max(seq, 1))
	s.deadLetter, s.paused = dl, paused
}

// SetPolicy changes the policy after a consumer update; it applies to
// the next deliveries and acks.
func (s *State) SetPolicy(p Policy) { s.policy = p }

// SetDeadLetter says whether the consumer has a dead-letter subject
// (docs/dead-letter.md). While on, a delivery that reaches max_deliver
// (Expire, ExhaustedByNak) stays pending with a dead-letter mark instead
// of leaving pending for the messages out of deliveries: the caller
// moves its message and ends the mark with DeadLettered, gives the move
// up with Unmark (no stream captures the subject), or drops it with
// DropRedelivery (the message is gone). Marks made earlier stay when it
// is turned off.
func (s *State) SetDeadLetter(on bool) { s.deadLetter = on }

// Delivered returns the last delivered pair: the consumer sequence counts
// every delivery, redeliveries included; the stream sequence is the
// highest delivered.
func (s *State) Delivered() store.SequencePair { return s.delivered }

// AckFloor returns the ack floor: every delivery at or below it is
// acknowledged.
func (s *State) AckFloor() store.SequencePair { return s.ackFloor }

// NextSeq returns the stream sequence from which new messages are looked
// for: one past the highest delivered.
func (s *State) NextSeq() uint64 { return s.delivered.Stream + 1 }

// NumRedeliveryQueued returns how many messages wait for redelivery.
func (s *State) NumRedeliveryQueued() int { return len(s.rdq) }

// NumAckPending returns the number of deliveries awaiting an ack.
func (s *State) NumAckPending() int { return s.pending.len() }

// NumRedelivered returns num_redelivered as nats-server v2.15.2 counts
// it (its redelivered-count entries): the pending messages delivered
// more than once and the messages that ran out of deliveries; 0 with
// max_deliver 1.
func (s *State) NumRedelivered() int {
	if s.policy.MaxDeliver == 1 {
		return 0
	}
	n := len(s.exhausted)
	s.pending.each(func(m *pendingMsg) bool {
		if m.deliveries > 1 {
			n++
		}
		return true
	})
	return n
}

// OldestPending returns the time (unix ns) of the last delivery of the
// delivery that has awaited its ack longest, and false when none awaits
// one. It walks every pending delivery (at most max_ack_pending).
func (s *State) OldestPending() (int64, bool) {
	var oldest int64
	found := false
	s.pending.each(func(m *pendingMsg) bool {
		if m.last > 0 && (!found || m.last < oldest) {
			oldest, found = m.last, true
		}
		return true
	})
	return oldest, found
}

// IsPending reports whether sseq was delivered and awaits an ack.
func (s *State) IsPending(sseq uint64) bool { return s.pending.get(sseq) != nil }

// AckableSince returns the time (unix ns) of the last delivery of the
// pending delivery sseq, as nats-server v2.15.2 keeps it in its pending
// record (the last delivery, or a +WPI, or one ack wait before a delayed
// NAK's deadline), and true when an ack of sseq would acknowledge it:
// false when sseq is not pending or carries a dead-letter mark. It only
// reads the state (the ack sampling metric, consumerrun).
func (s *State) AckableSince(sseq uint64) (int64, bool) {
	m := s.pending.get(sseq)
	if m == nil || m.dead() != 0 {
		return 0, false
	}
	return m.last, true
}

// IsExhausted reports whether sseq ran out of deliveries unacknowledged
// and is still held (see State).
func (s *State) IsExhausted(sseq uint64) bool {
	_, ok := s.exhausted[sseq]
	return ok
}

// NumExhausted returns the number of messages out of deliveries still
// held.
func (s *State) NumExhausted() int { return len(s.exhausted) }

// exhaust records that sseq ran out of deliveries after n of them.
func (s *State) exhaust(sseq, n uint64) {
	if s.exhausted == nil {
		s.exhausted = map[uint64]uint64{}
	}
	s.exhausted[sseq] = n
}

// release forgets the message out of deliveries sseq and its dead-letter
// mark, if any.
func (s *State) release(sseq uint64) {
	delete(s.exhausted, sseq)
	delete(s.held, sseq)
	delete(s.marks, sseq)
}

// timed returns the entry whose deadline the heap may hold for sseq: its
// pending delivery or the dead-letter mark of the held message; nil when
// neither.
func (s *State) timed(sseq uint64) *pendingMsg {
	if m := s.pending.get(sseq); m != nil {
		return m
	}
	return s.held[sseq]
}

// AtAckLimit reports whether max_ack_pending stops new deliveries
// (redeliveries are not new: they are already counted).
func (s *State) AtAckLimit() bool {
	return s.policy.Ack != AckNone && s.policy.MaxAckPending > 0 && s.pending.len() >= s.policy.MaxAckPending
}

// Delivery describes one delivery the caller is about to make: the
// delivery count (1 the first time) and the consumer sequence, for the
// ack reply subject (the v1 ack reply subject, ADR-15).
type Delivery struct {
	Deliveries  uint64
	ConsumerSeq uint64
}

// DeliverNew records the first delivery of stream sequence sseq, which
// must be at or after NextSeq.
func (s *State) DeliverNew(sseq uint64, now int64) Delivery {
	s.delivered.Consumer++
	s.delivered.Stream = sseq
	d := Delivery{Deliveries: 1, ConsumerSeq: s.delivered.Consumer}
	if s.policy.Ack == AckNone {
		s.ackFloor = s.delivered
		return d
	}
	m := s.pending.add(pendingMsg{sseq: sseq, cseq: d.ConsumerSeq, deliveries: 1, last: now})
	if at := now + int64(s.wait(1)); at >= s.lastFirst && sseq >= s.firstDue {
		m.deadline, s.lastFirst = at, at // in the pending list's queue (firstDue)
	} else {
		s.arm(m, now)
	}
	return d
}

// NextRedelivery returns the next stream sequence waiting in the
// redelivery queue, skipping any acknowledged since it was queued.
func (s *State) NextRedelivery() (uint64, bool) {
	for len(s.rdq) > 0 {
		sseq := s.rdq[0]
		if m := s.pending.get(sseq); m != nil && m.queued() {
			return sseq, true
		}
		s.rdq = s.rdq[1:]
	}
	return 0, false
}

// Redeliver records the redelivery of sseq, taken from NextRedelivery.
func (s *State) Redeliver(sseq uint64, now int64) Delivery {
	m := s.pending.get(sseq)
	if len(s.rdq) > 0 && s.rdq[0] == sseq {
		s.rdq = s.rdq[1:]
	}
	if m == nil {
		return Delivery{}
	}
	s.delivered.Consumer++
	m.setQueued(false)
	m.redelivered()
	m.last = now
	s.arm(m, now)
	return Delivery{Deliveries: m.count(), ConsumerSeq: s.delivered.Consumer}
}

// DropRedelivery forgets sseq without an ack, when the stream no longer
// holds it (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery, stream removal): a pending delivery
// leaves pending and the floor moves; a message out of deliveries is
// released (nats-server v2.15.2 decStreamPending). It returns what it
// dropped; false when sseq was neither.
func (s *State) DropRedelivery(sseq uint64) (Dropped, bool) {
	if n, ok := s.exhausted[sseq]; ok {
		s.release(sseq)
		return Dropped{Stream: sseq, Deliveries: n, Exhausted: true}, true
	}
	m, ok := s.pending.remove(sseq)
	if !ok {
		return Dropped{}, false
	}
	delete(s.marks, sseq)
	s.moveAckFloor()
	return Dropped{Stream: sseq, Consumer: m.cseq, Deliveries: m.count()}, true
}

// wait returns the ack wait after delivery number n (1-based): the
// backoff entry for it (the last repeats) or ack_wait.
func (s *State) wait(n uint64) time.Duration {
	if b := s.policy.BackOff; len(b) > 0 {
		i := min(int(n)-1, len(b)-1)
		return b[max(i, 0)]
	}
	return s.policy.AckWait
}

// arm sets m's deadline one wait after now and puts it in the heap.
func (s *State) arm(m *pendingMsg, now int64) {
	m.deadline = now + int64(s.wait(m.count()))
	m.flags |= pendingArmed
	s.deadlines.push(deadline{at: m.deadline, sseq: m.sseq})
}

// AckResult says what an ack did: the stream sequences it acknowledged
// (for interest and workqueue retention), none when nothing was pending.
type AckResult struct {
	Acked []uint64
}

// Ack acknowledges the delivery of stream sequence sseq with consumer
// sequence cseq (both from the ack reply subject), as +ACK and +TERM do.
// With ack policy all it acknowledges every pending sequence at or below
// sseq and moves the ack floor to (cseq, sseq). An ack of something not
// pending changes nothing (nats-server v2.15.2 processAckMsg), except
// that an explicit ack of a message out of deliveries releases it
// without moving the floor; ack policy all never releases one, as
// nats-server's ack-all leaves its redelivered-count entries. A
// delivery or message out of deliveries with a dead-letter mark is not
// acknowledged: it leaves only through DeadLettered, once its copy is
// durable, and with ack policy all the floor stays below a marked
// delivery.
func (s *State) Ack(sseq, cseq uint64) AckResult {
	var r AckResult
	switch s.policy.Ack {
	case AckExplicit:
		if m := s.pending.get(sseq); m != nil && m.dead() == 0 {
			s.pending.remove(sseq)
			r.Acked = append(r.Acked, sseq)
			s.moveAckFloor()
		} else if _, ok := s.exhausted[sseq]; ok && s.held[sseq] == nil {
			delete(s.exhausted, sseq)
			r.Acked = append(r.Acked, sseq)
		}
	case AckAll, AckFlowControl:
		if sseq <= s.ackFloor.Stream || sseq > s.delivered.Stream {
			return r
		}
		// A dead-letter mark at or below sseq holds the floor below it.
		acked, kept := s.pending.removeUpTo(sseq, pendingDeadMask)
		r.Acked = acked
		if !kept {
			s.ackFloor = store.SequencePair{Consumer: max(s.ackFloor.Consumer, cseq), Stream: sseq}
		}
		s.moveAckFloor()
	}
	return r
}

// moveAckFloor sets the ack floor just below the lowest pending delivery,
// or to the delivered pair when nothing is pending; it never moves down.
func (s *State) moveAckFloor() {
	m := s.pending.lowest()
	if m == nil {
		s.ackFloor = s.delivered
		return
	}
	if m.sseq-1 > s.ackFloor.Stream {
		s.ackFloor.Stream = m.sseq - 1
	}
	if m.cseq > 0 && m.cseq-1 > s.ackFloor.Consumer {
		s.ackFloor.Consumer = m.cseq - 1
	}
}

// Nak schedules sseq for redelivery after delay (at once when delay is 0)
// and reports whether it was pending (false for a dead-letter mark, which
// is never redelivered). A delayed NAK takes sseq out of the
// redelivery queue, and is stored as a last delivery one wait before the
// new deadline, as nats-server processNak does.
func (s *State) Nak(sseq uint64, delay time.Duration, now int64) bool {
	m := s.pending.get(sseq)
	if m == nil || m.dead() != 0 {
		return false
	}
	if delay <= 0 {
		s.queue(m)
		return true
	}
	if m.queued() {
		m.setQueued(false)
		s.rdq = slices.DeleteFunc(s.rdq, func(q uint64) bool { return q == sseq })
	}
	m.deadline = now + int64(delay)
	m.last = m.deadline - int64(s.wait(m.count()))
	m.flags |= pendingArmed
	s.deadlines.push(deadline{at: m.deadline, sseq: sseq})
	return true
}

// Progress (+WPI) restarts the ack wait of sseq and reports whether it was
// pending (false for a dead-letter mark).
func (s *State) Progress(sseq uint64, now int64) bool {
	m := s.pending.get(sseq)
	if m == nil || m.dead() != 0 {
		return false
	}
	if !m.queued() {
		m.last = now
		s.arm(m, now)
	}
	return true
}

func (s *State) queue(m *pendingMsg) {
	if !m.queued() {
		m.setQueued(true)
		s.rdq = append(s.rdq, m.sseq)
	}
}

// Exhausted is a message that reached max_deliver and will not be
// redelivered: its stream sequence and delivery count. With a
// dead-letter subject (SetDeadLetter), Kept says it stayed pending with
// a dead-letter mark for the caller to move; Expire also returns, with
// Retry set, the marks whose retry time (RetryMoveAt) came, which are
// not newly exhausted.
type Exhausted struct {
	Stream     uint64
	Deliveries uint64
	Kept       bool
	Retry      bool
}

// Expire moves every pending delivery whose deadline is at or before now
// to the redelivery queue, except those delivered max_deliver times
// already: those leave pending for the exhausted messages (the ack floor
// stays), or with a dead-letter subject stay pending with a mark (Kept),
// and are returned, for the MAX_DELIVERIES advisory. Dead-letter marks
// due are returned with Retry set and are not armed again: the caller
// re-arms them (RetryMoveAt) or ends them. Deadlines are taken in order
// of time, then stream sequence. Ack policy flow_control without an
// ack wait (its acks are the flow control replies) never redelivers: nothing expires (nats-server v2.15.2 checkPending returns
// when AckWait is 0).
func (s *State) Expire(now int64) []Exhausted {
	if s.noRedelivery() {
		return nil
	}
	var out []Exhausted
	for {
		m, armed := s.nextDue()
		if m == nil || m.deadline > now {
			break
		}
		if armed {
			s.deadlines.pop()
		} else {
			s.firstDue = m.sseq + 1
		}
		sseq, n := m.sseq, m.count()
		if m.dead() != 0 {
			// Spent until RetryMoveAt: a second heap entry of the same
			// time (a +WPI and the mark at one instant) is stale now.
			m.deadline = spentDeadline
			out = append(out, Exhausted{Stream: sseq, Deliveries: n, Retry: true})
			continue
		}
		if s.policy.MaxDeliver > 0 && n >= uint64(s.policy.MaxDeliver) {
			e := Exhausted{Stream: sseq, Deliveries: n, Kept: s.deadLetter}
			if e.Kept {
				s.mark(m, store.DeadLetterMaxDeliver, now)
			} else {
				s.pending.remove(sseq)
				s.exhaust(sseq, n)
			}
			out = append(out, e)
			continue
		}
		s.queue(m)
	}
	return out
}

// noRedelivery reports a flow_control policy without an ack wait, whose
// deliveries never expire.
func (s *State) noRedelivery() bool {
	return s.policy.Ack == AckFlowControl && s.policy.AckWait == 0
}

// spentDeadline is the deadline of a dead-letter mark that Expire
// returned (Retry) and the caller has not re-armed (RetryMoveAt): no heap
// entry holds it, so every entry left for the mark is stale.
const spentDeadline = math.MinInt64

// nextDue returns the delivery whose deadline comes next (by time, then
// stream sequence), and whether it is the heap's top (else it is the
// first delivery firstDue leads to); nil when no delivery waits for a
// deadline. A held message's dead-letter mark (held) is the heap's too.
// It drops stale heap entries (of deliveries acked, re-armed or queued
// since) and moves firstDue past entries that are not first deliveries
// waiting for their deadline: each is passed once.
func (s *State) nextDue() (*pendingMsg, bool) {
	var top *pendingMsg
	for len(s.deadlines) > 0 {
		d := s.deadlines[0]
		if m := s.timed(d.sseq); m != nil && m.deadline == d.at && m.flags&(pendingArmed|pendingQueued) == pendingArmed {
			top = m
			break
		}
		s.deadlines.pop() // stale
	}
	first := s.nextFirst()
	if first == nil || top != nil && (top.deadline < first.deadline || top.deadline == first.deadline && top.sseq < first.sseq) {
		return top, top != nil
	}
	return first, false
}

// nextFirst returns the first delivery at or after firstDue that waits
// for its first deadline outside the heap, or nil.
func (s *State) nextFirst() *pendingMsg {
	m, pos := s.pending.firstFrom(s.firstPos, s.firstDue, pendingArmed|pendingQueued)
	if m == nil {
		if len(s.pending.blocks) > 0 {
			s.firstDue = max(s.firstDue, s.pending.last().sseq+1)
		}
		s.firstPos = pendingPos{}
		return nil
	}
	s.firstDue, s.firstPos = m.sseq, pos
	return m
}

// ExhaustedByNak reports whether a NAK of sseq ends its deliveries
// (max_deliver reached) at now (unix ns): then it leaves pending like
// Expire's (or stays marked, Kept) and true is returned with its
// delivery count. A dead-letter mark is not exhausted again (false).
func (s *State) ExhaustedByNak(sseq uint64, now int64) (Exhausted, bool) {
	m := s.pending.get(sseq)
	if m == nil || m.dead() != 0 || s.policy.MaxDeliver <= 0 || m.count() < uint64(s.policy.MaxDeliver) {
		return Exhausted{}, false
	}
	n := m.count()
	if s.deadLetter {
		s.mark(m, store.DeadLetterMaxDeliver, now)
		return Exhausted{Stream: sseq, Deliveries: n, Kept: true}, true
	}
	s.pending.remove(sseq)
	s.exhaust(sseq, n)
	return Exhausted{Stream: sseq, Deliveries: n}, true
}

// NextDeadline returns the earliest time (unix ns) at which Expire has
// work, and false when nothing is pending or nothing expires (no ack
// wait, Expire).
func (s *State) NextDeadline() (int64, bool) {
	if s.noRedelivery() {
		return 0, false
	}
	if m, _ := s.nextDue(); m != nil {
		return m.deadline, true
	}
	return 0, false
}

// Snapshot returns the state to store (store.ConsumerState). A message
// out of deliveries is a Redelivered entry (its deliveries beyond the
// first) without a Pending entry, as nats-server v2.15.2 stores it. A
// dead-letter mark is a DeadLetter entry of a Pending entry, or of such
// a Redelivered entry for a held message's.
func (s *State) Snapshot() *store.ConsumerState {
	st := &store.ConsumerState{Delivered: s.delivered, AckFloor: s.ackFloor}
	if len(s.exhausted) > 0 {
		st.Redelivered = make(map[uint64]uint64, len(s.exhausted))
		for sseq, n := range s.exhausted {
			st.Redelivered[sseq] = n - 1
		}
	}
	for sseq, after := range s.marks {
		if st.DeadLetter == nil {
			st.DeadLetter = make(map[uint64]store.DeadLetter, len(s.marks))
		}
		st.DeadLetter[sseq] = store.DeadLetter{Reason: s.markOf(sseq).dead(), After: after}
	}
	if s.pending.len() == 0 {
		return st
	}
	st.Pending = make([]store.StreamPending, 0, s.pending.len())
	s.pending.each(func(m *pendingMsg) bool {
		st.Pending = append(st.Pending, store.StreamPending{Stream: m.sseq, Pending: store.Pending{Sequence: m.cseq, Timestamp: m.last}})
		if m.deliveries > 1 {
			if st.Redelivered == nil {
				st.Redelivered = map[uint64]uint64{}
			}
			st.Redelivered[m.sseq] = m.count() - 1
		}
		return true
	})
	return st
}

// deadline is an entry of the deadline heap; entries whose message was
// acked or re-armed since are skipped when they surface.
type deadline struct {
	at   int64
	sseq uint64
}

// deadlineHeap is a binary min-heap of deadlines (earliest first, then
// lowest sequence). Its push and pop are container/heap's algorithm on
// the concrete type: through heap.Interface every push boxed its 16-byte
// entry in an interface, one allocation per delivery.
type deadlineHeap []deadline

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].sseq < h[j].sseq
}
func (h deadlineHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)   { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

// push adds d.
func (h *deadlineHeap) push(d deadline) {
	*h = append(*h, d)
	q := *h
	for j := len(q) - 1; j > 0; {
		i := (j - 1) / 2
		if !q.Less(j, i) {
			break
		}
		q.Swap(i, j)
		j = i
	}
}

// pop removes and returns the earliest deadline; h must not be empty.
func (h *deadlineHeap) pop() deadline {
	q := *h
	n := len(q) - 1
	q.Swap(0, n)
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && q.Less(r, j) {
			j = r
		}
		if !q.Less(j, i) {
			break
		}
		q.Swap(i, j)
		i = j
	}
	d := q[n]
	*h = q[:n]
	return d
}

// Replay applies a journaled confirmed acknowledgement (store.ConsumerOp)
// to a restored state, as Ack, Nak and +TERM did when it was made, and
// returns the stream sequences it acknowledged (for retention). An op
// beyond the delivered stream sequence is ignored: the delivery it
// answers never reached the stored state, so its confirmation was never
// sent (jetstream confirms such an ack only once a snapshot holding the
// delivery is stored). Replaying an op the state already holds changes
// nothing but, for a NAK, how soon the message is redelivered.
func (s *State) Replay(op store.ConsumerOp, now int64) []uint64 {
	if op.Stream == 0 || op.Stream > s.delivered.Stream {
		return nil
	}
	switch op.Kind {
	case store.OpAck:
		return s.Ack(op.Stream, op.Consumer).Acked
	case store.OpTerm:
		if s.IsPending(op.Stream) || s.IsExhausted(op.Stream) {
			return s.Ack(op.Stream, op.Consumer).Acked
		}
	case store.OpNak:
		// Only re-arm: the state may be newer than the NAK (a later
		// snapshot with more deliveries), so a NAK replayed at max_deliver
		// must not end the deliveries; the deadline does that, with its
		// advisory.
		if m := s.pending.get(op.Stream); m != nil && (s.policy.MaxDeliver <= 0 || m.count() < uint64(s.policy.MaxDeliver)) {
			s.Nak(op.Stream, time.Duration(max(op.Time-now, 0)), now)
		}
	}
	return nil
}
