package protocol

// This file handles complete and partial control lines.

// line processes one complete control line, without its \n.
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

// argOf returns the argument of op's complete line: after the name and its whitespace, without a
// trailing \r. It fails with ErrUnknownOp when a required separator is missing and with
// ErrControlLine when the argument is longer than MaxControlLine (nats-server
// overMaxControlLineLimit).
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
	case opPub:
		return p.pubArgs(arg)
	case opHPub:
		return p.hpubArgs(arg)
	case opSub:
		return p.sub(arg)
	case opUnsub:
		return p.unsub(arg)
	case opConnect:
		return p.h.ProcessConnect(trim(arg))
	case opInfo:
		return p.h.ProcessInfo(trim(arg))
	}
	return ErrClientErr // opErr
}

// pubArgs reads "PUB <subject> [reply] <size>" and waits for the payload.
func (p *Parser) pubArgs(arg []byte) error {
	n := split(&p.args, arg, false)
	if n != 2 && n != 3 {
		return ErrBadArgs
	}
	p.pub = pendingPub{subject: p.args[0], hdr: -1, size: parseSize(p.args[n-1])}
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
	p.pub = pendingPub{subject: p.args[0], hdr: parseSize(p.args[n-2]), size: parseSize(p.args[n-1])}
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
		return p.h.ProcessUnsub(p.args[0], int64(max(parseSize(p.args[1]), 0)))
	}
	return ErrBadArgs
}

// accumulate appends data, a piece of a control line, to scratch. It appends at most lineCap
// bytes at a time and compacts after each piece, so scratch never grows past lineCap even when a
// client never sends \n.
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

// compact checks the partial line in scratch and shrinks it without changing its meaning: it
// fails early on an unknown operation (as nats-server does at the first bad byte) or an
// over-long argument, drops what PING, PONG and +OK ignore, and collapses the whitespace after
// the operation name to one space.
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

// collapse replaces a run of two or more spaces and tabs at scratch[n:] by one space.
func (p *Parser) collapse(n int) {
	j := skipSpace(p.scratch, n)
	if j-n < 2 {
		return
	}
	p.scratch[n] = ' '
	m := copy(p.scratch[n+1:], p.scratch[j:])
	p.scratch = p.scratch[:n+1+m]
}
