package consumerrun

import (
	"math"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
)

// The ack payloads of the ack kinds of nats-server v2.15.2's processAck.
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

// The v1 ack reply subject (the v1 ack reply subject, ADR-15) round-trips, and
// other forms are refused.
func TestAckSubject(t *testing.T) {
	s := consumer.AckSubject("ORDERS", "proc", 2, 7, 9, 1714557600123456789, 4)
	if s != "$JS.ACK.ORDERS.proc.2.7.9.1714557600123456789.4" {
		t.Fatalf("ackSubject = %s", s)
	}
	dc, sseq, cseq, ok := ParseAckSubject(s)
	if !ok || dc != 2 || sseq != 7 || cseq != 9 {
		t.Errorf("parse: %d %d %d %v", dc, sseq, cseq, ok)
	}
	for _, bad := range []string{"$JS.ACK.S.C.1.2.3.4", "$JS.ACK.S.C.x.2.3.4.5", "$JS.NAK.S.C.1.2.3.4.5", "$JS.ACK.S.C.1.2.3.4.5.6"} {
		if _, _, _, ok := ParseAckSubject(bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
	if s := consumer.AckSubject("S", "C", math.MaxUint64, 1, 0, -5, 0); s != "$JS.ACK.S.C.18446744073709551615.1.0.-5.0" {
		t.Errorf("extremes: %s", s)
	}
	// One allocation per delivery: it is built for every message sent.
	if n := testing.AllocsPerRun(100, func() { _ = consumer.AckSubject("ORDERS", "proc", 2, 7, 9, 1714557600123456789, 4) }); n != 1 {
		t.Errorf("ackSubject: %v allocations, want 1", n)
	}
}
