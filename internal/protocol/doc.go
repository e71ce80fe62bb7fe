// Package protocol parses the NATS client protocol as a client sends it and encodes the lines the
// server sends back (MSG, HMSG, -ERR, PING, PONG, +OK, INFO). It owns framing only: it knows
// nothing of subjects, subscriptions, accounts or sockets, and it never imports the server.
// Reading control lines (matching names, bounding a line split across reads) is
// internal/wireline's, shared with the route parser; this package holds the client protocol's
// operation table, argument handling and payloads.
//
// The wire format is docs/protocol.md section 1 (framing 1.1, operations 1.3, errors 1.11); edge cases
// follow nats-server v2.15.2 server/parser.go and the argument handling in server/client.go
// (processPub, processHeaderPub, parseSub, processUnsub, processErr).
//
// How to use it, per client connection:
//
//  1. Create one Parser with NewParser, giving it the connection's Handler.
//  2. Call Parse with every chunk read from the socket, in order, from one goroutine (the
//     connection's read loop). Any split of the stream is accepted.
//  3. Handle each Handler call synchronously. The byte slices passed to the Handler are only valid
//     during the call; copy what must be retained.
//  4. When Parse returns an error, close the connection. If errors.As finds an *Error whose Text is
//     not empty, send AppendErr(nil, Text) before closing. The Parser is dead from then on: later
//     calls return the same error and never call the Handler.
//
// Behaviour choices (all match nats-server v2.15.2 for a CLIENT connection unless marked):
//
//   - Operation names are case-insensitive. PUB, HPUB, SUB, UNSUB and -ERR need a space or tab
//     after the name; CONNECT and INFO do not. Anything else, including MSG, HMSG and the
//     route/leaf operations (RS+, LS+, A+ ...) and empty lines, is ErrUnknownOp. (nats-server
//     half-accepts HMSG from a client because of a parser quirk; cairn rejects it.)
//   - PING and PONG ignore everything after the name up to the line end ("PING foo" is a PING).
//   - +OK from a client is ignored; -ERR from a client makes Parse return ErrClientErr, because
//     nats-server logs it and closes the connection without replying.
//   - INFO from a client is passed to Handler.ProcessInfo; nats-server decodes it as JSON and
//     otherwise ignores it on a client connection.
//   - Control lines end at \n; one \r before it is dropped. The control-line limit counts the
//     argument bytes after the operation name and its separating whitespace, without that \r,
//     exactly as nats-server measures it. A partial line is checked as soon as it is buffered.
//   - Sizes are unsigned decimal numbers of at most 9 digits (nats-server parseSize); anything else
//     is ErrBadArgs. An unparsable UNSUB max is not an error: it is reported as max 0, which
//     nats-server treats like an absent max (remove now).
//   - PUB and HPUB arguments are split on spaces and tabs; SUB and UNSUB arguments also on \r, as
//     in nats-server's splitArg.
//   - HPUB is accepted unless SetHeaders(false) was called, in which case it is ErrNoHeaders at the
//     control line, before the payload is read (nats-server ErrMsgHeadersNotSupported).
package protocol
