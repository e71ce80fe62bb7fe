package route

import "github.com/cairnmq/cairn/internal/wireline"

// This file handles complete control lines; wireline accumulates a line split across reads.

// line processes one complete control line, without its LF.
func (p *Parser) line(line []byte) error {
	op := matchOp(line)
	arg, err := grammar.Arg(line, int(op), p.maxLine)
	if err != nil {
		return err
	}
	return p.dispatch(op, arg)
}

// dispatch handles an operation; arg is its argument (nil for PING, PONG
// and +OK).
func (p *Parser) dispatch(op opCode, arg []byte) error {
	switch op {
	case opMsg, opHMsg:
		return p.msgLine(op, arg)
	case opSub:
		return p.sub(arg)
	case opUnsub:
		return p.unsub(arg)
	case opInfo:
		return p.h.ProcessInfo(wireline.Trim(arg))
	case opConnect:
		return p.h.ProcessConnect(wireline.Trim(arg))
	}
	return p.control(op, arg)
}

// control handles PING, PONG, +OK and -ERR. (A separate switch keeps
// dispatch's small enough to compile without a jump table, which cost the
// message path a few instructions.)
func (p *Parser) control(op opCode, arg []byte) error {
	switch op {
	case opPing:
		return p.h.ProcessPing()
	case opPong:
		return p.h.ProcessPong()
	case opOK:
		return nil
	}
	if err := p.h.ProcessErr(wireline.Trim(arg)); err != nil { // opErr
		return err
	}
	return ErrPeerErr
}

// sub reads "RS+ <account> <subject> [<queue> <weight>]".
func (p *Parser) sub(arg []byte) error {
	p.args = split(p.args, arg)
	a := p.args
	switch len(a) {
	case 2:
		return p.h.ProcessSub(a[0], a[1], nil, 0)
	case 4:
		return p.h.ProcessSub(a[0], a[1], a[2], max(wireline.ParseSize(a[3]), 1))
	}
	return ErrBadArgs
}

// unsub reads "RS- <account> <subject> [<queue>]".
func (p *Parser) unsub(arg []byte) error {
	p.args = split(p.args, arg)
	a := p.args
	switch len(a) {
	case 2:
		return p.h.ProcessUnsub(a[0], a[1], nil)
	case 3:
		return p.h.ProcessUnsub(a[0], a[1], a[2])
	}
	return ErrBadArgs
}

// msgLine reads the control line of an RMSG or HMSG, checks its sizes and
// waits for the payload.
func (p *Parser) msgLine(op opCode, arg []byte) error {
	size, err := p.msgArgs(op, arg)
	if err != nil {
		return err
	}
	if size > p.maxPayload {
		return ErrMaxPayload
	}
	p.pend = pendingMsg{op: op, arg: arg, size: size}
	p.state = statePayload
	return nil
}

// msgArgs splits an RMSG or HMSG argument into p.msg (everything but the
// payload) and returns the total size. The layouts are in the package
// comment; they follow nats-server v2.15.2 processRoutedMsgArgs and
// processRoutedHeaderMsgArgs.
func (p *Parser) msgArgs(op opCode, arg []byte) (int, error) {
	p.args = split(p.args, arg)
	a := p.args
	sizes := 1 // RMSG: <size>; HMSG: <hdr size> <total size>
	if op == opHMsg {
		sizes = 2
	}
	m := &p.msg
	*m = Msg{HdrLen: -1}
	switch n := len(a); {
	case n < 2+sizes:
		return 0, ErrBadArgs
	case n == 3+sizes:
		m.Reply = a[2]
	case n > 3+sizes:
		if err := p.queueArgs(a[2 : n-sizes]); err != nil {
			return 0, err
		}
	}
	m.Account, m.Subject = a[0], a[1]
	size := wireline.ParseSize(a[len(a)-1])
	if op == opHMsg {
		m.HdrLen = wireline.ParseSize(a[len(a)-2])
		if m.HdrLen < 0 || m.HdrLen > size {
			return 0, ErrBadArgs
		}
	}
	if size < 0 {
		return 0, ErrBadArgs
	}
	return size, nil
}

// queueArgs reads "+ <reply> <queue>..." or "| <queue>...".
func (p *Parser) queueArgs(a [][]byte) error {
	if len(a[0]) != 1 {
		return ErrBadArgs
	}
	switch a[0][0] {
	case '+':
		p.msg.Reply, p.msg.Queues = a[1], a[2:]
	case '|':
		p.msg.Queues = a[1:]
	default:
		return ErrBadArgs
	}
	return nil
}
