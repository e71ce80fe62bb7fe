package stream

import (
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
)

// TestCheckDeadLetter: the dead-letter subject in metadata must be a
// subject to publish to, outside '$' subjects, and not one the stream
// itself captures (docs/dead-letter.md); every refusal is 10052.
func TestCheckDeadLetter(t *testing.T) {
	subjects := []string{"orders.>", "audit"}
	for _, tc := range []struct {
		subj string
		ok   bool
		want string
	}{
		{"dlq.orders", true, ""},
		{"", true, ""},
		{"dlq.*", false, "is not a valid subject to publish to"},
		{"dlq.>", false, "is not a valid subject to publish to"},
		{"dlq..x", false, "is not a valid subject to publish to"},
		{"dlq x", false, "is not a valid subject to publish to"},
		{"$JS.API.STREAM.DELETE.ORDERS", false, "must not start with '$'"},
		{"orders.dead", false, "is captured by stream ORDERS itself"},
		{"audit", false, "is captured by stream ORDERS itself"},
	} {
		err := CheckDeadLetter(map[string]string{MetaDeadLetterSubject: tc.subj}, "ORDERS", subjects)
		if tc.ok {
			if err != nil {
				t.Errorf("%q: %v", tc.subj, err)
			}
			continue
		}
		if err == nil || err.ErrCode != uint16(jserr.StreamInvalidConfig) || !strings.Contains(err.Description, tc.want) ||
			!strings.Contains(err.Description, MetaDeadLetterSubject) {
			t.Errorf("%q: got %v, want 10052 with %q", tc.subj, err, tc.want)
		}
	}
	if err := CheckDeadLetter(map[string]string{"other": "a b"}, "ORDERS", subjects); err != nil {
		t.Errorf("without the key: %v", err)
	}
	cfg := Config{Name: "ORDERS", Subjects: subjects, Metadata: map[string]string{MetaDeadLetterSubject: "orders.x"}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err == nil || err.ErrCode != uint16(jserr.StreamInvalidConfig) {
		t.Errorf("Validate of a looping dead-letter subject: %v", err)
	}
}

// TestDeadLetterHeader: the copy keeps the original's fields but those a
// stream acts on at publish, replaces earlier Cairn-Dlq-* fields, and
// adds the origin and the Nats-Msg-Id <stream>.<consumer>.<seq>.
func TestDeadLetterHeader(t *testing.T) {
	o := DeadLetterOrigin{Stream: "ORDERS", Consumer: "proc", Seq: 42, Subject: "orders.new",
		Time: t0, Deliveries: 5, Reason: "max_deliver"}
	ours := "Cairn-Dlq-Stream: ORDERS\r\nCairn-Dlq-Consumer: proc\r\nCairn-Dlq-Sequence: 42\r\n" +
		"Cairn-Dlq-Subject: orders.new\r\nCairn-Dlq-Time-Stamp: 2023-11-14T22:13:20Z\r\n" +
		"Cairn-Dlq-Deliveries: 5\r\nCairn-Dlq-Reason: max_deliver\r\n"
	for _, tc := range []struct {
		name string
		hdr  []byte
		want string
	}{
		{"none", nil, "NATS/1.0\r\n" + ours + "Nats-Msg-Id: ORDERS.proc.42\r\n\r\n"},
		{"kept and stripped", hdrBlock("A:1|Nats-Msg-Id:o-7|Nats-Expected-Last-Sequence:3|Nats-Rollup:all|Nats-TTL:1s|B:2|Nats-Batch-Id:x|Cairn-Dlq-Reason:term"),
			"NATS/1.0\r\nA: 1\r\nB: 2\r\n" + ours + "Cairn-Dlq-Msg-Id: o-7\r\nNats-Msg-Id: ORDERS.proc.42\r\n\r\n"},
	} {
		got := DeadLetterHeader(tc.hdr, o)
		if string(got) != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
		if MsgID(got) != "ORDERS.proc.42" || DeadLetterTime(got) != t0 {
			t.Errorf("%s: MsgID %q, time %d", tc.name, MsgID(got), DeadLetterTime(got))
		}
	}
	h := hdrBlock("A:1")
	DeadLetterHeader(h, o)
	if string(h) != "NATS/1.0\r\nA: 1\r\n\r\n" {
		t.Errorf("the original header changed: %q", h)
	}
}
