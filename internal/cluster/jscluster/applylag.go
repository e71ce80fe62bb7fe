package jscluster

import (
	"sync"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// A replicated stream's runtime applies on its own goroutine what its
// group hands it (streamlog.Log.Handed), so a replica whose group has
// applied everything its leader committed may still be far behind in its
// stream: after a restart, tens of thousands of operations queued. Such
// a replica is catching up too (Health, "stream catching up"), as a
// nats-server replica is while its stream catches up, from the moment
// its group lacks what its leader committed until its stream has applied
// what the group had handed it once the group had it all:
//
//   - a replica sampled for the first time, or whose group is not caught
//     up (raftnode.GroupStatus.CaughtUp), is catching up;
//   - at the first sample that finds its group caught up, the target is
//     what the log had handed by then;
//   - it stops catching up when its stream has applied the target.
//
// The run goroutine samples each replica every housekeeping tick (250
// ms); Health reads the stream's applied index afresh, and judges a
// replica not sampled yet by what its log has handed now. A replica
// whose group stays caught up (a follower keeping pace, under load or
// not) never starts catching up.

// applyLag is the sampling of one replica.
type applyLag struct {
	rep      *replica // the replica sampled (a restarted one starts again)
	catching bool
	target   uint64 // 0 while its group is not caught up
}

// applyLags are the replicas' samplings, by stream.
type applyLags struct {
	mu sync.Mutex // guards m; the run goroutine writes, Health reads
	m  map[streamKey]*applyLag
}

// sampleApply samples every replica of a replicated stream here (the
// run goroutine's housekeeping tick): what it reads first, with no lock
// of its own held, then the samplings under lags.mu.
func (c *Cluster) sampleApply() {
	c.mu.Lock()
	reps := make(map[streamKey]*replica, len(c.replicas))
	for k, r := range c.replicas {
		if r.log != nil {
			reps[k] = r
		}
	}
	c.mu.Unlock()
	type sample struct {
		rep             *replica
		applied, handed uint64
		synced          bool
	}
	samples := map[streamKey]sample{}
	for k, r := range reps {
		applied, ok := c.streamApplied(k)
		if !ok {
			continue
		}
		gs, err := c.node.Brief(r.sa.Group)
		if err != nil {
			continue
		}
		samples[k] = sample{rep: r, applied: applied, handed: r.log.Handed(), synced: gs.Role == raftnode.Leader || gs.CaughtUp}
	}
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
	for k, smp := range samples {
		l := c.lags.m[k]
		if l == nil || l.rep != smp.rep {
			l = &applyLag{rep: smp.rep, catching: true}
			c.lags.m[k] = l
		}
		switch {
		case !smp.synced:
			l.catching, l.target = true, 0
		case l.catching && l.target == 0:
			l.target = smp.handed
		}
		if l.catching && l.target != 0 && smp.applied >= l.target {
			l.catching = false
		}
	}
}

// streamApplied returns the applied index of the stream of replica k in
// its account's engine (jetstream.JetStream.StreamAppliedIndex).
func (c *Cluster) streamApplied(k streamKey) (uint64, bool) {
	acc := c.engineOf(k.account)
	if acc == nil {
		return 0, false
	}
	return acc.js.StreamAppliedIndex(k.name)
}

// applyBehind reports whether the stream of replica r (of stream k) is
// catching up with its log (sampleApply).
func (c *Cluster) applyBehind(k streamKey, r *replica) bool {
	if r == nil || r.log == nil {
		return false
	}
	applied, ok := c.streamApplied(k)
	if !ok {
		return false
	}
	c.lags.mu.Lock()
	defer c.lags.mu.Unlock()
	l := c.lags.m[k]
	switch {
	case l == nil || l.rep != r:
		return applied < r.log.Handed()
	case !l.catching:
		return false
	}
	return l.target == 0 || applied < l.target
}
