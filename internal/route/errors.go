package route

// Error is a route-protocol violation found by the Parser (style rule 6).
// Text is the exact -ERR text to send before closing, without the quotes,
// or empty when nats-server closes a route without sending -ERR. Every
// Error the Parser returns requires the connection to be closed.
type Error struct {
	Text string

	// detail describes the error for logs when Text is empty.
	detail string
}

// Error returns "route: " followed by the -ERR text, or a description when
// Text is empty.
func (e *Error) Error() string {
	if e.Text != "" {
		return "route: " + e.Text
	}
	return "route: " + e.detail
}

// The errors returned by Parser.Parse, compared with errors.Is or ==.
var (
	// ErrUnknownOp is an unknown or malformed operation name (including the
	// client operations PUB, SUB and MSG and the leaf-node operations LS+,
	// LMSG, which cairn does not negotiate), an empty line, or a payload not
	// followed by exactly CRLF: -ERR 'Unknown Protocol Operation'
	// (nats-server v2.15.2 parser.go parseErr).
	ErrUnknownOp = &Error{Text: "Unknown Protocol Operation"}

	// ErrControlLine is a control line whose arguments exceed
	// Config.MaxControlLine bytes: -ERR 'maximum control line exceeded'
	// (nats-server overMaxControlLineLimit).
	ErrControlLine = &Error{Text: "maximum control line exceeded"}

	// ErrMaxPayload is an RMSG or HMSG whose size exceeds Config.MaxPayload:
	// -ERR 'Maximum Payload Violation'. nats-server sets no payload limit on
	// routes; cairn bounds it so that a peer cannot make it buffer without
	// limit (docs/routes.md).
	ErrMaxPayload = &Error{Text: "Maximum Payload Violation"}

	// ErrBadArgs is an RS+, RS-, RMSG or HMSG with the wrong number of
	// arguments, a missing or bad reply indicator, a size that is not a
	// decimal of at most 9 digits, or a header size above the total size.
	// nats-server closes the route without -ERR (route.go
	// processRoutedMsgArgs, processRemoteSub).
	ErrBadArgs = &Error{detail: "malformed route protocol arguments"}

	// ErrPeerErr is returned after Handler.ProcessErr: nats-server logs a
	// route's -ERR and closes the connection without replying (client.go
	// processErr).
	ErrPeerErr = &Error{detail: "peer sent -ERR"}
)
