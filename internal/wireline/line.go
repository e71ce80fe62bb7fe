package wireline

// Slack is what a buffered partial control line may hold besides its limited argument: the
// operation name (at most 7 bytes), its separator and a trailing \r, rounded up. A protocol
// whose argument limit is maxArg reserves maxArg+Slack bytes for a partial line.
const Slack = 16

// Grammar is one protocol's operations as this package needs them. A protocol declares one, at
// package level, and never changes it. Op codes are the protocol's, as ints: indexes of Ops,
// or Bad or Partial.
type Grammar struct {
	// Ops is the protocol's table, indexed by op code; the Bad and Partial entries are unused.
	Ops []Op
	// Match returns the op code of the operation whose name starts line, Partial or Bad
	// (the protocol's first-byte switch followed by Check). Only Accumulate calls it.
	Match func(line []byte) int
	// ErrUnknownOp is returned for an unknown operation or a missing separator, and
	// ErrControlLine for an argument above the limit; each protocol gives its own error
	// values, which its wire error texts belong to.
	ErrUnknownOp, ErrControlLine error
}

// Arg returns the argument of a complete control line (without its \n) whose operation is op:
// the bytes after the name and its spaces and tabs, without one trailing \r. It returns nil
// for a Bare operation, whatever follows its name. It fails with g.ErrUnknownOp for Bad or
// Partial and for a Spaced name not followed by a space or tab, and with g.ErrControlLine
// when the argument is longer than maxArg bytes (nats-server overMaxControlLineLimit).
func (g *Grammar) Arg(line []byte, op, maxArg int) ([]byte, error) {
	if op <= Partial {
		return nil, g.ErrUnknownOp
	}
	o := g.Ops[op]
	n := len(o.Name)
	switch {
	case o.Rule == Bare:
		return nil, nil
	case o.Rule == Spaced && (len(line) == n || !IsSpace(line[n])):
		return nil, g.ErrUnknownOp
	}
	arg := DropCR(line[SkipSpace(line, n):])
	if len(arg) > maxArg {
		return nil, g.ErrControlLine
	}
	return arg, nil
}

// Accumulate appends data, a piece of a control line without its \n, to *partial. It appends
// at most maxArg+Slack bytes at a time and checks and compacts the line after each piece, so
// *partial never grows past maxArg+Slack bytes even when a peer never sends \n. It fails with
// g.ErrUnknownOp as soon as the line can begin no operation (as nats-server does at the first
// bad byte) or a Spaced name is followed by something else than a space or tab, and with
// g.ErrControlLine as soon as the argument is longer than maxArg bytes.
func (g *Grammar) Accumulate(partial *[]byte, data []byte, maxArg int) error {
	lineCap := maxArg + Slack
	buf := *partial
	if cap(buf) < lineCap {
		buf = append(make([]byte, 0, lineCap), buf...)
	}
	var err error
	for len(data) > 0 && err == nil {
		n := min(len(data), lineCap-len(buf))
		buf, data = append(buf, data[:n]...), data[n:]
		buf, err = g.compact(buf, maxArg)
	}
	*partial = buf
	return err
}

// compact checks the partial line buf and shrinks it without changing its meaning: it drops
// what a Bare operation ignores and collapses the spaces and tabs after the name to one space.
func (g *Grammar) compact(buf []byte, maxArg int) ([]byte, error) {
	op := g.Match(buf)
	switch op {
	case Bad:
		return buf, g.ErrUnknownOp
	case Partial:
		return buf, nil
	}
	o := g.Ops[op]
	n := len(o.Name)
	switch {
	case o.Rule == Bare:
		return buf[:n], nil
	case len(buf) == n:
		return buf, nil
	case o.Rule == Spaced && !IsSpace(buf[n]):
		return buf, g.ErrUnknownOp
	}
	buf = collapse(buf, n)
	if len(DropCR(buf[SkipSpace(buf, n):])) > maxArg {
		return buf, g.ErrControlLine
	}
	return buf, nil
}

// collapse replaces a run of two or more spaces and tabs at buf[n:] by one space.
func collapse(buf []byte, n int) []byte {
	j := SkipSpace(buf, n)
	if j-n < 2 {
		return buf
	}
	buf[n] = ' '
	m := copy(buf[n+1:], buf[j:])
	return buf[:n+1+m]
}
