package stream

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
)

// storedHeader returns the header stored at seq.
func storedHeader(t *testing.T, s *Stream, seq uint64) string {
	t.Helper()
	sm, err := s.Store().Load(seq)
	if err != nil {
		t.Fatalf("Load(%d): %v", seq, err)
	}
	return string(sm.Header)
}

// With allow_msg_ttl a valid Nats-TTL is stored as sent, and the message
// leaves once its TTL has passed (the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg, Nats-TTL).
func TestApplyTTLStoredAndExpires(t *testing.T) {
	s := newTestStream(t, `{"name":"T","subjects":["t.>"],"allow_msg_ttl":true}`)
	wantSeq(t, apply(s, "t.a", "Nats-TTL:2s", "x", t0), 1, false)
	wantSeq(t, apply(s, "t.b", "Nats-TTL:never", "x", t0), 2, false)
	wantErr(t, apply(s, "t.c", "Nats-TTL:10ms", "x", t0), jserr.MessageTTLInvalid)
	if got, want := storedHeader(t, s, 1), "NATS/1.0\r\nNats-TTL: 2s\r\n\r\n"; got != want {
		t.Fatalf("stored header %q, want %q", got, want)
	}
	markers, next, err := s.ExpireUpTo(t0 + int64(time.Second))
	if err != nil || len(markers) != 0 || next != t0+2*int64(time.Second) {
		t.Fatalf("ExpireUpTo = %v, %d, %v; want no markers, next at t0+2s", markers, next, err)
	}
	if _, _, err := s.ExpireUpTo(t0 + 2*int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := s.Store().State(false); st.Msgs != 1 || st.FirstSeq != 2 {
		t.Fatalf("after the TTL: %+v", st)
	}
}

// A TTL below subject_delete_marker_ttl is raised to it and the stored
// header rewritten (nats-server v2.15.2 processJetStreamMsg): the field
// moves to the end with whole seconds. "never", longer TTLs and streams
// with max_msgs_per_subject 1 are left alone.
func TestApplyTTLRaisedToMarkerTTL(t *testing.T) {
	s := newTestStream(t, `{"name":"T","subjects":["t.>"],"subject_delete_marker_ttl":60000000000}`)
	wantSeq(t, apply(s, "t.a", "Nats-TTL:5s|A:b", "x", t0), 1, false)
	wantSeq(t, apply(s, "t.a", "Nats-TTL:2m", "x", t0), 2, false)
	wantSeq(t, apply(s, "t.a", "Nats-TTL:never", "x", t0), 3, false)
	for seq, want := range map[uint64]string{
		1: "NATS/1.0\r\nA: b\r\nNats-TTL: 60\r\n\r\n",
		2: "NATS/1.0\r\nNats-TTL: 2m\r\n\r\n",
		3: "NATS/1.0\r\nNats-TTL: never\r\n\r\n",
	} {
		if got := storedHeader(t, s, seq); got != want {
			t.Errorf("seq %d stored header %q, want %q", seq, got, want)
		}
	}
	one := newTestStream(t, `{"name":"O","subjects":["o.>"],"subject_delete_marker_ttl":60000000000,"max_msgs_per_subject":1}`)
	wantSeq(t, apply(one, "o.a", "Nats-TTL:5s", "x", t0), 1, false)
	if got, want := storedHeader(t, one, 1), "NATS/1.0\r\nNats-TTL: 5s\r\n\r\n"; got != want {
		t.Errorf("max_msgs_per_subject 1: stored header %q, want %q", got, want)
	}
}

// When max_age removes the last message of a subject, ExpireUpTo returns
// a marker for it; applied, the marker rolls the message up and then
// expires by its own TTL without a new marker (nats-server v2.15.2
// handleRemovalOrSdm).
func TestExpireMarkers(t *testing.T) {
	s := newTestStream(t, `{"name":"M","subjects":["m.>"],"max_age":10000000000,"subject_delete_marker_ttl":5000000000}`)
	sec := int64(time.Second)
	wantSeq(t, apply(s, "m.a", "", "1", t0), 1, false)
	wantSeq(t, apply(s, "m.a", "", "2", t0), 2, false)
	wantSeq(t, apply(s, "m.b", "", "3", t0+5*sec), 3, false)
	markers, _, err := s.ExpireUpTo(t0 + 10*sec)
	if err != nil {
		t.Fatal(err)
	}
	want := "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 5s\r\nNats-Rollup: sub\r\n\r\n"
	if len(markers) != 1 || markers[0].Subject != "m.a" || string(markers[0].Header) != want || markers[0].Time != t0+10*sec {
		t.Fatalf("markers %+v, want one on m.a with header %q", markers, want)
	}
	r := s.Apply(markers[0])
	wantSeq(t, r, 4, false)
	if r.Purged != 1 {
		t.Fatalf("marker purged %d, want 1", r.Purged)
	}
	if st := s.Store().State(false); st.Msgs != 2 || st.FirstSeq != 3 {
		t.Fatalf("after the marker: %+v", st)
	}
	if markers, _, _ = s.ExpireUpTo(t0 + 15*sec); len(markers) != 1 || markers[0].Subject != "m.b" {
		t.Fatalf("at t0+15s markers %+v, want one on m.b", markers)
	}
	wantSeq(t, s.Apply(markers[0]), 5, false)
	if markers, _, _ = s.ExpireUpTo(t0 + 100*sec); len(markers) != 0 {
		t.Fatalf("markers expire into more markers: %+v", markers)
	}
	if st := s.Store().State(false); st.Msgs != 0 {
		t.Fatalf("markers left: %+v", st)
	}
}

// A failed marker (here: the stream is full under discard new) leaves its
// message, which the next pass reports again.
func TestExpireMarkerRetried(t *testing.T) {
	s := newTestStream(t, `{"name":"F","subjects":["f.>"],"subject_delete_marker_ttl":1000000000,"discard":"new","max_msgs":1}`)
	wantSeq(t, apply(s, "f.a", "Nats-TTL:1s", "x", t0), 1, false)
	later := t0 + 2*int64(time.Second)
	markers, next, _ := s.ExpireUpTo(later)
	if len(markers) != 1 || next > later {
		t.Fatalf("markers %+v next %d", markers, next)
	}
	wantErr(t, s.Apply(markers[0]), jserr.StreamStoreFailed)
	if markers, _, _ = s.ExpireUpTo(later + 1); len(markers) != 1 {
		t.Fatalf("marker not retried: %+v", markers)
	}
	if st := s.Store().State(false); st.Msgs != 1 {
		t.Fatalf("the message left: %+v", st)
	}
}
