// Package route speaks the protocol between the servers of a cluster: the
// route protocol of nats-server v2.15.2 (server/route.go, server/parser.go),
// so that a route can be debugged with nats-server's tools and a mixed core
// cluster stays possible later. It parses what a peer sends (Parser),
// encodes what this server sends (Append* functions), defines the INFO and
// CONNECT objects of a route (Info, Connect), and counts the local interest
// a server advertises to its peers (Interest). It knows nothing of sockets,
// subscriptions or the server: internal/server owns route connections.
// Reading control lines is internal/wireline's, shared with the client
// parser; this package holds the route operation table and arguments.
// docs/routes.md describes the protocol in full; this comment draws the
// bytes.
//
// # Wire format
//
// Every control line ends with CRLF; the parser also accepts a bare LF.
// Operation names are case-insensitive; arguments are separated by runs of
// spaces or tabs. The account is always present ("$G" for cairn's single
// account): cairn does not pool route connections or pin accounts
// (nats-server's pool_size -1), so no connection is bound to an account.
//
//	INFO {json}                       either side, any time (Info)
//	CONNECT {json}                    the dialing side, first line (Connect)
//	PING / PONG                       keep-alive, either side
//	+OK                               ignored
//	-ERR '<text>'                     the peer reports an error, then closes
//
//	RS+ <account> <subject>                          interest in subject
//	RS+ <account> <subject> <queue> <weight>         queue interest: weight =
//	                                                 the sender's member count,
//	                                                 sent again when it changes
//	RS- <account> <subject> [<queue>]                interest gone
//
//	RMSG <account> <subject> [<reply>] <size>\r\n<payload>\r\n
//	RMSG <account> <subject> + <reply> <queue>... <size>\r\n<payload>\r\n
//	RMSG <account> <subject> | <queue>... <size>\r\n<payload>\r\n
//	HMSG <account> <subject> [<reply>] <hdr size> <total size>\r\n<headers><payload>\r\n
//	HMSG <account> <subject> + <reply> <queue>... <hdr size> <total size>\r\n...
//	HMSG <account> <subject> | <queue>... <hdr size> <total size>\r\n...
//
// Sizes are unsigned decimals of at most 9 digits; the header size counts
// the header block and may not exceed the total size. The queue names of an
// RMSG or HMSG are the queue groups for which the sender chose the
// receiving server: the receiver delivers the message to one local member
// of each of them, and to every local plain subscription.
//
// How to use a Parser, per route connection:
//
//  1. Create it with NewParser, giving it the connection's Handler.
//  2. Call Parse with every chunk read from the socket, in order, from one
//     goroutine. Any split of the stream is accepted.
//  3. Handler methods run synchronously; their byte slices are valid only
//     during the call.
//  4. When Parse returns an error, close the connection, first sending
//     AppendErr(nil, Text) if errors.As finds an *Error with a Text. The
//     Parser is dead from then on.
//
// Limits: a control line may hold MaxControlLine argument bytes (16 times
// a client's max_control_line, 64 KiB by default, as nats-server allows
// routes), a payload MaxPayload bytes. Whatever a peer sends, the parser's
// buffer never exceeds MaxControlLine+MaxPayload plus a few bytes.
package route
