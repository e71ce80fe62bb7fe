package storetest

import (
	"errors"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

var consumerTests = []test{
	{name: "ConsumerNew", fn: testConsumerNew},
	{name: "ConsumerRoundTrip", fn: testConsumerRoundTrip},
	{name: "ConsumerBig", fn: testConsumerBig},
	{name: "ConsumerCopies", fn: testConsumerCopies},
	{name: "ConsumerDelete", fn: testConsumerDelete},
	{name: "ConsumerClose", fn: testConsumerClose},
	{name: "ConsumerInvalid", fn: testConsumerInvalid},
	{name: "ConsumerIndependent", fn: testConsumerIndependent},
	{name: "ConsumerDeadLetter", fn: testConsumerDeadLetter},
}

// sampleState is a consistent consumer state with pending and redelivered
// entries.
func sampleState() *store.ConsumerState {
	return &store.ConsumerState{
		Delivered: store.SequencePair{Consumer: 10, Stream: 20},
		AckFloor:  store.SequencePair{Consumer: 5, Stream: 12},
		Pending: []store.StreamPending{
			sp(15, 8, t0+1),
			sp(20, 10, t0+2),
		},
		Redelivered: map[uint64]uint64{15: 2},
	}
}

// sp is a pending entry: stream sequence, consumer sequence, timestamp.
func sp(seq, cseq uint64, ts int64) store.StreamPending {
	return store.StreamPending{Stream: seq, Pending: store.Pending{Sequence: cseq, Timestamp: ts}}
}

// updateState stores st and fails on error.
func updateState(t *testing.T, cs store.ConsumerStore, st *store.ConsumerState) {
	t.Helper()
	if err := cs.Update(st); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// wantConsumer fails unless cs.State() equals want (nil and empty maps
// compare equal).
func wantConsumer(t *testing.T, cs store.ConsumerStore, want *store.ConsumerState) {
	t.Helper()
	got, err := cs.State()
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if !sameConsumer(got, want) {
		t.Fatalf("State:\n got %+v\nwant %+v", got, want)
	}
}

// A new consumer has an empty state.
func testConsumerNew(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	wantConsumer(t, h.consumer("dur"), &store.ConsumerState{})
}

// Update replaces the state; State returns it.
func testConsumerRoundTrip(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	cs := h.consumer("dur")
	st := sampleState()
	updateState(t, cs, st)
	wantConsumer(t, cs, sampleState())
	st = &store.ConsumerState{
		Delivered: store.SequencePair{Consumer: 11, Stream: 25},
		AckFloor:  store.SequencePair{Consumer: 9, Stream: 18},
		Pending:   []store.StreamPending{sp(20, 10, t0+2), sp(25, 11, t0+3)},
	}
	updateState(t, cs, st)
	wantConsumer(t, cs, st)
	updateState(t, cs, &store.ConsumerState{Delivered: st.Delivered, AckFloor: st.Delivered})
	wantConsumer(t, cs, &store.ConsumerState{Delivered: st.Delivered, AckFloor: st.Delivered})
}

// Large pending lists and redelivered maps round-trip.
func testConsumerBig(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	cs := h.consumer("big")
	st := &store.ConsumerState{
		Delivered:   store.SequencePair{Consumer: 300_000, Stream: 1_000_000},
		AckFloor:    store.SequencePair{Consumer: 100, Stream: 500},
		Redelivered: map[uint64]uint64{},
	}
	for i := uint64(0); i < 100_000; i++ {
		seq := 501 + i*7
		st.Pending = append(st.Pending, sp(seq, 101+i, t0+int64(i)*1000))
		if i%10 == 0 {
			st.Redelivered[seq] = 1 + i%5
		}
	}
	updateState(t, cs, st)
	wantConsumer(t, cs, st)
}

// State returns a copy and Update keeps a copy.
func testConsumerCopies(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	cs := h.consumer("dur")
	st := sampleState()
	updateState(t, cs, st)
	st.Pending[0].Sequence = 9
	st.Redelivered[15] = 7
	st.Delivered.Consumer = 99
	wantConsumer(t, cs, sampleState())
	got, err := cs.State()
	if err != nil {
		t.Fatal(err)
	}
	got.Pending[1].Timestamp = 1
	got.Redelivered[20] = 1
	wantConsumer(t, cs, sampleState())
}

// Delete removes the state for good: the handle is closed and opening the
// name again gives an empty state.
func testConsumerDelete(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	cs := h.consumer("dur")
	updateState(t, cs, sampleState())
	if err := cs.Delete(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := cs.State(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("State after Delete = %v, want ErrClosed", err)
	}
	if err := cs.Update(sampleState()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Update after Delete = %v, want ErrClosed", err)
	}
	wantConsumer(t, h.consumer("dur"), &store.ConsumerState{})
}

// Close releases the handle and keeps the state.
func testConsumerClose(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	cs := h.consumer("dur")
	updateState(t, cs, sampleState())
	if err := cs.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := cs.State(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("State after Close = %v, want ErrClosed", err)
	}
	if err := cs.Update(sampleState()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Update after Close = %v, want ErrClosed", err)
	}
	wantConsumer(t, h.consumer("dur"), sampleState())
}

// Inconsistent states are refused with ErrBadRequest and leave the stored
// state alone (nats-server consumer Update sanity checks).
func testConsumerInvalid(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	cs := h.consumer("dur")
	updateState(t, cs, sampleState())
	bad := []func(st *store.ConsumerState){
		func(st *store.ConsumerState) { st.AckFloor.Consumer = 11 },
		func(st *store.ConsumerState) { st.AckFloor.Stream = 21 },
		func(st *store.ConsumerState) { st.Pending = append([]store.StreamPending{sp(12, 5, 0)}, st.Pending...) },
		func(st *store.ConsumerState) { st.Pending = append(st.Pending, sp(21, 11, 0)) },
		func(st *store.ConsumerState) { st.Pending[0], st.Pending[1] = st.Pending[1], st.Pending[0] },
		func(st *store.ConsumerState) { st.Pending[0].Stream = st.Pending[1].Stream },
		func(st *store.ConsumerState) {
			st.DeadLetter = map[uint64]store.DeadLetter{16: {Reason: store.DeadLetterTerm}}
		},
		func(st *store.ConsumerState) {
			st.DeadLetter = map[uint64]store.DeadLetter{15: {Reason: 9}}
		},
	}
	for i, mutate := range bad {
		st := sampleState()
		mutate(st)
		if err := cs.Update(st); !errors.Is(err, store.ErrBadRequest) {
			t.Fatalf("case %d: Update(%+v) = %v, want ErrBadRequest", i, st, err)
		}
	}
	if err := cs.Update(nil); !errors.Is(err, store.ErrBadRequest) {
		t.Fatalf("Update(nil) = %v, want ErrBadRequest", err)
	}
	wantConsumer(t, cs, sampleState())
}

// Consumers of one store keep separate states.
func testConsumerIndependent(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	a, b := h.consumer("a"), h.consumer("b")
	updateState(t, a, sampleState())
	other := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 1, Stream: 3}}
	updateState(t, b, other)
	wantConsumer(t, a, sampleState())
	wantConsumer(t, b, other)
	if err := a.Delete(); err != nil {
		t.Fatal(err)
	}
	wantConsumer(t, b, other)
}

// Dead-letter marks round-trip with the state, go when a later state has
// none, and (the state kept at the end) survive the reopen check
// (docs/dead-letter.md).
func testConsumerDeadLetter(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	cs := h.consumer("dur")
	st := sampleState()
	st.DeadLetter = map[uint64]store.DeadLetter{
		15: {Reason: store.DeadLetterMaxDeliver, After: 7},
		20: {Reason: store.DeadLetterTerm},
	}
	updateState(t, cs, st)
	wantConsumer(t, cs, st)
	got, err := cs.State()
	if err != nil {
		t.Fatal(err)
	}
	got.DeadLetter[15] = store.DeadLetter{}
	wantConsumer(t, cs, st)
	updateState(t, cs, sampleState())
	wantConsumer(t, cs, sampleState())
	updateState(t, cs, st)
	wantConsumer(t, cs, st)
	// A message out of deliveries (a Redelivered entry without a Pending
	// entry, here 13, below 15) may carry a mark too (a +TERM moving it).
	held := sampleState()
	held.Redelivered[13] = 0
	held.DeadLetter = map[uint64]store.DeadLetter{13: {Reason: store.DeadLetterTerm, After: 3}}
	updateState(t, cs, held)
	wantConsumer(t, cs, held)
	updateState(t, cs, st)
	wantConsumer(t, cs, st)
}
