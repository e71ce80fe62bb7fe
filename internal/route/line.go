package route

// This file handles complete and partial control lines.

// line processes one complete control line, without its LF.
func (p *Parser) line(line []byte) error {
	op := matchOp(line)
	switch op {
	case opBad, opPartial:
		return ErrUnknownOp
	case opPing:
		return p.h.ProcessPing()
	case opPong:
		return p.h.ProcessPong()
	case opOK:
		return nil
	}
	arg, err := p.argOf(op, line)
	if err != nil {
		return err
	}
	return p.dispatch(op, arg)
}

// argOf returns the argument of op's complete line: after the name and its
// whitespace, without a trailing CR. It fails with ErrUnknownOp when a
// required separator is missing and with ErrControlLine when the argument
// is longer than MaxControlLine.
func (p *Parser) argOf(op opCode, line []byte) ([]byte, error) {
	n := len(opNames[op])
	if needsSep(op) && (len(line) == n || !isSpace(line[n])) {
		return nil, ErrUnknownOp
	}
	arg := dropCR(line[skipSpace(line, n):])
	if len(arg) > p.maxLine {
		return nil, ErrControlLine
	}
	return arg, nil
}

// dispatch handles an operation that has an argument.
func (p *Parser) dispatch(op opCode, arg []byte) error {
	switch op {
	case opInfo:
		return p.h.ProcessInfo(trim(arg))
	case opConnect:
		return p.h.ProcessConnect(trim(arg))
	case opSub:
		return p.sub(arg)
	case opUnsub:
		return p.unsub(arg)
	case opMsg, opHMsg:
		return p.msgLine(op, arg)
	}
	if err := p.h.ProcessErr(trim(arg)); err != nil { // opErr
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
		return p.h.ProcessSub(a[0], a[1], a[2], max(parseSize(a[3]), 1))
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
	size := parseSize(a[len(a)-1])
	if op == opHMsg {
		m.HdrLen = parseSize(a[len(a)-2])
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

// accumulate appends data, a piece of a control line, to scratch, at most
// lineCap bytes at a time, compacting after each piece, so scratch never
// grows past lineCap even when a peer never sends LF.
func (p *Parser) accumulate(data []byte) error {
	if cap(p.scratch) < p.lineCap {
		p.scratch = append(make([]byte, 0, p.lineCap), p.scratch...)
	}
	for len(data) > 0 {
		n := min(len(data), p.lineCap-len(p.scratch))
		p.scratch = append(p.scratch, data[:n]...)
		data = data[n:]
		if err := p.compact(); err != nil {
			return err
		}
	}
	return nil
}

// compact checks the partial line in scratch and shrinks it without
// changing its meaning: it fails early on an unknown operation or an
// over-long argument, drops what PING, PONG and +OK ignore, and collapses
// the whitespace after the operation name to one space.
func (p *Parser) compact() error {
	op := matchOp(p.scratch)
	switch {
	case op == opBad:
		return ErrUnknownOp
	case op == opPartial:
		return nil
	case ignoresRest(op):
		p.scratch = p.scratch[:len(opNames[op])]
		return nil
	}
	n := len(opNames[op])
	if len(p.scratch) == n {
		return nil
	}
	if needsSep(op) && !isSpace(p.scratch[n]) {
		return ErrUnknownOp
	}
	p.collapse(n)
	if len(dropCR(p.scratch[skipSpace(p.scratch, n):])) > p.maxLine {
		return ErrControlLine
	}
	return nil
}

// collapse replaces a run of two or more spaces and tabs at scratch[n:] by
// one space.
func (p *Parser) collapse(n int) {
	j := skipSpace(p.scratch, n)
	if j-n < 2 {
		return
	}
	p.scratch[n] = ' '
	m := copy(p.scratch[n+1:], p.scratch[j:])
	p.scratch = p.scratch[:n+1+m]
}
