package consumer

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// A clone is exact and independent: the same operations applied to a
// state and to its clone give the same outcomes and states (deadlines,
// redelivery queue and dead-letter marks included), and operations
// applied to the original after the clone leave the clone as it was.
func TestCloneExactAndIndependent(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		p := Policy{Ack: AckPolicy(1 + rng.IntN(2)), AckWait: time.Duration(1+rng.IntN(5)) * time.Second, MaxDeliver: rng.IntN(4) - 1, MaxAckPending: rng.IntN(20), BackOff: []time.Duration{time.Second, 2 * time.Second}}
		a := NewState(p, 1)
		a.SetDeadLetter(rng.IntN(2) == 0)
		now, next := t0, uint64(1)
		step := func(s *State, n uint64) Op {
			now += int64(rng.IntN(1500)) * int64(time.Millisecond)
			return randomOp(rng, s, &next, now)
		}
		for range 300 {
			applyOp(a, step(a, next))
		}
		b := a.Clone()
		at := a.Snapshot()
		// Independence: change the original only.
		saveNow, saveNext := now, next
		orig := a.Clone()
		for range 200 {
			applyOp(orig, step(orig, next))
		}
		if !reflect.DeepEqual(b.Snapshot(), at) {
			t.Fatalf("seed %d: the clone changed with the original", seed)
		}
		now, next = saveNow, saveNext
		// Exactness: the same operations on both.
		for i := range 300 {
			op := step(a, next)
			oa, ob := applyOp(a, op), applyOp(b, op)
			if !reflect.DeepEqual(oa, ob) {
				t.Fatalf("seed %d op %d (%T %+v): outcomes differ:\n%+v\n%+v", seed, i, op, op, oa, ob)
			}
			da, oka := a.NextDeadline()
			db, okb := b.NextDeadline()
			if da != db || oka != okb || !sameNextRedelivery(a, b) {
				t.Fatalf("seed %d op %d (%T %+v): deadlines or redelivery queues differ: %d %v / %d %v", seed, i, op, op, da, oka, db, okb)
			}
		}
		if !reflect.DeepEqual(a.Snapshot(), b.Snapshot()) {
			t.Fatalf("seed %d: states differ:\n%+v\n%+v", seed, a.Snapshot(), b.Snapshot())
		}
	}
}

// sameNextRedelivery reports whether a and b would redeliver the same
// message next (NextRedelivery drops stale queue entries from both
// alike).
func sameNextRedelivery(a, b *State) bool {
	sa, oka := a.NextRedelivery()
	sb, okb := b.NextRedelivery()
	return sa == sb && oka == okb
}
