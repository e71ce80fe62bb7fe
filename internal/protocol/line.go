package protocol

import "github.com/cairnmq/cairn/internal/wireline"

// This file handles complete control lines; wireline accumulates a line split across reads.

// line processes one complete control line, without its \n.
func (p *Parser) line(line []byte) error {
	op := matchOp(line)
	arg, err := grammar.Arg(line, int(op), p.maxLine)
	if err != nil {
		return err
	}
	return p.dispatch(op, arg)
}

// dispatch handles an operation; arg is its argument (nil for PING, PONG and +OK).
func (p *Parser) dispatch(op opCode, arg []byte) error {
	switch op {
	case opPub:
		return p.pubArgs(arg)
	case opHPub:
		return p.hpubArgs(arg)
	case opSub:
		return p.sub(arg)
	case opUnsub:
		return p.unsub(arg)
	case opConnect:
		return p.h.ProcessConnect(wireline.Trim(arg))
	case opInfo:
		return p.h.ProcessInfo(wireline.Trim(arg))
	}
	return p.control(op)
}

// control handles PING, PONG, +OK and -ERR, the operations whose argument is ignored. (A
// separate switch keeps dispatch's small enough to compile without a jump table, which cost the
// PUB path a few instructions.)
func (p *Parser) control(op opCode) error {
	switch op {
	case opPing:
		return p.h.ProcessPing()
	case opPong:
		return p.h.ProcessPong()
	case opOK:
		return nil
	}
	return ErrClientErr // opErr
}

// pubArgs reads "PUB <subject> [reply] <size>" and waits for the payload.
func (p *Parser) pubArgs(arg []byte) error {
	n := split(&p.args, arg, false)
	if n != 2 && n != 3 {
		return ErrBadArgs
	}
	p.pub = pendingPub{subject: p.args[0], hdr: -1, size: wireline.ParseSize(p.args[n-1])}
	if n == 3 {
		p.pub.reply = p.args[1]
	}
	return p.expectPayload()
}

// hpubArgs reads "HPUB <subject> [reply] <hdr size> <total size>" and waits for the payload.
func (p *Parser) hpubArgs(arg []byte) error {
	if p.noHeaders {
		return ErrNoHeaders
	}
	n := split(&p.args, arg, false)
	if n != 3 && n != 4 {
		return ErrBadArgs
	}
	p.pub = pendingPub{subject: p.args[0], hdr: wireline.ParseSize(p.args[n-2]), size: wireline.ParseSize(p.args[n-1])}
	if n == 4 {
		p.pub.reply = p.args[1]
	}
	if p.pub.hdr < 0 || p.pub.hdr > p.pub.size {
		return ErrBadArgs
	}
	return p.expectPayload()
}

// expectPayload checks the pending size and switches to reading the payload.
func (p *Parser) expectPayload() error {
	switch {
	case p.pub.size < 0:
		return ErrBadArgs
	case p.pub.size > p.maxPayload:
		return ErrMaxPayload
	}
	p.state = statePayload
	return nil
}

// sub reads "SUB <subject> [queue] <sid>".
func (p *Parser) sub(arg []byte) error {
	n := split(&p.args, arg, true)
	switch n {
	case 2:
		return p.h.ProcessSub(p.args[0], nil, p.args[1])
	case 3:
		return p.h.ProcessSub(p.args[0], p.args[1], p.args[2])
	}
	return ErrBadArgs
}

// unsub reads "UNSUB <sid> [max]". An invalid max is reported as 0, as nats-server treats it.
func (p *Parser) unsub(arg []byte) error {
	n := split(&p.args, arg, true)
	switch n {
	case 1:
		return p.h.ProcessUnsub(p.args[0], 0)
	case 2:
		return p.h.ProcessUnsub(p.args[0], int64(max(wireline.ParseSize(p.args[1]), 0)))
	}
	return ErrBadArgs
}
