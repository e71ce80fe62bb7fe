package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// t0 is the time of the first message a harness appends; message n is
// stamped t0 + n seconds.
const t0 = int64(1_700_000_000_000_000_000)

// sec is one second in nanoseconds.
const sec = int64(time.Second)

// maxCompared bounds the number of messages a reopen check loads one by
// one.
const maxCompared = 20000

// harness wraps a store under test with what the test appended, so that
// expected states can be written as sequence lists.
type harness struct {
	t         *testing.T
	e         Engine
	cfg       store.Config
	s         store.Store
	sent      map[uint64]store.Msg // every message accepted, by sequence
	n         int64                // messages built so far
	lastTime  int64                // Time of the last accepted message
	consumers map[string]bool      // consumer names the test used
	closed    bool                 // the test closed the store itself
	// opened is State.Msgs when the store was last opened and appended
	// the messages accepted since: Removals must be opened+appended-Msgs.
	opened, appended uint64
}

// open returns a harness on a new store with cfg. When the test ends, the
// store goes through a reopen check (persistent engines) and is closed.
func open(t *testing.T, e Engine, cfg store.Config) *harness {
	t.Helper()
	h := &harness{t: t, e: e, cfg: cfg, sent: map[uint64]store.Msg{}, consumers: map[string]bool{}}
	h.s = e.New(t, cfg)
	t.Cleanup(h.finish)
	return h
}

// next builds the next message on subj: payload "<subj>#<n>", time t0+n s.
func (h *harness) next(subj string) store.Msg {
	h.n++
	return store.Msg{Subject: subj, Data: fmt.Appendf(nil, "%s#%d", subj, h.n), Time: t0 + h.n*sec}
}

// append appends m and records it when accepted.
func (h *harness) append(m store.Msg) (uint64, error) {
	h.t.Helper()
	seq, err := h.s.Append(m)
	if err != nil {
		return seq, err
	}
	h.sent[seq] = store.Msg{Subject: m.Subject, Header: bytes.Clone(m.Header), Data: bytes.Clone(m.Data), Time: m.Time}
	h.lastTime = m.Time
	h.appended++
	return seq, nil
}

// mustAppend appends m and fails unless it gets sequence want.
func (h *harness) mustAppend(m store.Msg, want uint64) {
	h.t.Helper()
	seq, err := h.append(m)
	if err != nil || seq != want {
		h.t.Fatalf("Append(%q) = %d, %v; want %d, nil", m.Subject, seq, err, want)
	}
}

// add appends the next message on each subject and fails on error. It
// returns the sequence of the last one.
func (h *harness) add(subjects ...string) uint64 {
	h.t.Helper()
	var seq uint64
	for _, subj := range subjects {
		var err error
		if seq, err = h.append(h.next(subj)); err != nil {
			h.t.Fatalf("Append(%q): %v", subj, err)
		}
	}
	return seq
}

// refuse appends m and fails unless Append returns an error matching want.
func (h *harness) refuse(m store.Msg, want error) {
	h.t.Helper()
	seq, err := h.append(m)
	if !errors.Is(err, want) {
		h.t.Fatalf("Append(%q, %d+%d bytes) = %d, %v; want %v", m.Subject, len(m.Header), len(m.Data), seq, err, want)
	}
}

// update applies cfg to the store and remembers it for reopening.
func (h *harness) update(cfg store.Config) {
	h.t.Helper()
	if err := h.s.UpdateConfig(cfg); err != nil {
		h.t.Fatalf("UpdateConfig: %v", err)
	}
	h.cfg = cfg
}

// expected returns the state of a store whose sequences run from first to
// last and which holds exactly the messages stored (ascending) as they
// were appended.
func (h *harness) expected(first, last uint64, stored []uint64) store.State {
	st := store.State{FirstSeq: first, LastSeq: last, LastTime: h.lastTime}
	subjects := map[string]bool{}
	for _, seq := range stored {
		m := h.sent[seq]
		st.Msgs++
		st.Bytes += h.size(m)
		subjects[m.Subject] = true
	}
	st.NumSubjects = len(subjects)
	if len(stored) > 0 {
		st.FirstTime = h.sent[stored[0]].Time
		for seq := first; seq <= last; seq++ {
			if !slices.Contains(stored, seq) {
				st.Deleted = append(st.Deleted, seq)
			}
		}
		st.NumDeleted = len(st.Deleted)
	}
	return st
}

// check fails unless the store's state is expected(first, last, stored),
// every sequence from first-1 to last+1 loads as expected, NumPending
// counts stored (wantPending), Removals counts every message that left
// since the store was opened, and DurableSeq reaches LastSeq.
func (h *harness) check(first, last uint64, stored ...uint64) {
	h.t.Helper()
	h.wantState(h.expected(first, last, stored))
	lo := first
	if lo > 0 {
		lo--
	}
	for seq := lo; seq <= last+1; seq++ {
		h.wantLoad(seq, slices.Contains(stored, seq))
	}
	h.wantPending(first, last, stored)
	h.wantRemovals()
	h.wantDurable()
}

// wantRemovals fails unless Removals counts every message that was
// stored since the store was opened and is no longer.
func (h *harness) wantRemovals() {
	h.t.Helper()
	msgs := h.s.State(false).Msgs
	if got, want := h.s.Removals(), h.opened+h.appended-msgs; got != want {
		h.t.Fatalf("Removals() = %d, want %d (%d at open, %d appended, %d stored)", got, want, h.opened, h.appended, msgs)
	}
}

// wantDurable fails unless DurableSeq is LastSeq once WaitDurable(LastSeq)
// returned.
func (h *harness) wantDurable() {
	h.t.Helper()
	last := h.s.State(false).LastSeq
	if last > 0 {
		if err := h.s.WaitDurable(last); err != nil {
			h.t.Fatalf("WaitDurable(%d): %v", last, err)
		}
	}
	if got := h.s.DurableSeq(); got != last {
		h.t.Fatalf("DurableSeq() = %d, want LastSeq %d", got, last)
	}
}

// wantState fails unless State(true) is want (nil and empty Deleted
// compare equal).
func (h *harness) wantState(want store.State) {
	h.t.Helper()
	got := normState(h.s.State(true))
	if want = normState(want); !reflect.DeepEqual(got, want) {
		h.t.Fatalf("State(true):\n got %+v\nwant %+v", got, want)
	}
}

// normState makes an empty Deleted nil.
func normState(st store.State) store.State {
	if len(st.Deleted) == 0 {
		st.Deleted = nil
	}
	return st
}

// wantLoad fails unless Load(seq) returns what was appended at seq (when
// stored) or ErrNotFound.
func (h *harness) wantLoad(seq uint64, stored bool) {
	h.t.Helper()
	sm, err := h.s.Load(seq)
	if !stored {
		if !errors.Is(err, store.ErrNotFound) {
			h.t.Fatalf("Load(%d) = %v, %v; want ErrNotFound", seq, sm, err)
		}
		return
	}
	if err != nil {
		h.t.Fatalf("Load(%d): %v", seq, err)
	}
	h.wantMsg(sm, seq)
}

// wantMsg fails unless sm is the message appended at seq.
func (h *harness) wantMsg(sm *store.StoredMsg, seq uint64) {
	h.t.Helper()
	m, ok := h.sent[seq]
	if !ok {
		h.t.Fatalf("no message was appended at %d", seq)
	}
	want := store.StoredMsg{Subject: m.Subject, Header: m.Header, Data: m.Data, Seq: seq, Time: m.Time}
	if !sameMsg(sm, &want) {
		h.t.Fatalf("message %d:\n got %s\nwant %s", seq, fmtMsg(sm), fmtMsg(&want))
	}
}

// sameMsg compares messages, nil and empty slices being equal.
func sameMsg(a, b *store.StoredMsg) bool {
	return a != nil && b != nil && a.Subject == b.Subject && a.Seq == b.Seq && a.Time == b.Time &&
		bytes.Equal(a.Header, b.Header) && bytes.Equal(a.Data, b.Data)
}

// fmtMsg formats a message for failure output.
func fmtMsg(m *store.StoredMsg) string {
	if m == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{seq %d %q hdr %q data %q time %d}", m.Seq, m.Subject, m.Header, m.Data, m.Time)
}

// consumer opens the named consumer store and remembers the name for the
// reopen check.
func (h *harness) consumer(name string) store.ConsumerStore {
	h.t.Helper()
	cs, err := h.s.ConsumerStore(name)
	if err != nil {
		h.t.Fatalf("ConsumerStore(%q): %v", name, err)
	}
	h.consumers[name] = true
	return cs
}

// reopen closes and reopens the store, checking that nothing observable
// changed.
func (h *harness) reopen() {
	h.t.Helper()
	before := h.snapshot()
	h.s = h.e.Reopen(h.t, h.s, h.cfg)
	h.opened, h.appended = before.state.Msgs, 0
	after := h.snapshot()
	before.compare(h.t, after)
	h.wantRemovals()
}

// finish runs the reopen check for persistent engines and closes the
// store, unless the test already failed or closed it.
func (h *harness) finish() {
	if h.closed || h.s == nil {
		return
	}
	if h.e.Reopen != nil && !h.t.Failed() {
		h.reopen()
	}
	if err := h.s.Close(); err != nil && !h.t.Failed() {
		h.t.Errorf("Close: %v", err)
	}
}

// snapshot is everything observable about a store that must survive a
// reopen.
type snapshot struct {
	state     store.State
	subjects  map[string]store.SubjectState
	msgs      []*store.StoredMsg
	consumers map[string]*store.ConsumerState
}

// snapshot captures the store's observable state.
func (h *harness) snapshot() snapshot {
	h.t.Helper()
	sn := snapshot{state: normState(h.s.State(true)), subjects: h.s.SubjectsState("")}
	if sn.state.Msgs <= maxCompared {
		for sm, err := h.s.LoadNext(nil, 0); err == nil; sm, err = h.s.LoadNext(nil, sm.Seq+1) {
			sn.msgs = append(sn.msgs, sm)
		}
	}
	sn.consumers = map[string]*store.ConsumerState{}
	for _, name := range slices.Sorted(maps.Keys(h.consumers)) {
		cs := h.consumer(name)
		st, err := cs.State()
		if err != nil {
			h.t.Fatalf("consumer %q State: %v", name, err)
		}
		sn.consumers[name] = st
		if err := cs.Close(); err != nil {
			h.t.Fatalf("consumer %q Close: %v", name, err)
		}
	}
	return sn
}

// compare fails unless after equals sn.
func (sn snapshot) compare(t *testing.T, after snapshot) {
	t.Helper()
	if !reflect.DeepEqual(sn.state, after.state) {
		t.Fatalf("State(true) changed across reopen:\nbefore %+v\n after %+v", sn.state, after.state)
	}
	if !sameSubjects(sn.subjects, after.subjects) {
		t.Fatalf("SubjectsState changed across reopen:\nbefore %v\n after %v", sn.subjects, after.subjects)
	}
	if len(sn.msgs) != len(after.msgs) {
		t.Fatalf("%d messages before reopen, %d after", len(sn.msgs), len(after.msgs))
	}
	for i, m := range sn.msgs {
		if !sameMsg(m, after.msgs[i]) {
			t.Fatalf("message changed across reopen:\nbefore %s\n after %s", fmtMsg(m), fmtMsg(after.msgs[i]))
		}
	}
	for name, st := range sn.consumers {
		if !sameConsumer(st, after.consumers[name]) {
			t.Fatalf("consumer %q changed across reopen:\nbefore %+v\n after %+v", name, st, after.consumers[name])
		}
	}
}

// sameSubjects compares SubjectsState results, nil and empty being equal.
func sameSubjects(a, b map[string]store.SubjectState) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// sameConsumer compares consumer states, nil and empty being equal.
func sameConsumer(a, b *store.ConsumerState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Delivered == b.Delivered && a.AckFloor == b.AckFloor &&
		len(a.Pending) == len(b.Pending) && (len(a.Pending) == 0 || reflect.DeepEqual(a.Pending, b.Pending)) &&
		len(a.Redelivered) == len(b.Redelivered) && (len(a.Redelivered) == 0 || reflect.DeepEqual(a.Redelivered, b.Redelivered)) &&
		len(a.DeadLetter) == len(b.DeadLetter) && (len(a.DeadLetter) == 0 || reflect.DeepEqual(a.DeadLetter, b.DeadLetter))
}

// seqs returns the sequences lo..hi.
func seqs(lo, hi uint64) []uint64 {
	var out []uint64
	for s := lo; s <= hi; s++ {
		out = append(out, s)
	}
	return out
}

// fixed returns a message on subj that counts len(subj)+n+30 bytes in
// either engine: a payload of n bytes (a file store's store.MsgSize), or
// of n+14 in an engine with MemSizes (store.MemMsgSize adds 16).
func (h *harness) fixed(subj string, n int) store.Msg {
	if h.e.MemSizes {
		n += 30 - 16
	}
	return h.payload(subj, n)
}

// payload returns a message on subj with a payload of exactly n bytes.
func (h *harness) payload(subj string, n int) store.Msg {
	m := h.next(subj)
	m.Data = bytes.Repeat([]byte{'x'}, n)
	return m
}

// size returns the bytes m counts for in the engine under test.
func (h *harness) size(m store.Msg) uint64 {
	return store.Config{MemSizes: h.e.MemSizes}.MsgSize(m.Subject, m.Header, m.Data)
}

// ss builds a SubjectState.
func ss(msgs, first, last uint64) store.SubjectState {
	return store.SubjectState{Msgs: msgs, First: first, Last: last}
}
