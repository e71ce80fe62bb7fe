package consumer

import (
	"fmt"
	"testing"
	"time"
)

// Pull request bodies of ADR-13.
func TestParsePull(t *testing.T) {
	cases := []struct {
		body string
		want pullRequest
		bad  string
	}{
		{"", pullRequest{Batch: 1}, ""},
		{"10", pullRequest{Batch: 10}, ""},
		{`{"batch":0}`, pullRequest{Batch: 1, isJSON: true}, ""},
		{`{"batch":5,"expires":30000000000,"no_wait":true,"max_bytes":100,"idle_heartbeat":5000000000}`,
			pullRequest{Batch: 5, Expires: 30 * time.Second, NoWait: true, MaxBytes: 100, Heartbeat: 5 * time.Second, isJSON: true}, ""},
		{`{"batch":2,"group":"jobs","min_pending":10,"min_ack_pending":5,"id":"X","priority":3}`,
			pullRequest{Batch: 2, PriorityGroup: PriorityGroup{Group: "jobs", MinPending: 10, MinAckPending: 5, Id: "X", Priority: 3}, isJSON: true}, ""},
		{`{"batch":1,"expires":1000000000,"idle_heartbeat":600000000}`, pullRequest{Batch: 1}, "heartbeat value too large"},
		{"ten", pullRequest{Batch: 1}, ""},
		{`{"batch":1,"idle_heartbeat":5000000000}`, pullRequest{Batch: 1}, "heartbeat value too large"},
		{`{"batch":"x"}`, pullRequest{Batch: 1}, "json: cannot unmarshal string into Go struct field JSApiConsumerGetNextRequest.batch of type int"},
	}
	for _, tc := range cases {
		got, bad := parsePull([]byte(tc.body))
		if bad != tc.bad || (bad == "" && got != tc.want) {
			t.Errorf("%q: got %+v %q, want %+v %q", tc.body, got, bad, tc.want, tc.bad)
		}
	}
}

// Status frames byte for byte (nats-server v2.15.2).
func TestStatusFrames(t *testing.T) {
	cases := []struct{ got, want string }{
		{string(hdrNoMessages), "NATS/1.0 404 No Messages\r\n\r\n"},
		{string(pendingHeader(408, "Request Timeout", 9, 0)), "NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 9\r\nNats-Pending-Bytes: 0\r\n\r\n"},
		{string(heartbeatHeader(1, 7, "")), "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\nNats-Last-Stream: 7\r\n\r\n"},
		{string(heartbeatHeader(1, 7, "$JS.FC.S.C.abcd")), "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\nNats-Last-Stream: 7\r\nNats-Consumer-Stalled: $JS.FC.S.C.abcd\r\n\r\n"},
		{string(hdrFlowControlReq), "NATS/1.0 100 FlowControl Request\r\n\r\n"},
		{string(headersOnly(nil, 5)), "NATS/1.0\r\nNats-Msg-Size: 5\r\n\r\n"},
		{string(headersOnly([]byte("NATS/1.0\r\nA: b\r\n\r\n"), 0)), "NATS/1.0\r\nA: b\r\nNats-Msg-Size: 0\r\n\r\n"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// Pull requests taken from one Deliverer (TakePulls) and adopted by
// another of the same consumer (AdoptPulls: its runtime replaced on the
// same server) are served there with what they are still owed, and end
// there at their own expiry; the first sends nothing for them.
func TestDelivererAdoptPulls(t *testing.T) {
	d1, out1, ms := newDeliverer(t, Config{AckPolicy: AckExplicit}, 5)
	out1.interest["_INBOX.1"] = true
	out1.interest["_INBOX.2"] = true
	last := ms.State(false).LastSeq
	d1.AddPull("_INBOX.1", []byte(`{"batch":3,"expires":10000000000}`), at(t0), last)
	d1.Deliver(at(t0), 1) // one message durable so far: one delivered, two owed
	d1.AddPull("_INBOX.2", []byte(`{"batch":1,"expires":2000000000}`), at(t0), last)
	if got := out1.take(); len(got) != 1 || got[0].subject != "s.1" {
		t.Fatalf("sent %+v, want s.1", got)
	}
	pulls := d1.TakePulls()
	if pulls.Len() != 2 || d1.NumWaiting() != 0 {
		t.Fatalf("took %d requests, %d left", pulls.Len(), d1.NumWaiting())
	}
	d2 := NewDeliverer("S", "C", d1.cfg, time.Unix(0, t0), ms, out1, &direct{st: &d1.st}, t.Logf)
	d2.SetState(d1.State())
	d2.AdoptPulls(pulls)
	d2.Deliver(at(t0+sec), last)
	got := out1.take()
	per := map[string]int{}
	for i, m := range got {
		per[m.route]++
		if want := fmt.Sprintf("s.%d", i+2); m.subject != want {
			t.Errorf("message %d is %s, want %s", i, m.subject, want)
		}
	}
	if len(got) != 3 || per["_INBOX.1"] != 2 || per["_INBOX.2"] != 1 {
		t.Fatalf("sent %+v, want two messages to _INBOX.1 and one to _INBOX.2", got)
	}
	d1.ExpirePulls(at(t0 + 20*sec))
	if got := out1.take(); len(got) != 0 {
		t.Fatalf("the first Deliverer sent %+v after its requests were taken", got)
	}
}
