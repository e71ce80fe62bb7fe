package stream

import (
	"testing"
	"time"
)

// ExpiryIdle is true only when an Expire at that time changes nothing:
// the runner of a replicated stream skips the timer's pass then (no
// entry), so a wrong true would keep an expired message or a Nats-Msg-Id
// past its window.
func TestExpiryIdle(t *testing.T) {
	sec := int64(time.Second)
	// changes reports whether an Expire at now changes the stream.
	changes := func(s *Stream, now int64) bool {
		ids := s.NumMsgIDs()
		var out Outcome
		s.ApplyOp(&Expire{Time: now}, &out)
		return out.Changed || s.NumMsgIDs() != ids
	}
	t.Run("dedupe window", func(t *testing.T) {
		s := newTestStream(t, `{"name":"S","subjects":["s"],"duplicate_window":1000000000}`)
		if !s.ExpiryIdle(t0) {
			t.Fatal("an empty stream without limits is not idle")
		}
		wantSeq(t, apply(s, "s", "Nats-Msg-Id:a", "", t0), 1, false)
		if !s.ExpiryIdle(t0+sec-1) || changes(s, t0+sec-1) {
			t.Fatal("idle before the id leaves the window: want true and no change")
		}
		if s.ExpiryIdle(t0 + sec) {
			t.Fatal("idle when the id leaves the window")
		}
		if !changes(s, t0+sec) || !s.ExpiryIdle(t0+sec) {
			t.Fatal("the pass at the deadline forgets the id, and then nothing is due")
		}
	})
	t.Run("max_age", func(t *testing.T) {
		s := newTestStream(t, `{"name":"S","subjects":["s"],"max_age":1000000000}`)
		wantSeq(t, apply(s, "s", "", "x", t0), 1, false)
		if s.ExpiryIdle(t0) {
			t.Fatal("idle with a message no pass has seen")
		}
		if changes(s, t0+sec/2) {
			t.Fatal("a pass before max_age removed something")
		}
		wantSeq(t, apply(s, "s", "", "y", t0+sec/2), 2, false)
		if !s.ExpiryIdle(t0+sec-1) || changes(s, t0+sec-1) {
			t.Fatal("idle before the first message's max_age: want true and no change")
		}
		if s.ExpiryIdle(t0 + sec) {
			t.Fatal("idle at the first message's max_age")
		}
		if !changes(s, t0+sec) {
			t.Fatal("the pass at max_age removed nothing")
		}
	})
	t.Run("max_age of a mirror", func(t *testing.T) {
		s := newTestStream(t, `{"name":"M","max_age":1000000000,"mirror":{"name":"O"}}`)
		wantSeq(t, s.ApplyMirror(Entry{Subject: "s", Data: []byte("x"), Time: t0}, 1), 1, false)
		changes(s, t0+sec/2)
		// A copy keeps its origin's time: this one is older than the
		// deadline the last pass found.
		wantSeq(t, s.ApplyMirror(Entry{Subject: "s", Data: []byte("y"), Time: t0 - sec}, 2), 2, false)
		if s.ExpiryIdle(t0 + sec/2 + 1) {
			t.Fatal("a mirror with max_age and messages is idle")
		}
	})
	t.Run("message TTLs", func(t *testing.T) {
		s := newTestStream(t, `{"name":"S","subjects":["s"],"allow_msg_ttl":true}`)
		if !s.ExpiryIdle(t0) {
			t.Fatal("an empty stream is not idle")
		}
		wantSeq(t, apply(s, "s", "Nats-TTL:1s", "x", t0), 1, false)
		if s.ExpiryIdle(t0) {
			t.Fatal("idle with messages that may carry TTLs")
		}
	})
}
