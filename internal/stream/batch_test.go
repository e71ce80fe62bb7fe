package stream

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
)

// The batch state machines with the clock passed in (ADR-50; nats-server
// v2.15.2 processJetStreamAtomicBatchMsg and processJetStreamFastBatchMsg,
// whose wire answers test/batch_test.go compares with nats-server's).

// batchEntry is message seq of atomic batch id, with extra header fields
// "Key:value|..." and commit ("", "1" or "eob").
func batchEntry(id string, seq int, commit, extra string) Entry {
	f := "Nats-Batch-Id:" + id + "|Nats-Batch-Sequence:" + strconv.Itoa(seq)
	if commit != "" {
		f += "|Nats-Batch-Commit:" + commit
	}
	if extra != "" {
		f += "|" + extra
	}
	return Entry{Subject: "orders.a", Header: hdrBlock(f), Data: []byte("m" + strconv.Itoa(seq)), Time: stepTime(seq)}
}

var atomicPolicy = BatchPolicy{AllowAtomic: true, AllowBatched: true}

func wantCode(t *testing.T, what string, err *jserr.Error, code jserr.ErrCode) {
	t.Helper()
	if err == nil || err.ErrCode != uint16(code) {
		t.Fatalf("%s: error %v, want %d", what, err, code)
	}
}

func TestAtomicStageCommit(t *testing.T) {
	var in BatchInflight
	a := NewAtomicBatches(BatchLimits{APILevel: 4}, &in)
	if r := a.Stage(atomicPolicy, "b", batchEntry("b", 1, "", ""), t0); !r.Empty || r.Err != nil {
		t.Fatalf("first message: %+v", r)
	}
	if r := a.Stage(atomicPolicy, "b", batchEntry("b", 2, "", "Nats-Required-Api-Level:1"), t0); !r.Empty {
		t.Fatalf("second message: %+v", r)
	}
	if n, _, staged := in.Open(); n != 1 || staged == 0 {
		t.Fatalf("inflight %d, staged %d", n, staged)
	}
	r := a.Stage(atomicPolicy, "b", batchEntry("b", 3, "eob", ""), t0+5)
	if r.Commit == nil || r.Err != nil {
		t.Fatalf("eob commit: %+v", r)
	}
	c := r.Commit
	if c.ID != "b" || c.Time != t0+5 || len(c.Entries) != 2 {
		t.Fatalf("commit %+v", c)
	}
	if got := string(c.Entries[1].Header); got != "NATS/1.0\r\nNats-Batch-Id: b\r\nNats-Batch-Sequence: 2\r\nNats-Batch-Commit: 1\r\n\r\n" {
		t.Errorf("last entry's header %q: the required level is removed and the commit header added", got)
	}
	if n, _, staged := in.Open(); n != 0 || staged != 0 || a.Len() != 0 {
		t.Errorf("after the commit: inflight %d, staged %d, open %d", n, staged, a.Len())
	}
}

func TestAtomicStageErrors(t *testing.T) {
	var in BatchInflight
	a := NewAtomicBatches(BatchLimits{AtomicMaxSize: 3, AtomicInflight: 2, AtomicTotal: 3, StagedBytes: 1000, APILevel: 4}, &in)
	stage := func(p BatchPolicy, e Entry) StageResult { return a.Stage(p, BatchID(e.Header), e, t0) }
	cases := []struct {
		p    BatchPolicy
		e    Entry
		code jserr.ErrCode
	}{
		{BatchPolicy{Sealed: true, Insufficient: true}, batchEntry("x", 1, "", ""), jserr.StreamSealed},
		{BatchPolicy{Insufficient: true}, batchEntry("x", 1, "", ""), jserr.InsufficientResources},
		{BatchPolicy{AllowAtomic: true, MaxMsgSize: 10}, batchEntry("x", 1, "", ""), jserr.StreamMessageExceedsMaximum},
		{BatchPolicy{}, batchEntry("x", 1, "", ""), jserr.AtomicPublishDisabled},
		{atomicPolicy, batchEntry(string(make([]byte, 65)), 1, "", ""), jserr.AtomicPublishInvalidBatchID},
		{atomicPolicy, Entry{Header: hdrBlock("Nats-Batch-Id:x|Nats-Batch-Sequence:1x")}, jserr.AtomicPublishMissingSeq},
		{atomicPolicy, batchEntry("x", 2, "", ""), jserr.AtomicPublishIncompleteBatch},
		{atomicPolicy, batchEntry("x", 4, "", ""), jserr.AtomicPublishTooLargeBatch},
		{atomicPolicy, batchEntry("x", 4, "eob", ""), jserr.AtomicPublishIncompleteBatch},
		{atomicPolicy, batchEntry("x", 1, "yes", ""), jserr.AtomicPublishInvalidBatchCommit},
		{atomicPolicy, batchEntry("x", 1, "eob", ""), jserr.AtomicPublishIncompleteBatch},
		{atomicPolicy, batchEntry("x", 1, "", "Nats-Required-Api-Level:5"), jserr.RequiredApiLevel},
	}
	for i, c := range cases {
		wantCode(t, "case "+strconv.Itoa(i), stage(c.p, c.e).Err, c.code)
		if a.Len() != 0 {
			t.Fatalf("case %d left a batch open", i)
		}
	}
	// Too many open batches: two per stream, three on the server.
	stage(atomicPolicy, batchEntry("o1", 1, "", ""))
	stage(atomicPolicy, batchEntry("o2", 1, "", ""))
	wantCode(t, "third on the stream", stage(atomicPolicy, batchEntry("o3", 1, "", "")).Err, jserr.AtomicPublishTooManyInflight)
	other := NewAtomicBatches(BatchLimits{AtomicInflight: 2, AtomicTotal: 3}, &in)
	if r := other.Stage(atomicPolicy, "p1", batchEntry("p1", 1, "", ""), t0); !r.Empty {
		t.Fatalf("third on the server: %+v", r)
	}
	wantCode(t, "fourth on the server", other.Stage(atomicPolicy, "p2", batchEntry("p2", 1, "", ""), t0).Err, jserr.AtomicPublishTooManyInflight)
	// A gap, a batch over the size limit and staging over the byte
	// budget abandon the batch with the reason of the advisory.
	r := stage(atomicPolicy, batchEntry("o1", 3, "", ""))
	wantCode(t, "gap", r.Err, jserr.AtomicPublishIncompleteBatch)
	if !reflect.DeepEqual(r.Abandoned, []Abandoned{{"o1", AbandonIncomplete}}) {
		t.Errorf("gap abandoned %v", r.Abandoned)
	}
	stage(atomicPolicy, batchEntry("o2", 2, "", ""))
	stage(atomicPolicy, batchEntry("o2", 3, "", ""))
	if r = stage(atomicPolicy, batchEntry("o2", 4, "", "")); r.Err == nil || r.Abandoned[0].Reason != AbandonLarge {
		t.Errorf("too large: %+v", r)
	}
	big := batchEntry("o4", 1, "", "")
	big.Data = make([]byte, 1000)
	if r = stage(atomicPolicy, big); r.Err == nil || r.Abandoned[0].Reason != AbandonIncomplete {
		t.Errorf("over the staged bytes: %+v", r)
	}
	if _, _, staged := in.Open(); staged != int64(len(batchEntry("p1", 1, "", "").Header)+2) {
		t.Errorf("staged bytes %d: only p1's first message is left", staged)
	}
}

// A batch with no message for the timeout is abandoned: by the next
// message of its id, or by Expire.
func TestAtomicStageTimeout(t *testing.T) {
	var in BatchInflight
	a := NewAtomicBatches(BatchLimits{Timeout: time.Second}, &in)
	a.Stage(atomicPolicy, "late", batchEntry("late", 1, "", ""), t0)
	r := a.Stage(atomicPolicy, "late", batchEntry("late", 2, "1", ""), t0+int64(time.Second))
	wantCode(t, "after the timeout", r.Err, jserr.AtomicPublishIncompleteBatch)
	if !reflect.DeepEqual(r.Abandoned, []Abandoned{{"late", AbandonTimeout}}) {
		t.Errorf("abandoned %v", r.Abandoned)
	}
	a.Stage(atomicPolicy, "b", batchEntry("b", 1, "", ""), t0)
	a.Stage(atomicPolicy, "a", batchEntry("a", 1, "", ""), t0+10)
	if got := a.Expire(t0 + int64(time.Second) + 5); !reflect.DeepEqual(got, []Abandoned{{"b", AbandonTimeout}}) {
		t.Errorf("Expire: %v", got)
	}
	if got := a.Expire(t0 + int64(time.Second) + 10); !reflect.DeepEqual(got, []Abandoned{{"a", AbandonTimeout}}) {
		t.Errorf("Expire: %v", got)
	}
	if n, _, staged := in.Open(); n != 0 || staged != 0 {
		t.Errorf("after expiry: inflight %d staged %d", n, staged)
	}
}

// commitOf stages entries as one batch and returns its commit.
func commitOf(t *testing.T, id string, entries ...Entry) BatchCommit {
	t.Helper()
	a := NewAtomicBatches(BatchLimits{}, &BatchInflight{})
	for _, e := range entries {
		if r := a.Stage(atomicPolicy, id, e, e.Time); r.Commit != nil {
			return *r.Commit
		}
	}
	t.Fatal("no commit")
	return BatchCommit{}
}

// ApplyBatch stores every message of a batch or none.
func TestApplyBatchAllOrNothing(t *testing.T) {
	s := newTestStream(t, `{"name":"ORDERS","subjects":["orders.>"],"allow_atomic":true,"discard":"new","max_msgs":4}`)
	apply(s, "orders.a", "", "x", t0)
	fail := []BatchCommit{
		commitOf(t, "b1", batchEntry("b1", 1, "", ""), batchEntry("b1", 2, "", "Nats-Expected-Last-Sequence:2"), batchEntry("b1", 3, "1", "")),
		commitOf(t, "b2", batchEntry("b2", 1, "", "Nats-Msg-Id:d"), batchEntry("b2", 2, "1", "Nats-Msg-Id:d")),
		commitOf(t, "b3", batchEntry("b3", 1, "", ""), batchEntry("b3", 2, "", ""), batchEntry("b3", 3, "", ""), batchEntry("b3", 4, "1", "")),
		commitOf(t, "b4", batchEntry("b4", 1, "", ""), batchEntry("b4", 2, "1", "Nats-Rollup:all")),
	}
	want := []string{
		`{"code":400,"err_code":10164,"description":"wrong last sequence"}`,
		`{"code":400,"err_code":10201,"description":"atomic publish batch contains duplicate message id"}`,
		`{"code":503,"err_code":10077,"description":"maximum messages exceeded"}`,
		`{"code":500,"err_code":10111,"description":"rollup not permitted"}`,
	}
	for i, c := range fail {
		res, err := s.ApplyBatch(c)
		if err == nil || res != nil {
			t.Fatalf("batch %d: stored %v", i, res)
		}
		if got := string(appendErrorAck(nil, "", err)); !bytes.Contains([]byte(got), []byte(want[i])) {
			t.Errorf("batch %d: %s, want %s", i, got, want[i])
		}
		if st := s.store.State(false); st.Msgs != 1 || st.LastSeq != 1 {
			t.Fatalf("batch %d left the stream at %+v", i, st)
		}
	}
	c := commitOf(t, "ok", batchEntry("ok", 1, "", "Nats-Expected-Last-Sequence:1|Nats-Msg-Id:i1"), batchEntry("ok", 2, "", ""), batchEntry("ok", 3, "1", ""))
	res, err := s.ApplyBatch(c)
	if err != nil || len(res) != 3 || res[0].Seq != 2 || res[2].Seq != 4 {
		t.Fatalf("ApplyBatch = %+v, %v", res, err)
	}
	m, _ := s.store.Load(4)
	if m.Time != c.Time || headerString(m.Header, hdrBatchCommit) != "1" {
		t.Errorf("stored %+v", m)
	}
	if seq, dup := s.dedupe.lookup("i1"); !dup || seq != 2 {
		t.Errorf("the batch's Nats-Msg-Id: %d %v", seq, dup)
	}
}

func TestBatchCommitCodec(t *testing.T) {
	c := BatchCommit{ID: "id", Time: -5, Entries: []Entry{
		{Subject: "a", Header: hdrBlock("K:v"), Data: []byte("x")},
		{Subject: "b", Data: []byte{}},
		{Subject: "c", Header: []byte{}, Data: []byte("yy")},
	}}
	b := EncodeBatchCommit(nil, c)
	got, err := DecodeBatchCommit(b)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for i := range b {
		if _, err := DecodeBatchCommit(b[:i]); !errors.Is(err, ErrBadBatchCommit) {
			t.Errorf("truncated to %d: %v", i, err)
		}
	}
	if _, err := DecodeBatchCommit(append(b, 0)); !errors.Is(err, ErrBadBatchCommit) {
		t.Errorf("trailing byte: %v", err)
	}
}

func FuzzDecodeBatchCommit(f *testing.F) {
	f.Add(EncodeBatchCommit(nil, BatchCommit{ID: "x", Entries: []Entry{{Subject: "a", Data: []byte("b")}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeBatchCommit(b)
		if err != nil {
			return
		}
		// Varints may come non-minimal; what they say must survive.
		again, err := DecodeBatchCommit(EncodeBatchCommit(nil, c))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-decoded %+v (%v), decoded %+v from %x", again, err, c, b)
		}
	})
}

// A start removes the tail of a batch stored without its commit header.
func TestDropPartialBatch(t *testing.T) {
	s := newTestStream(t, `{"name":"ORDERS","subjects":["orders.>"],"allow_atomic":true}`)
	apply(s, "orders.a", "", "x", t0)
	c := commitOf(t, "p", batchEntry("p", 1, "", ""), batchEntry("p", 2, "", ""), batchEntry("p", 3, "1", ""))
	if _, ok, err := s.DropPartialBatch(); ok || err != nil {
		t.Fatalf("nothing to drop: %v %v", ok, err)
	}
	for _, e := range c.Entries[:2] { // a crash after two of three
		if _, err := s.store.Append(store.Msg{Subject: e.Subject, Header: e.Header, Data: e.Data, Time: c.Time}); err != nil {
			t.Fatal(err)
		}
	}
	pb, ok, err := s.DropPartialBatch()
	if err != nil || !ok || pb != (PartialBatch{ID: "p", First: 2, Last: 3}) {
		t.Fatalf("DropPartialBatch = %+v %v %v", pb, ok, err)
	}
	if st := s.store.State(false); st.Msgs != 1 || st.LastSeq != 3 {
		t.Errorf("after the drop: %+v", st)
	}
	if _, err := s.ApplyBatch(c); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.DropPartialBatch(); ok {
		t.Error("a committed batch was dropped")
	}
}

// fastStep runs one fast batch message through Before, Apply and After
// and returns the payloads of the replies.
func fastStep(t *testing.T, s *Stream, f *FastBatches, reply, hdr string, now int64) []string {
	t.Helper()
	info, fast := ParseFastReply(reply)
	if !fast {
		t.Fatalf("%s is not a fast batch reply", reply)
	}
	var out []string
	st := f.Before(s.BatchPolicy(), info, Entry{Subject: "orders.a", Header: hdrBlock(hdr), Data: []byte("x"), Time: now}, now)
	for _, r := range st.Replies {
		out = append(out, string(r.Payload))
	}
	if st.Apply {
		for _, r := range f.After(info, s.Apply(st.Entry)) {
			out = append(out, string(r.Payload))
		}
	}
	return out
}

func TestFastBatches(t *testing.T) {
	s := newTestStream(t, `{"name":"ORDERS","subjects":["orders.>"],"allow_batched":true,"duplicate_window":60000000000}`)
	var in BatchInflight
	f := NewFastBatches("ORDERS", BatchLimits{Timeout: time.Second}, &in)
	steps := []struct {
		reply, hdr string
		want       []string
	}{
		{"in.f.4.fail.1.0.$FI", "", []string{`{"type":"ack","seq":0,"msgs":4}`}},
		{"in.f.4.fail.2.1.$FI", "", nil},
		{"in.f.4.fail.3.1.$FI", "Nats-Msg-Id:d", nil},
		{"in.f.4.fail.4.1.$FI", "Nats-Msg-Id:d", []string{`{"type":"ack","seq":4,"msgs":4}`}}, // a duplicate moves the flow on
		{"in.f.4.fail.4.4.$FI", "", []string{`{"type":"ack","seq":4,"msgs":4}`}},
		{"in.f.4.fail.9.4.$FI", "", []string{`{"type":"gap","last_seq":5,"seq":10}`, `{"stream":"ORDERS","seq":3,"batch":"f","count":4}`}},
		{"in.g.2.ok.1.0.$FI", "", []string{`{"type":"ack","seq":0,"msgs":2}`}},
		{"in.h.500.ok.1.0.$FI", "", []string{`{"type":"ack","seq":0,"msgs":1}`, `{"type":"ack","seq":1,"msgs":2}`}}, // g is open: h starts slow and ramps up
		{"in.h.500.ok.2.1.$FI", "", nil},
		{"in.h.500.ok.4.1.$FI", "Nats-Expected-Stream:X", []string{`{"type":"gap","last_seq":3,"seq":4}`, `{"type":"err","seq":4,"error":{"code":400,"err_code":10060,"description":"expected stream does not match"}}`}},
		{"in.h.500.ok.5.2.$FI", "", []string{`{"stream":"ORDERS","seq":7,"batch":"h","count":5}`}},
	}
	for i, st := range steps {
		got := fastStep(t, s, f, st.reply, st.hdr, t0)
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("step %d %s:\n got %q\nwant %q", i, st.reply, got, st.want)
		}
	}
	if f.Len() != 1 {
		t.Fatalf("open batches %d, want g", f.Len())
	}
	f.Expire(t0 + int64(time.Second))
	if _, n, _ := in.Open(); n != 0 || f.Len() != 0 {
		t.Errorf("after the timeout: %d open", n)
	}
	if got := fastStep(t, s, f, "in.g.2.ok.2.1.$FI", "", t0); len(got) != 1 || !bytes.Contains([]byte(got[0]), []byte("10208")) {
		t.Errorf("a message of an expired batch: %q", got)
	}
}

func TestParseFastReply(t *testing.T) {
	ok := map[string]FastInfo{
		"_INBOX.x.id.10.fail.1.0.$FI":   {ID: "id", Seq: 1, Flow: 10},
		"p.id.0.ok.7.2.$FI":             {ID: "id", Seq: 7, Flow: 10, GapOK: true, Commit: true},
		"p.id.99999999.ok.7.3.$FI":      {ID: "id", Seq: 7, Flow: 65535, GapOK: true, Commit: true, EOB: true},
		"p..5.fail.3.4.$FI":             {ID: "", Seq: 3, Flow: 5, Ping: true},
		"a.b.id.-3.fail.2.1.$FI":        {ID: "id", Seq: 2, Flow: 10},
		"a.b.id.5x.fail.1.0.$FI":        {ID: "id", Seq: 1, Flow: 10},
		"a.b.id.1.fail.10.4.$FI":        {ID: "id", Seq: 10, Flow: 1, Ping: true},
		"a.b.id.1.fail.2.3.$FI":         {ID: "id", Seq: 2, Flow: 1, Commit: true, EOB: true},
		"a.b.id.1.fail.1.2.$FI":         {ID: "id", Seq: 1, Flow: 1, Commit: true},
		"a.b.id.1.fail.5.2.$FI":         {ID: "id", Seq: 5, Flow: 1, Commit: true},
		"a.b.id.65535.fail.1.0.$FI":     {ID: "id", Seq: 1, Flow: 65535},
		"a.b.id.65536.fail.1.0.$FI":     {ID: "id", Seq: 1, Flow: 65535},
		"a.b.id.1.fail.3.1.x.y.1.0.$FI": {},
	}
	for reply, want := range ok {
		info, fast := ParseFastReply(reply)
		if want == (FastInfo{}) {
			if !fast || info != nil {
				t.Errorf("%s: %+v %v, want invalid", reply, info, fast)
			}
			continue
		}
		if !fast || info == nil || *info != want {
			t.Errorf("%s: %+v %v, want %+v", reply, info, fast, want)
		}
	}
	for _, reply := range []string{"", "$FI", ".$FI", "a.b", "a.b.$FIX", "a.$fi"} {
		if _, fast := ParseFastReply(reply); fast {
			t.Errorf("%q read as a fast batch reply", reply)
		}
	}
	for _, reply := range []string{"a.$FI", "x.1.0.$FI", "id.5.fail.2.0.$FI", "id.5.fail.1.1.$FI", "id.5.fail.1.3.$FI", "id.5.fail.0.1.$FI", "id.5.fail.18446744073709551615.1.$FI", "id.5.nope.1.0.$FI", "id.5.fail.1.5.$FI", "5.fail.1.0.$FI"} {
		if info, fast := ParseFastReply(reply); !fast || info != nil {
			t.Errorf("%q: %+v %v, want invalid", reply, info, fast)
		}
	}
}
