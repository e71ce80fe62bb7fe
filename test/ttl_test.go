package test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Per-message TTL (Nats-TTL, allow_msg_ttl), subject delete markers
// (subject_delete_marker_ttl) and JetStream API level 1 (docs/protocol.md
// section 0 item 2, sections 3.1 and 4.2; nats-server v2.15.2
// processJetStreamMsg and expireMsgs), through nats.go. Removals happen on
// the server's timer, so the tests poll with a deadline.

// ttlWait bounds how long a test waits for a TTL or marker to act: the
// TTLs used are 1 or 2 s, and nats-server may run its expiry a second or
// two late.
const ttlWait = 10 * time.Second

// ttlWaitMsgs polls the stream until it holds n messages.
func ttlWaitMsgs(t testing.TB, s jetstream.Stream, n uint64) {
	t.Helper()
	waitFor(t, ttlWait, "stream messages", func() bool {
		info, err := s.Info(tctx(t))
		return err == nil && info.State.Msgs == n
	})
}

// ttlMsg returns a message on subj with a raw Nats-TTL header value.
func ttlMsg(subj, ttl string) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Header.Set("Nats-TTL", ttl)
	m.Data = []byte("x")
	return m
}

// The account info reports API level 1 or more (nats.go refuses
// LimitMarkerTTL below 1).
func TestTTLAPILevel(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	info, err := js.AccountInfo(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.API.Level < 1 {
		t.Fatalf("api.level = %d, want at least 1", info.API.Level)
	}
}

// A message published with WithMsgTTL keeps its header and is gone once
// its TTL has passed; a message without one stays.
func TestTTLPublishExpires(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "TTL", Subjects: []string{"ttl.>"}, AllowMsgTTL: true})
	if !streamInfo(t, s).Config.AllowMsgTTL {
		t.Fatal("allow_msg_ttl not in the stream config")
	}
	wantAck(t, jsPublish(t, js, "ttl.a", "short", jetstream.WithMsgTTL(time.Second)), "TTL", 1, false)
	wantAck(t, jsPublish(t, js, "ttl.b", "stays"), "TTL", 2, false)
	m, err := s.GetMsg(tctx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("Nats-TTL"); got != "1s" {
		t.Errorf("stored Nats-TTL %q, want 1s", got)
	}
	ttlWaitMsgs(t, s, 1)
	if _, err := s.GetMsg(tctx(t), 1); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("message 1 after its TTL: %v", err)
	}
	wantState(t, streamInfo(t, s).State, 1, 2, 2)
}

// Without allow_msg_ttl a valid TTL is refused with 10166; with it, a
// TTL under a second or unparsable is refused with 10165; "never" is
// accepted.
func TestTTLErrors(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "NOTTL", Subjects: []string{"nottl"}})
	_, err := js.Publish(tctx(t), "nottl", []byte("x"), jetstream.WithMsgTTL(5*time.Second))
	wantAPIError(t, err, 400, 10166, "per-message TTL is disabled")
	_, err = js.PublishMsg(tctx(t), ttlMsg("nottl", "never"))
	wantAPIError(t, err, 400, 10166, "per-message TTL is disabled")

	createStream(t, js, jetstream.StreamConfig{Name: "TTL", Subjects: []string{"ttl"}, AllowMsgTTL: true})
	for _, v := range []string{"500ms", "abc", "0", "-1"} {
		_, err = js.PublishMsg(tctx(t), ttlMsg("ttl", v))
		wantAPIError(t, err, 400, 10165, "invalid per-message TTL")
	}
	wantAck(t, jsPublishMsg(t, js, ttlMsg("ttl", "never")), "TTL", 1, false)
	wantAck(t, jsPublishMsg(t, js, ttlMsg("ttl", "60")), "TTL", 2, false)
}

// allow_msg_ttl cannot be switched off; subject_delete_marker_ttl turns
// on allow_msg_ttl and roll-ups.
func TestTTLConfigRules(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, AllowMsgTTL: true})
	_, err := js.UpdateStream(tctx(t), jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}})
	wantAPIError(t, err, 500, 10052, "message TTL status can not be disabled")

	s := createStream(t, js, jetstream.StreamConfig{Name: "M", Subjects: []string{"m"}, SubjectDeleteMarkerTTL: time.Second, DenyPurge: true})
	cfg := streamInfo(t, s).Config
	if !cfg.AllowMsgTTL || !cfg.AllowRollup || cfg.DenyPurge || cfg.SubjectDeleteMarkerTTL != time.Second {
		t.Errorf("config %+v: want allow_msg_ttl and allow_rollup_hdrs on, deny_purge off", cfg)
	}
	_, err = js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, SubjectDeleteMarkerTTL: 500 * time.Millisecond})
	wantAPIError(t, err, 500, 10052, "subject delete marker TTL must be at least 1 second")
}

// With subject_delete_marker_ttl a shorter TTL is raised to it and stored
// as whole seconds; when the last message of a subject expires a marker
// takes its place (Nats-Marker-Reason: MaxAge), which expires in turn.
func TestTTLMarkers(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "MK", Subjects: []string{"mk.>"}, SubjectDeleteMarkerTTL: 2 * time.Second})
	jsPublish(t, js, "mk.a", "1", jetstream.WithMsgTTL(time.Second))
	m, err := s.GetMsg(tctx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Values("Nats-TTL"); len(got) != 1 || got[0] != "2" {
		t.Errorf("stored Nats-TTL %q, want [2]", got)
	}
	var marker *jetstream.RawStreamMsg
	waitFor(t, ttlWait, "the delete marker", func() bool {
		marker, err = s.GetLastMsgForSubject(tctx(t), "mk.a")
		return err == nil && marker.Sequence != 1
	})
	if marker.Sequence != 2 || len(marker.Data) != 0 {
		t.Errorf("marker at %d with %q, want 2 and empty", marker.Sequence, marker.Data)
	}
	for k, want := range map[string]string{"Nats-Marker-Reason": "MaxAge", "Nats-TTL": "2s", "Nats-Rollup": "sub"} {
		if got := marker.Header.Get(k); got != want {
			t.Errorf("marker header %s = %q, want %q (%v)", k, got, want, marker.Header)
		}
	}
	ttlWaitMsgs(t, s, 0)
	wantState(t, streamInfo(t, s).State, 0, 3, 2)
}

// A KV bucket with LimitMarkerTTL: a key created with a TTL is reported
// purged to a watcher when it expires, and a purge with a TTL leaves a
// marker that goes away after that TTL.
func TestTTLKeyValue(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	kv, err := js.CreateKeyValue(tctx(t), jetstream.KeyValueConfig{Bucket: "B", LimitMarkerTTL: 2 * time.Second})
	if err != nil {
		t.Fatalf("CreateKeyValue with LimitMarkerTTL: %v", err)
	}
	st, err := kv.Status(tctx(t))
	if err != nil || st.LimitMarkerTTL() != 2*time.Second {
		t.Fatalf("status %v, %v: want limit marker TTL 2s", st, err)
	}
	w, err := kv.WatchAll(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e, isNil := kvxNext(t, w); !isNil {
		t.Fatalf("first watch update %+v, want the end of initial values", e)
	}
	if _, err := kv.Create(tctx(t), "k", []byte("v"), jetstream.KeyTTL(time.Second)); err != nil {
		t.Fatalf("Create with KeyTTL: %v", err)
	}
	if e, _ := kvxNext(t, w); e.Key != "k" || e.Op != jetstream.KeyValuePut || e.Rev != 1 {
		t.Fatalf("watch update %+v, want put of k at 1", e)
	}
	e := kvxNextWithin(t, w, ttlWait)
	if e.Key != "k" || e.Op != jetstream.KeyValuePurge || e.Rev != 2 {
		t.Fatalf("watch update %+v, want k purged at 2 by its TTL", e)
	}
	if _, err := kv.Get(tctx(t), "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get of an expired key: %v", err)
	}

	kvxPut(t, kv, "p", "v")
	if e, _ := kvxNext(t, w); e.Key != "p" || e.Op != jetstream.KeyValuePut {
		t.Fatalf("watch update %+v, want put of p", e)
	}
	if err := kv.Purge(tctx(t), "p", jetstream.PurgeTTL(time.Second)); err != nil {
		t.Fatalf("Purge with TTL: %v", err)
	}
	if e, _ := kvxNext(t, w); e.Key != "p" || e.Op != jetstream.KeyValuePurge {
		t.Fatalf("watch update %+v, want p purged", e)
	}
	s, err := js.Stream(tctx(t), "KV_B")
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.GetLastMsgForSubject(tctx(t), "$KV.B.p")
	if err != nil {
		t.Fatal(err)
	}
	// A bucket with history 1 has max_msgs_per_subject 1, where nats-server
	// does not raise a TTL to subject_delete_marker_ttl.
	if got := last.Header.Get("Nats-TTL"); got != "1s" || last.Header.Get("KV-Operation") != "PURGE" {
		t.Errorf("purge marker headers %v, want KV-Operation PURGE and Nats-TTL 1s", last.Header)
	}
	ttlWaitMsgs(t, s, 0)
}

// kvxNextWithin is kvxNext with a longer wait.
func kvxNextWithin(t testing.TB, w jetstream.KeyWatcher, d time.Duration) kvxEntry {
	t.Helper()
	select {
	case e := <-w.Updates():
		if e == nil {
			t.Fatal("watcher sent nil")
		}
		return kvxOf(e)
	case <-time.After(d):
		t.Fatalf("no watch update within %v", d)
		return kvxEntry{}
	}
}

// TTLs survive a restart: a message whose TTL runs out while the server
// is down is removed after it comes back, and "never" keeps a message
// past max_age.
func TestTTLRestart(t *testing.T) {
	opts := jsIn(t.TempDir())
	u, stop := startServerStoppable(t, opts)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.>"}, AllowMsgTTL: true, MaxAge: 3 * time.Second})
	jsPublish(t, js, "r.ttl", "gone", jetstream.WithMsgTTL(time.Second))
	jsPublishMsg(t, js, ttlMsg("r.never", "never"))
	jsPublish(t, js, "r.plain", "gone by max_age")
	nc.Close()
	stop()
	time.Sleep(1500 * time.Millisecond)

	u2, _ := startServerStoppable(t, opts)
	_, js2 := jsConnect(t, u2)
	s, err := js2.Stream(tctx(t), "R")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	waitFor(t, ttlWait, "the TTL message to go", func() bool {
		_, err := s.GetMsg(tctx(t), 1)
		return errors.Is(err, jetstream.ErrMsgNotFound)
	})
	ttlWaitMsgs(t, s, 1)
	if m, err := s.GetMsg(tctx(t), 2); err != nil || m.Subject != "r.never" {
		t.Fatalf("the never message: %v", err)
	}
}

// The API level is advertised in INFO as api_lvl when the server has it.
func TestTTLInfoLevel(t *testing.T) {
	u := startJS(t)
	nc := connect(t, u)
	sub, err := nc.SubscribeSync("_INBOX.lvl")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("$JS.API.INFO", "_INBOX.lvl", nil); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		API struct {
			Level int `json:"level"`
		} `json:"api"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil || info.API.Level < 1 {
		t.Fatalf("$JS.API.INFO api.level in %s: %v", m.Data, err)
	}
}
