package server

import (
	"bytes"
	"math/rand/v2"
	"slices"

	"github.com/cairnmq/cairn/internal/route"
)

// A message published on this server goes to each peer with matching
// interest at most once, as one RMSG or HMSG that lists the queue groups
// for which the peer was chosen (docs/routes.md; nats-server v2.15.2
// client.go processMsgResults, addSubToRouteTargets). A message that came
// from a route is delivered locally only (one hop).

// routeTarget is a route that receives the message being dispatched, with
// the queue groups it was chosen for.
type routeTarget struct {
	rc     *client
	queues []string
}

// isRemote reports whether sub is a peer's interest (a subscription of a
// route connection).
func (sub *subscription) isRemote() bool {
	return sub.client != nil && sub.client.route != nil
}

// addRouteTarget records that rc receives the message, for queue group
// queue when not empty. c.rts is owned by c's dispatching goroutine.
func (c *client) addRouteTarget(rc *client, queue string) {
	for i := range c.rts {
		if c.rts[i].rc == rc {
			if queue != "" {
				c.rts[i].queues = append(c.rts[i].queues, queue)
			}
			return
		}
	}
	if len(c.rts) < cap(c.rts) {
		c.rts = c.rts[:len(c.rts)+1] // reuse the slot's queue slice
	} else {
		c.rts = append(c.rts, routeTarget{})
	}
	t := &c.rts[len(c.rts)-1]
	t.rc = rc
	if queue != "" {
		t.queues = append(t.queues, queue)
	}
}

// forwardToRoutes writes the message to every route target, then forgets
// them. match is the subject peers match it by; subj is the subject the
// subscribers see (JetStream deliveries travel with it after '@' in the
// reply, as in nats-server).
func (c *client) forwardToRoutes(match, subj, reply []byte, hdrLen int, msg []byte) {
	if len(reply) > 0 && !bytes.Equal(match, subj) && jsAckDeliverIdx(reply) < 0 {
		c.fwdReply = append(append(append(c.fwdReply[:0], reply...), '@'), subj...)
		reply = c.fwdReply
	}
	hdrLen, msg = c.withAPIClient(match, hdrLen, msg)
	for i := range c.rts {
		t := &c.rts[i]
		if c.trace != nil && hdrLen > 0 {
			hmsg, hlen := withHop(msg, hdrLen, c.trace.traceRoute(t.rc))
			c.forwardTo(t, match, reply, hlen, hmsg)
		} else {
			c.forwardTo(t, match, reply, hdrLen, msg)
		}
		clear(t.queues)
		t.rc, t.queues = nil, t.queues[:0]
	}
	c.rts = c.rts[:0]
}

// forwardTo appends one RMSG or HMSG to the route's outbound buffer. Headers
// are dropped for a peer that does not support them.
func (c *client) forwardTo(t *routeTarget, match, reply []byte, hdrLen int, msg []byte) {
	rc := t.rc
	if hdrLen >= 0 && !rc.route.headers {
		msg, hdrLen = msg[hdrLen:], -1
	}
	o := rc.out
	o.mu.Lock()
	if !o.acceptingLocked() {
		o.mu.Unlock()
		return
	}
	tail := o.tailLocked(route.MsgHeaderBound(c.acc.name, match, reply, t.queues) + len(msg) + 2)
	tail = route.AppendMsgHeader(tail, c.acc.name, match, reply, t.queues, hdrLen, len(msg))
	tail = append(append(tail, msg...), "\r\n"...)
	o.countLocked(len(msg))
	ok := o.commitLocked(tail)
	stalled := o.stall != nil
	o.mu.Unlock()
	if rc.log.TraceEnabled() {
		rc.traceOutRouteMsg(c.acc.name, match, reply, t.queues, hdrLen, len(msg))
	}
	if !ok {
		rc.closeSlowConsumer()
		return
	}
	c.markFlush(rc)
	if stalled && c.route == nil && (c.stallOn == nil || c.stallOn.route == nil) {
		c.stallOn = rc // a route first: waitStalled holds the publisher while it is full
	}
}

// pickQueueMember picks the member of a queue group that receives a
// message published on this server: a local member (weight 1) or a peer
// (weight = its member count), at random in proportion to the weights
// (nats-server v2.15.2 weightedQSubIndex). From the pick on, it skips
// members that cannot receive from c: c's own subscription when c has echo
// off, and one at its auto-unsubscribe limit. It returns nil when none can.
func (c *client) pickQueueMember(members []*subscription, subj []byte) *subscription {
	n := len(members)
	start := c.weightedStart(members)
	for i := 0; i < n; i++ {
		sub := members[(start+i)%n]
		if c.canReceive(sub, subj) {
			return sub
		}
	}
	return nil
}

// weightedStart picks a random index of members, weighting peers by their
// member counts.
func (c *client) weightedStart(members []*subscription) int {
	total := int64(0)
	for _, sub := range members {
		total += sub.weight()
	}
	if total == int64(len(members)) {
		return rand.IntN(len(members))
	}
	r := rand.Int64N(total)
	for i, sub := range members {
		if r -= sub.weight(); r < 0 {
			return i
		}
	}
	return len(members) - 1
}

// weight is a queue member's share of the picks: a peer's member count, 1
// for a local member.
func (sub *subscription) weight() int64 {
	if sub.isRemote() {
		return max(int64(sub.qw.Load()), 1)
	}
	return 1
}

// canReceive reports whether sub may receive a message c dispatches on
// subj: not c's own with echo off, not at its auto-unsubscribe limit, not
// denied by its permissions (so the group's next member gets it, as in
// nats-server).
func (c *client) canReceive(sub *subscription, subj []byte) bool {
	if sub.client == c && !c.opts.Echo {
		return false
	}
	if deniedDelivery(sub, subj) {
		return false
	}
	max := sub.max.Load()
	return max <= 0 || sub.delivered.Load() < max
}

// pickLocalQueueMember picks the member of a queue group that receives a
// message from a peer: a local client's subscription, uniformly at random
// among those that can receive (nats-server prefers local members for
// routed messages; a routed message never goes back out).
func (c *client) pickLocalQueueMember(members []*subscription, subj []byte) *subscription {
	n := len(members)
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		sub := members[(start+i)%n]
		if sub.client != nil && sub.client.route == nil && c.canReceive(sub, subj) {
			return sub
		}
	}
	return nil
}

// inQueueFilter reports whether a message from a peer names queue group q.
func (c *client) inQueueFilter(q string) bool {
	return slices.ContainsFunc(c.queueFilter, func(b []byte) bool { return string(b) == q })
}
