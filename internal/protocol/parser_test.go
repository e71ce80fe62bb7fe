package protocol

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// Expected-operation builders, in the recorder's format.
func pub(subject, reply string, hdr int, msg string) string {
	return fmt.Sprintf("PUB %q %q %d %q", subject, reply, hdr, msg)
}
func sub(subject, queue, sid string) string { return fmt.Sprintf("SUB %q %q %q", subject, queue, sid) }
func unsub(sid string, max int64) string    { return fmt.Sprintf("UNSUB %q %d", sid, max) }
func connect(arg string) string             { return fmt.Sprintf("CONNECT %q", arg) }
func info(arg string) string                { return fmt.Sprintf("INFO %q", arg) }

const (
	ping = "PING"
	pong = "PONG"
)

// small limits used by the limit cases.
var small = Config{MaxControlLine: 16, MaxPayload: 8}

type parseCase struct {
	name      string
	in        string
	cfg       Config
	noHeaders bool
	ops       []string
	err       error
}

// parseCases cover every operation and every error (docs/protocol.md 1.1, 1.3, 1.11; nats-server
// v2.15.2 parser.go and client.go processPub, processHeaderPub, parseSub, processUnsub).
var parseCases = []parseCase{
	// PING, PONG, +OK, -ERR (docs/protocol.md 1.3; parser.go OP_PING, OP_PLUS_OK, processErr).
	{name: "ping", in: "PING\r\n", ops: []string{ping}},
	{name: "ping lower", in: "ping\r\n", ops: []string{ping}},
	{name: "ping mixed", in: "PiNg\r\n", ops: []string{ping}},
	{name: "ping bare lf", in: "PING\n", ops: []string{ping}},
	{name: "ping trailing ws", in: "PING \t \r\n", ops: []string{ping}},
	{name: "ping trailing junk ignored", in: "PINGfoo bar\r\n", ops: []string{ping}},
	{name: "pong", in: "PONG\r\n", ops: []string{pong}},
	{name: "pong lower bare lf", in: "pong\n", ops: []string{pong}},
	{name: "ping pong", in: "PING\r\nPONG\r\nPING\n", ops: []string{ping, pong, ping}},
	{name: "ok ignored", in: "+OK\r\n+ok\nPING\r\n", ops: []string{ping}},
	{name: "client err", in: "PING\r\n-ERR 'boom'\r\nPING\r\n", ops: []string{ping}, err: ErrClientErr},
	{name: "client err no space", in: "-ERR\r\n", err: ErrUnknownOp},
	{name: "plus garbage", in: "+NO\r\n", err: ErrUnknownOp},

	// CONNECT and INFO (docs/protocol.md 1.3, 1.5).
	{name: "connect", in: "CONNECT {\"verbose\":false}\r\n", ops: []string{connect(`{"verbose":false}`)}},
	{name: "connect ws", in: "connect \t {} \t\r\n", ops: []string{connect("{}")}},
	{name: "connect no space", in: "CONNECT{}\n", ops: []string{connect("{}")}},
	{name: "connect empty", in: "CONNECT\r\n", ops: []string{connect("")}},
	{name: "connect then ping", in: "CONNECT {}\r\nPING\r\n", ops: []string{connect("{}"), ping}},
	{name: "info", in: "INFO {\"a\":1}\r\n", ops: []string{info(`{"a":1}`)}},
	{name: "info lower", in: "info {}\n", ops: []string{info("{}")}},

	// PUB (docs/protocol.md 1.3).
	{name: "pub", in: "PUB foo 5\r\nhello\r\n", ops: []string{pub("foo", "", -1, "hello")}},
	{name: "pub lower", in: "pub foo 5\r\nhello\r\n", ops: []string{pub("foo", "", -1, "hello")}},
	{name: "pub reply", in: "PUB foo bar 5\r\nhello\r\n", ops: []string{pub("foo", "bar", -1, "hello")}},
	{name: "pub tabs", in: "PUB\tfoo\t\t bar \t5\t\r\nhello\r\n", ops: []string{pub("foo", "bar", -1, "hello")}},
	{name: "pub bare lf", in: "PUB foo 5\nhello\r\n", ops: []string{pub("foo", "", -1, "hello")}},
	{name: "pub empty payload", in: "PUB foo 0\r\n\r\n", ops: []string{pub("foo", "", -1, "")}},
	{name: "pub leading zeros", in: "PUB foo 005\r\nhello\r\n", ops: []string{pub("foo", "", -1, "hello")}},
	{name: "pub payload with crlf", in: "PUB foo 6\r\nPING\r\n\r\n", ops: []string{pub("foo", "", -1, "PING\r\n")}},
	{name: "pub twice", in: "PUB a 1\r\nx\r\nPUB b r 2\r\nyz\r\n", ops: []string{pub("a", "", -1, "x"), pub("b", "r", -1, "yz")}},
	{name: "pub payload lf only", in: "PUB foo 5\r\nhello\nPING\r\n", err: ErrUnknownOp},
	{name: "pub payload too long", in: "PUB foo 3\r\nhello\r\n", err: ErrUnknownOp},
	{name: "pub payload bad cr", in: "PUB foo 5\r\nhelloXY", err: ErrUnknownOp},
	{name: "pub payload bad lf", in: "PUB foo 5\r\nhello\rX", err: ErrUnknownOp},
	{name: "pub payload partial", in: "PUB foo 5\r\nhel", ops: nil},
	{name: "pub one arg", in: "PUB foo\r\n", err: ErrBadArgs},
	{name: "pub four args", in: "PUB foo bar baz 5\r\n", err: ErrBadArgs},
	{name: "pub no args", in: "PUB \r\n", err: ErrBadArgs},
	{name: "pub negative", in: "PUB foo -1\r\n", err: ErrBadArgs},
	{name: "pub not a number", in: "PUB foo abc\r\n", err: ErrBadArgs},
	{name: "pub plus sign", in: "PUB foo +5\r\n", err: ErrBadArgs},
	{name: "pub ten digits", in: "PUB foo 0000000005\r\n", err: ErrBadArgs},
	{name: "pub cr inside args", in: "PUB foo\r5\r\n", err: ErrBadArgs},
	{name: "pub no separator", in: "PUB\r\n", err: ErrUnknownOp},
	{name: "pub bad name", in: "PUBX foo 1\r\n", err: ErrUnknownOp},
	{name: "pub at max payload", in: "PUB foo 8\r\n12345678\r\n", cfg: small, ops: []string{pub("foo", "", -1, "12345678")}},
	{name: "pub over max payload", in: "PUB foo 9\r\n", cfg: small, err: ErrMaxPayload},
	{name: "pub over default max payload", in: "PUB foo 1048577\r\n", err: ErrMaxPayload},

	// HPUB (docs/protocol.md 1.3, 1.6).
	{name: "hpub", in: "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", ops: []string{pub("foo", "", 12, "NATS/1.0\r\n\r\nhi")}},
	{name: "hpub reply", in: "hpub foo r 12 12\r\nNATS/1.0\r\n\r\n\r\n", ops: []string{pub("foo", "r", 12, "NATS/1.0\r\n\r\n")}},
	{name: "hpub example", in: "HPUB orders.new _INBOX.abc.def 34 39\r\nNATS/1.0\r\nNats-Msg-Id: order-1\r\n\r\nhello\r\n",
		ops: []string{pub("orders.new", "_INBOX.abc.def", 34, "NATS/1.0\r\nNats-Msg-Id: order-1\r\n\r\nhello")}},
	{name: "hpub zero", in: "HPUB foo 0 0\r\n\r\n", ops: []string{pub("foo", "", 0, "")}},
	{name: "hpub hdr over total", in: "HPUB foo 13 12\r\n", err: ErrBadArgs},
	{name: "hpub two args", in: "HPUB foo 12\r\n", err: ErrBadArgs},
	{name: "hpub five args", in: "HPUB foo a b 1 2\r\n", err: ErrBadArgs},
	{name: "hpub negative hdr", in: "HPUB foo -1 5\r\n", err: ErrBadArgs},
	{name: "hpub bad hdr", in: "HPUB foo x 5\r\n", err: ErrBadArgs},
	{name: "hpub bad total", in: "HPUB foo 1 x\r\n", err: ErrBadArgs},
	{name: "hpub over max payload", in: "HPUB foo 2 9\r\n", cfg: small, err: ErrMaxPayload},
	{name: "hpub disabled", in: "HPUB foo 12 14\r\n", noHeaders: true, err: ErrNoHeaders},
	{name: "hpub disabled pub ok", in: "PUB foo 1\r\nx\r\n", noHeaders: true, ops: []string{pub("foo", "", -1, "x")}},
	{name: "hpub bad payload end", in: "HPUB foo 1 2\r\nabc\r\n", err: ErrUnknownOp},

	// SUB (docs/protocol.md 1.3; nats.go sends two spaces when there is no queue).
	{name: "sub", in: "SUB foo 1\r\n", ops: []string{sub("foo", "", "1")}},
	{name: "sub two spaces", in: "SUB foo  1\r\n", ops: []string{sub("foo", "", "1")}},
	{name: "sub queue", in: "SUB foo q 1\r\n", ops: []string{sub("foo", "q", "1")}},
	{name: "sub tabs lower", in: "sub\tfoo\tq\t1\t\n", ops: []string{sub("foo", "q", "1")}},
	{name: "sub cr separates", in: "SUB foo\r1\r\n", ops: []string{sub("foo", "", "1")}},
	{name: "sub one arg", in: "SUB foo\r\n", err: ErrBadArgs},
	{name: "sub four args", in: "SUB foo q 1 x\r\n", err: ErrBadArgs},
	{name: "sub no separator", in: "SUB\r\n", err: ErrUnknownOp},
	{name: "sub glued", in: "SUBfoo 1\r\n", err: ErrUnknownOp},

	// UNSUB (docs/protocol.md 1.3; nats.go sends a trailing space when there is no max).
	{name: "unsub", in: "UNSUB 1\r\n", ops: []string{unsub("1", 0)}},
	{name: "unsub trailing space", in: "UNSUB 1 \r\n", ops: []string{unsub("1", 0)}},
	{name: "unsub max", in: "unsub 1 5\r\n", ops: []string{unsub("1", 5)}},
	{name: "unsub bad max is zero", in: "UNSUB 1 x\r\n", ops: []string{unsub("1", 0)}},
	{name: "unsub negative max is zero", in: "UNSUB 1 -3\r\n", ops: []string{unsub("1", 0)}},
	{name: "unsub no args", in: "UNSUB \r\n", err: ErrBadArgs},
	{name: "unsub three args", in: "UNSUB 1 2 3\r\n", err: ErrBadArgs},
	{name: "unsub no separator", in: "UNSUB\r\n", err: ErrUnknownOp},

	// Unknown operations (docs/protocol.md 1.3, 1.11).
	{name: "unknown", in: "FOO\r\n", err: ErrUnknownOp},
	{name: "empty line", in: "\r\n", err: ErrUnknownOp},
	{name: "bare lf", in: "\n", err: ErrUnknownOp},
	{name: "msg from client", in: "MSG foo 1 5\r\n", err: ErrUnknownOp},
	{name: "hmsg from client", in: "HMSG foo 1 0 5\r\n", err: ErrUnknownOp},
	{name: "route sub", in: "RS+ foo\r\n", err: ErrUnknownOp},
	{name: "account sub", in: "A+ foo\r\n", err: ErrUnknownOp},
	{name: "truncated name", in: "PIN\r\n", err: ErrUnknownOp},
	{name: "p alone", in: "P\r\n", err: ErrUnknownOp},
	{name: "leading space", in: " PING\r\n", err: ErrUnknownOp},
	{name: "partial unknown fails early", in: "FO", err: ErrUnknownOp},
	{name: "partial bad name fails early", in: "PUX", err: ErrUnknownOp},
	{name: "partial valid waits", in: "CONNE", ops: nil},
	{name: "ops before error kept", in: "PING\r\nSUB foo 1\r\nXX\r\nPING\r\n", ops: []string{ping, sub("foo", "", "1")}, err: ErrUnknownOp},

	// Control line limit: arguments after the name and its whitespace, \r excluded (docs/protocol.md
	// 1.1; parser.go overMaxControlLineLimit).
	{name: "line at limit", in: "SUB " + strings.Repeat("a", 14) + " 1\r\n", cfg: small, ops: []string{sub(strings.Repeat("a", 14), "", "1")}},
	{name: "line over limit", in: "SUB " + strings.Repeat("a", 15) + " 1\r\n", cfg: small, err: ErrControlLine},
	{name: "partial line over limit", in: "SUB " + strings.Repeat("a", 17), cfg: small, err: ErrControlLine},
	{name: "partial line at limit", in: "SUB " + strings.Repeat("a", 16) + "\r", cfg: small, ops: nil},
	{name: "separator not counted", in: "SUB" + strings.Repeat(" ", 40) + strings.Repeat("a", 14) + " 1\r\n", cfg: small, ops: []string{sub(strings.Repeat("a", 14), "", "1")}},
	{name: "ping junk not limited", in: "PING" + strings.Repeat("x", 100) + "\r\n", cfg: small, ops: []string{ping}},
	{name: "connect over limit", in: "CONNECT {\"name\":\"0123456789\"}\r\n", cfg: small, err: ErrControlLine},
	{name: "client err over limit", in: "-ERR '0123456789abcdefgh'\r\n", cfg: small, err: ErrControlLine},
	{name: "default limit ok", in: "SUB " + strings.Repeat("a", 4094) + " 1\r\n", ops: []string{sub(strings.Repeat("a", 4094), "", "1")}},
	{name: "default limit over", in: "SUB " + strings.Repeat("a", 4095) + " 1\r\n", err: ErrControlLine},
}

func TestParseTable(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got := feed(tc.cfg, tc.noHeaders, []byte(tc.in))
			want := streamtest.Result{Ops: tc.ops, Err: tc.err}
			if !got.Equal(want) {
				t.Fatalf("Parse(%q)\n got %v\nwant %v", tc.in, got, want)
			}
		})
	}
}

// TestParseSplit feeds every table input byte by byte and cut in two at every offset: the
// recorded operations and error must equal those of the whole input.
func TestParseSplit(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			want := feed(tc.cfg, tc.noHeaders, in)
			if got := feed(tc.cfg, tc.noHeaders, streamtest.Bytewise(in)...); !got.Equal(want) {
				t.Fatalf("bytewise %q\n got %v\nwant %v", tc.in, got, want)
			}
			for i := 0; i <= len(in); i++ {
				if got := feed(tc.cfg, tc.noHeaders, splitAt(in, i)...); !got.Equal(want) {
					t.Fatalf("split at %d %q\n got %v\nwant %v", i, tc.in, got, want)
				}
			}
		})
	}
}

// nilRecorder records whether reply and queue are nil.
type nilRecorder struct {
	counter
	nils []bool
}

func (r *nilRecorder) ProcessPub(_, reply []byte, _ int, _ []byte) error {
	r.nils = append(r.nils, reply == nil)
	return nil
}

func (r *nilRecorder) ProcessSub(_, queue, _ []byte) error {
	r.nils = append(r.nils, queue == nil)
	return nil
}

// TestAbsentArgsAreNil checks the Handler contract that an absent reply or queue is nil, whether
// the payload is split or not.
func TestAbsentArgsAreNil(t *testing.T) {
	in := []byte("PUB a 1\r\nx\r\nHPUB a 0 1\r\nx\r\nSUB a 1\r\nPUB a r 1\r\nx\r\nSUB a q 1\r\n")
	for _, chunks := range [][][]byte{{in}, streamtest.Bytewise(in)} {
		r := &nilRecorder{}
		if err := feedTo(NewParser(Config{}, r), chunks); err != nil {
			t.Fatal(err)
		}
		want := []bool{true, true, true, false, false}
		if fmt.Sprint(r.nils) != fmt.Sprint(want) {
			t.Fatalf("nil flags %v, want %v", r.nils, want)
		}
	}
}

func feedTo(p *Parser, chunks [][]byte) error {
	for _, c := range chunks {
		if err := p.Parse(c); err != nil {
			return err
		}
	}
	return nil
}

// TestHandlerErrorStopsParse checks that a Handler's error is returned unchanged, that later
// operations in the same buffer are not delivered, and that the Parser stays failed.
func TestHandlerErrorStopsParse(t *testing.T) {
	boom := errors.New("boom")
	r := &recorder{Log: streamtest.Log{Err: boom}}
	p := NewParser(Config{}, r)
	if err := p.Parse([]byte("PING\r\nPING\r\n")); err != boom {
		t.Fatalf("Parse = %v, want %v", err, boom)
	}
	if err := p.Parse([]byte("PING\r\n")); err != boom {
		t.Fatalf("second Parse = %v, want %v", err, boom)
	}
	if len(r.Ops) != 1 {
		t.Fatalf("ops = %q, want one PING", r.Ops)
	}
}

// TestErrorIsSticky checks that a protocol error is returned again without calling the Handler.
func TestErrorIsSticky(t *testing.T) {
	r := &recorder{}
	p := NewParser(Config{}, r)
	if err := p.Parse([]byte("FOO\r\n")); err != ErrUnknownOp {
		t.Fatalf("Parse = %v", err)
	}
	if err := p.Parse([]byte("PING\r\n")); err != ErrUnknownOp || len(r.Ops) != 0 {
		t.Fatalf("after failure: err %v ops %q", err, r.Ops)
	}
}

// TestSetHeadersFromHandler checks that SetHeaders called inside ProcessConnect applies to the
// next operation in the same buffer, as a server enabling headers from CONNECT needs.
func TestSetHeadersFromHandler(t *testing.T) {
	h := &headerSwitch{}
	h.p = NewParser(Config{}, h)
	h.p.SetHeaders(false)
	if err := h.p.Parse([]byte("CONNECT {}\r\nHPUB a 0 1\r\nx\r\n")); err != nil {
		t.Fatal(err)
	}
	if h.pubs != 1 {
		t.Fatalf("pubs = %d, want 1", h.pubs)
	}
}

type headerSwitch struct {
	counter
	p *Parser
}

func (h *headerSwitch) ProcessConnect([]byte) error {
	h.p.SetHeaders(true)
	return nil
}

// TestErrorTexts pins the exact -ERR texts and close flags (docs/protocol.md 1.11).
func TestErrorTexts(t *testing.T) {
	cases := []struct {
		err  *Error
		text string
	}{
		{ErrUnknownOp, "Unknown Protocol Operation"},
		{ErrControlLine, "maximum control line exceeded"},
		{ErrMaxPayload, "Maximum Payload Violation"},
		{ErrBadArgs, ""},
		{ErrNoHeaders, ""},
		{ErrClientErr, ""},
	}
	for _, c := range cases {
		if c.err.Text != c.text || !c.err.Close {
			t.Errorf("%v: Text %q Close %v, want %q true", c.err, c.err.Text, c.err.Close, c.text)
		}
		if !strings.HasPrefix(c.err.Error(), "protocol: ") || len(c.err.Error()) <= len("protocol: ") {
			t.Errorf("Error() = %q", c.err.Error())
		}
	}
}
