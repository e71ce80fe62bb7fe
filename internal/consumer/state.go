package consumer

import (
	"container/heap"
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
	pending   map[uint64]*pendingMsg // by stream sequence
	deadlines deadlineHeap
	rdq       []uint64          // stream sequences ready for redelivery, oldest first
	exhausted map[uint64]uint64 // stream sequence to deliveries, of messages out of deliveries; nil when none
	// held are the dead-letter marks of messages out of deliveries (each
	// also in exhausted): a +TERM of such a message moves it
	// (MarkDeadLetter); nil when none. Only dead, after and deadline are
	// used.
	held map[uint64]*pendingMsg
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

type pendingMsg struct {
	cseq       uint64 // consumer sequence of the first delivery (nats-server keeps it for the ack floor and the stored state)
	deliveries uint64 // number of deliveries so far (1 on the first)
	last       int64  // time of the last delivery or +WPI, or deadline-wait after a delayed NAK (unix ns)
	deadline   int64  // when it is redelivered without an ack (unix ns); for a dead-letter mark, when the move is retried
	queued     bool   // in the redelivery queue
	// dead marks a delivery being moved to the dead-letter subject
	// (store.DeadLetter): it is never redelivered, and acks, NAKs and
	// +WPI leave it alone until DeadLettered ends it.
	dead  store.DeadLetterReason
	after uint64 // store.DeadLetter.After
}

// NewState returns the state of a new consumer whose first delivery will
// be at stream sequence start or later (nats-server v2.15.2 selectStartingSeqNo): the
// delivered stream sequence is start-1, as nats-server reports it.
func NewState(p Policy, start uint64) *State {
	s := &State{policy: p, pending: map[uint64]*pendingMsg{}}
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
	s := &State{policy: p, delivered: st.Delivered, ackFloor: st.AckFloor, pending: make(map[uint64]*pendingMsg, len(st.Pending))}
	for sseq, pm := range st.Pending {
		m := &pendingMsg{cseq: pm.Sequence, deliveries: 1 + st.Redelivered[sseq], last: pm.Timestamp}
		m.deadline = pm.Timestamp + int64(s.wait(m.deliveries))
		if dl, ok := st.DeadLetter[sseq]; ok {
			m.dead, m.after, m.deadline = dl.Reason, dl.After, pm.Timestamp
		}
		s.pending[sseq] = m
		heap.Push(&s.deadlines, deadline{at: m.deadline, sseq: sseq})
	}
	for sseq, n := range st.Redelivered {
		if _, ok := st.Pending[sseq]; !ok {
			s.exhaust(sseq, 1+n)
			if dl, ok := st.DeadLetter[sseq]; ok {
				s.holdMark(sseq, dl.Reason, dl.After, 0)
			}
		}
	}
	return s
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

// NumAckPending returns the number of deliveries awaiting an ack.
func (s *State) NumAckPending() int { return len(s.pending) }

// NumRedelivered returns num_redelivered as nats-server v2.15.2 counts
// it (its redelivered-count entries): the pending messages delivered
// more than once and the messages that ran out of deliveries; 0 with
// max_deliver 1.
func (s *State) NumRedelivered() int {
	if s.policy.MaxDeliver == 1 {
		return 0
	}
	n := len(s.exhausted)
	for _, m := range s.pending {
		if m.deliveries > 1 {
			n++
		}
	}
	return n
}

// IsPending reports whether sseq was delivered and awaits an ack.
func (s *State) IsPending(sseq uint64) bool { return s.pending[sseq] != nil }

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
}

// timed returns the entry whose deadline the heap may hold for sseq: its
// pending delivery or the dead-letter mark of the held message; nil when
// neither.
func (s *State) timed(sseq uint64) *pendingMsg {
	if m := s.pending[sseq]; m != nil {
		return m
	}
	return s.held[sseq]
}

// AtAckLimit reports whether max_ack_pending stops new deliveries
// (redeliveries are not new: they are already counted).
func (s *State) AtAckLimit() bool {
	return s.policy.Ack != AckNone && s.policy.MaxAckPending > 0 && len(s.pending) >= s.policy.MaxAckPending
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
	m := &pendingMsg{cseq: d.ConsumerSeq, deliveries: 1, last: now}
	s.pending[sseq] = m
	s.arm(sseq, m, now)
	return d
}

// NextRedelivery returns the next stream sequence waiting in the
// redelivery queue, skipping any acknowledged since it was queued.
func (s *State) NextRedelivery() (uint64, bool) {
	for len(s.rdq) > 0 {
		sseq := s.rdq[0]
		if m := s.pending[sseq]; m != nil && m.queued {
			return sseq, true
		}
		s.rdq = s.rdq[1:]
	}
	return 0, false
}

// Redeliver records the redelivery of sseq, taken from NextRedelivery.
func (s *State) Redeliver(sseq uint64, now int64) Delivery {
	m := s.pending[sseq]
	if len(s.rdq) > 0 && s.rdq[0] == sseq {
		s.rdq = s.rdq[1:]
	}
	if m == nil {
		return Delivery{}
	}
	s.delivered.Consumer++
	m.queued = false
	m.deliveries++
	m.last = now
	s.arm(sseq, m, now)
	return Delivery{Deliveries: m.deliveries, ConsumerSeq: s.delivered.Consumer}
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
	m := s.pending[sseq]
	if m == nil {
		return Dropped{}, false
	}
	delete(s.pending, sseq)
	s.moveAckFloor()
	return Dropped{Stream: sseq, Consumer: m.cseq, Deliveries: m.deliveries}, true
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

func (s *State) arm(sseq uint64, m *pendingMsg, now int64) {
	m.deadline = now + int64(s.wait(m.deliveries))
	heap.Push(&s.deadlines, deadline{at: m.deadline, sseq: sseq})
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
		if m := s.pending[sseq]; m != nil && m.dead == 0 {
			delete(s.pending, sseq)
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
		kept := false // a dead-letter mark at or below sseq holds the floor below it
		for seq, m := range s.pending {
			if seq <= sseq {
				if m.dead != 0 {
					kept = true
					continue
				}
				delete(s.pending, seq)
				r.Acked = append(r.Acked, seq)
			}
		}
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
	if len(s.pending) == 0 {
		s.ackFloor = s.delivered
		return
	}
	lowest := s.lowestPending()
	m := s.pending[lowest]
	if lowest-1 > s.ackFloor.Stream {
		s.ackFloor.Stream = lowest - 1
	}
	if m.cseq > 0 && m.cseq-1 > s.ackFloor.Consumer {
		s.ackFloor.Consumer = m.cseq - 1
	}
}

// lowestPending returns the lowest pending stream sequence (pending must
// not be empty): by walking up from the ack floor when the range is short
// next to the number pending, else by visiting every pending entry. The
// floor only moves up, so the walks add up to the stream's length.
func (s *State) lowestPending() uint64 {
	from, to := s.ackFloor.Stream+1, s.delivered.Stream
	if to-from < 4*uint64(len(s.pending)) {
		for seq := from; seq <= to; seq++ {
			if s.pending[seq] != nil {
				return seq
			}
		}
	}
	lowest := uint64(0)
	for seq := range s.pending {
		if lowest == 0 || seq < lowest {
			lowest = seq
		}
	}
	return lowest
}

// Nak schedules sseq for redelivery after delay (at once when delay is 0)
// and reports whether it was pending (false for a dead-letter mark, which
// is never redelivered). A delayed NAK takes sseq out of the
// redelivery queue, and is stored as a last delivery one wait before the
// new deadline, as nats-server processNak does.
func (s *State) Nak(sseq uint64, delay time.Duration, now int64) bool {
	m := s.pending[sseq]
	if m == nil || m.dead != 0 {
		return false
	}
	if delay <= 0 {
		s.queue(sseq, m)
		return true
	}
	if m.queued {
		m.queued = false
		s.rdq = slices.DeleteFunc(s.rdq, func(q uint64) bool { return q == sseq })
	}
	m.deadline = now + int64(delay)
	m.last = m.deadline - int64(s.wait(m.deliveries))
	heap.Push(&s.deadlines, deadline{at: m.deadline, sseq: sseq})
	return true
}

// Progress (+WPI) restarts the ack wait of sseq and reports whether it was
// pending (false for a dead-letter mark).
func (s *State) Progress(sseq uint64, now int64) bool {
	m := s.pending[sseq]
	if m == nil || m.dead != 0 {
		return false
	}
	if !m.queued {
		m.last = now
		s.arm(sseq, m, now)
	}
	return true
}

func (s *State) queue(sseq uint64, m *pendingMsg) {
	if !m.queued {
		m.queued = true
		s.rdq = append(s.rdq, sseq)
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
// re-arms them (RetryMoveAt) or ends them.
func (s *State) Expire(now int64) []Exhausted {
	var out []Exhausted
	for len(s.deadlines) > 0 && s.deadlines[0].at <= now {
		d := heap.Pop(&s.deadlines).(deadline)
		m := s.timed(d.sseq)
		if m == nil || m.deadline != d.at || m.queued {
			continue // stale: acked, re-armed or already queued
		}
		if m.dead != 0 {
			out = append(out, Exhausted{Stream: d.sseq, Deliveries: m.deliveries, Retry: true})
			continue
		}
		if s.policy.MaxDeliver > 0 && m.deliveries >= uint64(s.policy.MaxDeliver) {
			e := Exhausted{Stream: d.sseq, Deliveries: m.deliveries, Kept: s.deadLetter}
			if e.Kept {
				s.mark(d.sseq, m, store.DeadLetterMaxDeliver, now)
			} else {
				delete(s.pending, d.sseq)
				s.exhaust(d.sseq, m.deliveries)
			}
			out = append(out, e)
			continue
		}
		s.queue(d.sseq, m)
	}
	return out
}

// ExhaustedByNak reports whether a NAK of sseq ends its deliveries
// (max_deliver reached) at now (unix ns): then it leaves pending like
// Expire's (or stays marked, Kept) and true is returned with its
// delivery count. A dead-letter mark is not exhausted again (false).
func (s *State) ExhaustedByNak(sseq uint64, now int64) (Exhausted, bool) {
	m := s.pending[sseq]
	if m == nil || m.dead != 0 || s.policy.MaxDeliver <= 0 || m.deliveries < uint64(s.policy.MaxDeliver) {
		return Exhausted{}, false
	}
	if s.deadLetter {
		s.mark(sseq, m, store.DeadLetterMaxDeliver, now)
		return Exhausted{Stream: sseq, Deliveries: m.deliveries, Kept: true}, true
	}
	delete(s.pending, sseq)
	s.exhaust(sseq, m.deliveries)
	return Exhausted{Stream: sseq, Deliveries: m.deliveries}, true
}

// NextDeadline returns the earliest time (unix ns) at which Expire has
// work, and false when nothing is pending.
func (s *State) NextDeadline() (int64, bool) {
	for len(s.deadlines) > 0 {
		d := s.deadlines[0]
		if m := s.timed(d.sseq); m != nil && m.deadline == d.at && !m.queued {
			return d.at, true
		}
		heap.Pop(&s.deadlines)
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
	for sseq, m := range s.held {
		if st.DeadLetter == nil {
			st.DeadLetter = map[uint64]store.DeadLetter{}
		}
		st.DeadLetter[sseq] = store.DeadLetter{Reason: m.dead, After: m.after}
	}
	if len(s.pending) == 0 {
		return st
	}
	st.Pending = make(map[uint64]store.Pending, len(s.pending))
	for sseq, m := range s.pending {
		st.Pending[sseq] = store.Pending{Sequence: m.cseq, Timestamp: m.last}
		if m.dead != 0 {
			if st.DeadLetter == nil {
				st.DeadLetter = map[uint64]store.DeadLetter{}
			}
			st.DeadLetter[sseq] = store.DeadLetter{Reason: m.dead, After: m.after}
		}
		if m.deliveries > 1 {
			if st.Redelivered == nil {
				st.Redelivered = map[uint64]uint64{}
			}
			st.Redelivered[sseq] = m.deliveries - 1
		}
	}
	return st
}

// deadline is an entry of the deadline heap; entries whose message was
// acked or re-armed since are skipped when they surface.
type deadline struct {
	at   int64
	sseq uint64
}

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
		if m := s.pending[op.Stream]; m != nil && (s.policy.MaxDeliver <= 0 || m.deliveries < uint64(s.policy.MaxDeliver)) {
			s.Nak(op.Stream, time.Duration(max(op.Time-now, 0)), now)
		}
	}
	return nil
}
