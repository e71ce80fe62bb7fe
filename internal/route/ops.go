package route

import "github.com/cairnmq/cairn/internal/wireline"

// opCode identifies the operation at the start of a control line.
type opCode uint8

const (
	opBad     opCode = wireline.Bad     // not a route operation
	opPartial opCode = wireline.Partial // a proper prefix of an operation name: more bytes needed
	opInfo    opCode = iota
	opConnect
	opPing
	opPong
	opOK
	opErr
	opSub   // RS+
	opUnsub // RS-
	opMsg   // RMSG
	opHMsg  // HMSG
)

// opTable holds each operation's name in lower case and what may follow it.
var opTable = [...]wireline.Op{
	opInfo: {Name: "info", Rule: wireline.Joined}, opConnect: {Name: "connect", Rule: wireline.Joined},
	opPing: {Name: "ping", Rule: wireline.Bare}, opPong: {Name: "pong", Rule: wireline.Bare},
	opOK: {Name: "+ok", Rule: wireline.Bare}, opErr: {Name: "-err"}, opSub: {Name: "rs+"},
	opUnsub: {Name: "rs-"}, opMsg: {Name: "rmsg"}, opHMsg: {Name: "hmsg"},
}

// grammar gives wireline the route protocol's operations and errors.
var grammar = wireline.Grammar{
	Ops:          opTable[:],
	Match:        func(line []byte) int { return int(matchOp(line)) },
	ErrUnknownOp: ErrUnknownOp, ErrControlLine: ErrControlLine,
}

// matchOp returns the operation whose name starts line, compared
// case-insensitively; opPartial when line is a proper prefix of a name, and
// opBad when it begins no name.
func matchOp(line []byte) opCode {
	op := candidate(line)
	return wireline.Check(line, op, opTable[op].Name)
}

// candidate picks the only operation a line can be from its first bytes.
func candidate(line []byte) opCode {
	if len(line) == 0 {
		return opPartial
	}
	switch wireline.Lower(line[0]) {
	case 'i':
		return opInfo
	case 'c':
		return opConnect
	case '+':
		return opOK
	case '-':
		return opErr
	case 'h':
		return opHMsg
	case 'p':
		return second(line, 'i', opPing, 'o', opPong)
	case 'r':
		return candidateR(line)
	}
	return opBad
}

// second tells two operations apart by the second byte of line.
func second(line []byte, b1 byte, op1 opCode, b2 byte, op2 opCode) opCode {
	if len(line) < 2 {
		return opPartial
	}
	switch wireline.Lower(line[1]) {
	case b1:
		return op1
	case b2:
		return op2
	}
	return opBad
}

// candidateR tells RS+, RS- and RMSG apart.
func candidateR(line []byte) opCode {
	if len(line) < 2 {
		return opPartial
	}
	switch wireline.Lower(line[1]) {
	case 'm':
		return opMsg
	case 's':
		if len(line) < 3 {
			return opPartial
		}
		switch line[2] {
		case '+':
			return opSub
		case '-':
			return opUnsub
		}
	}
	return opBad
}

// isSep reports a byte that separates arguments: space, tab, CR or LF, as
// nats-server's route argument splitting does.
func isSep(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// split appends the separator-delimited fields of arg to args[:0] and
// returns them.
func split(args [][]byte, arg []byte) [][]byte {
	args = args[:0]
	start := -1
	for i, b := range arg {
		if !isSep(b) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			args = append(args, arg[start:i])
			start = -1
		}
	}
	if start >= 0 {
		args = append(args, arg[start:])
	}
	return args
}
