package consumer

import (
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
