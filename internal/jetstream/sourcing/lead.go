package sourcing

import "time"

// Leader-only exchanges (docs/cluster.md, "Sourcing in a cluster"). A
// sourcer that reads its origin through a consumer — a durable one
// (durable.go), one it creates through an external API prefix
// (external.go), or one it creates on another server of the cluster
// (remote.go) — runs the exchange only on the replica that leads its
// stream, as nats-server v2.15.2 sets its mirror and source consumers up
// on the stream leader only (setLeader, setupMirrorConsumer,
// setupSourceConsumers):
//
//	await:   the stream leads here (a follower holds no consumer, no
//	         subscription, sends no request)
//	sync:    propose an empty Copy and wait for it (streamrun SyncLog):
//	         every copy the log committed before, the previous leader's
//	         included, is then in the store
//	start:   where copying goes on, from the store (durableRun.start)
//	run:     set the consumer up and receive, until the leadership
//	         moves (durableRun.moved)
//	release: drop the subscriptions and delete a consumer the sourcer
//	         created (not a durable one: it is the user's)
//
// A durable consumer is reset by the leader alone, and the reset sends
// it back to just above its ack floor, which only the leader's flow
// control replies move and only over copies its log applied: a new
// leader skips what the store holds and copies the rest, so nothing is
// copied twice or lost. An external or remote consumer is created by the
// leader starting one above the last origin sequence the store holds.
// A stream that is not replicated leads always: the loop runs once.

// runLeading runs the exchange of d, whose setup is setup, while the
// stream leads here, synced and started again at each change of
// leadership. It returns true when a replica of the origin runs here (a
// remote sourcer then reads its store), false once the sourcer stops.
func (s *sourcer) runLeading(d *durableRun, setup func() bool) bool {
	defer d.release()
	for {
		switch s.awaitLead(d.remote) {
		case leadStopped:
			return false
		case leadLocal:
			return true
		}
		gen := s.leadGen.Load()
		if s.r.Replicated() && !s.r.SyncLog() {
			if !s.pause(sourceRetry) {
				return false
			}
			continue
		}
		s.syncedGen, s.stale = gen, false
		d.fails = 0
		d.start()
		if !d.runLed(setup) {
			return false
		}
		d.release()
	}
}

// Outcomes of awaitLead.
const (
	leadHere    = iota // the stream leads here
	leadLocal          // a replica of the origin runs here
	leadStopped        // the sourcer stopped
)

// awaitLead waits until the sourcing stream leads here, a replica of the
// origin runs here (remote only) or the sourcer stops.
func (s *sourcer) awaitLead(remote bool) int {
	for {
		switch {
		case remote && s.env.Lookup(s.src.Name) != nil:
			return leadLocal
		case s.r.Leads():
			return leadHere
		}
		if !s.pause(sourceRetry) {
			return leadStopped
		}
	}
}

// pause waits for d, or until the sourcer is woken (Set.Lead); false
// when it stops.
func (s *sourcer) pause(d time.Duration) bool {
	select {
	case <-s.quit:
		return false
	case <-s.wake:
	case <-time.After(d):
	}
	return true
}

// runLed sets the consumer up with setup and receives from it, again
// after a backoff each time it fails or goes quiet, while the stream
// leads here under the leadership it synced (d.moved). It reports false
// when the sourcer stops.
func (d *durableRun) runLed(setup func() bool) bool {
	for !d.moved() {
		if setup() {
			d.fails = 0
			if !d.receive() {
				return false
			}
		} else {
			d.fails++
		}
		if d.moved() {
			return true
		}
		if !d.backoff() {
			return false
		}
	}
	return true
}

// moved reports whether the sourcer must stop its exchange: the
// stream's leadership changed since it found its start (it no longer
// leads, or another leader may have copied meanwhile), a copy was not
// applied (stale: the stream's state decides where to go on), or, for a
// remote sourcer, a replica of the origin runs here now.
func (d *durableRun) moved() bool {
	s := d.s
	return s.stale || s.leadGen.Load() != s.syncedGen || !s.r.Leads() || d.remote && s.env.Lookup(s.src.Name) != nil
}

// release ends the exchange of a leadership: the subscriptions go, and
// the consumer the sourcer created (not a durable one) is deleted.
func (d *durableRun) release() {
	d.unsubscribe()
	if d.s.src.Consumer == nil {
		d.dropConsumer()
	}
}
