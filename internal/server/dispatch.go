package server

import (
	"strconv"

	"github.com/cairnmq/cairn/internal/protocol"
	"github.com/cairnmq/cairn/internal/sublist"
)

// dispatch delivers a published message to every plain subscription
// that matches and to one member of each matching queue group (docs/protocol.md
// 1.7). When nothing was delivered (no match, only the publisher's own
// subscriptions with echo off, or a service import that reached nobody in
// the exporting account), a request gets the no-responders status
// (docs/protocol.md 1.8; nats-server v2.15.2 sends it in these cases).
func (c *client) dispatch(subj, reply []byte, hdrLen int, msg []byte) {
	if !c.deliverAll(subj, reply, hdrLen, msg) && len(reply) > 0 && c.opts.NoResponders {
		c.sendNoResponders(subj, reply)
	}
}

// deliverAll delivers to every matching plain subscription and one member
// of each matching queue group; it reports whether anything received it.
func (c *client) deliverAll(subj, reply []byte, hdrLen int, msg []byte) bool {
	return c.deliverAllAs(subj, subj, reply, hdrLen, msg)
}

// deliverAllAs matches by the subject match and writes subj into every
// frame: a JetStream delivery goes to the subscribers of a deliver
// subject or pull inbox but carries the stored subject (docs/protocol.md
// section 5.1). Peers with matching interest get the message once each
// (forward.go); a message from a peer (c is a route) reaches local
// subscribers only, and of the queue groups only those it names. It
// reports whether anything received the message, a peer included.
func (c *client) deliverAllAs(match, subj, reply []byte, hdrLen int, msg []byte) bool {
	c.routedBy = match
	r := c.acc.sl.Match(match)
	fromRoute := c.route != nil
	delivered := false
	for _, sub := range r.Plain {
		switch {
		case sub.isRemote():
			if !fromRoute && !c.localOnly {
				c.addRouteTarget(sub.client, "")
			}
		case fromRoute && sub.client == nil && !sub.shared():
			// JetStream's internal subscriptions stay local (interest.go).
		case c.importing && sub.imported:
			// An imported message is not imported again (imports.go).
		default:
			delivered = c.deliver(sub, subj, reply, hdrLen, msg) || delivered
		}
	}
	for i := range r.Queues {
		q := &r.Queues[i]
		var sub *subscription
		if fromRoute {
			if !c.inQueueFilter(q.Name) {
				continue
			}
			sub = c.pickLocalQueueMember(q.Members, subj)
		} else {
			sub = c.pickQueueMember(q.Members, subj)
		}
		switch {
		case sub == nil:
		case sub.isRemote():
			if !c.localOnly {
				c.addRouteTarget(sub.client, q.Name)
			}
		default:
			delivered = c.deliver(sub, subj, reply, hdrLen, msg) || delivered
		}
	}
	c.routedBy = nil
	if len(c.rts) > 0 {
		c.forwardToRoutes(match, subj, reply, hdrLen, msg)
		delivered = true
	}
	return delivered
}

// deliver appends one MSG or HMSG for sub to its client's outbound buffer
// and reports whether it did.
func (c *client) deliver(sub *subscription, subj, reply []byte, hdrLen int, msg []byte) bool {
	if sub.client == c && !c.opts.Echo {
		if c.trace != nil {
			c.trace.traceEgress(sub, sub.subject, traceErrNoEcho)
		}
		return false
	}
	return c.deliverTo(sub, subj, reply, hdrLen, msg)
}

// deliverTo delivers to sub regardless of echo, honouring its
// auto-unsubscribe limit, and reports whether it did.
func (c *client) deliverTo(sub *subscription, subj, reply []byte, hdrLen int, msg []byte) bool {
	if t := c.trace; t != nil {
		return c.deliverTraced(t, sub, subj, reply, hdrLen, msg)
	}
	if sub.svc != nil {
		return sub.svc(c, subj, reply, hdrLen, msg)
	}
	if sub.handler != nil {
		callHandler(sub, subj, reply, hdrLen, msg)
		return true
	}
	if deniedDelivery(sub, subj) {
		return false
	}
	return c.deliverMsg(sub, subj, reply, hdrLen, msg)
}

// deliverTraced is deliverTo for a traced message (msgtrace.go): a
// stream's subscription gets the trace, an import's carries it across
// (imports.go); a trace-only message reaches no other internal
// subscription ($JS.API and system requests: a deliberate difference,
// docs/compatibility.md) and no client, whose egress events are recorded
// all the same. An internal publisher delivering what a stream import
// carries records the "se" event for each subscription first and,
// unless the import allows the trace, delivers untraced (a trace-only
// message stops there).
func (c *client) deliverTraced(t *msgTrace, sub *subscription, subj, reply []byte, hdrLen int, msg []byte) bool {
	if si := c.viaImport; si != nil {
		t.traceStreamExport(sub.acc.name, string(subj))
		if !si.allowTrace {
			if t.only {
				return true // as delivered, as nats-server counts it
			}
			c.trace = nil
			ok := c.deliverTo(sub, subj, reply, hdrLen, msg)
			c.trace = t
			return ok
		}
	}
	switch {
	case sub.traced != nil:
		var hdr []byte
		data := msg
		if hdrLen > 0 {
			hdr, data = msg[:hdrLen:hdrLen], msg[hdrLen:]
		}
		sub.traced(string(subj), string(reply), hdr, data, t)
		return true
	case sub.crossing != nil:
		return sub.crossing(c, t, subj, reply, hdrLen, msg)
	case sub.svc != nil || sub.handler != nil:
		if t.only {
			return false
		}
		if sub.svc != nil {
			return sub.svc(c, subj, reply, hdrLen, msg)
		}
		callHandler(sub, subj, reply, hdrLen, msg)
		return true
	case deniedDelivery(sub, subj):
		t.traceEgress(sub, c.egressName(sub), traceErrSubDeny)
		return false
	case t.only:
		if max := sub.max.Load(); max > 0 && sub.delivered.Load() >= max {
			t.traceEgress(sub, c.egressName(sub), traceErrAutoUnsub)
			return false
		}
		t.traceEgress(sub, c.egressName(sub), "")
		return true
	}
	if max := sub.max.Load(); max > 0 && sub.delivered.Load() >= max {
		t.traceEgress(sub, c.egressName(sub), traceErrAutoUnsub)
		return false
	}
	t.traceEgress(sub, c.egressName(sub), "")
	return c.deliverMsg(sub, subj, reply, hdrLen, msg)
}

// egressName is how a traced delivery's egress event names the
// subscription sub: its subject or, for what a stream import carries,
// the subject in the exporter that nats-server's shadow subscription
// has (imports.go exporterSubject).
func (c *client) egressName(sub *subscription) string {
	if si := c.viaImport; si != nil {
		return si.exporterSubject(sub.subject)
	}
	return sub.subject
}

// deliverMsg writes the message to the client of sub, honouring its
// auto-unsubscribe limit, and reports whether it did.
func (c *client) deliverMsg(sub *subscription, subj, reply []byte, hdrLen int, msg []byte) bool {
	rc := sub.client
	n := sub.delivered.Add(1)
	max := sub.max.Load()
	if max > 0 && n > max {
		return false
	}
	ok, stalled := rc.appendMsg(sub.sid, subj, reply, hdrLen, msg)
	if rc.log.TraceEnabled() {
		rc.traceOut("MSG", subj, sub.sid, reply, []byte(strconv.Itoa(len(msg))))
	}
	if !ok {
		rc.closeSlowConsumer()
		return false
	}
	c.markFlush(rc)
	if stalled && rc != c && c.stallOn == nil {
		c.stallOn = rc
	}
	if len(reply) > 0 {
		if rp := rc.replies.Load(); rp != nil {
			rp.record(reply)
		}
	}
	if max > 0 && n == max {
		rc.removeSub(sub)
	}
	return true
}

// appendMsg writes the frame into c's outbound buffer. Headers are
// stripped for a client that did not negotiate them (docs/protocol.md 1.3). It
// reports ok false when c became a slow consumer, and stalled when its
// producers should slow down.
func (c *client) appendMsg(sid, subj, reply []byte, hdrLen int, msg []byte) (ok, stalled bool) {
	o := c.out
	o.mu.Lock()
	if !o.acceptingLocked() {
		o.mu.Unlock()
		return true, false
	}
	tail := o.tailLocked(frameBound(sid, subj, reply, msg))
	switch {
	case hdrLen < 0:
		tail = protocol.AppendMsg(tail, subj, sid, reply, msg)
		o.countLocked(len(msg))
	case c.headers.Load():
		tail = protocol.AppendHMsg(tail, subj, sid, reply, hdrLen, msg)
		o.countLocked(len(msg))
	default:
		tail = protocol.AppendMsg(tail, subj, sid, reply, msg[hdrLen:])
		o.countLocked(len(msg) - hdrLen)
	}
	ok = o.commitLocked(tail)
	stalled = o.stall != nil
	o.mu.Unlock()
	return ok, stalled
}

// frameBound is an upper bound of the bytes of a MSG or HMSG frame: the
// fields, five separators, two sizes of at most 20 digits, "HMSG", and two
// CRLFs.
func frameBound(sid, subj, reply, msg []byte) int {
	return len(sid) + len(subj) + len(reply) + len(msg) + 5 + 40 + 4 + 4
}

// sendNoResponders sends the 503 status to the requester's own plain
// (not queue) subscription that matches the reply subject, if it has one:
// HMSG <reply> <sid> <n> <n>\r\nNATS/1.0 503\r\nNats-Subject: <subj>\r\n\r\n\r\n
func (c *client) sendNoResponders(subj, reply []byte) {
	sub := ownSubscription(c, c.acc.sl.Match(reply))
	if sub == nil {
		return
	}
	h := append(c.nrHdr[:0], "NATS/1.0 503\r\nNats-Subject: "...)
	h = append(h, subj...)
	h = append(h, "\r\n\r\n"...)
	c.nrHdr = h
	c.deliverTo(sub, reply, nil, len(h), h)
}

func ownSubscription(c *client, r *sublist.Result[*subscription]) *subscription {
	for _, sub := range r.Plain {
		if sub.client == c {
			return sub
		}
	}
	return nil
}
