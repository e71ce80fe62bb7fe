package consumerrun

import (
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
)

// Pull requests through a change of leader (docs/cluster.md, "Pull
// requests through a change of leader").
//
// A pull request waits on the consumer's leader alone. When the leader
// dies (SIGKILL, a crash, a partition), or every server restarts at once,
// its waiting requests die with it, and a client whose request waited
// there (nats.go's Consume, Fetch) hears nothing until its heartbeats
// miss: about 30 s for a Consume with the default options. nats-server
// v2.15.2 proposes each waiting request's reply subject to the consumer's
// Raft group (consumer.go addClusterPendingRequest) and its new leader
// sends each a 409 Leadership Change (checkPendingRequests), on which
// the clients ask again at once.
//
// cairn's leader records the reply subject of each request that waits
// as a PullRequest operation in the round's batch (it rides with the
// round's deliveries: no entry of its own on a busy consumer), with the
// request's expiry (pullKeep from now without one); it records a reply
// subject again only once less than half of the new request's life is
// left on the record (a Consume asks again and again on one reply
// subject). Every replica keeps the reply subjects its log committed
// (pullSet; in the consumer's snapshots and checkpoints, replayed at a
// restart). A replica that comes to lead by an election (its predecessor
// went silent: ReplicatedLog.HandedOver false) sends each reply subject
// kept whose request has not expired one 409 Leadership Change, after it
// subscribed as the leader (the route that carries the 409 to the
// client's server carries that interest first); one handed the
// leadership by a live predecessor sends none, the predecessor ending
// its own (endOrphans). The record does not say which requests were
// answered since: a reply subject whose request ended gets the 409 too.
// nats.go's Consume keeps one reply subject for all its requests and
// then asks once more (as on a real leadership change); a finished
// Fetch's reply subject has no subscriber left.

// maxPulls bounds the reply subjects a consumer's replicas keep (twice
// the default max_waiting, 512).
const maxPulls = 1024

// pullKeep is how long the reply subject of a request without expires is
// kept.
const pullKeep = 2 * time.Minute

// pullSet is the reply subjects of the pull requests a replicated
// consumer's log recorded, with when each request expires (unix ns).
type pullSet map[string]int64

// keep records reply until until, as applying a PullRequest operation
// the leader decided at now (unix ns) does on every replica: with the
// set full, the expired ones (by now) go first, and a new reply subject
// is not kept if none did. It is a function of the operations applied
// only (no clock, and no map order decides what stays). It reports
// whether reply is kept.
func (p pullSet) keep(reply string, until, now int64) bool {
	if _, ok := p[reply]; !ok && len(p) >= maxPulls {
		for r, u := range p {
			if u <= now {
				delete(p, r)
			}
		}
		if len(p) >= maxPulls {
			return false
		}
	}
	p[reply] = max(p[reply], until)
	return true
}

// recordPull has the leader of a replicated consumer record a pull
// request it queued (c.mu held): reply, expiring at expires (unix ns, 0:
// none), no_wait or not. A no_wait request without expires is answered
// within the round (or by nobody); a reply subject recorded with at
// least half of the request's life left is not recorded again, and
// nothing is while a replica's server runs a build that does not decode
// the operation (ReplicatedLog.RecordsPulls). The
// operation is proposed with the round's batch; a leader holding for a
// leadership transfer (holdRound) records nothing: raft drops what is
// proposed then, and its successor is handed the request (endOrphans).
func (c *Consumer) recordPull(reply string, expires int64, noWait bool, now time.Time) {
	if !c.repl || !c.leading || c.stepDown || c.holding || noWait && expires == 0 {
		return
	}
	n := now.UnixNano()
	if expires == 0 {
		expires = now.Add(pullKeep).UnixNano()
	}
	if have, ok := c.pullsProposed[reply]; ok && have-n >= (expires-n)/2 {
		return
	}
	if c.pullsProposed == nil {
		c.pullsProposed = pullSet{}
	}
	if !c.log.(ReplicatedLog).RecordsPulls() {
		return // a replica's server of an earlier build would fence it
	}
	if !c.pullsProposed.keep(reply, expires, n) {
		return
	}
	c.Commit(&consumer.PullRequest{Reply: reply, Expires: expires, Time: n})
}

// addPull queues a pull request (Deliverer.AddPull) and records it on a
// replicated consumer's leader (c.mu held).
func (c *Consumer) addPull(reply string, body []byte, now time.Time) {
	if queued, expires, noWait := c.d.AddPull(reply, body, now, c.sr.DurableSeq()); queued {
		c.recordPull(reply, expires, noWait, now)
	}
}

// applyPull keeps the reply subject a committed PullRequest names (c.mu
// held; every replica).
func (c *Consumer) applyPull(o *consumer.PullRequest) {
	if c.pulls == nil {
		c.pulls = pullSet{}
	}
	c.pulls.keep(o.Reply, o.Expires, o.Time)
}

// endRecordedPulls, on a replica that has just come to lead (and
// subscribed as the leader), sends every reply subject its log recorded
// whose request has not expired a 409 Leadership Change when answer is
// set (its predecessor went silent), but those in ended (a replica
// that regained its leadership ended the requests that waited on it:
// endOrphans), and starts this leadership's record of what it proposed
// from the committed one (c.mu held). A predecessor
// that handed the leadership over ends the requests that waited on it
// itself, once this replica serves (endOrphans), and forwards those that
// reached it meanwhile: 409s from here too ended requests that were
// being served (after graceful step-downs, nats.go's Fetch returned 21
// leadership-change errors in a run, and 7 messages were delivered
// again).
func (c *Consumer) endRecordedPulls(answer bool, ended map[string]bool) {
	c.pullsProposed = pullSet{}
	now := c.now().UnixNano()
	for reply, until := range c.pulls {
		if until <= now {
			continue
		}
		c.pullsProposed[reply] = until
		if answer && !ended[reply] {
			c.env.Transport.Publish(reply, "", statusLeadershipChange, nil)
		}
	}
}
