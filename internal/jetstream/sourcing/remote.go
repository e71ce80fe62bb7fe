package sourcing

import "time"

// Remote sourcing (docs/cluster.md, "Sourcing in a cluster"). In a
// clustered JetStream the origin of a mirror or source (of the same
// account, without `external` or `consumer`) may have no replica on the
// server where the sourcing stream leads. The sourcer then reads it as
// nats-server v2.15.2 reads every origin (setupMirrorConsumer,
// trySetupSourceConsumer): through a consumer of its own created on the
// origin with $JS.API.CONSUMER.CREATE, the exchange of an external
// sourcer (external.go, docs/external-sourcing.md) with the account's own
// API prefix and deliver subjects $JS.M.<random> / $JS.S.<random>. The
// cluster routes the requests to the meta leader and the deliveries,
// heartbeats and flow control between the origin's server and this one.
//
// Only the replica that leads the sourcing stream runs the exchange, and
// it finds where copying starts from the stream's state once its log's
// committed operations are applied (streamrun.Stream.SyncLog): a mirror
// after its last sequence, a source after the origin sequence of its last
// copy (its Nats-Stream-Source header). A replica that stops leading
// deletes its consumer; the next leader creates one from its own state.
// A consumer whose server dies goes with it (an ephemeral): its
// heartbeats stop, and after 10 s without them the sourcer creates a new
// one from its position, as nats-server's health check does.

// runRemote sources from an origin with no replica on this server
// through the origin's consumer API, while the stream leads here. It
// returns true when a replica of the origin runs here (the sourcer then
// reads its store), false once the sourcer stops.
func (s *sourcer) runRemote() bool {
	d := &durableRun{s: s, in: &inbox{sig: make(chan struct{}, 1)}, remote: true}
	defer d.unsubscribe()
	defer d.dropConsumer()
	for {
		switch s.awaitLead() {
		case leadStopped:
			return false
		case leadLocal:
			return true
		}
		gen := s.leadGen.Load()
		if !s.r.SyncLog() {
			if !s.pause(sourceRetry) {
				return false
			}
			continue
		}
		s.syncedGen, s.stale = gen, false
		d.fails = 0
		d.start()
		if !d.runLed() {
			return false
		}
		d.dropConsumer()
		d.unsubscribe()
	}
}

// Outcomes of awaitLead.
const (
	leadHere    = iota // the stream leads here
	leadLocal          // a replica of the origin runs here
	leadStopped        // the sourcer stopped
)

// awaitLead waits until the sourcing stream leads here, a replica of the
// origin runs here or the sourcer stops.
func (s *sourcer) awaitLead() int {
	for {
		switch {
		case s.env.Lookup(s.src.Name) != nil:
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

// runLed sets the consumer up and receives from it, again after a
// backoff each time it fails or goes quiet, while the stream leads here
// under the leadership it synced (d.moved). It reports false when the
// sourcer stops.
func (d *durableRun) runLed() bool {
	for !d.moved() {
		if d.setupExternal() {
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

// moved reports whether a remote sourcer must stop its exchange: the
// stream's leadership changed since it found its start (it no longer
// leads, or another leader may have copied meanwhile), a copy was not
// applied (stale: the stream's state decides where to go on), or a
// replica of the origin runs here now.
func (d *durableRun) moved() bool {
	s := d.s
	return s.stale || s.leadGen.Load() != s.syncedGen || !s.r.Leads() || s.env.Lookup(s.src.Name) != nil
}
