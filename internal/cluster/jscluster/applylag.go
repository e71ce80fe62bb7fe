package jscluster

import (
	"sync"
	"time"
)

// A replicated stream's runtime applies on its own goroutine what its
// group hands it (streamlog.Log.Handed), so a replica whose group has
// applied everything its leader committed may still be far behind in its
// stream: after a restart, tens of thousands of operations queued. Such
// a replica is catching up too (Health, "stream catching up"). The run
// goroutine samples each replica every housekeeping tick: a mark is the
// index the log had handed when it was set; a replica whose stream has
// not applied through its mark within the contact window
// (raftnode.Node.ContactWindow) is behind, until it reaches it; then a
// new mark is set. A stream that keeps pace with its log reaches each
// mark well within the window.

// applyLag is the sampling of one replica.
type applyLag struct {
	rep    *replica // the replica sampled (a restarted one starts again)
	mark   uint64
	markAt time.Time
	behind bool
}

// applyLags are the replicas' samplings, by stream.
type applyLags struct {
	mu sync.Mutex // guards m; the run goroutine writes, Health reads
	m  map[streamKey]*applyLag
}

// sampleApply samples every replica of a replicated stream here (the
// run goroutine's housekeeping tick).
func (c *Cluster) sampleApply() {
	now := c.cfg.Now()
	window := c.node.ContactWindow()
	c.mu.Lock()
	reps := make(map[streamKey]*replica, len(c.replicas))
	for k, r := range c.replicas {
		if r.log != nil {
			reps[k] = r
		}
	}
	accs := make(map[string]*account, len(c.accounts))
	for n, a := range c.accounts {
		accs[n] = a
	}
	c.mu.Unlock()
	c.lags.mu.Lock()
	defer c.lags.mu.Unlock()
	if c.lags.m == nil {
		c.lags.m = map[streamKey]*applyLag{}
	}
	for k := range c.lags.m {
		if reps[k] == nil {
			delete(c.lags.m, k)
		}
	}
	for k, r := range reps {
		acc := accs[k.account]
		if acc == nil || acc.js == nil {
			continue
		}
		applied, ok := acc.js.StreamAppliedIndex(k.name)
		if !ok {
			continue
		}
		l := c.lags.m[k]
		if l == nil || l.rep != r {
			l = &applyLag{rep: r, markAt: now}
			c.lags.m[k] = l
		}
		switch {
		case applied >= l.mark:
			l.mark, l.markAt, l.behind = r.log.Handed(), now, false
		case now.Sub(l.markAt) > window:
			l.behind = true
		}
	}
}

// applyBehind reports whether the stream of replica k is behind its log
// (sampleApply).
func (c *Cluster) applyBehind(k streamKey) bool {
	c.lags.mu.Lock()
	defer c.lags.mu.Unlock()
	l := c.lags.m[k]
	return l != nil && l.behind
}
