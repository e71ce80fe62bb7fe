package protocol

// opCode identifies the operation at the start of a control line.
type opCode uint8

const (
	opBad     opCode = iota // not a client operation
	opPartial               // a proper prefix of an operation name: more bytes needed
	opPub
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

// opNames holds each operation's name in lower case.
var opNames = [...]string{
	opPub: "pub", opHPub: "hpub", opSub: "sub", opUnsub: "unsub", opConnect: "connect",
	opInfo: "info", opPing: "ping", opPong: "pong", opOK: "+ok", opErr: "-err",
}

// maxArgs is the largest argument count of any operation (HPUB with a reply).
const maxArgs = 4

// maxSizeDigits bounds the digits of a size, as nats-server's parseSize does (at most 999999999).
const maxSizeDigits = 9

// matchOp returns the operation whose name starts line, compared case-insensitively. It returns
// opPartial when line is shorter than the name it begins, and opBad when it begins no name.
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

// candidate picks the only operation a line can be, from its first (and for P, second) byte.
func candidate(line []byte) opCode {
	if len(line) == 0 {
		return opPartial
	}
	switch lower(line[0]) {
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
	switch lower(line[1]) {
	case 'u':
		return opPub
	case 'i':
		return opPing
	case 'o':
		return opPong
	}
	return opBad
}

// lower maps an ASCII upper-case letter to lower case and leaves other bytes alone.
func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + ('a' - 'A')
	}
	return b
}

// ignoresRest reports whether op ignores everything after its name up to the line end
// (nats-server's OP_PING, OP_PONG and OP_PLUS_OK states).
func ignoresRest(op opCode) bool {
	return op == opPing || op == opPong || op == opOK
}

// needsSep reports whether op's name must be followed by a space or tab (CONNECT and INFO
// accept their argument right after the name, as nats-server does).
func needsSep(op opCode) bool {
	return op != opConnect && op != opInfo
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

// skipSpace returns the index of the first byte of b at or after i that is not a space or tab.
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

// split stores the whitespace-separated fields of arg in args and returns how many there are;
// a result above len(args) means "too many". crSep makes \r a separator too (nats-server's
// splitArg, used for SUB and UNSUB).
func split(args *[maxArgs][]byte, arg []byte, crSep bool) int {
	n, start := 0, -1
	for i, b := range arg {
		if !isSpace(b) && (!crSep || b != '\r') {
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

// parseSize parses an unsigned decimal number of 1 to 9 digits; it returns -1 for anything else
// (nats-server util.go parseSize).
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
