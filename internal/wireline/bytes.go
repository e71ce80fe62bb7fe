package wireline

// MaxSizeDigits bounds the digits of a size, as nats-server's parseSize does: at most
// 999999999.
const MaxSizeDigits = 9

// ParseSize parses an unsigned decimal number of 1 to MaxSizeDigits digits; it returns -1 for
// anything else, including an empty d (nats-server v2.15.2 util.go parseSize).
func ParseSize(d []byte) int {
	if len(d) == 0 || len(d) > MaxSizeDigits {
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

// Lower maps an ASCII upper-case letter to lower case and returns other bytes unchanged.
func Lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + ('a' - 'A')
	}
	return b
}

// IsSpace reports whether b is a space or a tab, the bytes that separate a name from its
// argument.
func IsSpace(b byte) bool { return b == ' ' || b == '\t' }

// SkipSpace returns the index of the first byte of b at or after i that is not a space or
// tab, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// Trim returns b without its leading and trailing spaces, tabs and carriage returns (the
// argument of CONNECT, INFO and -ERR).
func Trim(b []byte) []byte {
	for len(b) > 0 && (IsSpace(b[0]) || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (IsSpace(b[len(b)-1]) || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// DropCR returns b without one trailing carriage return, if it has one.
func DropCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}
