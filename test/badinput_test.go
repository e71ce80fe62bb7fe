package test

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// rawCase is one exchange on a fresh raw connection. Each case also runs a
// bystander connection subscribed to ">" that must see exactly
// bystanderSees because of the case (usually nothing) and must keep
// working afterwards.
type rawCase struct {
	name    string
	connect string // CONNECT JSON sent (with PING) before send; "" = defaultConnect, "-" = none
	send    string
	reply   string // exact bytes the server answers send with
	closed  bool   // after reply the server closes the connection
	// bystanderSees is what the ">" subscriber (sid 1, headers on) gets.
	bystanderSees string
}

const (
	errUnknownOp = "-ERR 'Unknown Protocol Operation'\r\n"
	errMaxCtl    = "-ERR 'maximum control line exceeded'\r\n"
	errMaxPay    = "-ERR 'Maximum Payload Violation'\r\n"
	errInvSubj   = "-ERR 'Invalid Subject'\r\n"
	errInvPub    = "-ERR 'Invalid Publish Subject'\r\n"
)

func runRawCases(t *testing.T, u string, cases []rawCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			by := rawConnect(t, u, defaultConnect)
			by.send("SUB > 1\r\n")
			by.sync()

			c := rawConn(t, u)
			switch tc.connect {
			case "-":
			case "":
				c.handshake(defaultConnect)
			default:
				c.handshake(tc.connect)
			}
			c.send(tc.send)
			c.expect(tc.reply)
			if tc.closed {
				c.expectClosed()
			} else {
				c.sync()
			}

			by.send("PUB bystander.check 2\r\nok\r\nPING\r\n")
			by.expect(tc.bystanderSees + "MSG bystander.check 1 2\r\nok\r\nPONG\r\n")
		})
	}
}

// TestBadInput: malformed or forbidden input gets nats-server's exact
// answer, and other connections are unaffected.
func TestBadInput(t *testing.T) {
	u := startServer(t, nil)
	longArg := strings.Repeat("a", 4095) // "PUB <4095 a> 0" has a 4097-byte argument
	runRawCases(t, u, []rawCase{
		// Unparsable operations: -ERR 'Unknown Protocol Operation' and close.
		{name: "garbage text", send: "GARBAGE\r\n", reply: errUnknownOp, closed: true},
		{name: "binary garbage", send: "\x00\x01\x02\xff\xfe\r\n", reply: errUnknownOp, closed: true},
		{name: "garbage before CONNECT", connect: "-", send: "HELLO\r\n", reply: errUnknownOp, closed: true},
		{name: "empty line", send: "\r\n", reply: errUnknownOp, closed: true},
		{name: "bare LF line", send: "\n", reply: errUnknownOp, closed: true},
		{name: "leading space", send: " PING\r\n", reply: errUnknownOp, closed: true},
		{name: "longer op name PUBLISH", send: "PUBLISH foo 1\r\na\r\n", reply: errUnknownOp, closed: true},
		{name: "longer op name SUBX", send: "SUBX foo 1\r\n", reply: errUnknownOp, closed: true},
		{name: "PUB without args", send: "PUB\r\n", reply: errUnknownOp, closed: true},
		{name: "SUB without args", send: "SUB\r\n", reply: errUnknownOp, closed: true},
		{name: "UNSUB without args", send: "UNSUB\r\n", reply: errUnknownOp, closed: true},
		{name: "HPUB without args", send: "HPUB\r\n", reply: errUnknownOp, closed: true},
		// Route, leafnode and server-only operations from a client.
		{name: "route RS+", send: "RS+ $G foo\r\n", reply: errUnknownOp, closed: true},
		{name: "route RS-", send: "RS- $G foo\r\n", reply: errUnknownOp, closed: true},
		{name: "route RMSG", send: "RMSG $G foo 2\r\nhi\r\n", reply: errUnknownOp, closed: true},
		{name: "leaf LS+", send: "LS+ $G foo\r\n", reply: errUnknownOp, closed: true},
		{name: "leaf LMSG", send: "LMSG foo 2\r\nhi\r\n", reply: errUnknownOp, closed: true},
		{name: "gateway A+", send: "A+ foo\r\n", reply: errUnknownOp, closed: true},
		{name: "gateway A-", send: "A- foo\r\n", reply: errUnknownOp, closed: true},
		{name: "MSG from client", send: "MSG foo 1 2\r\nhi\r\n", reply: errUnknownOp, closed: true},
		{name: "HMSG from client", send: "HMSG foo 1 2 2\r\nhi\r\n", reply: errUnknownOp, closed: true},
		// Payload not followed by CRLF: nothing is delivered.
		{name: "payload longer than declared", send: "PUB foo 3\r\nabcX\r\n", reply: errUnknownOp, closed: true},
		{name: "payload followed by LF only", send: "PUB foo 3\r\nabc\n", reply: errUnknownOp, closed: true},
		{name: "payload followed by CR CR LF", send: "PUB foo 3\r\nabc\r\r\n", reply: errUnknownOp, closed: true},
		{name: "HPUB payload not followed by CRLF", connect: `{"verbose":false,"pedantic":false,"protocol":1,"headers":true}`,
			send: "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhiXX", reply: errUnknownOp, closed: true},

		// Limits.
		{name: "payload over max_payload", send: "PUB foo 1048577\r\n", reply: errMaxPay, closed: true},
		{name: "HPUB total over max_payload", connect: `{"verbose":false,"pedantic":false,"protocol":1,"headers":true}`,
			send: "HPUB foo 12 1048577\r\n", reply: errMaxPay, closed: true},
		{name: "control line over 4096", send: "PUB " + longArg + " 0\r\n\r\n", reply: errMaxCtl, closed: true},
		{name: "control line over 4096 without CRLF", send: "SUB " + strings.Repeat("b", 5000), reply: errMaxCtl, closed: true},
		{name: "control line of exactly 4096", send: "PUB " + longArg[:4094] + " 0\r\n\r\n",
			bystanderSees: "MSG " + longArg[:4094] + " 1 0\r\n\r\n"},

		// Malformed arguments: closed without any -ERR.
		{name: "PUB one arg", send: "PUB foo\r\n", closed: true},
		{name: "PUB four args", send: "PUB a b c 1\r\n", closed: true},
		{name: "PUB size not a number", send: "PUB foo abc\r\n", closed: true},
		{name: "PUB negative size", send: "PUB foo -1\r\n", closed: true},
		{name: "SUB one arg", send: "SUB foo\r\n", closed: true},
		{name: "SUB four args", send: "SUB a b c d\r\n", closed: true},
		{name: "UNSUB three args", send: "UNSUB a b c\r\n", closed: true},
		{name: "HPUB two args", connect: `{"verbose":false,"pedantic":false,"protocol":1,"headers":true}`,
			send: "HPUB foo 12\r\n", closed: true},
		{name: "HPUB five args", connect: `{"verbose":false,"pedantic":false,"protocol":1,"headers":true}`,
			send: "HPUB a b c 12 12\r\n", closed: true},
		{name: "HPUB header size above total", connect: `{"verbose":false,"pedantic":false,"protocol":1,"headers":true}`,
			send: "HPUB foo 20 12\r\n", closed: true},
		{name: "HPUB without headers negotiated", connect: `{"verbose":false,"pedantic":false,"protocol":1}`,
			send: "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", closed: true},
		{name: "HPUB with headers:false", connect: `{"verbose":false,"pedantic":false,"protocol":1,"headers":false}`,
			send: "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", closed: true},
		{name: "CONNECT with bad JSON", connect: "-", send: "CONNECT {bad json\r\n", closed: true},
		{name: "CONNECT without JSON", connect: "-", send: "CONNECT\r\n", closed: true},
		{name: "-ERR from client", send: "-ERR 'oops'\r\n", closed: true},

		// CONNECT content.
		{name: "CONNECT protocol 2", connect: "-", send: `CONNECT {"verbose":false,"protocol":2}` + "\r\nPING\r\n",
			reply: "-ERR 'invalid client protocol'\r\n", closed: true},
		{name: "CONNECT protocol -1", connect: "-", send: `CONNECT {"verbose":false,"protocol":-1}` + "\r\nPING\r\n",
			reply: "-ERR 'invalid client protocol'\r\n", closed: true},
		{name: "no_responders without headers", connect: "-", send: `CONNECT {"verbose":false,"protocol":1,"no_responders":true}` + "\r\nPING\r\n",
			reply: "-ERR 'no responders requires headers support'\r\n", closed: true},
		{name: "no_responders with headers false", connect: "-", send: `CONNECT {"verbose":false,"protocol":1,"headers":false,"no_responders":true}` + "\r\nPING\r\n",
			reply: "-ERR 'no responders requires headers support'\r\n", closed: true},

		// Invalid subscription subjects: -ERR 'Invalid Subject', connection stays.
		{name: "SUB empty token", send: "SUB foo..bar 1\r\n", reply: errInvSubj},
		{name: "SUB leading dot", send: "SUB .foo 1\r\n", reply: errInvSubj},
		{name: "SUB trailing dot", send: "SUB foo. 1\r\n", reply: errInvSubj},
		{name: "SUB > not last", send: "SUB foo.>.bar 1\r\n", reply: errInvSubj},
		{name: "SUB lone >.x", send: "SUB >.x 1\r\n", reply: errInvSubj},
		{name: "SUB invalid with queue", send: "SUB foo..bar q 1\r\n", reply: errInvSubj},
		// ... while wildcard characters inside tokens are literal and valid.
		{name: "SUB literal tokens with wildcard characters", send: "SUB foo* 1\r\nSUB f>o.b*r 2\r\nSUB *.> 3\r\n"},

		// Publishing to malformed subjects: silently dropped unless pedantic.
		{name: "PUB to malformed subjects", send: "PUB foo..bar 1\r\na\r\nPUB .foo 1\r\na\r\nPUB foo. 1\r\na\r\n"},
		{name: "PUB to wildcard subject not pedantic", send: "PUB foo.*.> 1\r\na\r\n", bystanderSees: "MSG foo.*.> 1 1\r\na\r\n"},

		// Reserved reply subjects and subjects.
		{name: "PUB with $JS.ACK reply", send: "PUB foo $JS.ACK.x 2\r\nhi\r\n",
			reply: `-ERR 'Permissions Violation for Publish with Reply of "$JS.ACK.x"'` + "\r\n"},
		{name: "PUB with _R_ reply", send: "PUB foo _R_.abc.def 2\r\nhi\r\n",
			reply: `-ERR 'Permissions Violation for Publish with Reply of "_R_.abc.def"'` + "\r\n"},
		{name: "PUB with _GR_ reply", send: "PUB foo _GR_.x 2\r\nhi\r\n",
			reply: `-ERR 'Permissions Violation for Publish with Reply of "_GR_.x"'` + "\r\n"},
		{name: "HPUB with $JS.ACK reply", connect: `{"verbose":false,"pedantic":false,"protocol":1,"headers":true}`,
			send:  "HPUB foo $JS.ACK.a.b 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
			reply: `-ERR 'Permissions Violation for Publish with Reply of "$JS.ACK.a.b"'` + "\r\n"},
		{name: "PUB with bare $JS.ACK. and _R_ replies is fine", send: "PUB foo $JS.ACK. 1\r\na\r\nPUB foo _R_ 1\r\nb\r\n",
			bystanderSees: "MSG foo 1 $JS.ACK. 1\r\na\r\nMSG foo 1 _R_ 1\r\nb\r\n"},
		{name: "PUB to _GR_ subject", send: "PUB _GR_.x 1\r\na\r\n",
			reply: `-ERR 'Permissions Violation for Publish to "_GR_.x"'` + "\r\n"},
		{name: "PUB to $GR subject", send: "PUB $GR.x 1\r\na\r\n",
			reply: `-ERR 'Permissions Violation for Publish to "$GR.x"'` + "\r\n"},
		{name: "PUB to $NRG subject", send: "PUB $NRG.x 1\r\na\r\n",
			reply: `-ERR 'Permissions Violation for Publish to "$NRG.x"'` + "\r\n"},

		// Things a client may send that the server ignores.
		{name: "INFO from client is ignored", send: "INFO {}\r\n"},
		{name: "+OK from client is ignored", send: "+OK\r\n"},
		{name: "unsolicited PONG is ignored", send: "PONG\r\n"},
		{name: "UNSUB unknown sid is ignored", send: "UNSUB 42\r\nUNSUB 42 5\r\n"},
	})
}

// TestBadInputConfiguredLimits: configured limits replace the defaults.
func TestBadInputConfiguredLimits(t *testing.T) {
	u := startServer(t, func(o *server.Options) {
		o.MaxPayload = 1024
		o.MaxControlLine = 256
	})
	c := rawConn(t, u)
	if got := c.info["max_payload"]; got != float64(1024) {
		t.Fatalf("INFO max_payload = %v, want 1024", got)
	}
	runRawCases(t, u, []rawCase{
		{name: "payload of max_payload", send: "PUB foo 1024\r\n" + strings.Repeat("x", 1024) + "\r\n",
			bystanderSees: "MSG foo 1 1024\r\n" + strings.Repeat("x", 1024) + "\r\n"},
		{name: "payload over max_payload", send: "PUB foo 1025\r\n", reply: errMaxPay, closed: true},
		{name: "argument of 256", send: "PUB " + strings.Repeat("s", 254) + " 0\r\n\r\n",
			bystanderSees: "MSG " + strings.Repeat("s", 254) + " 1 0\r\n\r\n"},
		{name: "argument of 257", send: "PUB " + strings.Repeat("s", 255) + " 0\r\n\r\n", reply: errMaxCtl, closed: true},
		{name: "SUB argument of 257", send: "SUB " + strings.Repeat("s", 255) + " 1\r\n", reply: errMaxCtl, closed: true},
	})
}

func TestMaxConnections(t *testing.T) {
	u := startServer(t, func(o *server.Options) { o.MaxConnections = 2 })
	a := rawConnect(t, u, defaultConnect)
	b := rawConnect(t, u, defaultConnect)
	c := rawConn(t, u) // INFO first, then the refusal
	c.expectErr("maximum connections exceeded")
	c.expectClosed()
	a.sync()
	b.sync()
}

// TestInfo checks the INFO the server sends first and the asynchronous one
// after the first PONG.
func TestInfo(t *testing.T) {
	u := startServer(t, nil)
	port, _ := strconv.Atoi(u[strings.LastIndex(u, ":")+1:])
	c := rawConn(t, u)
	if !regexp.MustCompile(`^INFO \{.*\} \r\n$`).MatchString(c.infoLine) {
		t.Errorf("INFO line %q: want `INFO {...} \\r\\n` (nats-server puts a space before CRLF)", c.infoLine)
	}
	info := c.info
	str := func(k string) string {
		s, ok := info[k].(string)
		if !ok || s == "" {
			t.Errorf("INFO %q = %#v, want a non-empty string", k, info[k])
		}
		return s
	}
	sid := str("server_id")
	if got := str("server_name"); got != sid {
		t.Errorf("server_name %q: without a configured name it is the server id %q", got, sid)
	}
	if v := str("version"); !regexp.MustCompile(`^2\.\d+\.\d+`).MatchString(v) {
		t.Errorf("version %q", v)
	}
	if g := str("go"); !strings.HasPrefix(g, "go") {
		t.Errorf("go %q", g)
	}
	for k, want := range map[string]any{
		"proto":       float64(1),
		"host":        "127.0.0.1",
		"port":        float64(port),
		"headers":     true,
		"max_payload": float64(1 << 20),
		"client_ip":   "127.0.0.1",
	} {
		if info[k] != want {
			t.Errorf("INFO %q = %#v, want %#v", k, info[k], want)
		}
	}
	if id, ok := info["client_id"].(float64); !ok || id < 1 || id != float64(uint64(id)) {
		t.Errorf("client_id %#v, want a positive integer", info["client_id"])
	}
	// The JetStream API level, sent with or without JetStream (4 on
	// cairn, 5 on nats-server v2.15.2): the JavaScript client's object
	// store needs 4 for batched puts.
	if lvl, ok := info["api_lvl"].(float64); !ok || lvl < 4 {
		t.Errorf("api_lvl %#v, want a level of 4 or more", info["api_lvl"])
	}
	for _, k := range []string{"auth_required", "tls_required", "tls_verify", "tls_available", "jetstream", "ldm", "connect_info", "nonce"} {
		if v, ok := info[k]; ok && v != false {
			t.Errorf("INFO %q = %#v: must be absent (false) here", k, v)
		}
	}
	// Key order of the common fields follows nats-server's Info struct.
	order := []string{"server_id", "server_name", "version", "proto", "go", "host", "port", "headers", "max_payload", "client_id", "client_ip", "api_lvl"}
	last := -1
	for _, k := range order {
		i := strings.Index(c.infoLine, `"`+k+`":`)
		if i < last {
			t.Errorf("INFO key %q out of order in %s", k, c.infoLine)
		}
		last = i
	}

	// The async INFO after the first PONG, for protocol 1.
	c.send("CONNECT " + defaultConnect + "\r\nPING\r\n")
	c.expect("PONG\r\n")
	line, info2 := c.expectInfo()
	if !strings.HasSuffix(line, "} \r\n") {
		t.Errorf("async INFO line %q: want `} \\r\\n` at the end", line)
	}
	if info2["connect_info"] != true {
		t.Errorf("async INFO lacks connect_info:true: %s", line)
	}
	for _, k := range order {
		if fmt.Sprint(info2[k]) != fmt.Sprint(info[k]) {
			t.Errorf("async INFO %q = %#v, first INFO had %#v", k, info2[k], info[k])
		}
	}
	// Only once.
	c.sync()
	c.sync()

	// client_id differs per connection and counts up.
	d := rawConn(t, u)
	if id1, id2 := info["client_id"].(float64), d.info["client_id"].(float64); id2 <= id1 {
		t.Errorf("second connection client_id %v, first %v: want increasing", id2, id1)
	}
}

func TestInfoServerName(t *testing.T) {
	u := startServer(t, func(o *server.Options) { o.ServerName = "n1" })
	c := rawConn(t, u)
	if c.info["server_name"] != "n1" {
		t.Fatalf("server_name %#v, want n1", c.info["server_name"])
	}
	if c.info["server_id"] == "n1" || c.info["server_id"] == "" {
		t.Fatalf("server_id %#v", c.info["server_id"])
	}
}

func TestAsyncInfoOnlyForProtocol1(t *testing.T) {
	u := startServer(t, nil)
	// protocol 0: PONG and no INFO.
	c := rawConn(t, u)
	c.send(`CONNECT {"verbose":false,"pedantic":false,"protocol":0}` + "\r\nPING\r\n")
	c.expect("PONG\r\n")
	c.sync()
	// No CONNECT at all: the same.
	n := rawConn(t, u)
	n.sync()
	n.sync()
	// A PING before CONNECT does not count as the first PONG: the INFO
	// follows the first PONG after CONNECT.
	p := rawConn(t, u)
	p.send("PING\r\n")
	p.expect("PONG\r\n")
	p.send(`CONNECT {"verbose":false,"pedantic":false,"protocol":1}` + "\r\nPING\r\n")
	p.expect("PONG\r\n")
	p.expectRe(`INFO \{[^\r\n]*"connect_info":true[^\r\n]*\} ?\r\n`)
	p.sync()
}

func TestPingPong(t *testing.T) {
	u := startServer(t, nil)
	c := rawConnect(t, u, defaultConnect)
	c.send("PING\r\nPING\r\n")
	c.expect("PONG\r\nPONG\r\n")
	// Operation names are case-insensitive; PING ignores what follows it
	// up to the newline; a bare LF ends a control line.
	c.send("ping\r\nPiNg\r\nPING\nPING foo\r\n")
	c.expect("PONG\r\nPONG\r\nPONG\r\nPONG\r\n")
	// A PING split across writes.
	for _, b := range "PING\r\n" {
		c.send(string(b))
	}
	c.expect("PONG\r\n")
}

// TestStaleConnection: a client that never answers PINGs gets max_pings_out
// PINGs, then -ERR 'Stale Connection' and is closed.
func TestStaleConnection(t *testing.T) {
	u := startServer(t, func(o *server.Options) {
		o.PingInterval = 100 * time.Millisecond
		o.MaxPingsOut = 2
	})
	// nats.go answers the server's PINGs, so it must stay.
	healthy := connect(t, u)
	hs := subSync(t, healthy, "healthy")
	flush(t, healthy)
	c := rawConnect(t, u, defaultConnect)
	start := time.Now()
	c.expect("PING\r\n")
	c.expect("PING\r\n")
	c.expectErr("Stale Connection")
	c.expectClosed()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stale connection detected after %v with a 100ms ping interval", took)
	}
	publish(t, healthy, "healthy", "yes")
	if m := nextMsg(t, hs); string(m.Data) != "yes" {
		t.Fatalf("got %q", m.Data)
	}
}

// TestPingAnswered: a client that answers the server's PINGs stays connected.
func TestPingAnswered(t *testing.T) {
	u := startServer(t, func(o *server.Options) {
		o.PingInterval = 100 * time.Millisecond
		o.MaxPingsOut = 2
	})
	c := rawConnect(t, u, defaultConnect)
	for range 4 { // twice the number that would make it stale
		c.expect("PING\r\n")
		c.send("PONG\r\n")
	}
	c.send("SUB x 1\r\nPUB x 1\r\ny\r\n")
	for {
		line := c.readLine()
		if line == "PING\r\n" {
			c.send("PONG\r\n")
			continue
		}
		if line != "MSG x 1 1\r\n" {
			t.Fatalf("got %q", line)
		}
		c.expect("y\r\n")
		return
	}
}

func TestVerbose(t *testing.T) {
	u := startServer(t, nil)
	by := rawConnect(t, u, defaultConnect)
	by.send("SUB > 1\r\n")
	by.sync()

	c := rawConnect(t, u, `{"verbose":true,"pedantic":false,"protocol":1,"headers":true}`) // CONNECT got +OK
	steps := []struct{ send, want string }{
		{"SUB foo 1\r\n", "+OK\r\n"},
		{"PUB foo 2\r\nhi\r\n", "+OK\r\nMSG foo 1 2\r\nhi\r\n"},
		{"PUB foo bar 2\r\nhi\r\n", "+OK\r\nMSG foo 1 bar 2\r\nhi\r\n"},
		{"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", "+OK\r\nHMSG foo 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"},
		{"PUB nobody 0\r\n\r\n", "+OK\r\n"},
		{"UNSUB 1\r\n", "+OK\r\n"},
		{"UNSUB 1\r\n", "+OK\r\n"}, // unknown sid still acknowledged
		{"SUB q.foo grp 2\r\n", "+OK\r\n"},
		{"PING\r\n", "PONG\r\n"},
		{"PONG\r\n", ""},
		// Errors replace the +OK.
		{"SUB foo..bar 3\r\n", errInvSubj},
		{"PUB foo $JS.ACK.x 1\r\na\r\n", `-ERR 'Permissions Violation for Publish with Reply of "$JS.ACK.x"'` + "\r\n"},
		// A second CONNECT is acknowledged too.
		{`CONNECT {"verbose":true,"pedantic":false,"protocol":1,"headers":true}` + "\r\n", "+OK\r\n"},
	}
	for _, s := range steps {
		c.send(s.send)
		c.expect(s.want)
	}
	c.sync()
	c.send(`CONNECT {"verbose":false}` + "\r\nPUB foo 0\r\n\r\n")
	c.sync() // verbose is off again: no +OK
	by.send("PING\r\n")
	by.expect("MSG foo 1 2\r\nhi\r\nMSG foo 1 bar 2\r\nhi\r\nHMSG foo 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" +
		"MSG nobody 1 0\r\n\r\nMSG foo 1 0\r\n\r\nPONG\r\n")
}

func TestPedantic(t *testing.T) {
	u := startServer(t, nil)
	by := rawConnect(t, u, defaultConnect)
	by.send("SUB > 1\r\n")
	by.sync()

	c := rawConnect(t, u, `{"verbose":false,"pedantic":true,"protocol":1}`)
	// Publishing to a wildcard subject: -ERR, but the message is still
	// delivered and the connection stays open.
	c.send("SUB foo.* 5\r\nPUB foo.* 2\r\nhi\r\n")
	c.expect(errInvPub + "MSG foo.* 5 2\r\nhi\r\n")
	c.send("PUB foo.> 1\r\nx\r\n")
	c.expect(errInvPub + "MSG foo.> 5 1\r\nx\r\n") // ">" is a literal token here, matched by "*"
	// A malformed subject: -ERR and nothing delivered.
	c.send("PUB foo..bar 1\r\ny\r\n")
	c.expect(errInvPub)
	c.sync()
	by.send("PING\r\n")
	by.expect("MSG foo.* 1 2\r\nhi\r\nMSG foo.> 1 1\r\nx\r\nPONG\r\n")

	// Verbose and pedantic: -ERR, then +OK, then the delivery.
	v := rawConnect(t, u, `{"verbose":true,"pedantic":true,"protocol":1}`)
	v.send("SUB bar.* 1\r\nPUB bar.* 2\r\nhi\r\n")
	v.expect("+OK\r\n" + errInvPub + "+OK\r\nMSG bar.* 1 2\r\nhi\r\n")
	v.sync()
}

// TestConnectDefaults: a CONNECT that omits verbose and pedantic leaves
// both on (the connection's starting options), and a client that never
// sends CONNECT gets +OK replies.
func TestConnectDefaults(t *testing.T) {
	u := startServer(t, nil)
	c := rawConn(t, u)
	c.send("CONNECT {}\r\n")
	c.expect("+OK\r\n")
	c.send("SUB foo.* 1\r\nPUB foo.* 1\r\na\r\n")
	c.expect("+OK\r\n" + errInvPub + "+OK\r\nMSG foo.* 1 1\r\na\r\n")
	c.sync()

	n := rawConn(t, u)
	n.send("SUB foo 1\r\nPUB foo 1\r\na\r\n")
	n.expect("+OK\r\n+OK\r\nMSG foo 1 1\r\na\r\n")
	n.sync()
}

func TestEchoFalseRaw(t *testing.T) {
	u := startServer(t, nil)
	other := rawConnect(t, u, defaultConnect)
	other.send("SUB chat 1\r\n")
	other.sync()
	e := rawConnect(t, u, `{"verbose":false,"pedantic":false,"protocol":1,"echo":false}`)
	e.send("SUB chat 1\r\nPUB chat 4\r\nmine\r\n")
	e.sync() // nothing of its own comes back
	other.send("PUB chat 6\r\ntheirs\r\nPING\r\n")
	other.expect("MSG chat 1 4\r\nmine\r\nMSG chat 1 6\r\ntheirs\r\nPONG\r\n")
	e.expect("MSG chat 1 6\r\ntheirs\r\n")
	e.sync()
	// echo:true (and the default) delivers own messages.
	d := rawConnect(t, u, `{"verbose":false,"pedantic":false,"protocol":1}`)
	d.send("SUB self 9\r\nPUB self 1\r\nz\r\nPING\r\n")
	d.expect("MSG self 9 1\r\nz\r\nPONG\r\n")
}

// TestFraming checks the exact bytes of deliveries and the tolerated
// input forms.
func TestFraming(t *testing.T) {
	u := startServer(t, nil)
	const sub7 = "SUB orders.new 7\r\n"
	steps := []struct{ name, send, want string }{
		{"MSG", "SUB orders.new 7\r\nPUB orders.new 5\r\nhello\r\n", "MSG orders.new 7 5\r\nhello\r\n"},
		{"MSG with reply", sub7 + "PUB orders.new _INBOX.abc.def 5\r\nhello\r\n", "MSG orders.new 7 _INBOX.abc.def 5\r\nhello\r\n"},
		{"empty payload", sub7 + "PUB orders.new 0\r\n\r\n", "MSG orders.new 7 0\r\n\r\n"},
		{"payload with CRLF inside", sub7 + "PUB orders.new 4\r\n\r\n\r\n\r\n", "MSG orders.new 7 4\r\n\r\n\r\n\r\n"},
		{"binary payload", sub7 + "PUB orders.new 4\r\n\x00\xff\r\x01\r\n", "MSG orders.new 7 4\r\n\x00\xff\r\x01\r\n"},
		{"HMSG", sub7 + "HPUB orders.new _INBOX.abc.def 34 39\r\nNATS/1.0\r\nNats-Msg-Id: order-1\r\n\r\nhello\r\n",
			"HMSG orders.new 7 _INBOX.abc.def 34 39\r\nNATS/1.0\r\nNats-Msg-Id: order-1\r\n\r\nhello\r\n"},
		{"HMSG header only", sub7 + "HPUB orders.new 12 12\r\nNATS/1.0\r\n\r\n\r\n", "HMSG orders.new 7 12 12\r\nNATS/1.0\r\n\r\n\r\n"},
		{"HPUB with header size 0 becomes MSG", sub7 + "HPUB orders.new 0 2\r\nab\r\n", "MSG orders.new 7 2\r\nab\r\n"},
		{"header bytes are not validated", sub7 + "HPUB orders.new 5 5\r\nhello\r\n", "HMSG orders.new 7 5 5\r\nhello\r\n"},
		{"lower-case ops", "sub lower 8\r\npub lower 1\r\nx\r\nunsub 8\r\npub lower 1\r\ny\r\n", "MSG lower 8 1\r\nx\r\n"},
		{"mixed-case ops", "Sub mixed 9\r\npUb mixed 1\r\nx\r\nhPuB mixed 12 12\r\nNATS/1.0\r\n\r\n\r\n", "MSG mixed 9 1\r\nx\r\nHMSG mixed 9 12 12\r\nNATS/1.0\r\n\r\n\r\n"},
		{"tabs and runs of spaces", "SUB\t tabs \t\tq1  10\r\nPUB \t tabs\t\treply   2\r\nhi\r\n", "MSG tabs 10 reply 2\r\nhi\r\n"},
		{"nats.go spacing", "SUB spaced  11\r\nPUB spaced 1\r\nz\r\nUNSUB 11 \r\nPUB spaced 1\r\nw\r\n", "MSG spaced 11 1\r\nz\r\n"},
		{"trailing spaces", "SUB trail 12   \r\nPUB trail 1  \r\nz\r\n", "MSG trail 12 1\r\nz\r\n"},
		{"bare LF ends control lines", "SUB lf 13\nPUB lf 2\nhi\r\n", "MSG lf 13 2\r\nhi\r\n"},
		{"duplicate sid keeps the first subscription", "SUB dup.a 14\r\nSUB dup.b 14\r\nPUB dup.b 1\r\nb\r\nPUB dup.a 1\r\na\r\n", "MSG dup.a 14 1\r\na\r\n"},
		{"UNSUB with non-numeric max removes at once", "SUB um 15\r\nUNSUB 15 x\r\nPUB um 1\r\na\r\n", ""},
		{"queue subscription delivery", "SUB work grp 16\r\nPUB work 1\r\nw\r\n", "MSG work 16 1\r\nw\r\n"},
		{"UTF-8 subject", "SUB caf\xc3\xa9.* 17\r\nPUB caf\xc3\xa9.\xe2\x82\xac 1\r\ne\r\n", "MSG caf\xc3\xa9.\xe2\x82\xac 17 1\r\ne\r\n"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			c := rawConnect(t, u, defaultConnect)
			c.send(s.send)
			c.expect(s.want)
			c.sync()
		})
	}
}

// TestSplitWrites sends operations and payloads in small pieces.
func TestSplitWrites(t *testing.T) {
	u := startServer(t, nil)
	c := rawConnect(t, u, defaultConnect)
	msg := "SUB split 1\r\nPUB split reply 11\r\nhello world\r\nHPUB split 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n"
	for i := 0; i < len(msg); i++ {
		c.send(msg[i : i+1])
	}
	c.expect("MSG split 1 reply 11\r\nhello world\r\nHMSG split 1 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n")
	// A large payload in uneven chunks.
	payload := strings.Repeat("0123456789", 20000)
	all := fmt.Sprintf("PUB split %d\r\n%s\r\n", len(payload), payload)
	for len(all) > 0 {
		n := min(len(all), 1+len(all)%4093)
		c.send(all[:n])
		all = all[n:]
	}
	c.expect(fmt.Sprintf("MSG split 1 %d\r\n%s\r\n", len(payload), payload))
	c.sync()
}

// TestMultipleSubscriptionsSameConnection: one MSG per matching
// subscription, each with its own sid.
func TestMultipleSubscriptionsSameConnection(t *testing.T) {
	u := startServer(t, nil)
	c := rawConnect(t, u, defaultConnect)
	c.send("SUB multi 1\r\nSUB multi 2\r\nSUB multi q 3\r\nSUB m* 4\r\nSUB > 5\r\n")
	c.sync()
	c.send("PUB multi 1\r\na\r\nPING\r\n")
	var got []string
	for {
		line := c.readLine()
		if line == "PONG\r\n" {
			break
		}
		c.expect("a\r\n")
		got = append(got, line)
	}
	sort.Strings(got)
	want := []string{"MSG multi 1 1\r\n", "MSG multi 2 1\r\n", "MSG multi 3 1\r\n", "MSG multi 5 1\r\n"}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("got %q, want %q (any order)", got, want)
	}
}

// TestNoRespondersFrame checks the exact 503 status message.
func TestNoRespondersFrame(t *testing.T) {
	u := startServer(t, nil)
	c := rawConnect(t, u, defaultConnect)
	c.send("SUB _INBOX.x.* 1\r\nPUB orders.new _INBOX.x.y 5\r\nhello\r\n")
	c.expect("HMSG _INBOX.x.y 1 42 42\r\nNATS/1.0 503\r\nNats-Subject: orders.new\r\n\r\n\r\n")
	c.sync()
	// The header length is 32 + the length of the requested subject, and
	// an HPUB request gets the same answer.
	c.send("HPUB a.much.longer.subject _INBOX.x.z 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
	c.expect("HMSG _INBOX.x.z 1 53 53\r\nNATS/1.0 503\r\nNats-Subject: a.much.longer.subject\r\n\r\n\r\n")
	c.sync()
	// An exact (old-style) inbox subscription counts too.
	c.send("SUB _INBOX.old 2\r\nPUB svc _INBOX.old 0\r\n\r\n")
	c.expect("HMSG _INBOX.old 2 35 35\r\nNATS/1.0 503\r\nNats-Subject: svc\r\n\r\n\r\n")
	c.sync()
	// No subscription of the requester on the reply subject: nothing.
	c.send("PUB orders.new not.subscribed 1\r\nx\r\n")
	c.sync()
	// Any reply prefix works, not only _INBOX.
	c.send("SUB my.replies.> 3\r\nPUB svc my.replies.1 0\r\n\r\n")
	c.expect("HMSG my.replies.1 3 35 35\r\nNATS/1.0 503\r\nNats-Subject: svc\r\n\r\n\r\n")
	c.sync()
	// A subscriber exists: no 503, the message is delivered.
	c.send("SUB svc 4\r\nPUB svc _INBOX.x.w 1\r\nq\r\n")
	c.expect("MSG svc 4 _INBOX.x.w 1\r\nq\r\n")
	c.sync()

	// Another connection's subscription on the reply subject does not
	// count: the 503 goes only to the requester's own subscription.
	o := rawConnect(t, u, defaultConnect)
	o.send("PUB nobody.here _INBOX.x.v 0\r\n\r\n")
	o.sync()
	c.sync()

	// Without no_responders in CONNECT: nothing.
	n := rawConnect(t, u, `{"verbose":false,"pedantic":false,"protocol":1,"headers":true}`)
	n.send("SUB _INBOX.n.* 1\r\nPUB nobody.here _INBOX.n.1 0\r\n\r\n")
	n.sync()

	// echo:false and the only subscriber is the requester itself: the
	// message is not delivered, so it is a no-responders.
	e := rawConnect(t, u, `{"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,"echo":false}`)
	e.send("SUB self.svc 1\r\nSUB _INBOX.e.* 2\r\nPUB self.svc _INBOX.e.1 0\r\n\r\n")
	e.expect("HMSG _INBOX.e.1 2 40 40\r\nNATS/1.0 503\r\nNats-Subject: self.svc\r\n\r\n\r\n")
	e.sync()
}
