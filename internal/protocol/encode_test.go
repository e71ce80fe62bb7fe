package protocol

import (
	"testing"

	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// TestEncoders pins the server lines byte for byte (docs/protocol.md 1.3 worked examples, 1.11).
func TestEncoders(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	cases := []struct {
		name, got, want string
	}{
		{"msg", string(AppendMsg(nil, b("orders.new"), b("7"), nil, b("hello"))),
			"MSG orders.new 7 5\r\nhello\r\n"},
		{"msg reply", string(AppendMsg(nil, b("orders.new"), b("7"), b("_INBOX.abc.def"), b("hello"))),
			"MSG orders.new 7 _INBOX.abc.def 5\r\nhello\r\n"},
		{"msg empty", string(AppendMsg(nil, b("a"), b("1"), b(""), nil)),
			"MSG a 1 0\r\n\r\n"},
		{"hmsg", string(AppendHMsg(nil, b("orders.new"), b("7"), b("_INBOX.abc.def"), 34,
			b("NATS/1.0\r\nNats-Msg-Id: order-1\r\n\r\nhello"))),
			"HMSG orders.new 7 _INBOX.abc.def 34 39\r\nNATS/1.0\r\nNats-Msg-Id: order-1\r\n\r\nhello\r\n"},
		{"hmsg no reply", string(AppendHMsg(nil, b("r"), b("9"), nil, 12, b("NATS/1.0\r\n\r\n"))),
			"HMSG r 9 12 12\r\nNATS/1.0\r\n\r\n\r\n"},
		{"msg header", string(AppendMsgHeader(b("x"), b("a"), b("1"), nil, -1, 1234567)),
			"xMSG a 1 1234567\r\n"},
		{"hmsg header", string(AppendMsgHeader(nil, b("a"), b("1"), b("r"), 0, 0)),
			"HMSG a 1 r 0 0\r\n"},
		{"err", string(AppendErr(nil, ErrUnknownOp.Text)), "-ERR 'Unknown Protocol Operation'\r\n"},
		{"info", string(AppendInfo(nil, b(`{"proto":1}`))), "INFO {\"proto\":1}\r\n"},
		{"ping", PingLine, "PING\r\n"},
		{"pong", PongLine, "PONG\r\n"},
		{"ok", OKLine, "+OK\r\n"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

// TestEncodeParseRoundTrip checks that a MSG and an HMSG written by the encoders are framed the
// way the parser frames PUB/HPUB (same sizes, same trailing CRLF) by rewriting the op name.
func TestEncodeParseRoundTrip(t *testing.T) {
	msg := AppendHMsg(nil, []byte("s"), []byte("r"), nil, 12, []byte("NATS/1.0\r\n\r\nbody"))
	// "HMSG s r 12 16" reads as "HPUB s r 12 16": subject s, reply r.
	copy(msg, "HPUB")
	got := feed(Config{}, false, msg)
	want := streamtest.Result{Ops: []string{pub("s", "r", 12, "NATS/1.0\r\n\r\nbody")}}
	if !got.Equal(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
