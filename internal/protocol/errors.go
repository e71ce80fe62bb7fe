package protocol

// Error is a client-protocol violation found by the Parser (style rule 6: wire errors carry the
// exact -ERR text and whether the connection must close). Text is the exact -ERR text without the
// quotes, or empty when nats-server closes the connection without sending -ERR (docs/protocol.md 1.11).
// Close says whether the connection must be closed; every Error the Parser returns has Close set.
type Error struct {
	Text  string
	Close bool

	// detail describes the error for logs when Text is empty.
	detail string
}

// Error returns "protocol: " followed by the -ERR text, or a description when Text is empty.
func (e *Error) Error() string {
	if e.Text != "" {
		return "protocol: " + e.Text
	}
	return "protocol: " + e.detail
}

// The errors returned by Parser.Parse. They are pointers so callers compare them with errors.Is or
// ==. Every one requires the connection to be closed.
var (
	// ErrUnknownOp is an unknown or malformed operation name, an empty line, or a payload not
	// followed by exactly \r\n: -ERR 'Unknown Protocol Operation' (docs/protocol.md 1.1, 1.11).
	ErrUnknownOp = &Error{Text: "Unknown Protocol Operation", Close: true}

	// ErrControlLine is a control line whose arguments exceed Config.MaxControlLine bytes:
	// -ERR 'maximum control line exceeded' (docs/protocol.md 1.1, 1.11).
	ErrControlLine = &Error{Text: "maximum control line exceeded", Close: true}

	// ErrMaxPayload is a PUB or HPUB whose declared size exceeds Config.MaxPayload, detected from
	// the control line before any payload is read: -ERR 'Maximum Payload Violation' (docs/protocol.md 1.11).
	ErrMaxPayload = &Error{Text: "Maximum Payload Violation", Close: true}

	// ErrBadArgs is a PUB, HPUB, SUB or UNSUB with the wrong number of arguments, a size that is
	// not a decimal number of at most 9 digits, or an HPUB header size above its total size.
	// nats-server closes without -ERR (docs/protocol.md 1.11; client.go processPub, processHeaderPub).
	ErrBadArgs = &Error{Close: true, detail: "malformed protocol arguments"}

	// ErrNoHeaders is an HPUB while headers are disabled with SetHeaders(false). nats-server
	// closes without -ERR (docs/protocol.md 1.3; client.go processHeaderPub, ErrMsgHeadersNotSupported).
	ErrNoHeaders = &Error{Close: true, detail: "message headers not supported"}

	// ErrClientErr is a -ERR sent by the client. nats-server logs it and closes the connection
	// without replying (client.go processErr).
	ErrClientErr = &Error{Close: true, detail: "client sent -ERR"}
)
