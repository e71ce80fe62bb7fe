package server

import (
	"bytes"
	"strconv"

	"github.com/cairnmq/cairn/internal/route"
)

// Trace lines follow nats-server's -V format (client.go traceInOp and
// traceOutOp): "<host:port> - cid:<n> - <<- [OP args]" for what a client
// sent and "->> [OP args]" for what it was sent. They are written only
// when the logger has trace on, checked at each operation (a reload may
// turn it on or off).

// traceIn logs an operation a client sent, with its non-empty arguments.
func (c *client) traceIn(op string, args ...[]byte) {
	if !c.log.TraceEnabled() {
		return
	}
	c.log.Tracef("%s - %s:%d - <<- [%s]", c.addr, c.tag, c.cid, joinArgs(op, args))
}

// tracePub logs a PUB or HPUB with its sizes and payload.
func (c *client) tracePub(subj, reply []byte, hdrLen int, msg []byte) {
	op, sizes := "PUB", []byte(strconv.Itoa(len(msg)))
	if hdrLen >= 0 {
		op, sizes = "HPUB", []byte(strconv.Itoa(hdrLen)+" "+strconv.Itoa(len(msg)))
	}
	c.traceIn(op, subj, reply, sizes)
	c.log.Tracef("%s - cid:%d - <<- MSG_PAYLOAD: [%q]", c.addr, c.cid, msg)
}

// traceOut logs an operation sent to the client.
func (c *client) traceOut(op string, args ...[]byte) {
	c.log.Tracef("%s - cid:%d - ->> [%s]", c.addr, c.cid, joinArgs(op, args))
}

func joinArgs(op string, args [][]byte) string {
	var b bytes.Buffer
	b.WriteString(op)
	for _, a := range args {
		if len(a) > 0 {
			b.WriteByte(' ')
			b.Write(a)
		}
	}
	return b.String()
}

// traceRouteMsg logs an RMSG or HMSG received from a peer, as nats-server
// traces it: "<<- [RMSG <account> <subject> ...]".
func (c *client) traceRouteMsg(m *route.Msg) {
	line := route.AppendMsgHeader(nil, string(m.Account), m.Subject, m.Reply, queueNames(m.Queues), m.HdrLen, len(m.Payload))
	c.log.Tracef("%s - rid:%d - <<- [%s]", c.addr, c.cid, line[:len(line)-2])
}

// traceOutRouteMsg logs an RMSG or HMSG sent to a peer.
func (c *client) traceOutRouteMsg(account string, subj, reply []byte, queues []string, hdrLen, size int) {
	line := route.AppendMsgHeader(nil, account, subj, reply, queues, hdrLen, size)
	c.log.Tracef("%s - rid:%d - ->> [%s]", c.addr, c.cid, line[:len(line)-2])
}

func queueNames(q [][]byte) []string {
	out := make([]string, len(q))
	for i, b := range q {
		out[i] = string(b)
	}
	return out
}
