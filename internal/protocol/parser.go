package protocol

import (
	"bytes"

	"github.com/cairnmq/cairn/internal/wireline"
)

// Handler receives the operations the Parser finds on a client connection, in stream order
// (docs/protocol.md 1.3). Byte slices alias the buffer given to Parse or the Parser's scratch buffer
// and are valid only during the call: copy what must be retained. A non-nil error returned by a
// Handler method stops Parse, which returns that same error unchanged; the Parser then stays
// failed. Handler methods must not call the Parser's Parse.
type Handler interface {
	// ProcessConnect receives the argument of CONNECT (normally JSON) with surrounding
	// whitespace and \r removed; it may be empty.
	ProcessConnect(arg []byte) error
	// ProcessInfo receives the argument of an INFO sent by the client, trimmed like CONNECT's.
	// nats-server decodes it as JSON and otherwise ignores it on client connections.
	ProcessInfo(arg []byte) error
	// ProcessPub receives a complete PUB or HPUB. hdrLen is -1 for PUB and the header byte count
	// for HPUB (0 <= hdrLen <= len(msg)). msg is the whole payload (headers then body for HPUB)
	// without the trailing \r\n. reply is nil when absent.
	ProcessPub(subject, reply []byte, hdrLen int, msg []byte) error
	// ProcessSub receives a SUB. queue is nil when absent.
	ProcessSub(subject, queue, sid []byte) error
	// ProcessUnsub receives an UNSUB. max is the automatic-unsubscribe count, 0 when absent or
	// not a valid size (nats-server removes the subscription at once in both cases).
	ProcessUnsub(sid []byte, max int64) error
	// ProcessPing receives a PING.
	ProcessPing() error
	// ProcessPong receives a PONG.
	ProcessPong() error
}

// Default limits (docs/protocol.md 1.9; nats-server const.go MAX_CONTROL_LINE_SIZE, MAX_PAYLOAD_SIZE).
const (
	// DefaultMaxControlLine is the default control-line limit in bytes.
	DefaultMaxControlLine = 4096
	// DefaultMaxPayload is the default payload limit in bytes (1 MiB).
	DefaultMaxPayload = 1 << 20
)

// Config holds one connection's parser limits. A zero or negative field means its default.
type Config struct {
	// MaxControlLine is the largest control-line argument in bytes (docs/protocol.md 1.1): the bytes
	// after the operation name and its whitespace, without the line terminator. Default 4096.
	MaxControlLine int
	// MaxPayload is the largest PUB/HPUB size in bytes, headers included (docs/protocol.md 1.1).
	// Default 1048576.
	MaxPayload int
	// ExactPayload uses MaxPayload as given, even when zero or negative: a
	// limit of 0 bytes lets only empty payloads through, a negative one
	// none (an account's or user JWT's max_payload, which nats-server
	// v2.15.2 compares as given in client.go processPub).
	ExactPayload bool
}

// withDefaults returns c with zero or negative fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.MaxControlLine <= 0 {
		c.MaxControlLine = DefaultMaxControlLine
	}
	if c.MaxPayload <= 0 && !c.ExactPayload {
		c.MaxPayload = DefaultMaxPayload
	}
	return c
}

// scratchKeep is the scratch capacity kept after a split message; a larger buffer (grown for a
// big payload) is released so idle connections do not pin it.
const scratchKeep = 64 << 10

// parserState says what the next input byte belongs to.
type parserState uint8

const (
	stateLine    parserState = iota // a control line (partial if scratch is not empty)
	statePayload                    // the payload of pub, stashed in scratch from payOff
)

// pendingPub is a PUB or HPUB whose control line has been read.
type pendingPub struct {
	subject, reply []byte
	hdr            int // header bytes, -1 for PUB
	size           int // payload bytes, headers included
}

// Parser turns a client's byte stream into Handler calls (docs/protocol.md 1.1, 1.3; nats-server
// v2.15.2 server/parser.go). It is not safe for concurrent use: one goroutine feeds it.
//
// Complete operations are parsed straight out of the buffer given to Parse. Only a control line
// or payload split across Parse calls is copied, into scratch, whose capacity never exceeds
// MaxControlLine+MaxPayload+wireline.Slack.
type Parser struct {
	h          Handler
	maxLine    int     // Config.MaxControlLine
	lineCap    int     // maxLine + wireline.Slack: capacity reserved for a partial control line
	maxPayload int     // Config.MaxPayload
	next       *Config // limits given to SetLimits, applied when the next operation starts
	noHeaders  bool
	// awaitConnect, when set, is called before an operation that does not
	// start with 'C' or 'c' (SetAwaitConnect).
	awaitConnect func() error
	err          error // sticky: set by the first failure

	state   parserState
	scratch []byte // the partial line, or stashed subject+reply then the partial payload
	payOff  int    // statePayload: where the payload starts in scratch
	pub     pendingPub
	args    [maxArgs][]byte
}

// NewParser returns a Parser that reports to h, with cfg's limits (zero fields take defaults).
// HPUB is accepted until SetHeaders(false) is called.
func NewParser(cfg Config, h Handler) *Parser {
	cfg = cfg.withDefaults()
	return &Parser{
		h:          h,
		maxLine:    cfg.MaxControlLine,
		lineCap:    cfg.MaxControlLine + wireline.Slack,
		maxPayload: cfg.MaxPayload,
	}
}

// SetLimits changes the parser's limits (zero fields take defaults), for a server whose
// configuration is reloaded. They apply from the next operation that starts after the call: an
// operation already partly read keeps the limits it began with, so the buffers sized for it stay
// valid. Like Parse, it must not be called concurrently with Parse.
func (p *Parser) SetLimits(cfg Config) {
	cfg = cfg.withDefaults()
	p.next = &cfg
	p.applyLimits()
}

// applyLimits installs the limits given to SetLimits once no operation is partly read.
func (p *Parser) applyLimits() {
	if p.next == nil || p.state != stateLine || len(p.scratch) > 0 {
		return
	}
	p.maxLine, p.lineCap, p.maxPayload = p.next.MaxControlLine, p.next.MaxControlLine+wireline.Slack, p.next.MaxPayload
	p.next = nil
}

// SetHeaders enables or disables HPUB. A server matching nats-server calls SetHeaders(false)
// before the first Parse and SetHeaders(client's "headers" flag) from ProcessConnect; an HPUB
// while disabled fails with ErrNoHeaders at its control line (docs/protocol.md 1.3). It may be called
// from a Handler method and applies to the following operations.
func (p *Parser) SetHeaders(enabled bool) { p.noHeaders = !enabled }

// SetAwaitConnect makes the parser call check when an operation begins with a byte other than 'C'
// or 'c' (so is not a CONNECT), as soon as that byte is read and before anything else of it is
// buffered: a server that requires authentication refuses anything but CONNECT first (nats-server
// v2.15.2 parser.go, awaitingAuth). If check returns nil the parser forgets it and goes on; an
// error stops Parse, which returns it. A nil check (the default) turns this off; the server calls
// SetAwaitConnect(nil) from ProcessConnect once the client authenticated. It may be called from a
// Handler method.
func (p *Parser) SetAwaitConnect(check func() error) { p.awaitConnect = check }

// Parse consumes buf, any piece of the client's stream, and calls the Handler once for each
// operation completed by it, in order. Partial state is kept in the Parser between calls; buf
// itself is never referenced after Parse returns, so the caller may reuse it.
//
// On failure Parse returns one of the package's *Error values (ErrUnknownOp, ErrControlLine,
// ErrMaxPayload, ErrBadArgs, ErrNoHeaders, ErrClientErr) or a Handler's error unchanged. Operations
// before the failing one have already been delivered; none after it are. The Parser is then
// failed: every later call returns the same error without calling the Handler.
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

// step consumes one operation, or the rest of buf when it ends inside one, and returns what is
// left of buf.
func (p *Parser) step(buf []byte) ([]byte, error) {
	if p.next != nil {
		p.applyLimits()
	}
	if p.state == statePayload {
		return p.resumePayload(buf)
	}
	if p.awaitConnect != nil && len(p.scratch) == 0 && buf[0] != 'C' && buf[0] != 'c' {
		check := p.awaitConnect
		if err := check(); err != nil {
			return nil, err
		}
		p.awaitConnect = nil
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
	p.args = [maxArgs][]byte{}
	if p.state != statePayload {
		p.pub = pendingPub{}
	}
}
