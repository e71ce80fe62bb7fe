package storetest

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

var basicTests = []test{
	{name: "Empty", fn: testEmpty},
	{name: "Sequences", fn: testSequences},
	{name: "FirstSeqConfig", fn: testFirstSeqConfig},
	{name: "FirstSeqOne", fn: testFirstSeqOne},
	{name: "WaitDurable", fn: testWaitDurable},
	{name: "StateBytes", fn: testStateBytes},
	{name: "StateTimes", fn: testStateTimes},
}

// A brand-new store shows first_seq 0 and last_seq 0 (docs/protocol.md 3.3).
func testEmpty(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.wantState(store.State{})
	if _, err := h.s.Load(0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(0) = %v, want ErrNotFound", err)
	}
	if _, err := h.s.Load(1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(1) = %v, want ErrNotFound", err)
	}
	if _, err := h.s.LoadNext(nil, 0); !errors.Is(err, store.ErrEOF) {
		t.Fatalf("LoadNext = %v, want ErrEOF", err)
	}
	for _, f := range []string{"", ">", "a", "a.*"} {
		if _, err := h.s.LoadLast(f); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LoadLast(%q) = %v, want ErrNotFound", f, err)
		}
	}
	if ss := h.s.SubjectsState(""); len(ss) != 0 {
		t.Fatalf("SubjectsState = %v, want empty", ss)
	}
}

// Sequences start at 1 and each append takes LastSeq+1.
func testSequences(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	for i, subj := range []string{"a", "b", "a", "c.d"} {
		h.mustAppend(h.next(subj), uint64(i+1))
	}
	h.check(1, 4, 1, 2, 3, 4)
}

// With first_seq N a new store shows first N, last N-1 and numbers from N
// (docs/protocol.md 3.3).
func testFirstSeqConfig(t *testing.T, e Engine) {
	h := open(t, e, store.Config{FirstSeq: 100})
	h.wantState(store.State{FirstSeq: 100, LastSeq: 99})
	if _, err := h.s.Load(99); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(99) = %v, want ErrNotFound", err)
	}
	h.mustAppend(h.next("a"), 100)
	h.mustAppend(h.next("b"), 101)
	h.check(100, 101, 100, 101)
}

// first_seq 1 is shown as first 1, last 0, unlike no first_seq (0, 0).
func testFirstSeqOne(t *testing.T, e Engine) {
	h := open(t, e, store.Config{FirstSeq: 1})
	h.wantState(store.State{FirstSeq: 1, LastSeq: 0})
	h.mustAppend(h.next("a"), 1)
	h.check(1, 1, 1)
}

// WaitDurable returns nil for appended sequences.
func testWaitDurable(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	seq := h.add("a", "b", "c")
	for s := uint64(1); s <= seq; s++ {
		if err := h.s.WaitDurable(s); err != nil {
			t.Fatalf("WaitDurable(%d): %v", s, err)
		}
	}
}

// Bytes counts store.MsgSize: subject+header+payload+30, +4 with headers;
// with MemSizes store.MemMsgSize: subject+header+payload+16.
func testStateBytes(t *testing.T, e Engine) {
	if e.MemSizes {
		testMemStateBytes(t, e)
		return
	}
	h := open(t, e, store.Config{})
	m := h.next("ab")
	m.Data = []byte("xyz") // 2+3+30 = 35
	h.mustAppend(m, 1)
	m = h.next("ab")
	m.Header, m.Data = []byte("NATS/1.0\r\n\r\n"), []byte("xyz") // 2+12+3+30+4 = 51
	h.mustAppend(m, 2)
	m = h.next("cde")
	m.Data = nil // 3+0+30 = 33
	h.mustAppend(m, 3)
	st := h.s.State(false)
	if st.Bytes != 35+51+33 || st.Msgs != 3 || st.NumSubjects != 2 {
		t.Fatalf("State = %+v, want Msgs 3, Bytes 119, NumSubjects 2", st)
	}
	if err := h.s.Delete(2); err != nil {
		t.Fatal(err)
	}
	if st = h.s.State(false); st.Bytes != 35+33 || st.NumDeleted != 1 || st.Deleted != nil {
		t.Fatalf("State(false) = %+v, want Bytes 68, NumDeleted 1, no Deleted list", st)
	}
	h.check(1, 3, 1, 3)
}

// FirstTime follows the first stored message; LastTime is the time of the
// last appended message even after it was removed; both come from
// Msg.Time, never from a clock.
func testStateTimes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	for i, ts := range []int64{5 * sec, 3 * sec, 9 * sec} {
		h.mustAppend(store.Msg{Subject: "a", Data: []byte("x"), Time: t0 + ts}, uint64(i+1))
	}
	st := h.s.State(false)
	if st.FirstTime != t0+5*sec || st.LastTime != t0+9*sec {
		t.Fatalf("times = %d, %d; want %d, %d", st.FirstTime, st.LastTime, t0+5*sec, t0+9*sec)
	}
	for _, seq := range []uint64{1, 3} {
		if err := h.s.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	st = h.s.State(false)
	if st.FirstTime != t0+3*sec || st.LastTime != t0+9*sec {
		t.Fatalf("after deletes times = %d, %d; want %d, %d", st.FirstTime, st.LastTime, t0+3*sec, t0+9*sec)
	}
	h.check(2, 3, 2)
}

var loadTests = []test{
	{name: "LoadRoundTrip", fn: testLoadRoundTrip},
	{name: "LoadNotFound", fn: testLoadNotFound},
	{name: "LoadNext", fn: testLoadNext},
	{name: "LoadNextDeleted", fn: testLoadNextDeleted},
	{name: "LoadNextSparse", fn: testLoadNextSparse},
	{name: "LoadLast", fn: testLoadLast},
	{name: "SubjectsState", fn: testSubjectsState},
}

// Load returns exactly what was appended: subject, header, payload,
// sequence and time.
func testLoadRoundTrip(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	msgs := []store.Msg{
		{Subject: "a.b", Header: []byte("NATS/1.0\r\nK: v\r\n\r\n"), Data: []byte("hello"), Time: t0},
		{Subject: "a.c", Data: []byte("no header"), Time: t0 + 1},
		{Subject: "a.d", Header: []byte("NATS/1.0\r\n\r\n"), Time: t0 + 2},
		{Subject: "e", Time: t0 + 3},
		{Subject: "f", Data: bytes.Repeat([]byte{0, 1, 2, 255}, 4096), Time: t0 + 4},
	}
	for i, m := range msgs {
		h.mustAppend(m, uint64(i+1))
	}
	h.check(1, 5, 1, 2, 3, 4, 5)
}

// Load of a sequence never stored, deleted or removed is ErrNotFound.
func testLoadNotFound(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a", "b", "c", "d")
	if err := h.s.Delete(2); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.Compact(2); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{0, 1, 2, 5, 6, math.MaxUint64} {
		if sm, err := h.s.Load(seq); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Load(%d) = %v, %v; want ErrNotFound", seq, sm, err)
		}
	}
	h.check(3, 4, 3, 4)
}

// loadFixture appends 1 a.x, 2 b.x, 3 a.y, 4 a.x, 5 b.y, 6 c.
func loadFixture(h *harness) {
	h.add("a.x", "b.x", "a.y", "a.x", "b.y", "c")
}

// nextCase is a LoadNext call and the sequence it must return (0: ErrEOF).
type nextCase struct {
	filters []string
	start   uint64
	want    uint64
}

// LoadNext with no, one or several filters, wildcards and starts.
func testLoadNext(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	loadFixture(h)
	h.wantNext([]nextCase{
		{nil, 0, 1}, {nil, 1, 1}, {nil, 3, 3}, {nil, 6, 6}, {nil, 7, 0}, {nil, math.MaxUint64, 0},
		{[]string{""}, 2, 2}, {[]string{">"}, 6, 6}, {[]string{}, 4, 4},
		{[]string{"a.x"}, 0, 1}, {[]string{"a.x"}, 2, 4}, {[]string{"a.x"}, 5, 0},
		{[]string{"a.*"}, 2, 3}, {[]string{"*.x"}, 2, 2}, {[]string{"*.y"}, 4, 5},
		{[]string{"b.>"}, 0, 2}, {[]string{"c"}, 0, 6}, {[]string{"*"}, 0, 6},
		{[]string{"d"}, 0, 0}, {[]string{"a.x.>"}, 0, 0}, {[]string{"a"}, 0, 0}, {[]string{"a.>"}, 5, 0},
		{[]string{"a.x", "b.y"}, 2, 4}, {[]string{"c", "a.y"}, 0, 3}, {[]string{"b.*", "c"}, 3, 5},
		{[]string{"z", "c"}, 0, 6}, {[]string{"a.x", ">"}, 2, 2}, {[]string{"a.x", ""}, 3, 3},
		{[]string{"a.x", "a.*"}, 2, 3}, {[]string{"z", "y.>"}, 0, 0}, {[]string{"c"}, math.MaxUint64, 0},
	})
}

// wantNext runs LoadNext cases.
func (h *harness) wantNext(cases []nextCase) {
	h.t.Helper()
	for _, c := range cases {
		sm, err := h.s.LoadNext(c.filters, c.start)
		if c.want == 0 {
			if !errors.Is(err, store.ErrEOF) {
				h.t.Fatalf("LoadNext(%q, %d) = %s, %v; want ErrEOF", c.filters, c.start, fmtMsg(sm), err)
			}
			continue
		}
		if err != nil {
			h.t.Fatalf("LoadNext(%q, %d): %v; want %d", c.filters, c.start, err, c.want)
		}
		h.wantMsg(sm, c.want)
	}
}

// LoadNext skips deleted and removed messages.
func testLoadNextDeleted(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	loadFixture(h)
	for _, seq := range []uint64{1, 4, 6} {
		if err := h.s.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	h.wantNext([]nextCase{
		{nil, 0, 2}, {nil, 1, 2}, {nil, 4, 5}, {nil, 6, 0},
		{[]string{"a.x"}, 0, 0}, {[]string{"a.*"}, 0, 3}, {[]string{"c"}, 0, 0}, {[]string{"*"}, 0, 0},
		{[]string{"a.x", "b.y"}, 0, 5}, {[]string{"b.*"}, 3, 5},
	})
}

// LoadNext finds rare subjects among many messages and walks a filter
// through a stream.
func testLoadNextSparse(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	var bulk3 []uint64
	for i := uint64(1); i <= 3000; i++ {
		subj := "bulk." + string(rune('0'+i%10))
		if i == 1500 || i == 2999 {
			subj = "rare.x"
		}
		h.mustAppend(h.next(subj), i)
		if subj == "bulk.3" {
			bulk3 = append(bulk3, i)
		}
	}
	h.wantNext([]nextCase{
		{[]string{"rare.x"}, 0, 1500}, {[]string{"rare.*"}, 1501, 2999}, {[]string{"rare.>"}, 3000, 0},
		{[]string{"rare.x", "bulk.7"}, 1494, 1497}, {[]string{"rare.x", "bulk.7"}, 1498, 1500},
		{[]string{"nope", "rare.x"}, 2000, 2999}, {[]string{"*.x"}, 1, 1500},
	})
	var got []uint64
	for sm, err := h.s.LoadNext([]string{"bulk.3"}, 0); err == nil; sm, err = h.s.LoadNext([]string{"bulk.3"}, sm.Seq+1) {
		got = append(got, sm.Seq)
	}
	if len(got) != len(bulk3) || got[0] != bulk3[0] || got[len(got)-1] != bulk3[len(bulk3)-1] {
		t.Fatalf("walking bulk.3 found %d messages, want %d", len(got), len(bulk3))
	}
}

// LoadLast with literal and wildcard filters; "" and ">" mean the last
// stored message.
func testLoadLast(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	loadFixture(h)
	h.wantLast(map[string]uint64{"a.x": 4, "a.*": 4, "*.y": 5, "b.>": 5, ">": 6, "": 6, "c": 6, "*": 6, "d": 0, "a": 0, "a.x.>": 0})
	for _, seq := range []uint64{6, 4} {
		if err := h.s.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	h.wantLast(map[string]uint64{"a.x": 1, "a.*": 3, "": 5, ">": 5, "c": 0, "*": 0, "*.x": 2})
}

// wantLast checks LoadLast for each filter (0: ErrNotFound).
func (h *harness) wantLast(cases map[string]uint64) {
	h.t.Helper()
	for f, want := range cases {
		sm, err := h.s.LoadLast(f)
		if want == 0 {
			if !errors.Is(err, store.ErrNotFound) {
				h.t.Fatalf("LoadLast(%q) = %s, %v; want ErrNotFound", f, fmtMsg(sm), err)
			}
			continue
		}
		if err != nil {
			h.t.Fatalf("LoadLast(%q): %v; want %d", f, err, want)
		}
		h.wantMsg(sm, want)
	}
}

// SubjectsState reports count, first and last per stored subject.
func testSubjectsState(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	loadFixture(h)
	all := map[string]store.SubjectState{
		"a.x": ss(2, 1, 4), "b.x": ss(1, 2, 2), "a.y": ss(1, 3, 3), "b.y": ss(1, 5, 5), "c": ss(1, 6, 6),
	}
	h.wantSubjects("", all)
	h.wantSubjects(">", all)
	h.wantSubjects("a.*", map[string]store.SubjectState{"a.x": ss(2, 1, 4), "a.y": ss(1, 3, 3)})
	h.wantSubjects("a.x", map[string]store.SubjectState{"a.x": ss(2, 1, 4)})
	h.wantSubjects("*.y", map[string]store.SubjectState{"a.y": ss(1, 3, 3), "b.y": ss(1, 5, 5)})
	h.wantSubjects("*", map[string]store.SubjectState{"c": ss(1, 6, 6)})
	h.wantSubjects("zz", nil)
	if err := h.s.Delete(1); err != nil {
		t.Fatal(err)
	}
	h.wantSubjects("a.x", map[string]store.SubjectState{"a.x": ss(1, 4, 4)})
	h.add("a.x", "a.x")
	h.wantSubjects("a.x", map[string]store.SubjectState{"a.x": ss(3, 4, 8)})
	for _, seq := range []uint64{4, 7, 8, 3} {
		if err := h.s.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	h.wantSubjects("a.*", nil)
	h.wantSubjects("", map[string]store.SubjectState{"b.x": ss(1, 2, 2), "b.y": ss(1, 5, 5), "c": ss(1, 6, 6)})
	if st := h.s.State(false); st.NumSubjects != 3 {
		t.Fatalf("NumSubjects = %d, want 3", st.NumSubjects)
	}
}

// wantSubjects checks SubjectsState(filter).
func (h *harness) wantSubjects(filter string, want map[string]store.SubjectState) {
	h.t.Helper()
	if got := h.s.SubjectsState(filter); !sameSubjects(got, want) {
		h.t.Fatalf("SubjectsState(%q) = %v, want %v", filter, got, want)
	}
}

// testMemStateBytes is testStateBytes for an engine with MemSizes.
func testMemStateBytes(t *testing.T, e Engine) {
	h := open(t, e, store.Config{MemSizes: true})
	m := h.next("ab")
	m.Data = []byte("xyz") // 2+3+16 = 21
	h.mustAppend(m, 1)
	m = h.next("ab")
	m.Header, m.Data = []byte("NATS/1.0\r\n\r\n"), []byte("xyz") // 2+12+3+16 = 33
	h.mustAppend(m, 2)
	if st := h.s.State(false); st.Bytes != 21+33 {
		t.Fatalf("State = %+v, want Bytes 54", st)
	}
	if err := h.s.Delete(1); err != nil {
		t.Fatal(err)
	}
	if st := h.s.State(false); st.Bytes != 33 {
		t.Fatalf("State = %+v, want Bytes 33", st)
	}
	h.check(2, 2, 2)
}
