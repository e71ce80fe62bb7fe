package jscluster

import (
	"sync"
	"time"
)

// Led elsewhere (docs/cluster.md, "Removing a server"). A replica that
// left its stream's or consumer's assignment while its server was down
// (STREAM.PEER.REMOVE, SERVER.REMOVE, a move) comes back with a group
// whose other replicas no longer talk to it: their leader removed it
// (or, for a group of two, forced it out: lostvoter.go), and raft's
// leader and its followers ignore the vote requests of a replica outside
// their configuration while they hear their leader. votersHeard then
// stays false, and the replica, which retires only once another voter
// is heard (the evacuated live copy of a stream of two must stay while
// nobody else leads), stayed for good, answering for the stream with
// its old state (a trial: a durable's info answered 10008 from it).
// It also retires once the stream's or consumer's leader, another
// server's replica, answers its $JSC.SI or $JSC.CI ask: a group that
// leads without it holds what it committed without it.

// elsewhereEvery is how often a leaving replica asks whether its
// stream or consumer is led elsewhere, and how long an answer counts.
const elsewhereEvery = retireAfter

// elsewhere remembers, by $JSC.SI or $JSC.CI subject, when an ask was
// last sent and when a leader last answered one. Its asks run on their
// own goroutines (requestAll waits up to listInfoWait), one per subject
// at a time.
type elsewhere struct {
	mu     sync.Mutex
	asked  map[string]time.Time
	seen   map[string]time.Time
	flight map[string]bool
}

// ledElsewhere reports whether a leader answered subject within
// elsewhereEvery, and asks again (apart, on its own goroutine) when the
// last ask is older than that.
func (c *Cluster) ledElsewhere(subject string) bool {
	e := &c.elsewhere
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.asked == nil {
		e.asked, e.seen, e.flight = map[string]time.Time{}, map[string]time.Time{}, map[string]bool{}
	}
	for s, t := range e.asked { // forget what nobody asked about lately
		if now.Sub(t) > 4*elsewhereEvery && !e.flight[s] {
			delete(e.asked, s)
			delete(e.seen, s)
		}
	}
	if !e.flight[subject] && now.Sub(e.asked[subject]) >= elsewhereEvery {
		e.asked[subject], e.flight[subject] = now, true
		go c.askElsewhere(subject)
	}
	t, ok := e.seen[subject]
	return ok && now.Sub(t) < elsewhereEvery
}

// askElsewhere asks subject once and records an answer.
func (c *Cluster) askElsewhere(subject string) {
	answered := c.requestAll([]string{subject}, nil, listInfoWait)[0] != nil
	e := &c.elsewhere
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.flight, subject)
	if answered {
		e.seen[subject] = time.Now()
	}
}
