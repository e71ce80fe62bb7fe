package store

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestCheckMsgSize(t *testing.T) {
	cases := []struct {
		max        int64
		hdr, data  int
		wantRefuse bool
	}{
		{0, 0, 1 << 20, false},
		{-1, 5, 5, false},
		{10, 0, 10, false},
		{10, 0, 11, true},
		{10, 4, 6, false},
		{10, 5, 6, true},
		{10, 11, 0, true},
	}
	for _, c := range cases {
		err := CheckMsgSize(Config{MaxMsgSize: c.max}, make([]byte, c.hdr), make([]byte, c.data))
		if got := errors.Is(err, ErrMaxMsgSize); got != c.wantRefuse || (err != nil && !got) {
			t.Errorf("CheckMsgSize(max %d, %d+%d) = %v, want refuse %v", c.max, c.hdr, c.data, err, c.wantRefuse)
		}
	}
}

// msg41 is a message whose MsgSize is 41 (subject "a", 10 bytes).
var msg41 = Msg{Subject: "a", Data: make([]byte, 10)}

func TestCheckDiscardNew(t *testing.T) {
	newCfg := func(maxMsgs, maxBytes, perSubj int64, perNew bool) Config {
		return Config{Discard: DiscardNew, MaxMsgs: maxMsgs, MaxBytes: maxBytes, MaxMsgsPerSubject: perSubj, DiscardNewPerSubject: perNew}
	}
	rollup := Msg{Subject: "a", Header: []byte("NATS/1.0\r\nNats-Rollup: sub\r\n\r\n")}
	cases := []struct {
		name   string
		cfg    Config
		occ    Occupancy
		m      Msg
		oldest uint64
		want   error
	}{
		{"discard old ignores limits", Config{MaxMsgs: 1, MaxBytes: 1, MaxMsgsPerSubject: 1, DiscardNewPerSubject: true}, Occupancy{5, 500, 5}, msg41, 41, nil},
		{"no limits", newCfg(0, 0, 0, false), Occupancy{5, 500, 5}, msg41, 41, nil},
		{"below max msgs", newCfg(3, 0, 0, false), Occupancy{2, 0, 0}, msg41, 0, nil},
		{"at max msgs", newCfg(3, 0, 0, false), Occupancy{3, 0, 0}, msg41, 0, ErrMaxMsgs},
		{"over max msgs", newCfg(3, 0, 0, false), Occupancy{4, 0, 0}, msg41, 0, ErrMaxMsgs},
		{"max msgs, subject at limit replaces", newCfg(3, 0, 1, false), Occupancy{3, 0, 1}, msg41, 41, nil},
		{"max msgs, subject below limit", newCfg(3, 0, 2, false), Occupancy{3, 0, 1}, msg41, 41, ErrMaxMsgs},
		{"bytes fit exactly", newCfg(0, 123, 0, false), Occupancy{2, 82, 0}, msg41, 0, nil},
		{"bytes over", newCfg(0, 122, 0, false), Occupancy{2, 82, 0}, msg41, 0, ErrMaxBytes},
		{"bytes over, replaces equal", newCfg(0, 122, 1, false), Occupancy{2, 82, 1}, msg41, 41, nil},
		{"bytes over, replaces larger", newCfg(0, 122, 1, false), Occupancy{2, 82, 1}, msg41, 50, nil},
		{"bytes over, replaces smaller", newCfg(0, 200, 1, false), Occupancy{3, 190, 1}, msg41, 40, ErrMaxBytes},
		{"per subject new", newCfg(0, 0, 2, true), Occupancy{5, 0, 2}, msg41, 41, ErrMaxMsgsPerSubject},
		{"per subject new, below", newCfg(0, 0, 2, true), Occupancy{5, 0, 1}, msg41, 41, nil},
		{"per subject new before max msgs", newCfg(1, 0, 1, true), Occupancy{5, 0, 1}, msg41, 41, ErrMaxMsgsPerSubject},
		{"rollup passes per subject", newCfg(0, 0, 1, true), Occupancy{5, 0, 1}, rollup, 41, nil},
		{"rollup replaces at max msgs", newCfg(5, 0, 1, true), Occupancy{5, 0, 1}, rollup, 41, nil},
		{"rollup still bound by max msgs", newCfg(5, 0, 2, true), Occupancy{5, 0, 1}, rollup, 41, ErrMaxMsgs},
	}
	for _, c := range cases {
		called := false
		oldest := func() uint64 { called = true; return c.oldest }
		err := CheckDiscardNew(c.cfg, c.occ, c.m, oldest)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: CheckDiscardNew = %v, want %v", c.name, err, c.want)
		}
		if called && !AtSubjectLimit(c.cfg, c.occ.SubjectMsgs) {
			t.Errorf("%s: oldestSize called below the subject limit", c.name)
		}
	}
}

func TestCheckAppendOrder(t *testing.T) {
	cfg := Config{Discard: DiscardNew, MaxMsgs: 1, MaxMsgSize: 5}
	err := CheckAppend(cfg, Occupancy{Msgs: 1}, Msg{Subject: "a", Data: make([]byte, 6)}, nil)
	if !errors.Is(err, ErrMaxMsgSize) {
		t.Fatalf("CheckAppend = %v, want ErrMaxMsgSize first", err)
	}
	err = CheckAppend(cfg, Occupancy{Msgs: 1}, Msg{Subject: "a", Data: make([]byte, 5)}, nil)
	if !errors.Is(err, ErrMaxMsgs) {
		t.Fatalf("CheckAppend = %v, want ErrMaxMsgs", err)
	}
}

func TestSubjectLimits(t *testing.T) {
	cases := []struct {
		per      int64
		n        uint64
		at, over bool
	}{
		{0, 100, false, false},
		{-1, 100, false, false},
		{2, 1, false, false},
		{2, 2, true, false},
		{2, 3, true, true},
	}
	for _, c := range cases {
		cfg := Config{MaxMsgsPerSubject: c.per}
		if AtSubjectLimit(cfg, c.n) != c.at || OverSubjectLimit(cfg, c.n) != c.over {
			t.Errorf("per %d, n %d: at %v over %v; want %v %v", c.per, c.n,
				AtSubjectLimit(cfg, c.n), OverSubjectLimit(cfg, c.n), c.at, c.over)
		}
	}
}

func TestOverStreamLimits(t *testing.T) {
	cases := []struct {
		cfg         Config
		msgs, bytes uint64
		want        bool
	}{
		{Config{}, 1 << 40, 1 << 50, false},
		{Config{MaxMsgs: 3}, 3, 0, false},
		{Config{MaxMsgs: 3}, 4, 0, true},
		{Config{MaxBytes: 100}, 1, 100, false},
		{Config{MaxBytes: 100}, 1, 101, true},
		{Config{MaxMsgs: 3, MaxBytes: 100}, 2, 101, true},
		{Config{MaxMsgs: 3, Discard: DiscardNew}, 4, 0, false},
		{Config{MaxBytes: 100, Discard: DiscardNew}, 1, 101, false},
	}
	for _, c := range cases {
		if got := OverStreamLimits(c.cfg, c.msgs, c.bytes); got != c.want {
			t.Errorf("OverStreamLimits(%+v, %d, %d) = %v, want %v", c.cfg, c.msgs, c.bytes, got, c.want)
		}
	}
}

func TestExpired(t *testing.T) {
	cfg := Config{MaxAge: 10 * time.Second}
	const now = int64(100 * time.Second)
	cases := []struct {
		cfg  Config
		ts   int64
		want bool
	}{
		{cfg, now - int64(10*time.Second), true},
		{cfg, now - int64(10*time.Second) + 1, false},
		{cfg, now - int64(11*time.Second), true},
		{cfg, now, false},
		{Config{}, 0, false},
		{Config{MaxAge: -1}, 0, false},
	}
	for _, c := range cases {
		if got := Expired(c.cfg, c.ts, now); got != c.want {
			t.Errorf("Expired(%v, %d) = %v, want %v", c.cfg.MaxAge, c.ts, got, c.want)
		}
	}
}

func TestHasRollup(t *testing.T) {
	cases := map[string]bool{
		"":                                     false,
		"NATS/1.0\r\n\r\n":                     false,
		"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n": true,
		"NATS/1.0\r\nNats-Rollup:all\r\n\r\n":  true,
		"NATS/1.0\r\nA: b\r\nNats-Rollup: x\r\n\r\n": true,
		"NATS/1.0\r\nNats-Rollup:\r\n\r\n":           false,
		"NATS/1.0\r\nNats-Rollup:   \r\n\r\n":        false,
		"NATS/1.0\r\nnats-rollup: sub\r\n\r\n":       false,
		"NATS/1.0\r\nX-Nats-Rollup: sub\r\n\r\n":     false,
		"NATS/1.0\r\nNats-Rollup-X: sub\r\n\r\n":     false,
		"Nats-Rollup: sub\r\n\r\n":                   false,
	}
	for hdr, want := range cases {
		if got := hasRollup([]byte(hdr)); got != want {
			t.Errorf("hasRollup(%q) = %v, want %v", hdr, got, want)
		}
	}
}

// fakeStore is an Enforcer over a list of subjects by sequence.
type fakeStore struct {
	seqs    []uint64
	subj    map[uint64]string
	size    uint64 // bytes per message
	removed []uint64
	stuck   bool // removals do nothing
}

// newFake holds one message per subject in subjects, from sequence 1.
func newFake(size uint64, subjects ...string) *fakeStore {
	f := &fakeStore{subj: map[uint64]string{}, size: size}
	for i, s := range subjects {
		f.seqs = append(f.seqs, uint64(i+1))
		f.subj[uint64(i+1)] = s
	}
	return f
}

func (f *fakeStore) Totals() (uint64, uint64) {
	return uint64(len(f.seqs)), uint64(len(f.seqs)) * f.size
}

func (f *fakeStore) SubjectMsgs(s string) uint64 {
	var n uint64
	for _, seq := range f.seqs {
		if f.subj[seq] == s {
			n++
		}
	}
	return n
}

func (f *fakeStore) SubjectsOver(n uint64) []string {
	var out []string
	for _, seq := range f.seqs {
		s := f.subj[seq]
		if f.SubjectMsgs(s) > n && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeStore) remove(i int) error {
	if f.stuck {
		return nil
	}
	f.removed = append(f.removed, f.seqs[i])
	f.seqs = slices.Delete(f.seqs, i, i+1)
	return nil
}

func (f *fakeStore) RemoveOldest() error { return f.remove(0) }

func (f *fakeStore) RemoveSubjectOldest(s string) error {
	for i, seq := range f.seqs {
		if f.subj[seq] == s {
			return f.remove(i)
		}
	}
	return errors.New("no message on subject")
}

func TestEnforce(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		subjects []string
		update   bool // EnforceAfterUpdate rather than after appending the last
		removed  []uint64
	}{
		{"nothing", Config{MaxMsgs: 3}, []string{"a", "b", "c"}, false, nil},
		{"max msgs", Config{MaxMsgs: 2}, []string{"a", "b", "c"}, false, []uint64{1}},
		{"max bytes", Config{MaxBytes: 15}, []string{"a", "b", "c"}, false, []uint64{1, 2}},
		{"per subject", Config{MaxMsgsPerSubject: 1}, []string{"a", "b", "a"}, false, []uint64{1}},
		{"append: subject first", Config{MaxMsgs: 2, MaxMsgsPerSubject: 1}, []string{"a", "b", "b"}, false, []uint64{2}},
		{"update: stream first", Config{MaxMsgs: 2, MaxMsgsPerSubject: 1}, []string{"a", "b", "b"}, true, []uint64{1, 2}},
		{"update: per subject", Config{MaxMsgsPerSubject: 1}, []string{"a", "b", "a", "b", "a"}, true, []uint64{1, 3, 2}},
		{"discard new removes only per subject", Config{Discard: DiscardNew, MaxMsgs: 1, MaxMsgsPerSubject: 1}, []string{"a", "b", "a"}, false, []uint64{1}},
		{"update under discard new", Config{Discard: DiscardNew, MaxMsgs: 1}, []string{"a", "b", "a"}, true, nil},
	}
	for _, c := range cases {
		f := newFake(10, c.subjects...)
		var err error
		if c.update {
			err = EnforceAfterUpdate(c.cfg, f)
		} else {
			err = EnforceAfterAppend(c.cfg, c.subjects[len(c.subjects)-1], f)
		}
		if err != nil || !slices.Equal(f.removed, c.removed) {
			t.Errorf("%s: removed %v, %v; want %v", c.name, f.removed, err, c.removed)
		}
	}
}

func TestEnforceNoProgress(t *testing.T) {
	f := newFake(10, "a", "a", "a")
	f.stuck = true
	if err := EnforceAfterAppend(Config{MaxMsgsPerSubject: 1}, "a", f); !errors.Is(err, errNoProgress) {
		t.Fatalf("per subject: %v, want errNoProgress", err)
	}
	if err := EnforceAfterUpdate(Config{MaxMsgs: 1}, f); !errors.Is(err, errNoProgress) {
		t.Fatalf("stream: %v, want errNoProgress", err)
	}
}

func TestPlanPurge(t *testing.T) {
	count := func(string) uint64 { return 10 }
	cases := []struct {
		req  PurgeRequest
		want PurgePlan
		err  error
	}{
		{PurgeRequest{}, PurgePlan{Kind: PurgeAll}, nil},
		{PurgeRequest{Subject: ">"}, PurgePlan{Kind: PurgeAll}, nil},
		{PurgeRequest{Seq: 1}, PurgePlan{Kind: PurgeNone}, nil},
		{PurgeRequest{Subject: "a", Seq: 1}, PurgePlan{Kind: PurgeNone}, nil},
		{PurgeRequest{Seq: 2}, PurgePlan{Kind: PurgeCompact, Seq: 2}, nil},
		{PurgeRequest{Subject: ">", Seq: 50}, PurgePlan{Kind: PurgeCompact, Seq: 50}, nil},
		{PurgeRequest{Keep: 3}, PurgePlan{Kind: PurgeMatching, Filter: ">", Max: 7}, nil},
		{PurgeRequest{Keep: 10}, PurgePlan{Kind: PurgeNone}, nil},
		{PurgeRequest{Subject: "a.*"}, PurgePlan{Kind: PurgeMatching, Filter: "a.*"}, nil},
		{PurgeRequest{Subject: "a", Seq: 5}, PurgePlan{Kind: PurgeMatching, Filter: "a", Below: 5}, nil},
		{PurgeRequest{Subject: "a", Keep: 1}, PurgePlan{Kind: PurgeMatching, Filter: "a", Max: 9}, nil},
		{PurgeRequest{Subject: "a", Keep: 11}, PurgePlan{Kind: PurgeNone}, nil},
		{PurgeRequest{Seq: 5, Keep: 1}, PurgePlan{}, ErrBadRequest},
		{PurgeRequest{Seq: 1, Keep: 1}, PurgePlan{}, ErrBadRequest},
	}
	for _, c := range cases {
		got, err := PlanPurge(c.req, count)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("PlanPurge(%+v) = %+v, %v; want %+v, %v", c.req, got, err, c.want, c.err)
		}
	}
}

func TestFilters(t *testing.T) {
	cases := []struct {
		subj    string
		filters []string
		want    bool
	}{
		{"a.b", nil, true},
		{"a.b", []string{}, true},
		{"a.b", []string{""}, true},
		{"a.b", []string{">"}, true},
		{"a.b", []string{"a.b"}, true},
		{"a.b", []string{"a.c"}, false},
		{"a.b", []string{"a.*"}, true},
		{"a.b", []string{"a.>"}, true},
		{"a.b", []string{"a"}, false},
		{"a.b", []string{"x", "*.b"}, true},
		{"a.b", []string{"x", "y"}, false},
		{"a..b", []string{"a..b"}, true},
	}
	for _, c := range cases {
		if got := MatchFilters(c.subj, c.filters); got != c.want {
			t.Errorf("MatchFilters(%q, %q) = %v, want %v", c.subj, c.filters, got, c.want)
		}
		if len(c.filters) == 1 && MatchFilter(c.subj, c.filters[0]) != c.want {
			t.Errorf("MatchFilter(%q, %q) != %v", c.subj, c.filters[0], c.want)
		}
	}
	all := []struct {
		filters []string
		want    bool
	}{
		{nil, true}, {[]string{"a"}, false}, {[]string{"a", ">"}, true}, {[]string{"", "a"}, true}, {[]string{"a.>", "*"}, false},
	}
	for _, c := range all {
		if FiltersAll(c.filters) != c.want {
			t.Errorf("FiltersAll(%q) != %v", c.filters, c.want)
		}
	}
}

func TestCheckConsumerState(t *testing.T) {
	ok := func() *ConsumerState {
		return &ConsumerState{
			Delivered: SequencePair{Consumer: 10, Stream: 20},
			AckFloor:  SequencePair{Consumer: 5, Stream: 12},
			Pending:   []StreamPending{{Stream: 13}, {Stream: 20}},
		}
	}
	cases := []struct {
		name   string
		mutate func(*ConsumerState)
		bad    bool
	}{
		{"valid", func(*ConsumerState) {}, false},
		{"empty", func(st *ConsumerState) { *st = ConsumerState{} }, false},
		{"ack floor consumer", func(st *ConsumerState) { st.AckFloor.Consumer = 11 }, true},
		{"ack floor stream", func(st *ConsumerState) { st.AckFloor.Stream = 21 }, true},
		{"pending at floor", func(st *ConsumerState) { st.Pending[0].Stream = 12 }, true},
		{"pending past delivered", func(st *ConsumerState) { st.Pending[1].Stream = 21 }, true},
		{"pending out of order", func(st *ConsumerState) { st.Pending[0], st.Pending[1] = st.Pending[1], st.Pending[0] }, true},
		{"pending repeated", func(st *ConsumerState) { st.Pending[0].Stream = 20 }, true},
		{"redelivered unchecked", func(st *ConsumerState) { st.Redelivered = map[uint64]uint64{99: 1} }, false},
	}
	for _, c := range cases {
		st := ok()
		c.mutate(st)
		if err := CheckConsumerState(st); errors.Is(err, ErrBadRequest) != c.bad || (!c.bad && err != nil) {
			t.Errorf("%s: CheckConsumerState = %v, want bad %v", c.name, err, c.bad)
		}
	}
	if !errors.Is(CheckConsumerState(nil), ErrBadRequest) {
		t.Error("CheckConsumerState(nil) accepted")
	}
}

func TestCloneConsumerState(t *testing.T) {
	st := &ConsumerState{Pending: []StreamPending{{Stream: 1, Pending: Pending{Sequence: 2}}}, Redelivered: map[uint64]uint64{}}
	c := CloneConsumerState(st)
	st.Pending[0].Sequence = 9
	if p, ok := c.PendingAt(1); !ok || p.Sequence != 2 || c.Redelivered != nil {
		t.Fatalf("clone = %+v", c)
	}
}
