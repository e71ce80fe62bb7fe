package protocol

import "strconv"

// Fixed server lines (docs/protocol.md 1.3).
const (
	// PingLine is the keep-alive the server sends: "PING\r\n".
	PingLine = "PING\r\n"
	// PongLine answers a client PING: "PONG\r\n".
	PongLine = "PONG\r\n"
	// OKLine acknowledges an operation when the client asked for verbose mode: "+OK\r\n".
	OKLine = "+OK\r\n"
	// CRLF ends every line and every payload: "\r\n".
	CRLF = "\r\n"
)

// AppendMsg appends a complete MSG to dst and returns the extended slice:
// "MSG <subject> <sid> [reply] <len(payload)>\r\n<payload>\r\n" (docs/protocol.md 1.3). The reply is
// left out when empty. It allocates only if dst must grow.
func AppendMsg(dst, subject, sid, reply, payload []byte) []byte {
	dst = AppendMsgHeader(dst, subject, sid, reply, -1, len(payload))
	dst = append(dst, payload...)
	return append(dst, CRLF...)
}

// AppendHMsg appends a complete HMSG to dst and returns the extended slice:
// "HMSG <subject> <sid> [reply] <hdrLen> <len(msg)>\r\n<msg>\r\n" (docs/protocol.md 1.3), where msg is the
// header block followed by the body and hdrLen (>= 0) is the header block's length in bytes. The
// reply is left out when empty. It allocates only if dst must grow.
func AppendHMsg(dst, subject, sid, reply []byte, hdrLen int, msg []byte) []byte {
	dst = AppendMsgHeader(dst, subject, sid, reply, hdrLen, len(msg))
	dst = append(dst, msg...)
	return append(dst, CRLF...)
}

// AppendMsgHeader appends only the control line of a MSG (hdrLen < 0) or an HMSG (hdrLen >= 0),
// including its \r\n, so the caller can write the payload itself and then CRLF. total is the
// payload length in bytes (headers included for HMSG). Format as in AppendMsg and AppendHMsg
// (docs/protocol.md 1.3). It allocates only if dst must grow.
func AppendMsgHeader(dst, subject, sid, reply []byte, hdrLen, total int) []byte {
	if hdrLen >= 0 {
		dst = append(dst, 'H')
	}
	dst = append(dst, "MSG "...)
	dst = appendArg(dst, subject)
	dst = appendArg(dst, sid)
	if len(reply) > 0 {
		dst = appendArg(dst, reply)
	}
	if hdrLen >= 0 {
		dst = strconv.AppendInt(dst, int64(hdrLen), 10)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(total), 10)
	return append(dst, CRLF...)
}

// appendArg appends arg and a separating space.
func appendArg(dst, arg []byte) []byte {
	dst = append(dst, arg...)
	return append(dst, ' ')
}

// AppendErr appends "-ERR '<text>'\r\n" to dst and returns the extended slice (docs/protocol.md 1.11).
// text should be one of the exact texts of docs/protocol.md 1.11, such as Error.Text.
func AppendErr(dst []byte, text string) []byte {
	dst = append(dst, "-ERR '"...)
	dst = append(dst, text...)
	return append(dst, "'\r\n"...)
}

// AppendInfo appends "INFO <json>\r\n" to dst and returns the extended slice (docs/protocol.md 1.3,
// 1.4). json is the already-encoded INFO object.
func AppendInfo(dst, json []byte) []byte {
	dst = append(dst, "INFO "...)
	dst = append(dst, json...)
	return append(dst, CRLF...)
}
