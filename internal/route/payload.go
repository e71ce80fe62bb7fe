package route

// This file handles the payload that follows an RMSG or HMSG control line.

// crlf ends every line and every payload.
const crlf = "\r\n"

// payload reads the pending payload and its CRLF from buf, right after the
// control line. A complete payload is delivered straight out of buf; a
// partial one is stashed in scratch with the control line's argument.
func (p *Parser) payload(buf []byte) ([]byte, error) {
	end := p.pend.size + len(crlf)
	if len(buf) < end {
		return nil, p.stash(buf)
	}
	if buf[end-2] != '\r' || buf[end-1] != '\n' {
		return nil, ErrUnknownOp
	}
	p.state = stateLine
	return buf[end:], p.deliver(buf[:p.pend.size])
}

// stash copies the control line's argument, then part (the start of the
// payload), into scratch, sized for the whole message so that later pieces
// never reallocate. The argument may already alias scratch (a split control
// line): append moves it to the front with memmove semantics, which never
// overwrites bytes not yet copied.
func (p *Parser) stash(part []byte) error {
	if badTrailer(part, p.pend.size) {
		return ErrUnknownOp
	}
	arg := p.pend.arg
	need := len(arg) + p.pend.size + len(crlf)
	buf := p.scratch[:0]
	if cap(buf) < need {
		buf = make([]byte, 0, max(need, p.lineCap))
	}
	buf = append(buf, arg...)
	p.pend.arg = buf[:len(arg):len(arg)]
	p.payOff = len(arg)
	p.scratch = append(buf, part...)
	return nil
}

// resumePayload adds the next piece of a stashed payload and delivers the
// message once complete, splitting its stashed argument again.
func (p *Parser) resumePayload(buf []byte) ([]byte, error) {
	want := p.payOff + p.pend.size + len(crlf) - len(p.scratch)
	n := min(want, len(buf))
	p.scratch = append(p.scratch, buf[:n]...)
	msg := p.scratch[p.payOff:]
	if badTrailer(msg, p.pend.size) {
		return nil, ErrUnknownOp
	}
	if n < want {
		return nil, nil
	}
	p.state = stateLine
	if _, err := p.msgArgs(p.pend.op, p.pend.arg); err != nil {
		return nil, err // cannot happen: the same bytes passed at the control line
	}
	err := p.deliver(msg[:p.pend.size])
	p.release()
	return buf[n:], err
}

// badTrailer reports whether the bytes after the size-byte payload at the
// start of b, as far as they are present, differ from CRLF.
func badTrailer(b []byte, size int) bool {
	return (len(b) > size && b[size] != '\r') || (len(b) > size+1 && b[size+1] != '\n')
}

// deliver hands the complete message to the Handler.
func (p *Parser) deliver(payload []byte) error {
	p.msg.Payload = payload
	return p.h.ProcessMsg(&p.msg)
}

// release empties scratch after a stashed message, dropping it when a big
// payload grew it.
func (p *Parser) release() {
	if cap(p.scratch) > max(scratchKeep, p.lineCap) {
		p.scratch = nil
		return
	}
	p.scratch = p.scratch[:0]
}
