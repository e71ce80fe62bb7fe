package route

// opCode identifies the operation at the start of a control line.
type opCode uint8

const (
	opBad     opCode = iota // not a route operation
	opPartial               // a proper prefix of an operation name: more bytes needed
	opInfo
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

// opNames holds each operation's name in lower case.
var opNames = [...]string{
	opInfo: "info", opConnect: "connect", opPing: "ping", opPong: "pong", opOK: "+ok",
	opErr: "-err", opSub: "rs+", opUnsub: "rs-", opMsg: "rmsg", opHMsg: "hmsg",
}

// maxSizeDigits bounds the digits of a size, as nats-server's parseSize
// does (at most 999999999).
const maxSizeDigits = 9

// matchOp returns the operation whose name starts line, compared
// case-insensitively; opPartial when line is a proper prefix of a name, and
// opBad when it begins no name.
func matchOp(line []byte) opCode {
	op := candidate(line)
	if op <= opPartial {
		return op
	}
	name := opNames[op]
	n := min(len(line), len(name))
	for i := 1; i < n; i++ {
		if lower(line[i]) != name[i] {
			return opBad
		}
	}
	if len(line) < len(name) {
		return opPartial
	}
	return op
}

// candidate picks the only operation a line can be from its first bytes.
func candidate(line []byte) opCode {
	if len(line) == 0 {
		return opPartial
	}
	switch lower(line[0]) {
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
	switch lower(line[1]) {
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
	switch lower(line[1]) {
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

// lower maps an ASCII upper-case letter to lower case.
func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + ('a' - 'A')
	}
	return b
}

// ignoresRest reports whether op ignores everything after its name up to
// the line end (nats-server's PING, PONG and +OK states).
func ignoresRest(op opCode) bool { return op == opPing || op == opPong || op == opOK }

// needsSep reports whether op's name must be followed by a space or tab
// (INFO and CONNECT accept their argument right after the name).
func needsSep(op opCode) bool { return op != opConnect && op != opInfo }

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

// isSep reports a byte that separates arguments: space, tab, CR or LF, as
// nats-server's route argument splitting does.
func isSep(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// skipSpace returns the index of the first byte of b at or after i that is
// not a space or tab.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// trim removes leading and trailing spaces, tabs and carriage returns.
func trim(b []byte) []byte {
	for len(b) > 0 && (isSpace(b[0]) || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (isSpace(b[len(b)-1]) || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// dropCR removes one trailing carriage return.
func dropCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

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

// parseSize parses an unsigned decimal of 1 to 9 digits; it returns -1 for
// anything else (nats-server util.go parseSize).
func parseSize(d []byte) int {
	if len(d) == 0 || len(d) > maxSizeDigits {
		return -1
	}
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
