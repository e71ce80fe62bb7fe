package route

import (
	"encoding/json"
	"strconv"
)

// Fixed lines of the route protocol.
const (
	// PingLine is a keep-alive: "PING\r\n".
	PingLine = "PING\r\n"
	// PongLine answers a PING: "PONG\r\n".
	PongLine = "PONG\r\n"
)

// AppendSub appends an RS+ to dst: "RS+ <account> <subject>\r\n", or with a
// queue "RS+ <account> <subject> <queue> <weight>\r\n" where weight (at
// least 1) is this server's member count of the group (nats-server v2.15.2
// addRouteSubOrUnsubProtoToBuf).
func AppendSub(dst []byte, account, subject, queue string, weight int32) []byte {
	dst = append(dst, "RS+ "...)
	dst = appendInterest(dst, account, subject, queue)
	if queue != "" {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(max(weight, 1)), 10)
	}
	return append(dst, crlf...)
}

// AppendUnsub appends an RS- to dst: "RS- <account> <subject> [<queue>]\r\n".
func AppendUnsub(dst []byte, account, subject, queue string) []byte {
	dst = append(dst, "RS- "...)
	dst = appendInterest(dst, account, subject, queue)
	return append(dst, crlf...)
}

func appendInterest(dst []byte, account, subject, queue string) []byte {
	dst = append(dst, account...)
	dst = append(dst, ' ')
	dst = append(dst, subject...)
	if queue != "" {
		dst = append(dst, ' ')
		dst = append(dst, queue...)
	}
	return dst
}

// AppendMsgHeader appends the control line of an RMSG (hdrLen < 0) or an
// HMSG (hdrLen >= 0), with its CRLF; the caller then appends the payload
// (size bytes, headers included) and CRLF. Without queues the reply follows
// the subject when not empty; with queues the line carries "+ <reply>
// <queue>..." or, without a reply, "| <queue>..." (package comment;
// nats-server v2.15.2 msgHeaderForRouteOrLeaf). It allocates only if dst
// must grow.
func AppendMsgHeader(dst []byte, account string, subject, reply []byte, queues []string, hdrLen, size int) []byte {
	if hdrLen >= 0 {
		dst = append(dst, "HMSG "...)
	} else {
		dst = append(dst, "RMSG "...)
	}
	dst = append(dst, account...)
	dst = append(dst, ' ')
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	switch {
	case len(queues) > 0 && len(reply) > 0:
		dst = append(dst, "+ "...)
		dst = append(append(dst, reply...), ' ')
	case len(queues) > 0:
		dst = append(dst, "| "...)
	case len(reply) > 0:
		dst = append(append(dst, reply...), ' ')
	}
	for _, q := range queues {
		dst = append(append(dst, q...), ' ')
	}
	if hdrLen >= 0 {
		dst = strconv.AppendInt(dst, int64(hdrLen), 10)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(size), 10)
	return append(dst, crlf...)
}

// MsgHeaderBound is an upper bound of the bytes AppendMsgHeader appends for
// these arguments.
func MsgHeaderBound(account string, subject, reply []byte, queues []string) int {
	n := len("HMSG ") + len(account) + len(subject) + len(reply) + len("+ ") + 4 + 2*10 + len(crlf)
	for _, q := range queues {
		n += len(q) + 1
	}
	return n
}

// AppendErr appends "-ERR '<text>'\r\n" to dst.
func AppendErr(dst []byte, text string) []byte {
	dst = append(dst, "-ERR '"...)
	dst = append(dst, text...)
	return append(dst, "'\r\n"...)
}

// AppendInfo appends "INFO <json> \r\n" to dst; nats-server v2.15.2 puts a
// space before the CRLF of every INFO.
func AppendInfo(dst []byte, in *Info) []byte {
	return appendJSON(append(dst, "INFO "...), in, " \r\n")
}

// AppendConnect appends "CONNECT <json>\r\n" to dst (nats-server v2.15.2
// sendRouteConnect).
func AppendConnect(dst []byte, c *Connect) []byte {
	return appendJSON(append(dst, "CONNECT "...), c, crlf)
}

func appendJSON(dst []byte, v any, end string) []byte {
	js, err := json.Marshal(v)
	if err != nil { // structs of strings, numbers, bools and string slices always encode
		panic(err)
	}
	return append(append(dst, js...), end...)
}
