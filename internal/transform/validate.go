package transform

import "strings"

// Validate checks a mapping the way nats-server v2.15.2 checks the
// subject transforms of stream, source and mirror configs (server/sublist.go
// ValidateMapping), and returns nil or the error whose text JetStream
// puts in its 10156, 10146 or 10154 error. An empty dest is valid. Else,
// token by token: an empty token or one after ">" is ErrDestinationSubject
// (in a *DestinationError); a token of the form {{...}} must name a
// mapping function (ErrUnknownFunction) and may hold whitespace; any other
// token with whitespace is ErrDestinationSubject. Then New(src, dest) must
// succeed. The caller checks src first: nats-server answers an invalid
// non-empty src (whitespace included) with 10155, 10145 or 10151.
func Validate(src, dest string) error {
	if dest == "" {
		return nil
	}
	afterTail := false
	for tok := range strings.SplitSeq(dest, ".") {
		switch {
		case tok == "" || afterTail:
			return destErr(tok, ErrDestinationSubject)
		case looksLikeCall(tok):
			if !isCall(tok) {
				return destErr(tok, ErrUnknownFunction)
			}
		case tok == ">":
			afterTail = true
		case strings.ContainsAny(tok, "\t\n\f\r "):
			return ErrDestinationSubject
		}
	}
	_, err := New(src, dest)
	return err
}
