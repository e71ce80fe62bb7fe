package route

import (
	"bytes"

	"github.com/cairnmq/cairn/internal/wireline"
)

// Handler receives the operations a Parser finds on a route connection, in
// stream order. Byte slices alias the buffer given to Parse or the Parser's
// scratch buffer and are valid only during the call: copy what must be
// retained. A non-nil error returned by a Handler method stops Parse, which
// returns that same error unchanged; the Parser then stays failed. Handler
// methods must not call the Parser's Parse.
type Handler interface {
	// ProcessInfo receives the argument of INFO (JSON, see Info) with
	// surrounding whitespace and CR removed; it may be empty.
	ProcessInfo(arg []byte) error
	// ProcessConnect receives the argument of CONNECT (JSON, see Connect),
	// trimmed like INFO's.
	ProcessConnect(arg []byte) error
	// ProcessPing receives a PING.
	ProcessPing() error
	// ProcessPong receives a PONG.
	ProcessPong() error
	// ProcessSub receives an RS+. queue is nil for a plain subscription;
	// weight is the peer's member count of the queue group (at least 1: a
	// missing or malformed weight counts as 1, as in nats-server) and 0 for
	// a plain subscription.
	ProcessSub(account, subject, queue []byte, weight int) error
	// ProcessUnsub receives an RS-; queue is nil for a plain subscription.
	ProcessUnsub(account, subject, queue []byte) error
	// ProcessMsg receives a complete RMSG or HMSG. m and everything it
	// points to are valid only during the call.
	ProcessMsg(m *Msg) error
	// ProcessErr receives the text after -ERR (quotes included, trimmed).
	// Parse then fails with ErrPeerErr unless ProcessErr returned an error.
	ProcessErr(text []byte) error
}

// Msg is one RMSG or HMSG.
type Msg struct {
	Account []byte
	Subject []byte
	Reply   []byte   // nil when absent
	Queues  [][]byte // the queue groups the sender chose this server for; empty when none
	// HdrLen is -1 for RMSG and the header block's length for HMSG
	// (0 <= HdrLen <= len(Payload)).
	HdrLen int
	// Payload is the header block (HMSG) followed by the body, without the
	// trailing CRLF.
	Payload []byte
}

// Default limits: nats-server v2.15.2 lets a route's control line be 16
// times max_control_line (parser.go overMaxControlLineLimit) and sets no
// payload limit on routes; cairn's default payload limit is its default
// max_pending, the most a peer's client could make it buffer anyway.
const (
	// DefaultMaxControlLine is the default route control-line limit in
	// bytes: 16 x 4096.
	DefaultMaxControlLine = 16 * 4096
	// DefaultMaxPayload is the default route payload limit in bytes (64 MiB).
	DefaultMaxPayload = 64 << 20
)

// Config holds one route connection's parser limits. A zero or negative
// field means its default.
type Config struct {
	// MaxControlLine is the largest control-line argument in bytes: the
	// bytes after the operation name and its whitespace, without the line
	// terminator.
	MaxControlLine int
	// MaxPayload is the largest RMSG/HMSG size in bytes, headers included.
	MaxPayload int
}

func (c Config) withDefaults() Config {
	if c.MaxControlLine <= 0 {
		c.MaxControlLine = DefaultMaxControlLine
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	return c
}

// scratchKeep is the scratch capacity kept after a split message; a larger
// buffer (grown for a big payload) is released.
const scratchKeep = 64 << 10

type parserState uint8

const (
	stateLine    parserState = iota // a control line (partial if scratch is not empty)
	statePayload                    // the payload of an RMSG or HMSG
)

// pendingMsg is an RMSG or HMSG whose control line has been read.
type pendingMsg struct {
	op   opCode
	arg  []byte // the control line's argument; aliases the caller's buffer or scratch
	size int    // payload bytes, headers included
}

// Parser turns a route's byte stream into Handler calls. It is not safe
// for concurrent use: one goroutine feeds it. Complete operations are
// parsed straight out of the buffer given to Parse; only a control line or
// message split across Parse calls is copied, into scratch, whose capacity
// never exceeds MaxControlLine+MaxPayload+wireline.Slack.
type Parser struct {
	h          Handler
	maxLine    int
	lineCap    int
	maxPayload int
	err        error // sticky: set by the first failure

	state   parserState
	scratch []byte // the partial line, or the stashed argument then the partial payload
	payOff  int    // statePayload with a stash: where the payload starts in scratch
	pend    pendingMsg
	args    [][]byte
	msg     Msg
}

// NewParser returns a Parser that reports to h, with cfg's limits.
func NewParser(cfg Config, h Handler) *Parser {
	cfg = cfg.withDefaults()
	return &Parser{
		h:          h,
		maxLine:    cfg.MaxControlLine,
		lineCap:    cfg.MaxControlLine + wireline.Slack,
		maxPayload: cfg.MaxPayload,
	}
}

// Parse consumes buf, any piece of the route's stream, and calls the
// Handler once per operation completed by it, in order. buf is never
// referenced after Parse returns.
//
// On failure Parse returns one of the package's *Error values
// (ErrUnknownOp, ErrControlLine, ErrMaxPayload, ErrBadArgs, ErrPeerErr) or
// a Handler's error unchanged. Operations before the failing one have been
// delivered; none after it are. The Parser then stays failed.
func (p *Parser) Parse(buf []byte) error {
	if p.err != nil {
		return p.err
	}
	var err error
	for len(buf) > 0 && err == nil {
		buf, err = p.step(buf)
	}
	p.forget()
	if err != nil {
		p.err, p.scratch = err, nil
	}
	return err
}

// step consumes one operation, or the rest of buf when it ends inside one.
func (p *Parser) step(buf []byte) ([]byte, error) {
	if p.state == statePayload {
		return p.resumePayload(buf)
	}
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil, grammar.Accumulate(&p.scratch, buf, p.maxLine)
	}
	line := buf[:i]
	if len(p.scratch) > 0 {
		if err := grammar.Accumulate(&p.scratch, line, p.maxLine); err != nil {
			return nil, err
		}
		line, p.scratch = p.scratch, p.scratch[:0]
	}
	if err := p.line(line); err != nil {
		return nil, err
	}
	if p.state == statePayload {
		return p.payload(buf[i+1:])
	}
	return buf[i+1:], nil
}

// forget drops references into the caller's buffer once Parse returns.
func (p *Parser) forget() {
	clear(p.args[:cap(p.args)])
	p.msg = Msg{}
	if p.state != statePayload {
		p.pend = pendingMsg{}
	}
}
