package consumerrun

import (
	"encoding/json"
	"time"
)

// Pull requests seen by a replicated consumer's followers (docs/cluster.md,
// "Pull requests through a change of leader").
//
// A pull request waits on the consumer's leader alone. When the leader
// dies (SIGKILL, a crash, a partition) its waiting requests die with it,
// and a client whose request waited there (nats.go's Consume, Fetch)
// hears nothing until its heartbeats miss: a Consume through another
// server got nothing for 5 s after its consumer's leader was killed,
// where nats-server's clients went on within 33 ms. nats-server v2.15.2
// proposes each waiting request's reply subject to the consumer's Raft
// group (consumer.go addClusterPendingRequest, removeClusterPendingRequest)
// and its new leader sends each a 409 Leadership Change
// (checkPendingRequests), on which the clients ask again at once.
//
// cairn records them without a Raft entry each (one per pull request,
// fsynced on a majority, would cost a Fetch loop an fsync a fetch): each
// follower replica subscribes to the consumer's pull subject too and
// keeps the reply subjects it sees, each until its request expires (at
// most shadowKeep without one), at most maxShadowPulls of them. A
// replica that comes to lead by an election (its predecessor went
// silent: ReplicatedLog.HandedOver false) sends each reply subject still
// kept one 409 Leadership Change, after it subscribed as the leader (the
// route that carries the 409 to the client's server carries that
// interest first); one handed the leadership by a live predecessor
// sends none, the predecessor ending its own (endOrphans). A follower
// cannot tell which requests its leader already answered: a
// reply subject whose request ended gets the 409 too. nats.go's Consume
// keeps one reply subject for all its requests, which then asks once
// more (the same as a real leadership change); a finished Fetch's reply
// subject has no subscriber left.

// maxShadowPulls bounds the reply subjects a follower keeps (twice the
// default max_waiting, 512).
const maxShadowPulls = 1024

// shadowKeep is how long a follower keeps the reply subject of a request
// without expires.
const shadowKeep = 2 * time.Minute

// shadowSubscribe subscribes a follower replica of a replicated pull
// consumer to its pull subject, to keep the reply subjects it sees
// (c.mu held); nothing when it leads, has stopped or is a push consumer,
// or already subscribed so.
func (c *Consumer) shadowSubscribe() {
	if !c.repl || c.leading || c.stopped || c.shadow != nil || c.cfg.IsPush() {
		return
	}
	sub, err := c.env.Transport.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+c.sr.Name()+"."+c.name, "", c.onShadowPull)
	if err != nil {
		c.env.Logf("consumer %s > %s: follow its pull requests: %v", c.sr.Name(), c.name, err)
		return
	}
	c.shadow = sub
}

// shadowUnsubscribe ends the follower's subscription (c.mu held).
func (c *Consumer) shadowUnsubscribe() {
	if c.shadow != nil {
		c.shadow.Unsubscribe()
		c.shadow = nil
	}
}

// onShadowPull keeps the reply subject of a pull request a follower sees.
func (c *Consumer) onShadowPull(_, reply string, _, data []byte) {
	if reply == "" {
		return
	}
	now := c.now()
	until := now.Add(shadowKeep)
	var req struct {
		Expires time.Duration `json:"expires"`
		NoWait  bool          `json:"no_wait"`
	}
	if json.Unmarshal(data, &req) == nil {
		switch {
		case req.NoWait && req.Expires <= 0:
			return // answered at once by the leader, or by nobody
		case req.Expires > 0:
			until = now.Add(req.Expires)
		}
	}
	// shadowMu, not mu: the handler runs on the publisher's goroutine,
	// which may be this consumer's own loop holding mu (forward publishes
	// the requests an old leader kept: the subscription here takes them).
	c.shadowMu.Lock()
	defer c.shadowMu.Unlock()
	c.keepShadowPull(reply, until.UnixNano(), now.UnixNano())
}

// keepShadowPull keeps reply until its request expires at until (unix
// ns), within maxShadowPulls: when full, those expired by now go first,
// and a new reply subject is not kept if none did (c.shadowMu held).
func (c *Consumer) keepShadowPull(reply string, until, now int64) {
	if c.shadowPulls == nil {
		c.shadowPulls = map[string]int64{}
	}
	if _, ok := c.shadowPulls[reply]; !ok && len(c.shadowPulls) >= maxShadowPulls {
		for r, u := range c.shadowPulls {
			if u <= now {
				delete(c.shadowPulls, r)
			}
		}
		if len(c.shadowPulls) >= maxShadowPulls {
			return
		}
	}
	c.shadowPulls[reply] = max(c.shadowPulls[reply], until)
}

// endShadowPulls, on a replica that has just come to lead (and
// subscribed as the leader), stops following and, with answer (its
// predecessor went silent), sends every reply subject kept whose request
// has not expired a 409 Leadership Change (c.mu held). A predecessor
// that handed the leadership over ends the requests that waited on it
// itself, once this replica serves (endOrphans), and forwards those that
// reached it meanwhile: the 409s from here too ended requests that were
// being served (after graceful step-downs, nats.go's Fetch returned 21
// leadership-change errors in a run, and 7 messages were delivered
// again).
func (c *Consumer) endShadowPulls(answer bool) {
	c.shadowUnsubscribe()
	c.shadowMu.Lock()
	kept := c.shadowPulls
	c.shadowPulls = nil
	c.shadowMu.Unlock()
	if !answer {
		return
	}
	now := c.now().UnixNano()
	for reply, until := range kept {
		if until > now {
			c.env.Transport.Publish(reply, "", statusLeadershipChange, nil)
		}
	}
}
