// Package subject holds pure functions on NATS subjects: validation,
// matching a published subject against a subscription pattern, and the
// set relations (subset, overlap) that JetStream needs for stream subjects.
//
// Terms used throughout (docs/protocol.md section 1.7):
//
//   - A subject is a non-empty string of tokens separated by '.'.
//   - A token is a non-empty byte string with no whitespace (space, tab,
//     CR, LF, form feed). Any other byte, UTF-8 included, is allowed, and
//     comparison is byte-wise (case-sensitive).
//   - A token made of exactly "*" is a single-token wildcard; a token made
//     of exactly ">" is a tail wildcard that matches one or more tokens and
//     may only be the last token. "foo*" or "f>o" are literal tokens.
//   - A pattern is a subject that may contain wildcards (what SUB accepts).
//   - A published subject is matched with its tokens taken literally, so a
//     "*" or ">" token in it only reaches subscriptions that have a
//     wildcard in that position.
//
// The package allocates nothing and keeps no state; every function is safe
// for concurrent use. It is a leaf: it imports only the standard library.
package subject

import "strings"

// text is the set of types the byte-level scanners accept, so the string
// and []byte entry points share one allocation-free implementation.
type text interface{ ~string | ~[]byte }

// isSpace reports whether c is one of the bytes no token may contain:
// space, tab, CR, LF and form feed (docs/protocol.md section 1.7).
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\f':
		return true
	}
	return false
}

// isWild reports whether the token s[start:end] is a wildcard token, "*"
// or ">".
func isWild[S text](s S, start, end int) bool {
	return end-start == 1 && (s[start] == '*' || s[start] == '>')
}

// scan reports whether s is a valid subject; when literal is set, wildcard
// tokens make it invalid too. It looks at every byte once.
func scan[S text](s S, literal bool) bool {
	if len(s) == 0 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if isSpace(s[i]) {
				return false
			}
			continue
		}
		if !validToken(s, start, i, literal) {
			return false
		}
		start = i + 1
	}
	return true
}

// validToken checks the token s[start:end]: non-empty, ">" only when it
// ends s, and no wildcard at all when literal is set.
func validToken[S text](s S, start, end int, literal bool) bool {
	if end == start {
		return false
	}
	if !isWild(s, start, end) {
		return true
	}
	return !literal && (s[start] == '*' || end == len(s))
}

// ValidSubject reports whether s is a valid subscription subject (a
// pattern): non-empty, no empty token, no whitespace (space, tab, CR, LF,
// form feed) anywhere, "*" and ">" wildcards only as whole tokens and ">"
// only as the last token. An invalid SUB subject is answered with
// -ERR 'Invalid Subject' (docs/protocol.md section 1.7). nats-server v2.15.2
// (server/sublist.go IsValidSubject) applies the same rules. Its SUB path
// checks only empty tokens and ">" placement (Sublist.Insert), and its
// parser splits arguments on space, tab, CR and LF, so the one subject it
// accepts that this rejects is one containing a form feed.
func ValidSubject(s string) bool { return scan(s, false) }

// ValidSubjectBytes is ValidSubject for a byte slice, for use directly on a
// read buffer; it does not allocate and does not retain b.
func ValidSubjectBytes(b []byte) bool { return scan(b, false) }

// ValidLiteral reports whether s is a valid subject (ValidSubject) with no
// wildcard token, that is a subject a pedantic client may publish to
// (docs/protocol.md section 1.7; nats-server v2.15.2 IsValidLiteralSubject, which
// unlike this function does not check for whitespace).
func ValidLiteral(s string) bool { return scan(s, true) }

// ValidLiteralBytes is ValidLiteral for a byte slice; it does not allocate
// and does not retain b.
func ValidLiteralBytes(b []byte) bool { return scan(b, true) }

// IsLiteral reports whether s has no wildcard token (no token that is
// exactly "*" or ">"). It does not check validity: IsLiteral("foo..*")
// is false and IsLiteral("a..b") is true. Same rule as nats-server v2.15.2
// subjectIsLiteral.
func IsLiteral(s string) bool { return isLiteral(s) }

// IsLiteralBytes is IsLiteral for a byte slice; it does not allocate.
func IsLiteralBytes(b []byte) bool { return isLiteral(b) }

func isLiteral[S text](s S) bool {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			continue
		}
		if isWild(s, start, i) {
			return false
		}
		start = i + 1
	}
	return true
}

// ValidQueue reports whether q is an acceptable queue group name: non-empty
// and free of whitespace (space, tab, CR, LF, form feed). Unlike a subject
// token it may contain '.', '*' and '>': nats-server v2.15.2 accepts any
// whitespace-free SUB argument as the queue name (server/client.go splitArg
// and processSubEx; the sublist never validates it), so "a.b" and "*" are
// legal queue names even though NATS's protocol documentation describes the
// name as a token (docs/protocol.md 1.7). A form feed is rejected for
// consistency with ValidSubject, though nats-server's parser would pass it
// through. The empty string is not valid; callers use "" to mean "no
// queue".
func ValidQueue(q string) bool { return validQueue(q) }

// ValidQueueBytes is ValidQueue for a byte slice; it does not allocate.
func ValidQueueBytes(b []byte) bool { return validQueue(b) }

func validQueue[S text](q S) bool {
	if len(q) == 0 {
		return false
	}
	for i := 0; i < len(q); i++ {
		if isSpace(q[i]) {
			return false
		}
	}
	return true
}

// Tokens returns the number of '.'-separated tokens in s, counting empty
// ones: Tokens("") is 0, Tokens("a.b") is 2, Tokens("a..") is 3. It does
// not validate s (nats-server v2.15.2 numTokens).
func Tokens(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, ".") + 1
}

// TokenAt returns the token of s at the zero-based index i, or "" when s has
// fewer than i+1 tokens or i is negative. The index is zero-based, unlike
// nats-server v2.15.2 tokenAt, which counts from one. It does not allocate.
func TokenAt(s string, i int) string {
	if i < 0 {
		return ""
	}
	for ; i > 0; i-- {
		dot := strings.IndexByte(s, '.')
		if dot < 0 {
			return ""
		}
		s = s[dot+1:]
	}
	tok, _, _ := strings.Cut(s, ".")
	return tok
}
