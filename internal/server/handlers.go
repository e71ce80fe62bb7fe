package server

import (
	"bytes"
	"fmt"
	"time"

	"github.com/cairnmq/cairn/internal/protocol"
	"github.com/cairnmq/cairn/internal/subject"
)

// The methods in this file implement protocol.Handler. They run on the
// client's read loop. Errors that keep the connection open are sent as
// -ERR here and never returned; a returned error closes the connection
// (docs/protocol.md 1.11).

var _ protocol.Handler = (*client)(nil)

// ProcessConnect applies a CONNECT (docs/protocol.md 1.5): it authenticates
// the client (auth.go), then checks the protocol fields. A second CONNECT
// authenticates again and drops the client's subscriptions, as
// nats-server v2.15.2 does.
func (c *client) ProcessConnect(arg []byte) error {
	if c.log.TraceEnabled() {
		c.traceIn("CONNECT", redactConnect(arg))
	}
	next, err := parseConnect(arg, c.opts)
	if err != nil {
		return err
	}
	if c.connectSeen {
		c.dropAllSubs()
	} else if c.rtt.Load() == 0 { // a first estimate, as nats-server's processConnect
		c.rtt.Store(max(int64(time.Since(c.started)), 1))
	}
	if err := c.authenticate(&next); err != nil {
		return err
	}
	if err := checkConnect(&next); err != nil {
		return err
	}
	c.opts = next
	c.connectSeen = true
	c.mu.Lock()
	c.meta.name, c.meta.lang, c.meta.version = next.Name, next.Lang, next.Version
	c.mu.Unlock()
	c.headers.Store(next.Headers)
	c.parser.SetHeaders(next.Headers)
	c.pings.connected(c.srv.limits().PingInterval)
	c.srv.clientEvent(ClientEvent{Connect: true, Conn: c.snapshot(false, 0), AccountConns: int(c.acc.nconns.Load())})
	c.sendOK()
	return nil
}

// ProcessInfo ignores an INFO sent by a client, as nats-server does for
// client connections.
func (c *client) ProcessInfo([]byte) error { return nil }

// ProcessPing answers PONG and, after the first PONG to a client that
// speaks protocol 1, sends the INFO with connect_info (docs/protocol.md 1.2).
func (c *client) ProcessPing() error {
	c.traceIn("PING")
	c.enqueueString(protocol.PongLine)
	if !c.connectSeen || c.firstPong {
		return nil
	}
	c.firstPong = true
	if c.opts.Protocol >= 1 {
		c.sendConnectInfo()
	}
	return nil
}

// sendConnectInfo sends the INFO with connect_info that follows the first
// PONG, and from then on lets async INFO updates reach this client, in
// order with it (connect_urls.go sendAsyncInfo).
func (c *client) sendConnectInfo() {
	if cl := c.srv.cl; cl != nil {
		cl.infoMu.Lock()
		defer cl.infoMu.Unlock()
	}
	c.asyncInfo.Store(true)
	in := c.srv.baseInfo()
	in.CID = c.cid
	in.ClientIP = c.ip
	in.ConnectInfo = true
	in.RemoteAccount = c.acc.name
	in.IsSystemAccount = c.acc.system
	in.MaxPayload = int(c.mpay.Load())
	c.enqueue(appendInfo(nil, in))
}

// ProcessPong records the answer to a server PING.
func (c *client) ProcessPong() error {
	c.traceIn("PONG")
	c.pings.pong(c)
	return nil
}

// ProcessSub adds a subscription (docs/protocol.md 1.3, 1.7). One the user may
// not make gets a permissions violation (perms.go), an invalid subject or
// queue -ERR 'Invalid Subject'; the connection stays open. A repeated sid
// is ignored.
func (c *client) ProcessSub(subj, queue, sid []byte) error {
	c.traceIn("SUB", subj, queue, sid)
	if !c.maySubscribe(subj, queue) {
		c.subViolation(subj, queue, sid)
		return nil
	}
	if c.subsAtLimit() {
		c.maxSubsExceeded()
		return nil
	}
	c.mu.Lock()
	dup := c.subs[string(sid)] != nil
	c.mu.Unlock()
	if dup || c.closed.Load() {
		c.sendOK()
		return nil
	}
	if !subject.ValidSubjectBytes(subj) || (len(queue) > 0 && !subject.ValidQueueBytes(queue)) {
		c.sendErr("Invalid Subject")
		return nil
	}
	c.mu.Lock()
	sub := &subscription{client: c, acc: c.acc, subject: string(subj), queue: string(queue), sid: bytes.Clone(sid)}
	sub.deny.Store(c.denyFilter(sub.subject, sub.queue))
	c.subs[string(sub.sid)] = sub
	c.mu.Unlock()
	if err := sub.acc.sl.Insert(sub.subject, sub.queue, sub); err != nil {
		c.dropSub(sub)
		c.sendErr("Invalid Subject")
		return nil
	}
	c.srv.interestAdded(sub)
	c.sendOK()
	return nil
}

// ProcessUnsub removes a subscription now, or after max deliveries in
// total when max is above the count delivered so far (docs/protocol.md 1.3).
// Unknown sids are ignored.
func (c *client) ProcessUnsub(sid []byte, max int64) error {
	c.traceIn("UNSUB", sid)
	c.mu.Lock()
	sub := c.subs[string(sid)]
	c.mu.Unlock()
	if sub != nil {
		sub.max.Store(max)
		if max <= 0 || sub.delivered.Load() >= max {
			c.removeSub(sub)
		}
	}
	c.sendOK()
	return nil
}

// dropSub forgets sub in the client's map.
func (c *client) dropSub(sub *subscription) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[string(sub.sid)] != sub {
		return false
	}
	delete(c.subs, string(sub.sid))
	return true
}

// dropAllSubs removes every subscription of the client (a second
// CONNECT, as nats-server v2.15.2 clearAccountSubs).
func (c *client) dropAllSubs() {
	c.mu.Lock()
	subs := c.subs
	c.subs = make(map[string]*subscription)
	c.mu.Unlock()
	list := make([]*subscription, 0, len(subs))
	for _, sub := range subs {
		_ = sub.acc.sl.Remove(sub.subject, sub.queue, sub)
		list = append(list, sub)
	}
	c.srv.interestRemoved(list...)
}

// removeSub removes sub from the client and the sublist; it is safe to
// call more than once and from any goroutine.
func (c *client) removeSub(sub *subscription) {
	if c.dropSub(sub) {
		_ = sub.acc.sl.Remove(sub.subject, sub.queue, sub)
		c.srv.interestRemoved(sub)
	}
}

// ProcessPub dispatches a PUB or HPUB (docs/protocol.md 1.3, 1.7, 1.8).
func (c *client) ProcessPub(subj, reply []byte, hdrLen int, msg []byte) error {
	if c.log.TraceEnabled() {
		c.tracePub(subj, reply, hdrLen, msg)
	}
	if hdrLen >= 0 && !c.opts.Headers {
		return errHeadersNotSupported
	}
	c.nIn++
	c.bIn += int64(len(msg))
	if !c.checkPub(subj, reply) {
		return nil
	}
	if hdrLen == 0 { // an empty header block: nats-server delivers a plain MSG
		hdrLen = -1
	}
	if hdrLen > 0 {
		var skip bool
		if hdrLen, msg, skip = c.initTrace(subj, hdrLen, msg); skip {
			return nil
		}
	}
	c.sendOK()
	if c.srv.jsDomain != nil {
		var mapped bool
		if subj, mapped = mapJSDomain(c.srv.jsDomain, subj); mapped && c.trace != nil {
			c.trace.traceMapped(subj)
		}
	}
	c.dispatch(subj, reply, hdrLen, msg)
	c.sendTrace()
	return nil
}

// errHeadersNotSupported closes a connection that sent HPUB without
// negotiating headers; nats-server sends no -ERR (docs/protocol.md 1.3).
var errHeadersNotSupported = &protocol.Error{Close: true}

// Prefixes a client may not publish to or use as a reply (nats-server
// v2.15.2 client.go: reserved gateway, service-import and JetStream ack
// subjects).
var (
	reservedSubjectPrefixes = [][]byte{[]byte("_GR_."), []byte("$GR."), []byte("$NRG.")}
	reservedReplyPrefixes   = [][]byte{[]byte("_R_."), []byte("_GR_."), []byte("$GR.")}
	jsAckPrefix             = []byte("$JS.ACK.")
)

// isReservedReply reports a reply subject a client may not use: the
// service-import and gateway prefixes, or "$JS.ACK." followed by at least
// one byte (nats-server v2.15.2 isReservedReply).
func isReservedReply(reply []byte) bool {
	if len(reply) > len(jsAckPrefix) && bytes.HasPrefix(reply, jsAckPrefix) {
		return true
	}
	return hasAnyPrefix(reply, reservedReplyPrefixes)
}

// checkPub applies the pedantic subject check, the reserved-prefix
// permission checks and the user's publish permissions (perms.go), in
// nats-server v2.15.2's order (processInboundClientMsg); it reports
// whether the message may be delivered.
func (c *client) checkPub(subj, reply []byte) bool {
	if c.opts.Pedantic && !subject.ValidLiteralBytes(subj) {
		c.sendErr("Invalid Publish Subject")
	}
	if hasAnyPrefix(subj, reservedSubjectPrefixes) || !c.mayPublish(subj) {
		c.pubViolation(subj)
		return false
	}
	if isReservedReply(reply) {
		c.sendErr(fmt.Sprintf("Permissions Violation for Publish with Reply of %q", reply))
		return false
	}
	return true
}

func hasAnyPrefix(b []byte, prefixes [][]byte) bool {
	for _, p := range prefixes {
		if bytes.HasPrefix(b, p) {
			return true
		}
	}
	return false
}
