package jscluster

import (
	"encoding/json"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// settleWait bounds how long a scale or move of a stream whose
// scale-down to one replica is not settled yet waits for the settle
// (waitSettled): the kept server converts its replica and asks for the
// settle within a few housekeeping rounds, and the update must still be
// answered within a client's 5 s request timeout (nats.go's and the nats
// CLI's default) once the scale itself ran (docs/cluster.md,
// "Settling").
const settleWait = 3 * time.Second

// settlePoll is how often waitSettled looks at the meta group's state.
const settlePoll = 20 * time.Millisecond

// updateTarget returns the meta group's assignment of stream k and its
// config: 10059 when there is none, 10058 when the config does not
// decode.
func (c *Cluster) updateTarget(k streamKey) (meta.StreamAssignment, stream.Config, *jserr.Error) {
	var cfg stream.Config
	sa, _, ok, _ := c.assignment(k)
	if !ok {
		return sa, cfg, jserr.New(jserr.StreamNotFound)
	}
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		return sa, cfg, jserr.From(err, jserr.StreamUpdate)
	}
	return sa, cfg, nil
}

// waitSettled waits, at most settleWait, until the scale-down to one
// replica that left stream k's assignment sa unsettled is settled
// (meta.SettleStream applied) or the stream is no longer that stream
// (deleted, or deleted and created again). It reports false when the
// assignment is still unsettled at the deadline (the caller answers
// 10008, as before the wait) or the server stops. nats-server v2.15.2
// takes a scale-up sent right after a scale-down to one replica (a
// stream of one replica there has no group to settle); the wait makes
// cairn take it too, a moment later.
func (c *Cluster) waitSettled(k streamKey, sa meta.StreamAssignment) bool {
	deadline := time.Now().Add(settleWait)
	for {
		cur, _, ok, _ := c.assignment(k)
		if !ok || cur.Created != sa.Created || !cur.Unsettled() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-c.quit:
			return false
		case <-time.After(min(settlePoll, left)):
		}
	}
}

// waitConsumerSettled is waitSettled for consumer k, whose assignment ca
// is unsettled: it returns the assignment once settled; false when still
// unsettled at the deadline, when the consumer was deleted (or deleted
// and created again) meanwhile, or when the server stops (the caller
// answers 10008: a retry sees what the meta group holds then).
func (c *Cluster) waitConsumerSettled(k consumerKey, ca meta.ConsumerAssignment) (meta.ConsumerAssignment, bool) {
	deadline := time.Now().Add(settleWait)
	for {
		cur, _, ok, _ := c.consumerAssignment(k)
		if !ok || cur.Created != ca.Created {
			return ca, false
		}
		if !cur.Unsettled() {
			return cur, true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return ca, false
		}
		select {
		case <-c.quit:
			return ca, false
		case <-time.After(min(settlePoll, left)):
		}
	}
}
