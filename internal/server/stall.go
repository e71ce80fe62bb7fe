package server

import "time"

// Stalling follows nats-server v2.15.2 (client.go stalledWait): a producer
// that outruns a consumer is slowed instead of letting the consumer's
// buffer grow to the slow-consumer limit.

// waitStalled blocks the read loop until a receiver this read batch
// pushed past its stall threshold (client.stallOn) catches up, for at most stallMin (stallMax once the receiver is at its
// limit), and for at most stallBudget in total per read batch. A route at
// its limit holds the publisher until it is back under the stall
// threshold or closes (only its write deadline closes it, when a write
// makes no progress at all): passing max_pending does not close a route
// (outbound.route), so this wait is what bounds its memory, to
// max_pending plus what each publisher's last read batch added.
func (c *client) waitStalled() {
	rc := c.stallOn
	c.stallOn = nil
	if rc == nil {
		return
	}
	ch, full := rc.out.stallState()
	if ch == nil {
		return
	}
	c.stalls.Add(1)
	c.srv.ctr.stalls.Add(1)
	if full && rc.route != nil {
		<-ch // closed when the route catches up, or closes
		return
	}
	ttl := stallMin
	if full {
		ttl = stallMax
	}
	t := time.NewTimer(min(ttl, stallBudget))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}
