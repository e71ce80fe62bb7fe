package consumer

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// The injected clock: tests keep the time in a plain int64 (unix ns) and
// advance it by hand.
const (
	sec = int64(time.Second)
	t0  = int64(1_700_000_000) * sec
)

func explicit(wait time.Duration) Policy { return Policy{Ack: AckExplicit, AckWait: wait} }

func pair(c, s uint64) store.SequencePair { return store.SequencePair{Consumer: c, Stream: s} }

// pend is a stored pending entry: stream sequence, consumer sequence and
// timestamp.
func pend(sseq, cseq uint64, ts int64) store.StreamPending {
	return store.StreamPending{Stream: sseq, Pending: store.Pending{Sequence: cseq, Timestamp: ts}}
}

// deliver records first deliveries of seqs at now.
func deliver(s *State, now int64, seqs ...uint64) {
	for _, seq := range seqs {
		s.DeliverNew(seq, now)
	}
}

// redeliverAll takes the whole redelivery queue at now, redelivering
// each message, and returns the stream sequences in queue order.
func redeliverAll(s *State, now int64) []uint64 {
	var out []uint64
	for {
		seq, ok := s.NextRedelivery()
		if !ok {
			return out
		}
		s.Redeliver(seq, now)
		out = append(out, seq)
	}
}

func wantFloors(t *testing.T, s *State, delivered, floor store.SequencePair) {
	t.Helper()
	if got := s.Delivered(); got != delivered {
		t.Fatalf("delivered %+v, want %+v", got, delivered)
	}
	if got := s.AckFloor(); got != floor {
		t.Fatalf("ack floor %+v, want %+v", got, floor)
	}
}

func wantQueue(t *testing.T, s *State, now int64, want ...uint64) {
	t.Helper()
	if got := redeliverAll(s, now); !slices.Equal(got, want) {
		t.Fatalf("redelivery queue %v, want %v", got, want)
	}
}

func wantDeadline(t *testing.T, s *State, want int64, ok bool) {
	t.Helper()
	got, gotOK := s.NextDeadline()
	if got != want || gotOK != ok {
		t.Fatalf("NextDeadline = t0%+.3fs %v, want t0%+.3fs %v", secs(got), gotOK, secs(want), ok)
	}
}

func secs(ns int64) float64 {
	if ns == 0 {
		return 0
	}
	return float64(ns-t0) / float64(sec)
}

// boolKeys returns the set of m's keys.
func boolKeys[V any](m map[uint64]V) map[uint64]bool {
	out := make(map[uint64]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func sortedAcks(r AckResult) []uint64 {
	a := slices.Clone(r.Acked)
	slices.Sort(a)
	return a
}

// TestNewStateStart: a new consumer's delivered and ack floor stream
// sequences are one below its start (nats-server v2.15.2 selectStartingSeqNo).
func TestNewStateStart(t *testing.T) {
	for _, tc := range []struct {
		start, next uint64
		pair        store.SequencePair
	}{
		{0, 1, pair(0, 0)},
		{1, 1, pair(0, 0)},
		{10, 10, pair(0, 9)},
	} {
		s := NewState(explicit(time.Second), tc.start)
		wantFloors(t, s, tc.pair, tc.pair)
		if s.NextSeq() != tc.next || s.NumAckPending() != 0 {
			t.Fatalf("start %d: next %d pending %d", tc.start, s.NextSeq(), s.NumAckPending())
		}
	}
}

// TestDeliverNewNumbering: every first delivery takes the next consumer
// sequence, also when a filter skips stream sequences (the v1 ack reply subject, ADR-15, consumer seq).
func TestDeliverNewNumbering(t *testing.T) {
	for _, ack := range []AckPolicy{AckNone, AckAll, AckExplicit} {
		s := NewState(Policy{Ack: ack, AckWait: time.Second}, 1)
		for i, sseq := range []uint64{1, 2, 5, 9} {
			d := s.DeliverNew(sseq, t0)
			if want := (Delivery{Deliveries: 1, ConsumerSeq: uint64(i + 1)}); d != want {
				t.Fatalf("%v: delivery of %d = %+v, want %+v", ack, sseq, d, want)
			}
			if s.Delivered() != pair(uint64(i+1), sseq) || s.NextSeq() != sseq+1 {
				t.Fatalf("%v: delivered %+v next %d after %d", ack, s.Delivered(), s.NextSeq(), sseq)
			}
		}
		wantPending := 4
		if ack == AckNone {
			wantPending = 0
		}
		if s.NumAckPending() != wantPending {
			t.Fatalf("%v: %d pending, want %d", ack, s.NumAckPending(), wantPending)
		}
	}
}

// TestRedeliveryTakesNewConsumerSeq: a redelivery counts one more
// delivery and takes a new consumer sequence; the delivered stream
// sequence stays the highest delivered (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery, ack_wait).
func TestRedeliveryTakesNewConsumerSeq(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2, 3)
	s.Expire(t0 + 10*sec)
	for i, want := range []Delivery{{2, 4}, {2, 5}} {
		seq, ok := s.NextRedelivery()
		if !ok || seq != uint64(i+1) {
			t.Fatalf("next redelivery %d %v, want %d", seq, ok, i+1)
		}
		if d := s.Redeliver(seq, t0+10*sec); d != want {
			t.Fatalf("redelivery of %d = %+v, want %+v", seq, d, want)
		}
	}
	wantFloors(t, s, pair(5, 3), pair(0, 0))
	if d := s.DeliverNew(4, t0+10*sec); d != (Delivery{1, 6}) {
		t.Fatalf("new delivery after redeliveries = %+v, want {1 6}", d)
	}
	if s.NextSeq() != 5 {
		t.Fatalf("next seq %d, want 5", s.NextSeq())
	}
	// 3 still waits in the queue; 1, 2 and 4 come due together at t0+20s
	// and queue behind it in stream order.
	s.Expire(t0 + 20*sec)
	wantQueue(t, s, t0+20*sec, 3, 1, 2, 4)
	wantFloors(t, s, pair(10, 4), pair(0, 0))
	s.Ack(1, 8)
	if d := s.Redeliver(1, t0+20*sec); d != (Delivery{}) || s.Delivered() != pair(10, 4) {
		t.Fatalf("redelivery of an acked message = %+v, delivered %+v", d, s.Delivered())
	}
}

// TestAckExplicitFloor: explicit acks in and out of order. The floor is
// (lowest pending's consumer seq - 1, lowest pending's stream seq - 1),
// or the delivered pair when nothing is pending (nats-server v2.15.2
// consumer.go processAckMsg, moveAckFloor).
func TestAckExplicitFloor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deliver []uint64
		acks    []uint64
		floors  []store.SequencePair // after each ack
	}{
		{"in order", []uint64{1, 2, 3, 4, 5}, []uint64{1, 2, 3, 4, 5},
			[]store.SequencePair{pair(1, 1), pair(2, 2), pair(3, 3), pair(4, 4), pair(5, 5)}},
		{"out of order", []uint64{1, 2, 3, 4, 5}, []uint64{3, 1, 2, 5, 4},
			[]store.SequencePair{pair(0, 0), pair(1, 1), pair(3, 3), pair(3, 3), pair(5, 5)}},
		{"reverse", []uint64{1, 2, 3}, []uint64{3, 2, 1},
			[]store.SequencePair{pair(0, 0), pair(0, 0), pair(3, 3)}},
		// A filtered consumer: stream sequences 1, 3, 5 are not its.
		// nats-server leaves the floor at (0,0) after the first ack
		// (its floor moves only when the delivery just above it is
		// acked); the formula, which cairn follows, gives (0,1).
		{"gaps", []uint64{2, 4, 6}, []uint64{4, 2, 6},
			[]store.SequencePair{pair(0, 1), pair(2, 5), pair(3, 6)}},
		// Far apart sequences: the lowest pending is found by visiting
		// the pending entries, not by walking the stream range.
		{"sparse", []uint64{1, 100, 200}, []uint64{100, 1, 200},
			[]store.SequencePair{pair(0, 0), pair(2, 199), pair(3, 200)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(explicit(time.Minute), 1)
			deliver(s, t0, tc.deliver...)
			last := tc.deliver[len(tc.deliver)-1]
			for i, seq := range tc.acks {
				r := s.Ack(seq, uint64(slices.Index(tc.deliver, seq)+1))
				if !slices.Equal(r.Acked, []uint64{seq}) {
					t.Fatalf("ack %d acked %v", seq, r.Acked)
				}
				wantFloors(t, s, pair(uint64(len(tc.deliver)), last), tc.floors[i])
				if s.IsPending(seq) || s.NumAckPending() != len(tc.acks)-i-1 {
					t.Fatalf("after ack %d: pending %v, %d pending", seq, s.IsPending(seq), s.NumAckPending())
				}
			}
		})
	}
}

// TestAckFloorUsesFirstDeliverySeq: a redelivered pending message keeps
// the consumer sequence of its first delivery for the ack floor and the
// stored state, as nats-server does (consumer.go trackPending "keep
// original consumer delivery sequence", filestore.go UpdateDelivered);
// the ack reply of the redelivery carries the new consumer sequence.
func TestAckFloorUsesFirstDeliverySeq(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2, 3)
	s.Expire(t0 + 10*sec)
	s.Redeliver(1, t0+10*sec) // consumer seq 4
	s.Redeliver(2, t0+10*sec) // consumer seq 5
	st := s.Snapshot()
	if p1, _ := st.PendingAt(1); p1.Sequence != 1 {
		t.Fatalf("stored pending %+v, want the first delivery sequences", st.Pending)
	}
	if p2, _ := st.PendingAt(2); p2.Sequence != 2 {
		t.Fatalf("stored pending %+v, want the first delivery sequences", st.Pending)
	}
	steps := []struct {
		sseq, cseq uint64
		floor      store.SequencePair
	}{
		{3, 3, pair(0, 0)}, // 1 is still pending with first delivery 1
		{1, 4, pair(1, 1)}, // lowest pending is 2, first delivered as 2
		{2, 5, pair(5, 3)}, // nothing pending: the delivered pair
	}
	for _, st := range steps {
		s.Ack(st.sseq, st.cseq)
		wantFloors(t, s, pair(5, 3), st.floor)
	}
}

// TestAckNotPending: an ack of something not pending (already acked,
// never delivered to this consumer, beyond the delivered sequence, at or
// below the floor) changes nothing (the ack kinds of nats-server v2.15.2's processAck, double ack).
func TestAckNotPending(t *testing.T) {
	for _, ack := range []AckPolicy{AckExplicit, AckAll} {
		s := NewState(Policy{Ack: ack, AckWait: time.Minute}, 1)
		deliver(s, t0, 1, 2, 4) // 3 is filtered out
		s.Ack(1, 1)
		before := s.Snapshot()
		for _, a := range [][2]uint64{{1, 1}, {0, 0}, {5, 4}, {9, 9}} {
			if r := s.Ack(a[0], a[1]); len(r.Acked) != 0 {
				t.Fatalf("%v: ack %v acked %v", ack, a, r.Acked)
			}
		}
		if ack == AckExplicit {
			if r := s.Ack(3, 0); len(r.Acked) != 0 {
				t.Fatalf("ack of the never delivered 3 acked %v", r.Acked)
			}
		}
		if after := s.Snapshot(); !reflect.DeepEqual(before, after) {
			t.Fatalf("%v: state changed by acks of nothing pending:\n%+v\n%+v", ack, before, after)
		}
	}
}

// TestAckAll: with ack policy all, an ack covers every pending message at
// or below it (the ack kinds of nats-server v2.15.2's processAck); flow_control acks the same way.
func TestAckAll(t *testing.T) {
	for _, ack := range []AckPolicy{AckAll, AckFlowControl} {
		s := NewState(Policy{Ack: ack, AckWait: time.Minute}, 1)
		deliver(s, t0, 1, 2, 3, 4, 5)
		if got := sortedAcks(s.Ack(3, 3)); !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Fatalf("%v: ack all 3 acked %v", ack, got)
		}
		wantFloors(t, s, pair(5, 5), pair(3, 3))
		if s.NumAckPending() != 2 || !s.IsPending(4) || s.IsPending(3) {
			t.Fatalf("%v: %d pending after ack all 3", ack, s.NumAckPending())
		}
		if r := s.Ack(2, 2); len(r.Acked) != 0 {
			t.Fatalf("%v: ack all below the floor acked %v", ack, r.Acked)
		}
		if got := sortedAcks(s.Ack(5, 5)); !slices.Equal(got, []uint64{4, 5}) {
			t.Fatalf("%v: ack all 5 acked %v", ack, got)
		}
		wantFloors(t, s, pair(5, 5), pair(5, 5))
	}
}

// TestAckAllSkipsQueued: messages acked by an ack all while waiting in
// the redelivery queue are not redelivered; when nothing is left pending
// the floor is the delivered pair.
func TestAckAllSkipsQueued(t *testing.T) {
	s := NewState(Policy{Ack: AckAll, AckWait: 10 * time.Second}, 1)
	deliver(s, t0, 1, 2, 3)
	s.Expire(t0 + 10*sec)
	s.Ack(2, 2)
	wantQueue(t, s, t0+10*sec, 3) // redelivered as consumer seq 4
	s.Ack(3, 4)
	wantFloors(t, s, pair(4, 3), pair(4, 3))
}

// TestAckNone: nothing is pending; the floor follows the delivered pair
// and acks, naks and progress do nothing (nats-server v2.15.2 ConsumerConfig).
func TestAckNone(t *testing.T) {
	s := NewState(Policy{Ack: AckNone, AckWait: time.Second, MaxAckPending: 1, MaxDeliver: 1}, 1)
	deliver(s, t0, 1, 2, 4)
	wantFloors(t, s, pair(3, 4), pair(3, 4))
	if s.NumAckPending() != 0 || s.AtAckLimit() || s.IsPending(4) {
		t.Fatalf("ack none: %d pending, at limit %v", s.NumAckPending(), s.AtAckLimit())
	}
	if r := s.Ack(4, 3); len(r.Acked) != 0 {
		t.Fatalf("ack none: ack acked %v", r.Acked)
	}
	if s.Nak(4, 0, t0) || s.Progress(4, t0) {
		t.Fatal("ack none: nak or progress of a delivered message reported pending")
	}
	if out := s.Expire(t0 + time.Hour.Nanoseconds()); len(out) != 0 {
		t.Fatalf("ack none: expire returned %v", out)
	}
	wantDeadline(t, s, 0, false)
	wantQueue(t, s, t0)
	st := s.Snapshot()
	if st.Pending != nil || st.Redelivered != nil || st.AckFloor != pair(3, 4) {
		t.Fatalf("ack none snapshot %+v", st)
	}
}

// TestExpireQueueOrder: Expire queues messages whose ack_wait has passed
// in deadline order (stream order for equal deadlines), behind those
// already queued; NextRedelivery peeks and skips acked ones
// (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery).
func TestExpireQueueOrder(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1)
	deliver(s, t0+sec, 2, 3)
	deliver(s, t0+2*sec, 4)
	s.Progress(1, t0+5*sec) // 1 now due at t0+15s
	if out := s.Expire(t0 + 11*sec - 1); len(out) != 0 {
		t.Fatalf("expire before any deadline returned %v", out)
	}
	if seq, ok := s.NextRedelivery(); ok {
		t.Fatalf("%d queued before its deadline", seq)
	}
	s.Expire(t0 + 11*sec) // 2 and 3, exactly at their deadline
	s.Expire(t0 + 20*sec) // 4 (t0+12s), then 1 (t0+15s)
	for range 2 {
		if seq, ok := s.NextRedelivery(); !ok || seq != 2 {
			t.Fatalf("peek %d %v, want 2", seq, ok)
		}
	}
	s.Ack(3, 3)
	wantQueue(t, s, t0+20*sec, 2, 4, 1)
	wantDeadline(t, s, t0+30*sec, true)
}

// TestExpireIdempotent: a second Expire at the same time queues nothing
// more, and a queued message is not queued twice.
func TestExpireIdempotent(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2)
	s.Expire(t0 + 10*sec)
	s.Expire(t0 + 10*sec)
	s.Expire(t0 + 30*sec)
	wantQueue(t, s, t0+30*sec, 1, 2)
}

// TestAckWaitAndBackoff: the wait after delivery k is backoff[min(k-1,
// len-1)], the last value repeating, or ack_wait without backoff
// (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery, backoff).
func TestAckWaitAndBackoff(t *testing.T) {
	s3 := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}
	for _, tc := range []struct {
		name  string
		p     Policy
		waits []int64 // seconds, after delivery 1, 2, ...
	}{
		{"ack wait", Policy{Ack: AckExplicit, AckWait: 30 * time.Second}, []int64{30, 30, 30}},
		{"backoff", Policy{Ack: AckExplicit, AckWait: time.Second, BackOff: s3}, []int64{1, 5, 10, 10, 10}},
		{"one backoff", Policy{Ack: AckExplicit, AckWait: 30 * time.Second, BackOff: []time.Duration{2 * time.Second}}, []int64{2, 2, 2}},
		{"ack all", Policy{Ack: AckAll, AckWait: 30 * time.Second, BackOff: s3}, []int64{1, 5, 10, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(tc.p, 1)
			now := t0
			s.DeliverNew(1, now)
			for i, w := range tc.waits {
				due := now + w*sec
				wantDeadline(t, s, due, true)
				s.Expire(due - 1)
				if _, ok := s.NextRedelivery(); ok {
					t.Fatalf("delivery %d queued before its wait of %ds", i+1, w)
				}
				s.Expire(due)
				now = due
				if d := s.Redeliver(1, now); d.Deliveries != uint64(i+2) {
					t.Fatalf("redelivery %+v, want delivery %d", d, i+2)
				}
			}
		})
	}
}

// TestProgressUsesCurrentWait: +WPI restarts the wait of the current
// delivery (its backoff entry) and does not count a delivery.
func TestProgressUsesCurrentWait(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, BackOff: []time.Duration{time.Second, 5 * time.Second}}, 1)
	s.DeliverNew(1, t0)
	s.Expire(t0 + sec)
	s.Redeliver(1, t0+sec) // delivery 2: wait 5s
	if !s.Progress(1, t0+3*sec) {
		t.Fatal("progress of a pending message reported not pending")
	}
	wantDeadline(t, s, t0+8*sec, true)
	s.Expire(t0 + 8*sec)
	if d := s.Redeliver(1, t0+8*sec); d.Deliveries != 3 {
		t.Fatalf("redelivery after progress %+v, want delivery 3", d)
	}
}

// TestProgress: +WPI resets the ack wait from now (the ack kinds of nats-server v2.15.2's processAck); on a message not pending it reports false; a message already
// queued stays queued.
func TestProgress(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2)
	if !s.Progress(1, t0+8*sec) || s.Progress(9, t0) {
		t.Fatal("progress reported the wrong pending status")
	}
	s.Expire(t0 + 10*sec) // 2 only
	wantDeadline(t, s, t0+18*sec, true)
	if !s.Progress(2, t0+11*sec) {
		t.Fatal("progress of a queued message reported not pending")
	}
	wantDeadline(t, s, t0+18*sec, true)
	s.Expire(t0 + 18*sec)
	wantQueue(t, s, t0+18*sec, 2, 1)
}

// TestMaxDeliver: after max_deliver deliveries the next expiry returns
// the message as exhausted; it leaves pending and the queue, and the ack
// floor moves past it (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery, max_deliver). Zero and
// -1 mean no limit.
func TestMaxDeliver(t *testing.T) {
	for _, tc := range []struct {
		max, rounds int
		exhausted   bool
	}{{1, 1, true}, {3, 3, true}, {0, 20, false}, {-1, 20, false}} {
		p := Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: tc.max}
		s := NewState(p, 1)
		now := t0
		deliver(s, now, 1, 2)
		s.Ack(2, 2)
		var out []Exhausted
		for r := range tc.rounds {
			if r > 0 {
				wantQueue(t, s, now, 1)
			}
			now += 10 * sec
			out = s.Expire(now)
			if r < tc.rounds-1 && len(out) != 0 {
				t.Fatalf("max %d: exhausted %v after %d deliveries", tc.max, out, r+1)
			}
		}
		if !tc.exhausted {
			if len(out) != 0 || !s.IsPending(1) {
				t.Fatalf("max %d: exhausted %v, pending %v", tc.max, out, s.IsPending(1))
			}
			continue
		}
		if want := []Exhausted{{Stream: 1, Deliveries: uint64(tc.max)}}; !slices.Equal(out, want) {
			t.Fatalf("max %d: exhausted %v, want %v", tc.max, out, want)
		}
		if s.IsPending(1) || s.NumAckPending() != 0 {
			t.Fatalf("max %d: exhausted message still pending", tc.max)
		}
		if !s.IsExhausted(1) || s.NumExhausted() != 1 {
			t.Fatalf("max %d: exhausted message not held", tc.max)
		}
		// num_redelivered counts it, except with max_deliver 1.
		if want := min(1, tc.max-1); s.NumRedelivered() != want {
			t.Fatalf("max %d: NumRedelivered %d, want %d", tc.max, s.NumRedelivered(), want)
		}
		wantQueue(t, s, now)
		wantDeadline(t, s, 0, false)
		// The floor stays below the message that ran out of deliveries.
		wantFloors(t, s, s.Delivered(), pair(0, 0))
	}
}

// TestMaxDeliverKeepsFloor: running out of deliveries does not move the
// ack floor (nats-server v2.15.2 keeps it below such a message); an ack
// that leaves nothing pending moves it to the delivered pair, past the
// exhausted message, as nats-server's does.
func TestMaxDeliverKeepsFloor(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
	deliver(s, t0, 1)
	deliver(s, t0+5*sec, 2)
	if out := s.Expire(t0 + 10*sec); !slices.Equal(out, []Exhausted{{Stream: 1, Deliveries: 1}}) {
		t.Fatalf("exhausted %v", out)
	}
	wantFloors(t, s, pair(2, 2), pair(0, 0))
	if out := s.Expire(t0 + 15*sec); !slices.Equal(out, []Exhausted{{Stream: 2, Deliveries: 1}}) {
		t.Fatalf("exhausted %v", out)
	}
	wantFloors(t, s, pair(2, 2), pair(0, 0))
	deliver(s, t0+16*sec, 3)
	if r := s.Ack(3, 3); !slices.Equal(r.Acked, []uint64{3}) {
		t.Fatalf("ack 3: %v", r.Acked)
	}
	wantFloors(t, s, pair(3, 3), pair(3, 3))
	if !s.IsExhausted(1) || !s.IsExhausted(2) {
		t.Fatal("an ack of another message released the exhausted ones")
	}
}

// TestAckReleasesExhausted: an explicit ack (or +TERM) of a message that
// ran out of deliveries releases it, for retention, without moving the
// floor; a second ack finds nothing. Ack policy all never releases one
// (nats-server v2.15.2 keeps its redelivered-count entry).
func TestAckReleasesExhausted(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 2}, 1)
	deliver(s, t0, 1, 2)
	s.Nak(1, 0, t0)
	s.Redeliver(1, t0)
	if _, ok := s.ExhaustedByNak(1, t0); !ok {
		t.Fatal("not exhausted")
	}
	if r := s.Ack(1, 3); !slices.Equal(r.Acked, []uint64{1}) {
		t.Fatalf("ack of the exhausted message acked %v", r.Acked)
	}
	if s.IsExhausted(1) || s.NumRedelivered() != 0 {
		t.Fatal("still held after its ack")
	}
	wantFloors(t, s, pair(3, 2), pair(0, 0))
	if r := s.Ack(1, 3); len(r.Acked) != 0 {
		t.Fatalf("second ack acked %v", r.Acked)
	}

	a := NewState(Policy{Ack: AckAll, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
	deliver(a, t0, 1)
	a.Expire(t0 + 10*sec)
	deliver(a, t0+11*sec, 2)
	for _, seq := range []uint64{1, 2} {
		if r := a.Ack(seq, seq); slices.Contains(r.Acked, 1) {
			t.Fatalf("ack all of %d released the exhausted message", seq)
		}
	}
	if !a.IsExhausted(1) {
		t.Fatal("ack all released the exhausted message")
	}
	wantFloors(t, a, pair(2, 2), pair(2, 2))
}

// TestExhaustedGone: a message out of deliveries that leaves the stream
// is released (DropRedelivery, DropGone, SkipTo), marked Exhausted and
// without a consumer sequence.
func TestExhaustedGone(t *testing.T) {
	mk := func() *State {
		s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
		deliver(s, t0, 1, 2, 3, 4)
		s.Ack(4, 4)
		s.Expire(t0 + 10*sec) // 1, 2, 3 exhausted
		return s
	}
	s := mk()
	if d, ok := s.DropRedelivery(2); !ok || d != (Dropped{Stream: 2, Deliveries: 1, Exhausted: true}) {
		t.Fatalf("DropRedelivery(2) = %+v %v", d, ok)
	}
	if _, ok := s.DropRedelivery(2); ok || s.IsExhausted(2) {
		t.Fatal("dropped twice")
	}
	ds := s.DropGone(func(seq uint64) bool { return seq == 3 })
	if len(ds) != 1 || ds[0] != (Dropped{Stream: 3, Deliveries: 1, Exhausted: true}) {
		t.Fatalf("DropGone = %+v", ds)
	}
	wantFloors(t, s, pair(4, 4), pair(0, 0))
	if !s.SkipTo(2) || s.IsExhausted(1) || s.NumExhausted() != 0 {
		t.Fatal("SkipTo(2) kept 1")
	}
	if s.SkipTo(2) {
		t.Fatal("SkipTo(2) again changed something")
	}
}

// TestExhaustedByNak: a NAK after the last allowed delivery ends the
// message's deliveries like an expiry does (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery).
func TestExhaustedByNak(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 2}, 1)
	deliver(s, t0, 1, 2)
	if _, ok := s.ExhaustedByNak(1, t0); ok {
		t.Fatal("exhausted after one of two deliveries")
	}
	s.Nak(1, 0, t0+sec)
	wantQueue(t, s, t0+sec, 1)
	e, ok := s.ExhaustedByNak(1, t0)
	if !ok || e != (Exhausted{Stream: 1, Deliveries: 2}) {
		t.Fatalf("ExhaustedByNak = %+v %v", e, ok)
	}
	if s.IsPending(1) || !s.IsExhausted(1) {
		t.Fatal("exhausted message still pending, or not held")
	}
	wantFloors(t, s, pair(3, 2), pair(0, 0))
	for _, seq := range []uint64{1, 99} {
		if _, ok := s.ExhaustedByNak(seq, t0); ok {
			t.Fatalf("ExhaustedByNak(%d) of nothing pending", seq)
		}
	}
	u := NewState(explicit(time.Second), 1)
	deliver(u, t0, 1)
	for i := range 5 {
		if _, ok := u.ExhaustedByNak(1, t0); ok {
			t.Fatalf("exhausted after %d deliveries without max_deliver", i+1)
		}
		u.Nak(1, 0, t0)
		wantQueue(t, u, t0, 1)
	}
}

// TestNakNoDelay: -NAK queues the message at once, once
// (the ack kinds of nats-server v2.15.2's processAck).
func TestNakNoDelay(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2)
	if !s.Nak(2, 0, t0+sec) || !s.Nak(2, 0, t0+sec) {
		t.Fatal("nak of a pending message reported not pending")
	}
	if s.Nak(9, 0, t0) {
		t.Fatal("nak of nothing pending reported pending")
	}
	wantDeadline(t, s, t0+10*sec, true) // 1's; 2 is queued
	s.Expire(t0 + 10*sec)
	wantQueue(t, s, t0+10*sec, 2, 1)
}

// TestNakDelay: -NAK with a delay holds the message back until the
// delay has passed, whether shorter or longer than ack_wait, and takes
// it out of the queue if it was waiting there (the ack kinds of nats-server v2.15.2's processAck;
// nats-server processNak removeFromRedeliverQueue).
func TestNakDelay(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2)
	s.Nak(1, 20*time.Second, t0+sec)
	s.Nak(2, 2*time.Second, t0+sec)
	wantDeadline(t, s, t0+3*sec, true)
	s.Expire(t0 + 10*sec)
	wantQueue(t, s, t0+10*sec, 2)
	wantDeadline(t, s, t0+20*sec, true) // 2's redelivery wait
	s.Expire(t0 + 21*sec - 1)
	if seq, _ := s.NextRedelivery(); seq == 1 {
		t.Fatal("1 queued before its nak delay passed")
	}
	s.Expire(t0 + 21*sec)
	wantQueue(t, s, t0+21*sec, 2, 1)
}

// TestNakDelayWhileQueued: a delayed NAK of a queued message keeps it
// out of the queue until the delay passes, and it then queues behind
// what came due in the meantime.
func TestNakDelayWhileQueued(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2)
	deliver(s, t0+2*sec, 3)
	s.Expire(t0 + 10*sec) // queue 1, 2
	s.Nak(1, 5*time.Second, t0+10*sec)
	if seq, ok := s.NextRedelivery(); !ok || seq != 2 {
		t.Fatalf("next redelivery %d %v, want 2", seq, ok)
	}
	s.Expire(t0 + 12*sec) // 3
	s.Expire(t0 + 15*sec) // 1
	wantQueue(t, s, t0+15*sec, 2, 3, 1)
}

// TestAtAckLimit: max_ack_pending stops new deliveries at the limit;
// redeliveries do not add to it; -1 and 0 mean no limit (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery).
func TestAtAckLimit(t *testing.T) {
	for _, tc := range []struct {
		ack   AckPolicy
		max   int
		limit bool
	}{
		{AckExplicit, 2, true}, {AckAll, 2, true}, {AckExplicit, -1, false},
		{AckExplicit, 0, false}, {AckNone, 2, false},
	} {
		s := NewState(Policy{Ack: tc.ack, AckWait: 10 * time.Second, MaxAckPending: tc.max}, 1)
		deliver(s, t0, 1)
		if s.AtAckLimit() {
			t.Fatalf("%+v: at limit with one pending", tc)
		}
		deliver(s, t0, 2)
		if s.AtAckLimit() != tc.limit {
			t.Fatalf("%+v: at limit %v with two pending", tc, s.AtAckLimit())
		}
		s.Expire(t0 + 10*sec)
		redeliverAll(s, t0+10*sec)
		if s.AtAckLimit() != tc.limit {
			t.Fatalf("%+v: at limit %v after redeliveries", tc, s.AtAckLimit())
		}
		s.Ack(1, 3)
		if s.AtAckLimit() {
			t.Fatalf("%+v: at limit after an ack", tc)
		}
	}
}

// TestNumRedelivered counts pending messages delivered more than once;
// a queued message counts only once redelivered.
func TestNumRedelivered(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2, 3)
	s.Expire(t0 + 10*sec)
	check := func(want int) {
		t.Helper()
		if got := s.NumRedelivered(); got != want {
			t.Fatalf("NumRedelivered = %d, want %d", got, want)
		}
	}
	check(0)
	s.Redeliver(1, t0+10*sec)
	s.Redeliver(2, t0+10*sec)
	check(2)
	s.Expire(t0 + 20*sec)
	s.Redeliver(3, t0+20*sec)
	s.Redeliver(1, t0+20*sec) // third delivery counts once
	check(3)
	s.Ack(1, 6)
	check(2)
	s.DropRedelivery(2)
	check(1)
	// A message out of deliveries counts, until released.
	m := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 2}, 1)
	deliver(m, t0, 1)
	m.Expire(t0 + 10*sec)
	m.Redeliver(1, t0+10*sec)
	m.Expire(t0 + 20*sec)
	if !m.IsExhausted(1) || m.NumRedelivered() != 1 {
		t.Fatalf("exhausted %v, NumRedelivered %d", m.IsExhausted(1), m.NumRedelivered())
	}
	m.Ack(1, 2)
	if m.NumRedelivered() != 0 {
		t.Fatalf("NumRedelivered %d after releasing it", m.NumRedelivered())
	}
}

// TestNextDeadlineSkipsStale: NextDeadline ignores heap entries of acked,
// queued and re-armed messages, and drops them.
func TestNextDeadlineSkipsStale(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	wantDeadline(t, s, 0, false)
	deliver(s, t0, 1)
	deliver(s, t0+sec, 2)
	deliver(s, t0+2*sec, 3)
	wantDeadline(t, s, t0+10*sec, true)
	s.Ack(1, 1)
	wantDeadline(t, s, t0+11*sec, true)
	s.Progress(2, t0+5*sec)
	wantDeadline(t, s, t0+12*sec, true)
	s.Nak(3, 0, t0+5*sec)
	wantDeadline(t, s, t0+15*sec, true)
	s.Ack(2, 2)
	wantDeadline(t, s, 0, false)
	if len(s.deadlines) != 0 {
		t.Fatalf("%d stale deadline entries kept", len(s.deadlines))
	}
}

// TestDropRedelivery: a pending message the stream no longer holds
// leaves pending and the queue without an ack; the floor moves
// (nats-server v2.15.2's ack wait, backoff and max_deliver redelivery, stream removal).
func TestDropRedelivery(t *testing.T) {
	s := NewState(explicit(10*time.Second), 1)
	deliver(s, t0, 1, 2, 3)
	s.Expire(t0 + 10*sec)
	s.DropRedelivery(1)
	if s.IsPending(1) || s.NumAckPending() != 2 {
		t.Fatal("dropped message still pending")
	}
	wantFloors(t, s, pair(3, 3), pair(1, 1))
	if seq, ok := s.NextRedelivery(); !ok || seq != 2 {
		t.Fatalf("next redelivery %d %v, want 2", seq, ok)
	}
	s.DropRedelivery(1)
	s.DropRedelivery(99)
	s.DropRedelivery(3)
	wantFloors(t, s, pair(3, 3), pair(1, 1))
	wantQueue(t, s, t0+10*sec, 2)
	s.DropRedelivery(2)
	wantFloors(t, s, pair(4, 3), pair(4, 3))
	wantDeadline(t, s, 0, false)
}

// snapshotFixture builds a state with acked, redelivered, progressed,
// nak-delayed, queued and fresh pending messages, and returns it at
// t0+12s.
func snapshotFixture(p Policy) *State {
	s := NewState(p, 1)
	deliver(s, t0, 1, 2, 3, 4, 5)
	s.Ack(2, 2)
	s.Expire(t0 + 10*sec)               // queue 1, 3, 4, 5
	s.Redeliver(1, t0+10*sec)           // consumer seq 6
	s.Redeliver(3, t0+10*sec)           // consumer seq 7
	s.Progress(3, t0+11*sec)            // due t0+21s
	s.Nak(4, 30*time.Second, t0+11*sec) // due t0+41s, out of the queue
	deliver(s, t0+12*sec, 6)            // consumer seq 8; 5 stays queued
	return s
}

// TestSnapshot: the stored state holds the delivered and floor pairs,
// each pending message's first consumer sequence and timestamp (a NAK
// delay is stored as a timestamp one wait before the new deadline, as
// nats-server does), and the redelivery counts beyond the first.
func TestSnapshot(t *testing.T) {
	s := snapshotFixture(explicit(10 * time.Second))
	want := &store.ConsumerState{
		Delivered: pair(8, 6),
		AckFloor:  pair(0, 0),
		Pending: []store.StreamPending{
			pend(1, 1, t0+10*sec), pend(3, 3, t0+11*sec), pend(4, 4, t0+31*sec),
			pend(5, 5, t0), pend(6, 8, t0+12*sec),
		},
		Redelivered: map[uint64]uint64{1: 1, 3: 1},
	}
	got := s.Snapshot()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot\n%+v\nwant\n%+v", got, want)
	}
	s.Ack(1, 6)
	if _, ok := got.PendingAt(1); !ok {
		t.Fatal("snapshot shares its pending entries with the state")
	}
	empty := NewState(explicit(time.Second), 5).Snapshot()
	if empty.Pending != nil || empty.Redelivered != nil || empty.Delivered != pair(0, 4) {
		t.Fatalf("empty snapshot %+v", empty)
	}
}

// TestSnapshotRestoreRoundTrip: a restored state has the same stored
// form, delivered and floor pairs, delivery counts and deadlines as the
// one snapshotted; a message queued at the snapshot is due at once after
// the restore. From then on both behave the same.
func TestSnapshotRestoreRoundTrip(t *testing.T) {
	for _, p := range []Policy{
		{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 3},
		{Ack: AckExplicit, AckWait: 10 * time.Second, BackOff: []time.Duration{10 * time.Second, 3 * time.Second}},
	} {
		a := snapshotFixture(p)
		b := RestoreState(p, a.Snapshot())
		if !reflect.DeepEqual(a.Snapshot(), b.Snapshot()) {
			t.Fatalf("%+v: restored snapshot\n%+v\nwant\n%+v", p, b.Snapshot(), a.Snapshot())
		}
		wantFloors(t, b, a.Delivered(), a.AckFloor())
		a.pending.each(func(m *pendingMsg) bool {
			seq := m.sseq
			r := b.pending.get(seq)
			if r.deliveries != m.deliveries || r.deadline != m.deadline {
				t.Fatalf("%+v: restored %d: %d deliveries due t0%+.3fs, want %d due t0%+.3fs",
					p, seq, r.deliveries, secs(r.deadline), m.deliveries, secs(m.deadline))
			}
			return true
		})
		wantDeadline(t, b, t0+10*sec, true) // 5, queued before the snapshot
		now := t0 + 12*sec
		b.Expire(now)
		for now <= t0+60*sec {
			ea, eb := a.Expire(now), b.Expire(now)
			qa, qb := redeliverAll(a, now), redeliverAll(b, now)
			if !slices.Equal(ea, eb) || !slices.Equal(qa, qb) {
				t.Fatalf("%+v: at t0%+.3fs original exhausted %v queued %v, restored %v %v",
					p, secs(now), ea, qa, eb, qb)
			}
			now += sec / 2
		}
		if !reflect.DeepEqual(a.Snapshot(), b.Snapshot()) {
			t.Fatalf("%+v: diverged after restore", p)
		}
	}
}

// TestRestoreLate: after a restart later than every deadline, every
// pending message is queued, oldest deadline first.
func TestRestoreLate(t *testing.T) {
	p := Policy{Ack: AckExplicit, BackOff: []time.Duration{time.Second, time.Minute}}
	st := &store.ConsumerState{
		Delivered:   pair(5, 4),
		AckFloor:    pair(0, 0),
		Pending:     []store.StreamPending{pend(1, 1, t0+3*sec), pend(2, 2, t0), pend(4, 5, t0+10*sec)},
		Redelivered: map[uint64]uint64{2: 1},
	}
	s := RestoreState(p, st)
	wantDeadline(t, s, t0+4*sec, true) // 1: ts + backoff[0]
	s.Expire(t0 + time.Hour.Nanoseconds())
	// 1 due t0+4s, 4 due t0+11s, 2 due t0+60s (second delivery's backoff)
	wantQueue(t, s, t0+time.Hour.Nanoseconds(), 1, 4, 2)
	if s.NumRedelivered() != 3 || s.Delivered() != pair(8, 4) {
		t.Fatalf("after redelivering: %d redelivered, delivered %+v", s.NumRedelivered(), s.Delivered())
	}
}

// model is an obviously correct reference for State: plain maps and
// slices, every question answered by looking at everything.
type model struct {
	p         Policy
	delivered store.SequencePair
	floor     store.SequencePair
	pending   map[uint64]*modelMsg
	rdq       []uint64          // redelivery queue, oldest first
	done      map[uint64]string // acked, exhausted or dropped: never delivered again
	lastCseq  map[uint64]uint64 // consumer seq of each message's latest delivery
	exhausted map[uint64]uint64 // out of deliveries, still held: deliveries
	// Dead-letter marks (deadletter.go): dl is SetDeadLetter; held are
	// the marks of messages out of deliveries; after is every mark's
	// After.
	dl    bool
	held  map[uint64]*modelMsg
	after map[uint64]uint64
}

type modelMsg struct {
	first      uint64 // consumer seq of the first delivery
	deliveries uint64
	last       int64 // stored timestamp: deadline - wait(deliveries)
	deadline   int64
	queued     bool
	dead       store.DeadLetterReason // a dead-letter mark
	spent      bool                   // a mark whose deadline Expire returned (Retry), until RetryMoveAt
}

func newModel(p Policy, start uint64) *model {
	m := &model{p: p, pending: map[uint64]*modelMsg{}, done: map[uint64]string{}, lastCseq: map[uint64]uint64{}, exhausted: map[uint64]uint64{},
		held: map[uint64]*modelMsg{}, after: map[uint64]uint64{}}
	if start > 0 {
		m.delivered.Stream, m.floor.Stream = start-1, start-1
	}
	return m
}

func (m *model) wait(n uint64) int64 {
	if b := m.p.BackOff; len(b) > 0 {
		return int64(b[min(n, uint64(len(b)))-1])
	}
	return int64(m.p.AckWait)
}

func (m *model) deliverNew(sseq uint64, now int64) Delivery {
	m.delivered = pair(m.delivered.Consumer+1, sseq)
	m.lastCseq[sseq] = m.delivered.Consumer
	if m.p.Ack == AckNone {
		m.floor = m.delivered
		m.done[sseq] = "delivered with ack none"
	} else {
		m.pending[sseq] = &modelMsg{first: m.delivered.Consumer, deliveries: 1, last: now, deadline: now + m.wait(1)}
	}
	return Delivery{Deliveries: 1, ConsumerSeq: m.delivered.Consumer}
}

func (m *model) redeliver(sseq uint64, now int64) Delivery {
	x := m.pending[sseq]
	m.rdq = m.rdq[1:]
	m.delivered.Consumer++
	m.lastCseq[sseq] = m.delivered.Consumer
	x.deliveries++
	x.last, x.deadline, x.queued = now, now+m.wait(x.deliveries), false
	return Delivery{Deliveries: x.deliveries, ConsumerSeq: m.delivered.Consumer}
}

func (m *model) unqueue(sseq uint64) {
	m.rdq = slices.DeleteFunc(m.rdq, func(q uint64) bool { return q == sseq })
}

func (m *model) remove(sseq uint64, why string) {
	delete(m.pending, sseq)
	delete(m.after, sseq)
	m.unqueue(sseq)
	m.done[sseq] = why
}

// release forgets a message out of deliveries and its mark.
func (m *model) release(sseq uint64) {
	delete(m.exhausted, sseq)
	delete(m.held, sseq)
	delete(m.after, sseq)
}

func (m *model) lowest() uint64 {
	low := uint64(0)
	for q := range m.pending {
		if low == 0 || q < low {
			low = q
		}
	}
	return low
}

func (m *model) raiseFloor() {
	if len(m.pending) == 0 {
		m.floor = m.delivered
		return
	}
	low := m.lowest()
	m.floor = pair(max(m.floor.Consumer, m.pending[low].first-1), max(m.floor.Stream, low-1))
}

func (m *model) ack(sseq, cseq uint64) []uint64 {
	var acked []uint64
	switch m.p.Ack {
	case AckExplicit:
		if _, ok := m.exhausted[sseq]; ok {
			if m.held[sseq] != nil {
				return nil // being moved to the dead-letter subject
			}
			delete(m.exhausted, sseq) // released; the floor stays
			return []uint64{sseq}
		}
		if x := m.pending[sseq]; x == nil || x.dead != 0 {
			return nil
		}
		acked = []uint64{sseq}
	case AckAll:
		if sseq <= m.floor.Stream || sseq > m.delivered.Stream {
			return nil
		}
		kept := false
		for q, x := range m.pending {
			if q <= sseq {
				if x.dead != 0 {
					kept = true
					continue
				}
				acked = append(acked, q)
			}
		}
		if !kept {
			m.floor = pair(max(m.floor.Consumer, cseq), sseq)
		}
	default:
		return nil
	}
	for _, q := range acked {
		m.remove(q, "acked")
	}
	m.raiseFloor()
	slices.Sort(acked)
	return acked
}

func (m *model) queue(sseq uint64) {
	if x := m.pending[sseq]; !x.queued {
		x.queued = true
		m.rdq = append(m.rdq, sseq)
	}
}

func (m *model) nak(sseq uint64, delay time.Duration, now int64) bool {
	x := m.pending[sseq]
	switch {
	case x == nil || x.dead != 0:
		return false
	case delay <= 0:
		m.queue(sseq)
	default:
		if x.queued {
			x.queued = false
			m.unqueue(sseq)
		}
		x.deadline = now + int64(delay)
		x.last = x.deadline - m.wait(x.deliveries)
	}
	return true
}

func (m *model) progress(sseq uint64, now int64) bool {
	x := m.pending[sseq]
	if x == nil || x.dead != 0 {
		return false
	}
	if !x.queued {
		x.last, x.deadline = now, now+m.wait(x.deliveries)
	}
	return true
}

func (m *model) atMax(x *modelMsg) bool {
	return m.p.MaxDeliver > 0 && x.deliveries >= uint64(m.p.MaxDeliver)
}

func (m *model) expire(now int64) []Exhausted {
	timed := func(q uint64) *modelMsg {
		if x := m.pending[q]; x != nil {
			return x
		}
		return m.held[q]
	}
	var due []uint64
	for q, x := range m.pending {
		if !x.queued && !x.spent && x.deadline <= now {
			due = append(due, q)
		}
	}
	for q, x := range m.held {
		if !x.spent && x.deadline <= now {
			due = append(due, q)
		}
	}
	slices.SortFunc(due, func(a, b uint64) int {
		return cmp.Or(cmp.Compare(timed(a).deadline, timed(b).deadline), cmp.Compare(a, b))
	})
	var out []Exhausted
	for _, q := range due {
		x := timed(q)
		switch {
		case x.dead != 0:
			x.spent = true
			out = append(out, Exhausted{Stream: q, Deliveries: x.deliveries, Retry: true})
		case m.atMax(x) && m.dl:
			m.mark(q, store.DeadLetterMaxDeliver, now)
			out = append(out, Exhausted{Stream: q, Deliveries: x.deliveries, Kept: true})
		case m.atMax(x):
			out = append(out, Exhausted{Stream: q, Deliveries: x.deliveries})
			m.remove(q, "exhausted by expiry")
			m.exhausted[q] = x.deliveries
		default:
			m.queue(q)
		}
	}
	return out
}

// markWait is the wait a new mark is armed for (deadletter.go mark).
func (m *model) markWait(deliveries uint64) int64 { return max(m.wait(deliveries), 1) }

func (m *model) mark(sseq uint64, reason store.DeadLetterReason, now int64) {
	x := m.pending[sseq]
	x.dead, x.spent = reason, false
	if x.queued {
		x.queued = false
		m.unqueue(sseq)
	}
	x.last, x.deadline = now, now+m.markWait(x.deliveries)
	m.after[sseq] = 0
}

func (m *model) markDeadLetter(sseq uint64, reason store.DeadLetterReason, now int64) bool {
	if x := m.pending[sseq]; x != nil {
		if x.dead != 0 {
			return false
		}
		m.mark(sseq, reason, now)
		return true
	}
	n, ok := m.exhausted[sseq]
	if !ok || m.held[sseq] != nil {
		return false
	}
	m.held[sseq] = &modelMsg{deliveries: n, dead: reason, deadline: now + m.markWait(n)}
	m.after[sseq] = 0
	return true
}

// markOf returns the mark of sseq, nil when it has none.
func (m *model) markOf(sseq uint64) *modelMsg {
	if x := m.pending[sseq]; x != nil && x.dead != 0 {
		return x
	}
	return m.held[sseq]
}

func (m *model) deadLettered(sseq uint64) []uint64 {
	if m.held[sseq] != nil {
		m.release(sseq)
		return []uint64{sseq}
	}
	x := m.pending[sseq]
	if x == nil || x.dead == 0 {
		return nil
	}
	delete(m.after, sseq)
	if x.dead == store.DeadLetterTerm && m.p.Ack == AckAll {
		x.dead = 0
		return m.ack(sseq, x.first)
	}
	m.remove(sseq, "dead-lettered")
	m.raiseFloor()
	return []uint64{sseq}
}

func (m *model) unmark(sseq uint64) []uint64 {
	x := m.markOf(sseq)
	switch {
	case x == nil:
		return nil
	case x.dead == store.DeadLetterTerm:
		return m.deadLettered(sseq)
	case m.held[sseq] != nil:
		delete(m.held, sseq)
		delete(m.after, sseq)
		return nil
	}
	m.remove(sseq, "unmarked at max_deliver")
	m.exhausted[sseq] = x.deliveries
	return nil
}

func (m *model) retryMoveAt(sseq uint64, at int64) bool {
	x := m.markOf(sseq)
	if x == nil {
		return false
	}
	x.deadline, x.spent = at, false
	return true
}

func (m *model) setMoveAfter(sseq, after uint64) bool {
	if m.markOf(sseq) == nil {
		return false
	}
	m.after[sseq] = after
	return true
}

func (m *model) moves() []Move {
	var out []Move
	for _, q := range slices.Sorted(maps.Keys(m.after)) {
		x := m.markOf(q)
		mv := Move{Stream: q, Deliveries: x.deliveries, Reason: x.dead, After: m.after[q]}
		if m.pending[q] != nil {
			mv.Consumer = x.first
		}
		out = append(out, mv)
	}
	return out
}

func (m *model) exhaustedByNak(sseq uint64, now int64) (Exhausted, bool) {
	x := m.pending[sseq]
	if x == nil || x.dead != 0 || !m.atMax(x) {
		return Exhausted{}, false
	}
	if m.dl {
		m.mark(sseq, store.DeadLetterMaxDeliver, now)
		return Exhausted{Stream: sseq, Deliveries: x.deliveries, Kept: true}, true
	}
	m.remove(sseq, "exhausted by nak")
	m.exhausted[sseq] = x.deliveries
	return Exhausted{Stream: sseq, Deliveries: x.deliveries}, true
}

func (m *model) drop(sseq uint64) {
	if _, ok := m.exhausted[sseq]; ok {
		m.release(sseq)
		return
	}
	if m.pending[sseq] != nil {
		m.remove(sseq, "dropped")
		m.raiseFloor()
	}
}

func (m *model) dropGone(gone func(uint64) bool) []Dropped {
	var out []Dropped
	moved := false
	for _, q := range slices.Sorted(maps.Keys(m.pending)) {
		if x := m.pending[q]; gone(q) {
			out = append(out, Dropped{Stream: q, Consumer: x.first, Deliveries: x.deliveries})
			m.remove(q, "gone from the stream")
			moved = true
		}
	}
	for _, q := range slices.Sorted(maps.Keys(m.exhausted)) {
		if gone(q) {
			out = append(out, Dropped{Stream: q, Deliveries: m.exhausted[q], Exhausted: true})
			m.release(q)
		}
	}
	if moved {
		m.raiseFloor()
	}
	slices.SortFunc(out, func(a, b Dropped) int { return cmp.Compare(a.Stream, b.Stream) })
	return out
}

func (m *model) skipTo(seq uint64) bool {
	if seq == 0 {
		return false
	}
	dropped, released := false, false
	for q := range m.pending {
		if q < seq {
			m.remove(q, "purged")
			dropped = true
		}
	}
	for q := range m.exhausted {
		if q < seq {
			m.release(q)
			released = true
		}
	}
	if m.delivered.Stream < seq-1 {
		m.delivered.Stream = seq - 1
		dropped = true
	}
	if dropped {
		m.raiseFloor()
	}
	return dropped || released
}

// restored is what a restart keeps: deadlines, not the queue. A mark is
// due at once: a pending delivery's at its stored timestamp (the time
// of the mark), a held message's at 0.
func (m *model) restored() {
	for _, x := range m.pending {
		x.queued, x.spent = false, false
		x.deadline = x.last + m.wait(x.deliveries) // the policy may have changed since it was armed
		if x.dead != 0 {
			x.deadline = x.last
		}
	}
	for _, x := range m.held {
		x.deadline, x.spent = 0, false
	}
	m.rdq = nil
}

func (m *model) nextDeadline() (int64, bool) {
	var at int64
	ok := false
	for _, x := range m.pending {
		if !x.queued && !x.spent && (!ok || x.deadline < at) {
			at, ok = x.deadline, true
		}
	}
	for _, x := range m.held {
		if !x.spent && (!ok || x.deadline < at) {
			at, ok = x.deadline, true
		}
	}
	return at, ok
}

// due returns what Expire eventually returns without further calls:
// the pending deliveries and the marks whose deadline is not spent.
func (m *model) due() map[uint64]bool {
	out := map[uint64]bool{}
	for q, x := range m.pending {
		if !x.spent {
			out[q] = true
		}
	}
	for q, x := range m.held {
		if !x.spent {
			out[q] = true
		}
	}
	return out
}

func (m *model) snapshot() *store.ConsumerState {
	st := &store.ConsumerState{Delivered: m.delivered, AckFloor: m.floor}
	for q, n := range m.exhausted {
		if st.Redelivered == nil {
			st.Redelivered = map[uint64]uint64{}
		}
		st.Redelivered[q] = n - 1
	}
	for q, after := range m.after {
		if st.DeadLetter == nil {
			st.DeadLetter = map[uint64]store.DeadLetter{}
		}
		st.DeadLetter[q] = store.DeadLetter{Reason: m.markOf(q).dead, After: after}
	}
	for _, q := range slices.Sorted(maps.Keys(m.pending)) {
		x := m.pending[q]
		st.Pending = append(st.Pending, pend(q, x.first, x.last))
		if x.deliveries > 1 {
			if st.Redelivered == nil {
				st.Redelivered = map[uint64]uint64{}
			}
			st.Redelivered[q] = x.deliveries - 1
		}
	}
	return st
}

// check compares s with the model and checks the invariants that do not
// depend on the model's bookkeeping.
func (m *model) check(t *testing.T, s *State) {
	t.Helper()
	f, d := s.AckFloor(), s.Delivered()
	if d != m.delivered || f != m.floor {
		t.Fatalf("delivered %+v floor %+v, model %+v %+v", d, f, m.delivered, m.floor)
	}
	if f.Stream > d.Stream || f.Consumer > d.Consumer {
		t.Fatalf("ack floor %+v above delivered %+v", f, d)
	}
	if s.NumAckPending() != len(m.pending) {
		t.Fatalf("%d pending, model %d", s.NumAckPending(), len(m.pending))
	}
	redelivered := 0
	for q, x := range m.pending {
		if !s.IsPending(q) || q <= f.Stream || q > d.Stream {
			t.Fatalf("pending %d (is pending %v) outside (%d, %d]", q, s.IsPending(q), f.Stream, d.Stream)
		}
		if m.p.Ack == AckExplicit && x.first <= f.Consumer {
			t.Fatalf("pending %d first delivered as %d, at or below the floor %+v", q, x.first, f)
		}
		if x.deliveries > 1 {
			redelivered++
		}
	}
	for q := range m.exhausted {
		if !s.IsExhausted(q) || s.IsPending(q) {
			t.Fatalf("exhausted %d: held %v, pending %v", q, s.IsExhausted(q), s.IsPending(q))
		}
	}
	if s.NumExhausted() != len(m.exhausted) {
		t.Fatalf("%d exhausted, model %d", s.NumExhausted(), len(m.exhausted))
	}
	redelivered += len(m.exhausted)
	if m.p.MaxDeliver == 1 {
		redelivered = 0
	}
	if s.NumRedelivered() != redelivered {
		t.Fatalf("NumRedelivered %d, model %d", s.NumRedelivered(), redelivered)
	}
	limit := m.p.Ack != AckNone && m.p.MaxAckPending > 0 && len(m.pending) >= m.p.MaxAckPending
	if s.AtAckLimit() != limit {
		t.Fatalf("AtAckLimit %v with %d pending", s.AtAckLimit(), len(m.pending))
	}
	at, ok := s.NextDeadline()
	if mat, mok := m.nextDeadline(); at != mat || ok != mok {
		t.Fatalf("NextDeadline t0%+.3fs %v, model t0%+.3fs %v", secs(at), ok, secs(mat), mok)
	}
	seq, ok := s.NextRedelivery()
	if len(m.rdq) > 0 != ok || ok && seq != m.rdq[0] {
		t.Fatalf("NextRedelivery %d %v, model queue %v", seq, ok, m.rdq)
	}
	if got, want := s.Snapshot(), m.snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot\n%+v\nmodel\n%+v", got, want)
	}
	if got, want := s.Moves(), m.moves(); !slices.Equal(got, want) {
		t.Fatalf("moves %+v, model %+v", got, want)
	}
}

// horizon is a time after which every pending delivery of p is due,
// given NAK delays below maxNakDelay.
func horizon(p Policy) int64 {
	w := p.AckWait
	for _, b := range p.BackOff {
		w = max(w, b)
	}
	return int64(w+maxNakDelay) + 1
}

const maxNakDelay = 20 * time.Second

// checkEventually: once enough time has passed, every pending message
// of s (a state whose pending set is want) is queued for redelivery or
// exhausted, each once.
func checkEventually(t *testing.T, s *State, p Policy, now int64, want map[uint64]bool) {
	t.Helper()
	far := now + horizon(p)
	seen := map[uint64]bool{}
	for _, e := range s.Expire(far) {
		seen[e.Stream] = true
	}
	for _, q := range redeliverAll(s, far) {
		if seen[q] {
			t.Fatalf("%d both exhausted and redelivered", q)
		}
		seen[q] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("%d of %d pending messages and marks redelivered, exhausted or due", len(seen), len(want))
	}
	for q := range want {
		if !seen[q] {
			t.Fatalf("pending %d neither redelivered nor exhausted after %.0fs", q, float64(far-now)/float64(sec))
		}
	}
}

type modelRun struct {
	t   *testing.T
	rng *rand.Rand
	p   Policy
	s   *State
	m   *model
	now int64
	dl  bool  // dead-letter marks in play
	at  int64 // makes RetryMoveAt times unique (a repeated time is a duplicate heap entry, as in nats-server's pending timers)
}

// pick returns a stream sequence to ack, nak or touch: mostly a pending
// one, sometimes one out of deliveries or one with a dead-letter mark,
// sometimes anything up to just past the delivered sequence; and the
// consumer sequence of its latest delivery, as its ack reply says.
func (r *modelRun) pick() (uint64, uint64) {
	var seq uint64
	if len(r.m.after) > 0 && r.rng.IntN(6) == 0 {
		keys := slices.Sorted(maps.Keys(r.m.after))
		seq = keys[r.rng.IntN(len(keys))]
	} else if len(r.m.exhausted) > 0 && r.rng.IntN(8) == 0 {
		keys := slices.Sorted(maps.Keys(r.m.exhausted))
		seq = keys[r.rng.IntN(len(keys))]
	} else if len(r.m.pending) > 0 && r.rng.IntN(5) > 0 {
		keys := make([]uint64, 0, len(r.m.pending))
		for q := range r.m.pending {
			keys = append(keys, q)
		}
		slices.Sort(keys)
		seq = keys[r.rng.IntN(len(keys))]
	} else {
		seq = r.rng.Uint64N(r.m.delivered.Stream + 3)
	}
	return seq, r.m.lastCseq[seq]
}

// deadLetterStep drives the dead-letter marks: +TERM marks, moves
// completed, given up, retried later, and the scan position.
func (r *modelRun) deadLetterStep() string {
	t, s, m, now := r.t, r.s, r.m, r.now
	seq, _ := r.pick()
	switch k := r.rng.IntN(12); {
	case k < 4:
		if got, want := s.MarkDeadLetter(seq, store.DeadLetterTerm, now), m.markDeadLetter(seq, store.DeadLetterTerm, now); got != want {
			t.Fatalf("MarkDeadLetter(%d) = %v, model %v", seq, got, want)
		}
		return fmt.Sprintf("term to dead letter %d", seq)
	case k < 7:
		got, want := slices.Sorted(slices.Values(s.DeadLettered(seq))), m.deadLettered(seq)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("DeadLettered(%d) = %v, model %v", seq, got, want)
		}
		return fmt.Sprintf("dead-lettered %d", seq)
	case k < 8:
		got, want := slices.Sorted(slices.Values(s.Unmark(seq))), m.unmark(seq)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("Unmark(%d) = %v, model %v", seq, got, want)
		}
		return fmt.Sprintf("unmark %d", seq)
	case k < 10:
		r.at++
		at := now + r.rng.Int64N(5*sec) + r.at
		if got, want := s.RetryMoveAt(seq, at), m.retryMoveAt(seq, at); got != want {
			t.Fatalf("RetryMoveAt(%d) = %v, model %v", seq, got, want)
		}
		return fmt.Sprintf("retry move %d at t0%+.3fs", seq, secs(at))
	case k < 11:
		after := r.rng.Uint64N(1000)
		if got, want := s.SetMoveAfter(seq, after), m.setMoveAfter(seq, after); got != want {
			t.Fatalf("SetMoveAfter(%d) = %v, model %v", seq, got, want)
		}
		return fmt.Sprintf("move after %d %d", seq, after)
	default:
		m.dl = !m.dl
		s.SetDeadLetter(m.dl)
		return fmt.Sprintf("dead letter %v", m.dl)
	}
}

func (r *modelRun) step() string {
	t, s, m, now := r.t, r.s, r.m, r.now
	if r.dl && r.rng.IntN(8) == 0 {
		return r.deadLetterStep()
	}
	switch op := r.rng.IntN(100); {
	case op < 25:
		if s.AtAckLimit() {
			return "at ack limit"
		}
		if len(m.pending) >= 128 {
			return "enough pending" // keeps the per-step checks cheap
		}
		seq := s.NextSeq() + r.rng.Uint64N(3)
		if got, want := s.DeliverNew(seq, now), m.deliverNew(seq, now); got != want {
			t.Fatalf("DeliverNew(%d) = %+v, model %+v", seq, got, want)
		}
		return fmt.Sprintf("deliver %d", seq)
	case op < 40:
		seq, ok := s.NextRedelivery()
		if !ok {
			return "nothing to redeliver"
		}
		if m.pending[seq] == nil {
			t.Fatalf("redelivery of %d, not pending: %s", seq, m.done[seq])
		}
		if got, want := s.Redeliver(seq, now), m.redeliver(seq, now); got != want {
			t.Fatalf("Redeliver(%d) = %+v, model %+v", seq, got, want)
		}
		return fmt.Sprintf("redeliver %d", seq)
	case op < 58:
		seq, cseq := r.pick()
		if got, want := sortedAcks(s.Ack(seq, cseq)), m.ack(seq, cseq); !slices.Equal(got, want) {
			t.Fatalf("Ack(%d, %d) acked %v, model %v", seq, cseq, got, want)
		}
		return fmt.Sprintf("ack %d %d", seq, cseq)
	case op < 66:
		// The runner's NAK: exhausted at max_deliver, else queued.
		seq, _ := r.pick()
		ge, gok := s.ExhaustedByNak(seq, now)
		if we, wok := m.exhaustedByNak(seq, now); ge != we || gok != wok {
			t.Fatalf("ExhaustedByNak(%d) = %+v %v, model %+v %v", seq, ge, gok, we, wok)
		}
		if gok {
			return fmt.Sprintf("nak %d: exhausted", seq)
		}
		var delay time.Duration
		if r.rng.IntN(2) == 0 {
			delay = time.Duration(r.rng.Int64N(int64(maxNakDelay)))
		}
		if got, want := s.Nak(seq, delay, now), m.nak(seq, delay, now); got != want {
			t.Fatalf("Nak(%d, %v) = %v, model %v", seq, delay, got, want)
		}
		return fmt.Sprintf("nak %d %v", seq, delay)
	case op < 72:
		seq, _ := r.pick()
		if got, want := s.Progress(seq, now), m.progress(seq, now); got != want {
			t.Fatalf("Progress(%d) = %v, model %v", seq, got, want)
		}
		return fmt.Sprintf("progress %d", seq)
	case op < 92:
		switch k := r.rng.IntN(40); {
		case k < 2:
			r.now += 60 * sec
		case k < 3:
			r.now -= r.rng.Int64N(3 * sec) // the wall clock steps back
		default:
			r.now += r.rng.Int64N(4 * sec)
		}
		if got, want := s.Expire(r.now), m.expire(r.now); !slices.Equal(got, want) {
			t.Fatalf("Expire at t0%+.3fs = %v, model %v", secs(r.now), got, want)
		}
		return fmt.Sprintf("expire at t0%+.3fs", secs(r.now))
	case op < 96:
		switch k := r.rng.IntN(8); {
		case k == 0: // messages removed from the stream
			mod := 3 + r.rng.Uint64N(5)
			gone := func(q uint64) bool { return q%mod == 0 }
			if got, want := s.DropGone(gone), m.dropGone(gone); !slices.Equal(got, want) {
				t.Fatalf("DropGone(multiples of %d) = %v, model %v", mod, got, want)
			}
			return fmt.Sprintf("drop multiples of %d", mod)
		case k == 1: // a purge below seq
			seq := m.floor.Stream + r.rng.Uint64N(m.delivered.Stream-m.floor.Stream+4)
			if got, want := s.SkipTo(seq), m.skipTo(seq); got != want {
				t.Fatalf("SkipTo(%d) = %v, model %v", seq, got, want)
			}
			return fmt.Sprintf("skip to %d", seq)
		}
		seq, _ := r.pick()
		s.DropRedelivery(seq)
		m.drop(seq)
		return fmt.Sprintf("drop %d", seq)
	case op < 97:
		r.s = RestoreState(r.p, s.Snapshot())
		r.s.SetDeadLetter(m.dl)
		m.restored()
		return "restore"
	case op < 98:
		// A consumer update changes the ack wait: it applies from the next
		// delivery (first deliveries after a shorter wait are due before
		// earlier ones).
		r.p.AckWait = []time.Duration{time.Second, 3 * time.Second, 10 * time.Second, 20 * time.Second}[r.rng.IntN(4)]
		s.SetPolicy(r.p)
		m.p = r.p
		return fmt.Sprintf("ack wait %v", r.p.AckWait)
	default:
		restored := maps.Clone(m.pending)
		for q := range m.held {
			restored[q] = nil
		}
		checkEventually(t, RestoreState(r.p, s.Snapshot()), r.p, now, boolKeys(restored))
		return "eventually"
	}
}

// TestStateAgainstModel runs thousands of random deliveries, acks, naks,
// progress, expiries, drops and restarts against State and the model,
// checking after each that they agree and that the invariants hold: the
// floor is at or below delivered, every pending sequence is in
// (floor, delivered], no message is redelivered after it was acked,
// exhausted or dropped, and every pending message is eventually
// redelivered or exhausted. The runs with dead-letter marks also put
// +TERM marks, complete, give up and re-arm moves and turn the
// dead-letter subject on and off (deadletter.go).
func TestStateAgainstModel(t *testing.T) {
	backoff := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second}
	policies := []struct {
		name string
		p    Policy
		dl   bool
	}{
		{"explicit", Policy{Ack: AckExplicit, AckWait: 10 * time.Second}, false},
		{"explicit backoff max deliver", Policy{Ack: AckExplicit, AckWait: time.Second, BackOff: backoff, MaxDeliver: 4}, false},
		{"explicit max ack pending", Policy{Ack: AckExplicit, AckWait: 5 * time.Second, MaxDeliver: 3, MaxAckPending: 16}, false},
		{"all", Policy{Ack: AckAll, AckWait: 10 * time.Second, MaxDeliver: 5}, false},
		{"all backoff max ack pending", Policy{Ack: AckAll, BackOff: backoff, MaxAckPending: 8}, false},
		{"none", Policy{Ack: AckNone, AckWait: time.Second, MaxDeliver: 2}, false},
		{"explicit dead letter", Policy{Ack: AckExplicit, AckWait: time.Second, BackOff: backoff, MaxDeliver: 3}, true},
		{"explicit dead letter max ack pending", Policy{Ack: AckExplicit, AckWait: 5 * time.Second, MaxDeliver: 2, MaxAckPending: 16}, true},
		{"all dead letter", Policy{Ack: AckAll, AckWait: 10 * time.Second, MaxDeliver: 2}, true},
	}
	ops := 4000
	if testing.Short() {
		ops = 500
	}
	for _, pc := range policies {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", pc.name, seed), func(t *testing.T) {
				t.Parallel()
				runModel(t, pc.p, pc.dl, seed, ops)
			})
		}
	}
}

func runModel(t *testing.T, p Policy, dl bool, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	start := 1 + rng.Uint64N(5)
	r := &modelRun{t: t, rng: rng, p: p, s: NewState(p, start), m: newModel(p, start), now: t0, dl: dl}
	r.s.SetDeadLetter(dl)
	r.m.dl = dl
	var trail []string
	defer func() {
		if t.Failed() {
			t.Logf("seed %d, last operations:\n%v", seed, trail[max(0, len(trail)-15):])
		}
	}()
	for range ops {
		trail = append(trail, r.step())
		r.m.check(t, r.s)
	}
	// Liveness on the live state: everything pending is queued or
	// exhausted after a horizon and, with max_deliver, gone after enough
	// rounds of redelivery.
	checkEventually(t, r.s, p, r.now, r.m.due())
	if p.MaxDeliver <= 0 || dl {
		return // (marks stay pending until their move ends)
	}
	floor, held := r.s.AckFloor(), r.s.NumExhausted()+r.s.NumAckPending()
	for round := 0; r.s.NumAckPending() > 0; round++ {
		if round > p.MaxDeliver {
			t.Fatalf("%d still pending after %d rounds with max_deliver %d", r.s.NumAckPending(), round, p.MaxDeliver)
		}
		r.now += horizon(p)
		r.s.Expire(r.now)
		redeliverAll(r.s, r.now)
	}
	// Running out of deliveries moved no floor, and every one is held.
	if r.s.AckFloor() != floor || r.s.NumExhausted() != held {
		t.Fatalf("all exhausted: floor %+v (was %+v), %d held, want %d", r.s.AckFloor(), floor, r.s.NumExhausted(), held)
	}
}

// TestExpireNothingDueIsCheap: with many deliveries pending and none
// due, Expire and NextDeadline allocate nothing and leave the deadline
// heap as it is (see BenchmarkExpireNothingDue for the time; first
// deliveries have no heap entry, see TestFirstDeliveriesNeedNoHeap).
func TestExpireNothingDueIsCheap(t *testing.T) {
	s := pendingState(100_000)
	n := len(s.deadlines)
	now := t0 + 10*sec
	allocs := testing.AllocsPerRun(100, func() {
		s.Expire(now)
		s.NextDeadline()
	})
	if allocs != 0 || len(s.deadlines) != n {
		t.Fatalf("%.1f allocations, heap %d → %d", allocs, n, len(s.deadlines))
	}
}

// pendingState returns a state with n first deliveries pending, one
// nanosecond apart from t0, with a 30s ack wait.
func pendingState(n int) *State {
	s := NewState(Policy{Ack: AckExplicit, AckWait: 30 * time.Second}, 1)
	for seq := range uint64(n) {
		s.DeliverNew(seq+1, t0+int64(seq))
	}
	return s
}

// BenchmarkExpireNothingDue: the runner calls Expire and NextDeadline on
// every timer tick; with 1,000,000 deliveries pending and none due they
// must only look at the top of the heap and the first delivery waiting
// for its deadline.
func BenchmarkExpireNothingDue(b *testing.B) {
	s := pendingState(1_000_000)
	now := t0 + 10*sec
	b.Run("Expire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out := s.Expire(now); out != nil {
				b.Fatal(out)
			}
		}
	})
	b.Run("NextDeadline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if at, ok := s.NextDeadline(); !ok || at != t0+30*sec {
				b.Fatal(at, ok)
			}
		}
	})
}

// TestSetPolicy: a changed policy applies from the next delivery; the
// pending deadlines stay as they were armed.
func TestSetPolicy(t *testing.T) {
	c := &Config{AckPolicy: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 5, MaxAckPending: 7}
	p := PolicyOf(c)
	if p.Ack != AckExplicit || p.AckWait != 10*time.Second || p.MaxDeliver != 5 || p.MaxAckPending != 7 || p.BackOff != nil {
		t.Fatalf("PolicyOf = %+v", p)
	}
	s := NewState(p, 1)
	deliver(s, t0, 1)
	p.AckWait = time.Minute
	s.SetPolicy(p)
	deliver(s, t0, 2)
	wantDeadline(t, s, t0+10*sec, true)
	s.Expire(t0 + 10*sec)
	if d := s.Redeliver(1, t0+10*sec); d.Deliveries != 2 {
		t.Fatalf("redelivery %+v", d)
	}
	wantDeadline(t, s, t0+60*sec, true)
	s.Expire(t0 + 60*sec)
	wantQueue(t, s, t0+60*sec, 2)
}

// TestReplayExhausted: a journaled ack or +TERM of a message out of
// deliveries releases it at restore, as it did when made; a journaled
// NAK of it changes nothing.
func TestReplayExhausted(t *testing.T) {
	for _, kind := range []store.ConsumerOpKind{store.OpAck, store.OpTerm, store.OpNak} {
		s := NewState(Policy{Ack: AckExplicit, AckWait: 10 * time.Second, MaxDeliver: 1}, 1)
		deliver(s, t0, 1, 2)
		s.Expire(t0 + 10*sec)
		r := RestoreState(s.policy, s.Snapshot())
		got := r.Replay(store.ConsumerOp{Kind: kind, Stream: 1, Consumer: 1, Time: t0 + 20*sec}, t0+11*sec)
		if release := kind != store.OpNak; !slices.Equal(got, map[bool][]uint64{true: {1}}[release]) || r.IsExhausted(1) == release {
			t.Fatalf("replay of op %v: acked %v, still held %v", kind, got, r.IsExhausted(1))
		}
		wantFloors(t, r, pair(2, 2), pair(0, 0))
	}
}

// TestReplayJournal: replaying journaled confirmed acks onto a restored
// state acknowledges what they acked, ignores ops beyond the delivered
// sequence (their confirmation waited for a snapshot that never landed),
// is idempotent, and a NAK only moves a redelivery: replayed onto a
// state that already reached max_deliver it ends nothing.
func TestReplayJournal(t *testing.T) {
	p := Policy{Ack: AckExplicit, AckWait: 30 * time.Second, MaxDeliver: 2}
	s := NewState(p, 1)
	deliver(s, t0, 1, 2, 3, 4)
	r := RestoreState(p, s.Snapshot())
	ack := func(seq uint64) store.ConsumerOp {
		return store.ConsumerOp{Kind: store.OpAck, Stream: seq, Consumer: seq}
	}
	if got := r.Replay(ack(2), t0); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("replayed ack 2: acked %v", got)
	}
	if got := r.Replay(ack(2), t0); got != nil {
		t.Fatalf("a second replay of ack 2 acked %v", got)
	}
	if got := r.Replay(ack(9), t0); got != nil || r.Delivered().Stream != 4 {
		t.Fatalf("an ack beyond delivered acked %v, delivered %d", got, r.Delivered().Stream)
	}
	// A NAK with a delay re-arms the redelivery at its recorded time.
	r.Replay(store.ConsumerOp{Kind: store.OpNak, Stream: 3, Consumer: 3, Time: t0 + 5*sec}, t0+sec)
	wantDeadline(t, r, t0+5*sec, true)
	// Message 4 reached max_deliver since the NAK was journaled: the
	// replayed NAK leaves it pending, to end at its deadline.
	r.Expire(t0 + 30*sec)
	if d := r.Redeliver(4, t0+30*sec); d.Deliveries != 2 {
		t.Fatalf("redelivery of 4: %+v", d)
	}
	r.Replay(store.ConsumerOp{Kind: store.OpNak, Stream: 4, Consumer: 4, Time: t0}, t0+31*sec)
	if !r.IsPending(4) {
		t.Fatal("a replayed NAK ended the deliveries of a message at max_deliver")
	}
}

// Reset (ADR-60) forgets every delivery and restarts the consumer
// sequence at 1 from the given stream sequence, as nats-server's
// resetLocalStartingSeq: delivered and ack floor are {0, seq-1}.
func TestReset(t *testing.T) {
	s := NewState(Policy{Ack: AckExplicit, AckWait: time.Second, MaxDeliver: 2}, 1)
	deliver(s, t0, 1, 2, 3, 4)
	s.Ack(1, 1)
	s.Expire(t0 + 2*sec)
	redeliverAll(s, t0+2*sec)
	s.Expire(t0 + 4*sec) // 2, 3, 4 run out of deliveries
	if s.NumExhausted() == 0 {
		t.Fatalf("setup: %d exhausted, %d pending", s.NumExhausted(), s.NumAckPending())
	}
	s.Reset(3)
	if s.Delivered() != pair(0, 2) || s.AckFloor() != pair(0, 2) || s.NumAckPending() != 0 || s.NumExhausted() != 0 || s.NumRedelivered() != 0 {
		t.Fatalf("after Reset(3): delivered %v floor %v, %d pending, %d exhausted, %d redelivered",
			s.Delivered(), s.AckFloor(), s.NumAckPending(), s.NumExhausted(), s.NumRedelivered())
	}
	if d := s.DeliverNew(3, t0+5*sec); d.ConsumerSeq != 1 {
		t.Fatalf("first delivery after the reset has consumer sequence %d, want 1", d.ConsumerSeq)
	}
	s.Reset(0)
	if s.Delivered() != pair(0, 0) || s.NextSeq() != 1 {
		t.Fatalf("Reset(0): delivered %v, next %d; want {0 0} and 1", s.Delivered(), s.NextSeq())
	}
}

// A flow_control consumer has no ack wait: its deliveries wait for the
// flow control replies and are never redelivered (nats-server v2.15.2
// checkPending with AckWait 0).
func TestStateFlowControlNeverExpires(t *testing.T) {
	s := NewState(Policy{Ack: AckFlowControl, MaxDeliver: -1, MaxAckPending: 10}, 1)
	s.DeliverNew(1, t0)
	if _, ok := s.NextDeadline(); ok {
		t.Fatal("a flow_control delivery has a deadline")
	}
	if ex := s.Expire(t0 + 3600*sec); len(ex) != 0 || s.NumRedeliveryQueued() != 0 || s.NumAckPending() != 1 {
		t.Fatalf("an hour later: exhausted %v, queued %d, pending %d", ex, s.NumRedeliveryQueued(), s.NumAckPending())
	}
}
