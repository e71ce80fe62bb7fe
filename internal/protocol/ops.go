package protocol

import "github.com/cairnmq/cairn/internal/wireline"

// opCode identifies the operation at the start of a control line.
type opCode uint8

const (
	opBad     opCode = wireline.Bad     // not a client operation
	opPartial opCode = wireline.Partial // a proper prefix of an operation name: more bytes needed
	opPub     opCode = iota
	opHPub
	opSub
	opUnsub
	opConnect
	opInfo
	opPing
	opPong
	opOK
	opErr
)

// opTable holds each operation's name in lower case and what may follow it.
var opTable = [...]wireline.Op{
	opPub: {Name: "pub"}, opHPub: {Name: "hpub"}, opSub: {Name: "sub"}, opUnsub: {Name: "unsub"},
	opConnect: {Name: "connect", Rule: wireline.Joined}, opInfo: {Name: "info", Rule: wireline.Joined},
	opPing: {Name: "ping", Rule: wireline.Bare}, opPong: {Name: "pong", Rule: wireline.Bare},
	opOK: {Name: "+ok", Rule: wireline.Bare}, opErr: {Name: "-err"},
}

// grammar gives wireline the client protocol's operations and errors.
var grammar = wireline.Grammar{
	Ops:          opTable[:],
	Match:        func(line []byte) int { return int(matchOp(line)) },
	ErrUnknownOp: ErrUnknownOp, ErrControlLine: ErrControlLine,
}

// maxArgs is the largest argument count of any operation (HPUB with a reply).
const maxArgs = 4

// matchOp returns the operation whose name starts line, compared case-insensitively. It returns
// opPartial when line is shorter than the name it begins, and opBad when it begins no name.
func matchOp(line []byte) opCode {
	op := candidate(line)
	return wireline.Check(line, op, opTable[op].Name)
}

// candidate picks the only operation a line can be, from its first (and for P, second) byte.
func candidate(line []byte) opCode {
	if len(line) == 0 {
		return opPartial
	}
	switch wireline.Lower(line[0]) {
	case 'p':
		return candidateP(line)
	case 'h':
		return opHPub
	case 's':
		return opSub
	case 'u':
		return opUnsub
	case 'c':
		return opConnect
	case 'i':
		return opInfo
	case '+':
		return opOK
	case '-':
		return opErr
	}
	return opBad
}

// candidateP tells PUB, PING and PONG apart by the second byte.
func candidateP(line []byte) opCode {
	if len(line) < 2 {
		return opPartial
	}
	switch wireline.Lower(line[1]) {
	case 'u':
		return opPub
	case 'i':
		return opPing
	case 'o':
		return opPong
	}
	return opBad
}

// split stores the whitespace-separated fields of arg in args and returns how many there are;
// a result above len(args) means "too many". crSep makes \r a separator too (nats-server's
// splitArg, used for SUB and UNSUB).
func split(args *[maxArgs][]byte, arg []byte, crSep bool) int {
	n, start := 0, -1
	for i, b := range arg {
		if !wireline.IsSpace(b) && (!crSep || b != '\r') {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			if n == maxArgs {
				return n + 1
			}
			args[n], n, start = arg[start:i], n+1, -1
		}
	}
	return addLast(args, n, arg, start)
}

// addLast stores the field that runs to the end of arg, if any, and returns the new count.
func addLast(args *[maxArgs][]byte, n int, arg []byte, start int) int {
	switch {
	case start < 0:
		return n
	case n == maxArgs:
		return n + 1
	}
	args[n] = arg[start:]
	return n + 1
}
