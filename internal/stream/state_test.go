package stream

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
)

// apply publishes one message at time t and returns the result.
func apply(s *Stream, subj, hdr, data string, t int64) Result {
	return s.Apply(Entry{Subject: subj, Header: hdrBlock(hdr), Data: []byte(data), Time: t})
}

// wantSeq fails unless r stored (or, with dup, found a duplicate) at seq.
func wantSeq(t *testing.T, r Result, seq uint64, dup bool) {
	t.Helper()
	if r.Err != nil || r.Seq != seq || r.Duplicate != dup {
		t.Fatalf("result %+v, want seq %d duplicate %v", r, seq, dup)
	}
}

// wantErr fails unless r is the error code.
func wantErr(t *testing.T, r Result, code jserr.ErrCode) {
	t.Helper()
	if r.Err == nil || r.Err.ErrCode != uint16(code) || r.Seq != 0 {
		t.Fatalf("result %+v, want error %d", r, code)
	}
}

// TestApplyRollupPurges: a rollup keeps only itself on its subject (sub)
// or in the stream (all), and Result.Purged counts what left
// (the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg row 7).
func TestApplyRollupPurges(t *testing.T) {
	s := newTestStream(t, `{"name":"R","subjects":["r.>"],"allow_rollup_hdrs":true}`)
	for i, subj := range []string{"r.a", "r.b", "r.a", "r.b"} {
		wantSeq(t, apply(s, subj, "", "x", stepTime(i)), uint64(i+1), false)
	}
	r := apply(s, "r.a", "Nats-Rollup:sub", "x", stepTime(4))
	wantSeq(t, r, 5, false)
	if r.Purged != 2 {
		t.Errorf("sub rollup purged %d, want 2", r.Purged)
	}
	if st := s.Store().State(false); st.Msgs != 3 || st.FirstSeq != 2 || st.LastSeq != 5 {
		t.Errorf("after sub rollup %+v", st)
	}
	r = apply(s, "r.c", "Nats-Rollup:ALL", "x", stepTime(5))
	wantSeq(t, r, 6, false)
	if r.Purged != 3 {
		t.Errorf("all rollup purged %d, want 3", r.Purged)
	}
	if st := s.Store().State(false); st.Msgs != 1 || st.FirstSeq != 6 {
		t.Errorf("after all rollup %+v", st)
	}
	wantErr(t, apply(s, "r.c", "Nats-Expected-Last-Sequence:5", "x", stepTime(6)), jserr.StreamWrongLastSequence)
	wantSeq(t, apply(s, "r.c", "Nats-Expected-Last-Sequence:6", "x", stepTime(7)), 7, false)
}

// TestApplyRollupDenied: deny_purge forbids rollups even where the
// config predates the rule (a config built in Go).
func TestApplyRollupDenied(t *testing.T) {
	c := mustConfig(t, `{"name":"R","subjects":["r.>"]}`)
	c.AllowRollup, c.DenyPurge = true, true
	s := New(c, memstore.New(c.StoreConfig()))
	r := apply(s, "r.a", "Nats-Rollup:sub", "x", t0)
	wantErr(t, r, jserr.StreamRollupFailed)
	if r.Err.Description != "rollup not permitted" {
		t.Errorf("description %q", r.Err.Description)
	}
}

// TestApplySealed: a sealed stream refuses every publish with 10109, an
// atomic batch message included; on file storage an oversized record is
// refused first (nats-server checks the file store record size before the
// seal).
func TestApplySealed(t *testing.T) {
	for _, storage := range []string{"file", "memory"} {
		c := mustConfig(t, `{"name":"S","subjects":["s"],"storage":"`+storage+`"}`)
		sealed := c.Clone()
		sealed.Sealed = true
		if err := CheckUpdate(&c, &sealed); err != nil {
			t.Fatal(err)
		}
		s := New(sealed, memstore.New(sealed.StoreConfig()))
		wantErr(t, apply(s, "s", "", "x", t0), jserr.StreamSealed)
		wantErr(t, apply(s, "s", "Nats-Batch-Id:b", "x", t0), jserr.StreamSealed)
		big := s.Apply(Entry{Subject: "s", Data: make([]byte, fileRecordLimit), Time: t0})
		if storage == "memory" {
			wantErr(t, big, jserr.StreamSealed)
			continue
		}
		wantErr(t, big, jserr.StreamStoreFailed)
		if big.Err.Description != "message too large" {
			t.Errorf("description %q", big.Err.Description)
		}
	}
}

// TestApplyFileRecordLimit: the largest file record nats-server accepts
// is 32 MiB; memory streams have no such limit.
func TestApplyFileRecordLimit(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["s"]}`)
	fits := fileRecordLimit - 22 - len("s") - 8
	wantSeq(t, s.Apply(Entry{Subject: "s", Data: make([]byte, fits), Time: t0}), 1, false)
	wantErr(t, s.Apply(Entry{Subject: "s", Data: make([]byte, fits+1), Time: t0}), jserr.StreamStoreFailed)
	m := newTestStream(t, `{"name":"S","subjects":["s"],"storage":"memory"}`)
	wantSeq(t, m.Apply(Entry{Subject: "s", Data: make([]byte, fits+1), Time: t0}), 1, false)
}

// TestApplyStoredHeader: the stored header loses an inline status and
// Nats-Request-Info (nats-server v2.15.2 processJetStreamMsg item 5) and keeps the rest
// byte for byte; the entry's own buffer is never changed.
func TestApplyStoredHeader(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"NATS/1.0\r\nNats-Msg-Id: a\r\nX: y\r\n\r\n", "NATS/1.0\r\nNats-Msg-Id: a\r\nX: y\r\n\r\n"},
		{"NATS/1.0 503\r\nX: y\r\n\r\n", "NATS/1.0\r\nX: y\r\n\r\n"},
		{"NATS/1.0 100 Idle Heartbeat\r\n\r\n", ""},
		{"NATS/1.0\r\nNats-Request-Info: {}\r\nX: y\r\nNats-Request-Info: {}\r\n\r\n", "NATS/1.0\r\nX: y\r\n\r\n"},
		{"NATS/1.0\r\nNats-Request-Info: {}\r\n\r\n", ""},
		{"NATS/1.0\r\n\r\n", "NATS/1.0\r\n\r\n"},
	}
	for i, tc := range tests {
		s := newTestStream(t, `{"name":"S","subjects":["s"]}`)
		in := []byte(tc.in)
		wantSeq(t, s.Apply(Entry{Subject: "s", Header: in, Data: []byte("d"), Time: t0}), 1, false)
		m, err := s.Store().Load(1)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Header) != tc.want || string(m.Data) != "d" || m.Time != t0 {
			t.Errorf("%d: stored %q %q %d, want header %q", i, m.Header, m.Data, m.Time, tc.want)
		}
		if string(in) != tc.in {
			t.Errorf("%d: entry header changed to %q", i, in)
		}
	}
}

// TestApplyExpectedLastSubjectSequence covers the per-subject check with
// the subject override, wildcards and a purged subject (the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg rows 3 and 3a).
func TestApplyExpectedLastSubjectSequence(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["s.>"]}`)
	wantSeq(t, apply(s, "s.a", "Nats-Expected-Last-Subject-Sequence:0", "1", t0), 1, false)
	wantSeq(t, apply(s, "s.b", "", "2", t0), 2, false)
	wantErr(t, apply(s, "s.a", "Nats-Expected-Last-Subject-Sequence:0", "3", t0), jserr.StreamWrongLastSequence)
	wantSeq(t, apply(s, "s.a", "Nats-Expected-Last-Subject-Sequence:1", "3", t0), 3, false)
	wantSeq(t, apply(s, "s.c", "Nats-Expected-Last-Subject-Sequence:2|Nats-Expected-Last-Subject-Sequence-Subject:s.b", "4", t0), 4, false)
	r := apply(s, "s.c", "Nats-Expected-Last-Subject-Sequence:3|Nats-Expected-Last-Subject-Sequence-Subject:s.*", "5", t0)
	wantErr(t, r, jserr.StreamWrongLastSequence)
	if r.Err.Description != "wrong last sequence: 4" {
		t.Errorf("description %q", r.Err.Description)
	}
	if _, err := s.Store().Purge(store.PurgeRequest{Subject: "s.a"}); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, apply(s, "s.a", "Nats-Expected-Last-Subject-Sequence:0", "6", t0), 5, false)
	r = apply(s, "s.x", "Nats-Expected-Last-Subject-Sequence:7", "7", t0)
	wantErr(t, r, jserr.StreamWrongLastSequence)
	if r.Err.Description != "wrong last sequence: 0" {
		t.Errorf("description %q", r.Err.Description)
	}
}

// TestApplyExpectedLastMsgID: the id compared is that of the last stored
// message, empty when it had none (the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg row 6).
func TestApplyExpectedLastMsgID(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["s"]}`)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0), 1, false)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:b|Nats-Expected-Last-Msg-Id:a", "", t0), 2, false)
	if s.LastMsgID() != "b" {
		t.Errorf("LastMsgID %q", s.LastMsgID())
	}
	r := apply(s, "s", "Nats-Expected-Last-Msg-Id:a", "", t0)
	wantErr(t, r, jserr.StreamWrongLastMsgID)
	if r.Err.Description != "wrong last msg ID: b" {
		t.Errorf("description %q", r.Err.Description)
	}
	wantSeq(t, apply(s, "s", "", "", t0), 3, false)
	if s.LastMsgID() != "" {
		t.Errorf("LastMsgID %q after a message without id", s.LastMsgID())
	}
}

// TestDedupeWindow: an id is a duplicate until ExpireDedupe passes its
// time plus duplicate_window, whatever the time of the duplicate
// (docs/engine.md: expiry is an explicit operation).
func TestDedupeWindow(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["s"],"duplicate_window":1000000000}`)
	sec := int64(time.Second)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0), 1, false)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:b", "", t0+sec/2), 2, false)
	if d, ok := s.DedupeDeadline(); !ok || d != t0+sec {
		t.Errorf("deadline %d %v, want %d", d, ok, t0+sec)
	}
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0+5*sec), 1, true)
	s.ExpireDedupe(t0 + sec - 1)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0+sec), 1, true)
	s.ExpireDedupe(t0 + sec)
	if s.NumMsgIDs() != 1 {
		t.Errorf("%d ids, want 1", s.NumMsgIDs())
	}
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:b", "", t0+sec), 2, true)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0+sec), 3, false)
	s.ExpireDedupe(t0 + sec + sec/2)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0+sec), 3, true)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:b", "", t0+sec), 4, false)
	s.ExpireDedupe(t0 + 10*sec)
	if _, ok := s.DedupeDeadline(); ok || s.NumMsgIDs() != 0 {
		t.Errorf("ids left after the window: %d", s.NumMsgIDs())
	}
}

// TestDedupeNewerIDSurvivesOlderExpiry: when an id comes back after its
// first entry left the map, expiring the old queue record must not drop
// the new one (a window shortened by SetConfig makes this reachable).
func TestDedupeNewerIDSurvivesOlderExpiry(t *testing.T) {
	var d dedupe
	d.add("a", 1, 0)
	delete(d.ids, "a") // as if forgotten while its record stays queued
	d.add("a", 2, 10)
	d.expire(5, 5)
	if seq, ok := d.lookup("a"); !ok || seq != 2 {
		t.Errorf("lookup a = %d %v, want 2", seq, ok)
	}
	d.expire(15, 5)
	if _, ok := d.lookup("a"); ok || len(d.queue) != 0 {
		t.Errorf("a still there, queue %v", d.queue)
	}
}

// TestSetConfig: new limits reach the store at once and the new window
// applies from the next ExpireDedupe.
func TestSetConfig(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["s"]}`)
	for i := range 5 {
		wantSeq(t, apply(s, "s", "Nats-Msg-Id:"+string(rune('a'+i)), "", t0), uint64(i+1), false)
	}
	n := s.Config()
	n.MaxMsgs, n.DuplicateWindow = 2, time.Second
	if err := CheckUpdate(new(s.Config()), &n); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConfig(n); err != nil {
		t.Fatal(err)
	}
	if st := s.Store().State(false); st.Msgs != 2 {
		t.Errorf("%d messages after max_msgs 2", st.Msgs)
	}
	s.ExpireDedupe(t0 + int64(time.Second))
	if s.NumMsgIDs() != 0 || s.Config().MaxMsgs != 2 {
		t.Errorf("%d ids, config %+v", s.NumMsgIDs(), s.Config())
	}
	if err := s.Store().Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConfig(s.Config()); err == nil {
		t.Error("SetConfig on a closed store succeeded")
	}
}

// TestDuplicateWindowZero: with no window (set in Go) no id is kept.
func TestDuplicateWindowZero(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s"]}`)
	c.DuplicateWindow = 0
	s := New(c, memstore.New(c.StoreConfig()))
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0), 1, false)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0), 2, false)
	if s.LastMsgID() != "a" {
		t.Errorf("LastMsgID %q", s.LastMsgID())
	}
}

// TestRebuild: a stream made again over the same store finds the ids
// stored within the window of the newest message, and the last message's
// id (nats-server rebuildDedupe).
func TestRebuild(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s.>"]}`) // window 2m
	st := memstore.New(c.StoreConfig())
	s := New(c, st)
	sec := int64(time.Second)
	wantSeq(t, apply(s, "s.a", "Nats-Msg-Id:a", "", t0), 1, false)
	wantSeq(t, apply(s, "s.a", "", "", t0+sec), 2, false)
	wantSeq(t, apply(s, "s.b", "Nats-Msg-Id:b", "", t0+90*sec), 3, false)
	wantSeq(t, apply(s, "s.c", "Nats-Msg-Id:c", "", t0+150*sec), 4, false)

	re := New(c, st)
	if err := re.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if re.NumMsgIDs() != 2 || re.LastMsgID() != "c" {
		t.Errorf("%d ids, last %q; want 2, c", re.NumMsgIDs(), re.LastMsgID())
	}
	wantSeq(t, apply(re, "s.b", "Nats-Msg-Id:b", "", t0+151*sec), 3, true)
	wantSeq(t, apply(re, "s.a", "Nats-Msg-Id:a", "", t0+151*sec), 5, false)

	// The clock, given after Rebuild, expires what the window no longer covers.
	re2 := New(c, st)
	if err := re2.Rebuild(); err != nil {
		t.Fatal(err)
	}
	re2.ExpireDedupe(t0 + 211*sec)
	wantSeq(t, apply(re2, "s.b", "Nats-Msg-Id:b", "", t0+211*sec), 6, false)
	wantSeq(t, apply(re2, "s.c", "Nats-Msg-Id:c", "", t0+211*sec), 4, true)
}

// TestRebuildLastDeleted: when the message at the last sequence is gone,
// the last id is empty, as in nats-server.
func TestRebuildLastDeleted(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s"]}`)
	st := memstore.New(c.StoreConfig())
	s := New(c, st)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0), 1, false)
	wantSeq(t, apply(s, "s", "Nats-Msg-Id:b", "", t0), 2, false)
	if err := st.Delete(2); err != nil {
		t.Fatal(err)
	}
	re := New(c, st)
	if err := re.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if re.LastMsgID() != "" || re.NumMsgIDs() != 1 {
		t.Errorf("last %q, %d ids", re.LastMsgID(), re.NumMsgIDs())
	}
	wantSeq(t, apply(re, "s", "Nats-Msg-Id:a", "", t0), 1, true)

	if _, err := st.Purge(store.PurgeRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := re.Rebuild(); err != nil || re.NumMsgIDs() != 0 || re.LastMsgID() != "" {
		t.Errorf("after purge: %v, %d ids, last %q", err, re.NumMsgIDs(), re.LastMsgID())
	}
}

// TestRebuildLongStream: the binary search finds the window's start in a
// long stream with gaps.
func TestRebuildLongStream(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s"]}`)
	st := memstore.New(c.StoreConfig())
	s := New(c, st)
	sec := int64(time.Second)
	for i := range 1000 {
		wantSeq(t, apply(s, "s", "Nats-Msg-Id:id"+strconv.Itoa(i), "", t0+int64(i)*sec), uint64(i+1), false)
	}
	for seq := uint64(2); seq <= 1000; seq += 3 {
		if err := st.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	re := New(c, st)
	if err := re.Rebuild(); err != nil {
		t.Fatal(err)
	}
	// Kept: times after 999-120 s, so messages 881..1000 less the deleted.
	want := 0
	for seq := 881; seq <= 1000; seq++ {
		if (seq-2)%3 != 0 {
			want++
		}
	}
	if re.NumMsgIDs() != want {
		t.Errorf("%d ids, want %d", re.NumMsgIDs(), want)
	}
	// Message 881 (time 880 s) was deleted: 882 is the oldest id.
	if d, _ := re.DedupeDeadline(); d != t0+881*sec+int64(2*time.Minute) {
		t.Errorf("deadline %d", d-t0)
	}
}

// failingStore makes chosen store calls fail.
type failingStore struct {
	store.Store
	appendErr, purgeErr, loadErr error
}

func (f *failingStore) Append(m store.Msg) (uint64, error) {
	if f.appendErr != nil {
		return 0, f.appendErr
	}
	return f.Store.Append(m)
}

func (f *failingStore) Purge(req store.PurgeRequest) (uint64, error) {
	if f.purgeErr != nil {
		return 0, f.purgeErr
	}
	return f.Store.Purge(req)
}

func (f *failingStore) LoadLast(filter string) (*store.StoredMsg, error) {
	if f.loadErr != nil {
		return nil, f.loadErr
	}
	return f.Store.LoadLast(filter)
}

// TestApplyStoreErrors: store errors become 10077 with the store's text
// (10054 for the store's size limit; a fixed text naming no server path
// for a fenced store; 10023 for a full disk), and the error is kept for
// the runner (docs/design-jetstream.md, the publish path item 4).
func TestApplyStoreErrors(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s.>"],"allow_rollup_hdrs":true}`)
	fs := &failingStore{Store: memstore.New(c.StoreConfig())}
	s := New(c, fs)
	wantSeq(t, apply(s, "s.a", "Nats-Msg-Id:a", "", t0), 1, false)

	fs.appendErr = fmt.Errorf("%w: write /srv/nats/jetstream/S/msgs/1.blk: input/output error", store.ErrFenced)
	r := apply(s, "s.a", "Nats-Msg-Id:b", "", t0)
	wantErr(t, r, jserr.StreamStoreFailed)
	if r.Err.Description != "stream store failed after a write error" || !errors.Is(r.StoreErr, store.ErrFenced) {
		t.Errorf("fenced: %+v", r)
	}
	fs.appendErr = fmt.Errorf("%w: write /srv/x: %w", store.ErrFenced, syscall.ENOSPC)
	if r := apply(s, "s.a", "Nats-Msg-Id:b", "", t0); r.Err == nil || r.Err.ErrCode != uint16(jserr.InsufficientResources) || strings.Contains(r.Err.Description, "/srv") {
		t.Errorf("full disk: %+v, want 10023 insufficient resources", r)
	}
	if s.LastMsgID() != "a" || s.NumMsgIDs() != 1 {
		t.Errorf("a failed append changed the state: last %q, %d ids", s.LastMsgID(), s.NumMsgIDs())
	}
	fs.appendErr = store.ErrMaxMsgSize
	wantErr(t, apply(s, "s.a", "", "", t0), jserr.StreamMessageExceedsMaximum)
	fs.appendErr = store.ErrMaxMsgs
	r = apply(s, "s.a", "", "", t0)
	if got := string(AppendPubAck(nil, "S", r, "")); got != `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"S","seq":0}` {
		t.Errorf("PubAck %s", got)
	}

	fs.appendErr, fs.purgeErr = nil, errors.New("disk on fire")
	r = apply(s, "s.a", "Nats-Rollup:sub", "", t0)
	if r.Seq != 2 || r.Err == nil || r.Err.Description != "disk on fire" || r.StoreErr != fs.purgeErr {
		t.Errorf("rollup purge failure: %+v", r)
	}

	fs.purgeErr = nil
	if err := fs.Store.Close(); err != nil {
		t.Fatal(err)
	}
	r = apply(s, "s.a", "", "", t0)
	wantErr(t, r, jserr.StreamStoreFailed)
	if r.Err.Description != "store is closed" {
		t.Errorf("closed: %q", r.Err.Description)
	}
}

// TestApplyLoadErrorOnSubjectCheck: a load error in the per-subject check
// is a mismatch reporting 0, as in nats-server.
func TestApplyLoadErrorOnSubjectCheck(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s.>"]}`)
	fs := &failingStore{Store: memstore.New(c.StoreConfig()), loadErr: &store.CorruptError{First: 1, Last: 1}}
	s := New(c, fs)
	r := apply(s, "s.a", "Nats-Expected-Last-Subject-Sequence:0|Nats-Expected-Last-Subject-Sequence-Subject:s.*", "", t0)
	wantErr(t, r, jserr.StreamWrongLastSequence)
	if r.Err.Description != "wrong last sequence: 0" {
		t.Errorf("description %q", r.Err.Description)
	}
	// Rebuild steps over damage (TestRebuildSkipsCorruption).
	if err := (&Stream{cfg: c, store: fs}).Rebuild(); err != nil {
		t.Errorf("Rebuild error %v", err)
	}
}

// TestApplyDoesNotAliasResults: the stored message does not change when
// the caller reuses its buffers (the store copies; Apply passes them on).
func TestApplyDoesNotAliasResults(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["s"]}`)
	hdr, data := hdrBlock("X:1"), []byte("payload")
	wantSeq(t, s.Apply(Entry{Subject: "s", Header: hdr, Data: data, Time: t0}), 1, false)
	copy(hdr, bytes.Repeat([]byte("z"), len(hdr)))
	copy(data, "PAYLOAD")
	m, err := s.Store().Load(1)
	if err != nil || string(m.Data) != "payload" || string(m.Header) != "NATS/1.0\r\nX: 1\r\n\r\n" {
		t.Errorf("stored %q %q %v", m.Header, m.Data, err)
	}
}

// corruptStore reports the sequences in [bad, bad] as damaged, as the
// file store does for a record that fails its checksum.
type corruptStore struct {
	store.Store
	bad     uint64
	badLast bool // LoadLast fails too
}

func (c *corruptStore) LoadNext(filters []string, start uint64) (*store.StoredMsg, error) {
	m, err := c.Store.LoadNext(filters, start)
	if err == nil && start <= c.bad && m.Seq >= c.bad {
		return nil, &store.CorruptError{First: c.bad, Last: c.bad, Where: "test", Reason: "flipped bit"}
	}
	return m, err
}

func (c *corruptStore) LoadLast(filter string) (*store.StoredMsg, error) {
	if c.badLast {
		return nil, &store.CorruptError{First: c.bad, Last: c.bad, Where: "test", Reason: "flipped bit"}
	}
	return c.Store.LoadLast(filter)
}

// TestRebuildSkipsCorruption: one damaged message costs its own id, not
// the stream (a restart must not leave the stream unrestored).
func TestRebuildSkipsCorruption(t *testing.T) {
	for _, badLast := range []bool{false, true} {
		c := mustConfig(t, `{"name":"S","subjects":["s.>"]}`)
		st := memstore.New(c.StoreConfig())
		s := New(c, st)
		for i, id := range []string{"a", "b", "c", "d", "e"} {
			wantSeq(t, apply(s, "s.x", "Nats-Msg-Id:"+id, "", t0+int64(i)), uint64(i+1), false)
		}
		re := New(c, &corruptStore{Store: st, bad: 3, badLast: badLast})
		if err := re.Rebuild(); err != nil {
			t.Fatalf("badLast %v: Rebuild: %v", badLast, err)
		}
		if re.NumMsgIDs() != 4 {
			t.Errorf("badLast %v: %d ids, want 4 (all but the damaged one)", badLast, re.NumMsgIDs())
		}
		wantSeq(t, apply(re, "s.x", "Nats-Msg-Id:d", "", t0+10), 4, true)
	}
}

// countingStore counts the loads of messages from its store.
type countingStore struct {
	store.Store
	loads int
}

func (c *countingStore) LoadNext(filters []string, start uint64) (*store.StoredMsg, error) {
	c.loads++
	return c.Store.LoadNext(filters, start)
}

func (c *countingStore) Load(seq uint64) (*store.StoredMsg, error) {
	c.loads++
	return c.Store.Load(seq)
}

// TestRebuildAtReadsNoExpiredID: a restart long after the last publish
// reads none of the messages whose ids the clock has expired (a stream of
// large messages read its whole window at each start), and keeps what
// Rebuild then ExpireDedupe keep.
func TestRebuildAtReadsNoExpiredID(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s"]}`) // window 2m
	st := &countingStore{Store: memstore.New(c.StoreConfig())}
	s := New(c, st)
	sec := int64(time.Second)
	for i := range 1000 {
		wantSeq(t, apply(s, "s", "Nats-Msg-Id:id"+strconv.Itoa(i), "", t0+int64(i)*sec), uint64(i+1), false)
	}
	for _, tc := range []struct {
		now      int64
		ids      int
		maxLoads int
	}{
		{now: t0 + 2000*sec, ids: 0, maxLoads: 15},            // long after: a binary search, no window read
		{now: t0 + 1060*sec, ids: 59, maxLoads: 15 + 59 + 1},  // half the window left: only that half read
		{now: t0 + 999*sec, ids: 120, maxLoads: 15 + 120 + 1}, // at once: the whole window
	} {
		st.loads = 0
		re := New(c, st)
		if err := re.RebuildAt(tc.now); err != nil {
			t.Fatal(err)
		}
		if re.NumMsgIDs() != tc.ids || re.LastMsgID() != "id999" || st.loads > tc.maxLoads {
			t.Errorf("now %d: %d ids (want %d), last %q, %d loads (at most %d)", (tc.now-t0)/sec, re.NumMsgIDs(), tc.ids, re.LastMsgID(), st.loads, tc.maxLoads)
		}
		old := New(c, st)
		if err := old.Rebuild(); err != nil {
			t.Fatal(err)
		}
		old.ExpireDedupe(tc.now)
		if old.NumMsgIDs() != re.NumMsgIDs() {
			t.Errorf("now %d: Rebuild+ExpireDedupe keeps %d ids, RebuildAt %d", (tc.now-t0)/sec, old.NumMsgIDs(), re.NumMsgIDs())
		}
	}
}
