package protocol

// This file handles the payload that follows a PUB or HPUB control line.

// payload reads the pending payload and its \r\n from buf, right after the control line. A
// complete payload is delivered straight out of buf; a partial one is stashed in scratch.
func (p *Parser) payload(buf []byte) ([]byte, error) {
	end := p.pub.size + len(CRLF)
	if len(buf) < end {
		return nil, p.stash(buf)
	}
	if buf[end-2] != '\r' || buf[end-1] != '\n' {
		return nil, ErrUnknownOp
	}
	p.state = stateLine
	return buf[end:], p.deliver(buf[:p.pub.size])
}

// stash copies the pending subject and reply, then part (the start of the payload), into scratch,
// sized for the whole payload so that later pieces never reallocate. The subject and reply may
// already alias scratch (when the control line was split): append moves them with memmove
// semantics to the front, which never overwrites bytes not yet copied.
func (p *Parser) stash(part []byte) error {
	if badTrailer(part, p.pub.size) {
		return ErrUnknownOp
	}
	s, r := p.pub.subject, p.pub.reply
	k := len(s) + len(r)
	need := k + p.pub.size + len(CRLF)
	buf := p.scratch[:0]
	if cap(buf) < need {
		buf = make([]byte, 0, max(need, p.lineCap))
	}
	buf = append(append(buf, s...), r...)
	p.pub.subject = buf[:len(s):len(s)]
	if r != nil {
		p.pub.reply = buf[len(s):k:k]
	}
	p.payOff = k
	p.scratch = append(buf, part...)
	return nil
}

// resumePayload adds the next piece of a stashed payload and delivers it once complete.
func (p *Parser) resumePayload(buf []byte) ([]byte, error) {
	want := p.payOff + p.pub.size + len(CRLF) - len(p.scratch)
	n := min(want, len(buf))
	p.scratch = append(p.scratch, buf[:n]...)
	msg := p.scratch[p.payOff:]
	if badTrailer(msg, p.pub.size) {
		return nil, ErrUnknownOp
	}
	if n < want {
		return nil, nil
	}
	p.state = stateLine
	err := p.deliver(msg[:p.pub.size])
	p.release()
	return buf[n:], err
}

// badTrailer reports whether the bytes after the size-byte payload at the start of b, as far as
// they are present, differ from \r\n. Checking each byte as it arrives fails as early as
// nats-server's MSG_END_R and MSG_END_N states.
func badTrailer(b []byte, size int) bool {
	return (len(b) > size && b[size] != '\r') || (len(b) > size+1 && b[size+1] != '\n')
}

// deliver hands the complete pending PUB or HPUB to the Handler.
func (p *Parser) deliver(msg []byte) error {
	return p.h.ProcessPub(p.pub.subject, p.pub.reply, p.pub.hdr, msg)
}

// release empties scratch after a stashed payload, dropping it when a big payload grew it.
func (p *Parser) release() {
	if cap(p.scratch) > max(scratchKeep, p.lineCap) {
		p.scratch = nil
		return
	}
	p.scratch = p.scratch[:0]
}
