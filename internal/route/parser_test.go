package route

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline"
	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// small limits used by the limit cases.
var small = Config{MaxControlLine: 24, MaxPayload: 8}

type parseCase struct {
	name string
	in   string
	cfg  Config
	ops  []string
	err  error
}

// parseCases cover every operation and every error (docs/routes.md;
// nats-server v2.15.2 parser.go and route.go processRemoteSub,
// processRemoteUnsub, processRoutedMsgArgs, processRoutedHeaderMsgArgs).
var parseCases = []parseCase{
	{name: "ping pong", in: "PING\r\npong\nPiNg junk\r\n", ops: []string{"PING", "PONG", "PING"}},
	{name: "ok ignored", in: "+OK\r\nPING\r\n", ops: []string{"PING"}},
	{name: "info", in: "INFO {\"server_id\":\"N1\"} \r\n", ops: []string{`INFO "{\"server_id\":\"N1\"}"`}},
	{name: "connect", in: "connect\t{}\n", ops: []string{`CONNECT "{}"`}},
	{name: "err", in: "PING\r\n-ERR 'Authorization Violation'\r\nPING\r\n", ops: []string{"PING", `ERR "'Authorization Violation'"`}, err: ErrPeerErr},
	{name: "err no space", in: "-ERR\r\n", err: ErrUnknownOp},

	// RS+ and RS-.
	{name: "rs+", in: "RS+ $G foo.bar\r\n", ops: []string{rsub("$G", "foo.bar", "", 0)}},
	{name: "rs+ queue", in: "rs+ $G foo.* q1 3\r\n", ops: []string{rsub("$G", "foo.*", "q1", 3)}},
	{name: "rs+ ws", in: "RS+\t$G  foo \t q1\t12 \r\n", ops: []string{rsub("$G", "foo", "q1", 12)}},
	{name: "rs+ weight 0 is 1", in: "RS+ $G foo q1 0\r\n", ops: []string{rsub("$G", "foo", "q1", 1)}},
	{name: "rs+ weight bad is 1", in: "RS+ $G foo q1 x\r\n", ops: []string{rsub("$G", "foo", "q1", 1)}},
	{name: "rs+ weight too long is 1", in: "RS+ $G foo q1 1234567890\r\n", ops: []string{rsub("$G", "foo", "q1", 1)}},
	{name: "rs+ no weight", in: "RS+ $G foo q1\r\n", err: ErrBadArgs},
	{name: "rs+ one arg", in: "RS+ foo\r\n", err: ErrBadArgs},
	{name: "rs+ five args", in: "RS+ $G a b 1 x\r\n", err: ErrBadArgs},
	{name: "rs+ no sep", in: "RS+$G foo\r\n", err: ErrUnknownOp},
	{name: "rs-", in: "RS- $G foo.bar\r\n", ops: []string{runsub("$G", "foo.bar", "")}},
	{name: "rs- queue", in: "rs- $G foo q1\n", ops: []string{runsub("$G", "foo", "q1")}},
	{name: "rs- four args", in: "RS- $G foo q1 2\r\n", err: ErrBadArgs},
	{name: "rs- one arg", in: "RS- $G\r\n", err: ErrBadArgs},
	{name: "rs other", in: "RSX $G foo\r\n", err: ErrUnknownOp},

	// RMSG.
	{name: "rmsg", in: "RMSG $G foo 5\r\nhello\r\n", ops: []string{rmsg("$G", "foo", "", nil, -1, "hello")}},
	{name: "rmsg reply", in: "RMSG $G foo bar 5\r\nhello\r\n", ops: []string{rmsg("$G", "foo", "bar", nil, -1, "hello")}},
	{name: "rmsg queue", in: "RMSG $G foo | q1 5\r\nhello\r\n", ops: []string{rmsg("$G", "foo", "", []string{"q1"}, -1, "hello")}},
	{name: "rmsg queues", in: "RMSG $G foo | q1 q2 0\r\n\r\n", ops: []string{rmsg("$G", "foo", "", []string{"q1", "q2"}, -1, "")}},
	{name: "rmsg reply queue", in: "RMSG $G foo + r q1 2\r\nhi\r\n", ops: []string{rmsg("$G", "foo", "r", []string{"q1"}, -1, "hi")}},
	{name: "rmsg reply no queue", in: "RMSG $G foo + r 2\r\nhi\r\n", ops: []string{rmsg("$G", "foo", "r", nil, -1, "hi")}},
	{name: "rmsg payload crlf", in: "RMSG $G foo 6\r\nPING\r\n\r\n", ops: []string{rmsg("$G", "foo", "", nil, -1, "PING\r\n")}},
	{name: "rmsg bad indicator", in: "RMSG $G foo * r q 2\r\nhi\r\n", err: ErrBadArgs},
	{name: "rmsg long indicator", in: "RMSG $G foo ++ r q 2\r\nhi\r\n", err: ErrBadArgs},
	{name: "rmsg two args", in: "RMSG $G 5\r\n", err: ErrBadArgs},
	{name: "rmsg bad size", in: "RMSG $G foo 5x\r\n", err: ErrBadArgs},
	{name: "rmsg size too long", in: "RMSG $G foo 1234567890\r\n", err: ErrBadArgs},
	{name: "rmsg trailer", in: "RMSG $G foo 2\r\nhiX\n", err: ErrUnknownOp},
	{name: "rmsg too long payload", in: "RMSG $G foo 2\r\nhello\r\n", err: ErrUnknownOp},
	{name: "two msgs", in: "RMSG $G a 1\r\nx\r\nRMSG $G b r 2\r\nyz\r\n",
		ops: []string{rmsg("$G", "a", "", nil, -1, "x"), rmsg("$G", "b", "r", nil, -1, "yz")}},

	// HMSG.
	{name: "hmsg", in: "HMSG $G foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", ops: []string{rmsg("$G", "foo", "", nil, 12, "NATS/1.0\r\n\r\nhi")}},
	{name: "hmsg reply", in: "HMSG $G foo r 1 1\r\nx\r\n", ops: []string{rmsg("$G", "foo", "r", nil, 1, "x")}},
	{name: "hmsg queue", in: "HMSG $G foo | q 1 1\r\nx\r\n", ops: []string{rmsg("$G", "foo", "", []string{"q"}, 1, "x")}},
	{name: "hmsg reply queues", in: "HMSG $G foo + r q p 0 1\r\nx\r\n", ops: []string{rmsg("$G", "foo", "r", []string{"q", "p"}, 0, "x")}},
	{name: "hmsg hdr above total", in: "HMSG $G foo 2 1\r\nx\r\n", err: ErrBadArgs},
	{name: "hmsg bad hdr", in: "HMSG $G foo x 1\r\nx\r\n", err: ErrBadArgs},
	{name: "hmsg three args", in: "HMSG $G foo 1\r\n", err: ErrBadArgs},

	// Operations a route never sends, and limits.
	{name: "pub", in: "PUB foo 1\r\nx\r\n", err: ErrUnknownOp},
	{name: "sub", in: "SUB foo 1\r\n", err: ErrUnknownOp},
	{name: "msg", in: "MSG foo 1 1\r\nx\r\n", err: ErrUnknownOp},
	{name: "ls+", in: "LS+ $G foo\r\n", err: ErrUnknownOp},
	{name: "lmsg", in: "LMSG $G foo 1\r\nx\r\n", err: ErrUnknownOp},
	{name: "a+", in: "A+ $G\r\n", err: ErrUnknownOp},
	{name: "empty line", in: "\r\n", err: ErrUnknownOp},
	{name: "line limit", cfg: small, in: "RS+ $G " + strings.Repeat("a", 30) + "\r\n", err: ErrControlLine},
	{name: "line at limit", cfg: small, in: "RS+ $G " + strings.Repeat("a", 21) + "\r\n", ops: []string{rsub("$G", strings.Repeat("a", 21), "", 0)}},
	{name: "payload limit", cfg: small, in: "RMSG $G foo 9\r\n", err: ErrMaxPayload},
	{name: "payload at limit", cfg: small, in: "RMSG $G foo 8\r\n12345678\r\n", ops: []string{rmsg("$G", "foo", "", nil, -1, "12345678")}},
	{name: "partial line unknown", in: "RX", err: ErrUnknownOp},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			want := streamtest.Result{Ops: tc.ops, Err: tc.err}
			if got := feed(tc.cfg, []byte(tc.in)); !got.Equal(want) {
				t.Fatalf("whole\n got %v\nwant %v", got, want)
			}
			if got := feed(tc.cfg, streamtest.Bytewise([]byte(tc.in))...); !got.Equal(want) {
				t.Fatalf("bytewise\n got %v\nwant %v", got, want)
			}
			for cut := 1; cut < len(tc.in); cut++ {
				in := []byte(tc.in)
				if got := feed(tc.cfg, in[:cut], in[cut:]); !got.Equal(want) {
					t.Fatalf("cut at %d\n got %v\nwant %v", cut, got, want)
				}
			}
		})
	}
}

// TestParseStaysFailed checks that a failed Parser returns its error again
// and calls the Handler no more.
func TestParseStaysFailed(t *testing.T) {
	r := &recorder{}
	p := NewParser(Config{}, r)
	if err := p.Parse([]byte("BOGUS\r\n")); err != ErrUnknownOp {
		t.Fatalf("got %v, want ErrUnknownOp", err)
	}
	if err := p.Parse([]byte("PING\r\n")); err != ErrUnknownOp || len(r.Ops) != 0 {
		t.Fatalf("after failure: err %v ops %q", err, r.Ops)
	}
}

// TestParseHandlerError checks that a Handler's error stops Parse.
func TestParseHandlerError(t *testing.T) {
	boom := fmt.Errorf("boom")
	r := &recorder{Log: streamtest.Log{Err: boom}}
	p := NewParser(Config{}, r)
	if err := p.Parse([]byte("PING\r\nPING\r\n")); err != boom || len(r.Ops) != 1 {
		t.Fatalf("err %v ops %q", err, r.Ops)
	}
}

// TestParseUnboundedLineBounded feeds a line that never ends: the parser
// fails with ErrControlLine once the argument passes the limit, holding no
// more than the limit plus slack.
func TestParseUnboundedLineBounded(t *testing.T) {
	p := NewParser(small, &recorder{})
	chunk := []byte("RS+ " + strings.Repeat("a", 10))
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		err = p.Parse(chunk)
		chunk = []byte(strings.Repeat("b", 10))
		if cap(p.scratch) > small.MaxControlLine+wireline.Slack {
			t.Fatalf("scratch grew to %d", cap(p.scratch))
		}
	}
	if err != ErrControlLine {
		t.Fatalf("got %v, want ErrControlLine", err)
	}
}
