package stream

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/vfs"
)

// applyOp applies op and returns a copy of the outcome.
func applyOp(s *Stream, op Op) Outcome {
	var out Outcome
	s.ApplyOp(op, &out)
	return out
}

func wantOpErr(t *testing.T, what string, err *jserr.Error, code jserr.ErrCode, desc string) {
	t.Helper()
	if err == nil || err.ErrCode != uint16(code) || (desc != "" && err.Description != desc) {
		t.Fatalf("%s: error %v, want %d %q", what, err, code, desc)
	}
}

// A Publish decides each entry alone and in order: one Result each, the
// same as applying them one by one.
func TestApplyOpPublish(t *testing.T) {
	s := newTestStream(t, `{"name":"P","subjects":["p.>"]}`)
	out := applyOp(s, &Publish{Entries: []Entry{
		{Subject: "p.a", Header: hdrBlock("Nats-Msg-Id:1"), Data: []byte("x"), Time: t0},
		{Subject: "p.a", Header: hdrBlock("Nats-Msg-Id:1"), Data: []byte("x"), Time: t0},
		{Subject: "p.b", Header: hdrBlock("Nats-Expected-Last-Sequence:9"), Time: t0},
		{Subject: "p.b", Time: t0},
	}})
	if len(out.Results) != 4 {
		t.Fatalf("%d results, want 4", len(out.Results))
	}
	wantSeq(t, out.Results[0], 1, false)
	wantSeq(t, out.Results[1], 1, true)
	wantErr(t, out.Results[2], jserr.StreamWrongLastSequence)
	wantSeq(t, out.Results[3], 2, false)
}

// A Copy stops at the first refusal: the entries after it are not tried
// (the sourcer retries them), and the outcome ends with the refused one.
func TestApplyOpCopyStopsAtRefusal(t *testing.T) {
	s := newTestStream(t, `{"name":"C","subjects":["c.>"],"max_msgs":1,"discard":"new"}`)
	src := &store.StoredMsg{Subject: "o.a", Data: []byte("x"), Seq: 1, Time: t0}
	e := SourcedEntry(src, "O", "", "o.a", t0)
	out := applyOp(s, &Copy{Entries: []Entry{e, e, e}})
	if len(out.Results) != 2 {
		t.Fatalf("%d results, want 2 (stored, refused)", len(out.Results))
	}
	wantSeq(t, out.Results[0], 1, false)
	if out.Results[1].Err == nil {
		t.Fatalf("second copy %+v, want refused by max_msgs", out.Results[1])
	}
	mirror := newTestStream(t, `{"name":"M","mirror":{"name":"O"}}`)
	out = applyOp(mirror, &Copy{Mirror: true, Entries: []Entry{{Subject: "o.a", Time: t0}, {Subject: "o.b", Time: t0}}, OriginSeqs: []uint64{3, 7}})
	wantSeq(t, out.Results[0], 3, false)
	wantSeq(t, out.Results[1], 7, false)
	if st := mirror.Store().State(false); st.FirstSeq != 3 || st.LastSeq != 7 || st.Msgs != 2 {
		t.Fatalf("mirror after copies at 3 and 7: %+v", st)
	}
}

// Purge runs nats-server's checks in its order (sealed, deny_purge, seq
// with keep), from the stream's config at apply time.
func TestApplyOpPurge(t *testing.T) {
	s := newTestStream(t, `{"name":"P","subjects":["p.>"]}`)
	for i := range 5 {
		apply(s, "p.a", "", "x", stepTime(i))
	}
	out := applyOp(s, &Purge{Request: store.PurgeRequest{Seq: 2, Keep: 1}})
	wantOpErr(t, "seq with keep", out.Err, jserr.BadRequest, "")
	out = applyOp(s, &Purge{Request: store.PurgeRequest{Keep: 2}})
	if out.Err != nil || out.Removed != 3 {
		t.Fatalf("purge keeping 2: %+v, want 3 removed", out)
	}
	cfg := s.Config()
	cfg.DenyPurge = true
	applyOp(s, &UpdateConfig{Config: cfg})
	wantOpErr(t, "deny_purge", applyOp(s, &Purge{Request: store.PurgeRequest{Seq: 2, Keep: 1}}).Err, jserr.StreamPurgeFailed, "stream purge not permitted")
	cfg.Sealed = true
	applyOp(s, &UpdateConfig{Config: cfg})
	wantOpErr(t, "sealed", applyOp(s, &Purge{}).Err, jserr.StreamSealed, "")
	if st := s.Store().State(false); st.Msgs != 2 {
		t.Fatalf("refused purges removed messages: %+v", st)
	}
}

// DeleteMsg: sealed 10109, deny_delete 10057, out of range on a file
// stream 10057 with the file store's text, a gap 10043.
func TestApplyOpDeleteMsg(t *testing.T) {
	c := mustConfig(t, `{"name":"D","subjects":["d.>"],"storage":"file"}`)
	fs, err := filestore.Open(filestore.Config{Dir: "/d", FS: vfs.NewCrashFS()}, c.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	s := New(c, fs)
	for i := range 3 {
		apply(s, "d.a", "", "x", stepTime(i))
	}
	if out := applyOp(s, &DeleteMsg{Seq: 2}); out.Err != nil {
		t.Fatalf("delete 2: %v", out.Err)
	}
	wantOpErr(t, "again", applyOp(s, &DeleteMsg{Seq: 2}).Err, jserr.SequenceNotFound, "sequence 2 not found")
	wantOpErr(t, "0", applyOp(s, &DeleteMsg{Seq: 0}).Err, jserr.StreamMsgDeleteFailed, "no message found")
	wantOpErr(t, "past the end", applyOp(s, &DeleteMsg{Seq: 4}).Err, jserr.StreamMsgDeleteFailed, "stream store EOF")
	c.DenyDelete = true
	applyOp(s, &UpdateConfig{Config: c})
	wantOpErr(t, "deny_delete", applyOp(s, &DeleteMsg{Seq: 1}).Err, jserr.StreamMsgDeleteFailed, "message delete not permitted")

	m := newTestStream(t, `{"name":"M","subjects":["m"],"storage":"memory"}`)
	wantOpErr(t, "memory, past the end", applyOp(m, &DeleteMsg{Seq: 9}).Err, jserr.SequenceNotFound, "")
}

// Expire removes by max_age at the op's time, stores the subject delete
// markers (stamped with that time) and forgets the ids out of the
// duplicate window; Changed says whether anything happened.
func TestApplyOpExpire(t *testing.T) {
	sec := int64(time.Second)
	s := newTestStream(t, `{"name":"E","subjects":["e.>"],"max_age":10000000000,"duplicate_window":2000000000,"subject_delete_marker_ttl":5000000000}`)
	apply(s, "e.a", "Nats-Msg-Id:x", "1", t0)
	apply(s, "e.b", "", "2", t0+5*sec)
	out := applyOp(s, &Expire{Time: t0 + 3*sec})
	if out.Changed || len(out.Results) != 0 || s.NumMsgIDs() != 0 {
		t.Fatalf("at 3s: %+v with %d ids, want nothing removed and the id forgotten", out, s.NumMsgIDs())
	}
	out = applyOp(s, &Expire{Time: t0 + 10*sec})
	if !out.Changed || len(out.Results) != 1 || out.Results[0].Seq != 3 {
		t.Fatalf("at 10s: %+v, want the marker of e.a stored at 3", out)
	}
	if m, err := s.Store().Load(3); err != nil || m.Time != t0+10*sec || m.Subject != "e.a" {
		t.Fatalf("marker %+v (%v), want e.a stamped with the op's time", m, err)
	}
}

// Remove removes what is still stored and counts it.
func TestApplyOpRemove(t *testing.T) {
	s := newTestStream(t, `{"name":"R","subjects":["r"]}`)
	for i := range 4 {
		apply(s, "r", "", "x", stepTime(i))
	}
	out := applyOp(s, &Remove{Reason: RemoveAcked, Seqs: []uint64{3, 1, 9}})
	if out.Removed != 2 || out.StoreErr != nil {
		t.Fatalf("%+v, want 2 removed", out)
	}
	if st := s.Store().State(false); st.Msgs != 2 || st.FirstSeq != 2 {
		t.Fatalf("after the removal: %+v", st)
	}
}

// An UpdateConfig the store refuses leaves the config as it was, with
// 10069 and the store's error.
func TestApplyOpUpdateRefused(t *testing.T) {
	s := newTestStream(t, `{"name":"U","subjects":["u"]}`)
	_ = s.Store().Close()
	cfg := s.Config()
	cfg.MaxMsgs = 5
	out := applyOp(s, &UpdateConfig{Config: cfg})
	if out.Err == nil || out.Err.ErrCode != uint16(jserr.StreamUpdate) || !errors.Is(out.StoreErr, store.ErrClosed) {
		t.Fatalf("update of a closed store: %+v", out)
	}
	if s.Config().MaxMsgs == 5 {
		t.Fatal("the refused config was taken")
	}
}
