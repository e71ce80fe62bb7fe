package jetstream

import (
	"math"
	"testing"
	"time"
)

// The ack payloads of protocol.md section 5.3.
func TestParseAckBody(t *testing.T) {
	cases := []struct {
		body   string
		kind   ackKind
		delay  time.Duration
		reason string
		next   string
	}{
		{"", ackAck, 0, "", ""},
		{"+ACK", ackAck, 0, "", ""},
		{"+OK", ackAck, 0, "", ""},
		{"-NAK", ackNak, 0, "", ""},
		{`-NAK {"delay": 5000000000}`, ackNak, 5 * time.Second, "", ""},
		{"-NAK 250ms", ackNak, 250 * time.Millisecond, "", ""},
		{"-NAK soon", ackNak, 0, "", ""},
		{`-NAK {"delay": -5}`, ackNak, 0, "", ""},
		{"+WPI", ackWPI, 0, "", ""},
		{"+NXT", ackNext, 0, "", ""},
		{"+NXT 10", ackNext, 0, "", "10"},
		{`+NXT {"batch":5}`, ackNext, 0, "", `{"batch":5}`},
		{"+TERM", ackTerm, 0, "", ""},
		{"+TERM bad order", ackTerm, 0, "bad order", ""},
	}
	for _, tc := range cases {
		a := parseAckBody([]byte(tc.body))
		if a.kind != tc.kind || a.delay != tc.delay || a.reason != tc.reason || string(a.next) != tc.next {
			t.Errorf("%q: got kind %d delay %v reason %q next %q", tc.body, a.kind, a.delay, a.reason, a.next)
		}
	}
}

// The v1 ack reply subject (protocol.md section 5.2) round-trips, and
// other forms are refused.
func TestAckSubject(t *testing.T) {
	s := ackSubject("ORDERS", "proc", 2, 7, 9, 1714557600123456789, 4)
	if s != "$JS.ACK.ORDERS.proc.2.7.9.1714557600123456789.4" {
		t.Fatalf("ackSubject = %s", s)
	}
	dc, sseq, cseq, ok := parseAckSubject(s)
	if !ok || dc != 2 || sseq != 7 || cseq != 9 {
		t.Errorf("parse: %d %d %d %v", dc, sseq, cseq, ok)
	}
	for _, bad := range []string{"$JS.ACK.S.C.1.2.3.4", "$JS.ACK.S.C.x.2.3.4.5", "$JS.NAK.S.C.1.2.3.4.5", "$JS.ACK.S.C.1.2.3.4.5.6"} {
		if _, _, _, ok := parseAckSubject(bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
	if s := ackSubject("S", "C", math.MaxUint64, 1, 0, -5, 0); s != "$JS.ACK.S.C.18446744073709551615.1.0.-5.0" {
		t.Errorf("extremes: %s", s)
	}
	// One allocation per delivery: it is built for every message sent.
	if n := testing.AllocsPerRun(100, func() { _ = ackSubject("ORDERS", "proc", 2, 7, 9, 1714557600123456789, 4) }); n != 1 {
		t.Errorf("ackSubject: %v allocations, want 1", n)
	}
}

// Pull request bodies of protocol.md section 5.6.
func TestParsePull(t *testing.T) {
	cases := []struct {
		body string
		want pullRequest
		bad  string
	}{
		{"", pullRequest{Batch: 1}, ""},
		{"10", pullRequest{Batch: 10}, ""},
		{`{"batch":0}`, pullRequest{Batch: 1}, ""},
		{`{"batch":5,"expires":30000000000,"no_wait":true,"max_bytes":100,"idle_heartbeat":5000000000}`,
			pullRequest{Batch: 5, Expires: 30 * time.Second, NoWait: true, MaxBytes: 100, Heartbeat: 5 * time.Second}, ""},
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

// Status frames byte for byte (protocol.md sections 5.6 and 5.7).
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
