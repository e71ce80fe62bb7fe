// Package wireline reads the control lines of cairn's two NATS text protocols, the client
// protocol (internal/protocol) and the route protocol (internal/route). That is its one job:
// it matches an operation name against a protocol's table, keeps a line split across reads
// bounded and checked while it grows, cuts the argument off a complete line, and provides the
// byte and size helpers those arguments need. Finding the \n stays in each parser's loop, the
// hot path, where a shared call measured slower (docs/benchmarks.md, "Control-line reading").
// Each protocol keeps its own operation table, its own argument handling, its own errors and
// everything about payloads.
//
// The rules, shared by both protocols (docs/protocol.md 1.1, docs/routes.md; nats-server
// v2.15.2 server/parser.go):
//
//   - A control line ends at \n; one \r before it is dropped.
//   - Operation names are case-insensitive. A protocol assigns op codes; Bad (0) and Partial (1)
//     are reserved in every table.
//   - Most names must be followed by a space or tab (Spaced); CONNECT and INFO take their
//     argument right after the name (Joined); PING, PONG and +OK ignore the rest of the line
//     (Bare).
//   - The control-line limit counts the argument: the bytes after the name and its spaces and
//     tabs, without the \r (nats-server overMaxControlLineLimit). A partial line is checked as
//     soon as it is buffered, so an unknown operation or an over-long argument fails before
//     its \n arrives, as in nats-server.
//   - Sizes are unsigned decimals of 1 to 9 digits (nats-server util.go parseSize).
package wireline
