package jscluster

import (
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// The Raft WAL is one log for every group of this server, and a segment
// is deleted only once no group holds entries in it above its
// compaction point (docs/cluster.md, "The WAL"). A group that goes idle
// between two of its checkpoints would keep the segment holding its last
// entries, and every newer one, until it next applies something: so the
// run goroutine checks the WAL's pins (raftnode Node.WALPins) every
// walPinPoll, and a group seen keeping a sealed segment for walPinGrace
// is checkpointed out of its turn (then again each walPinGrace while it
// still does): the meta group and a replicated consumer at once (their
// checkpoints are small and compact through every entry applied), a
// file stream's replica by its checkpoint goroutine (streamckpt Poke:
// it compacts as far as the stream's other replicas allow).
const (
	walPinPoll  = time.Second
	walPinGrace = 10 * time.Second
)

// walPins is the run goroutine's record of the groups keeping sealed WAL
// segments.
type walPins struct {
	polled time.Time
	// since: when each group was first seen keeping a sealed segment, or
	// last checkpointed for it.
	since map[raftnode.GroupID]time.Time
}

// releaseWAL checkpoints the groups that have kept sealed WAL segments
// for walPinGrace (the housekeeping tick; at most every walPinPoll).
func (c *Cluster) releaseWAL() {
	now := c.cfg.Now()
	if now.Sub(c.pins.polled) < walPinPoll {
		return
	}
	c.pins.polled = now
	since := make(map[raftnode.GroupID]time.Time)
	var due []raftnode.GroupID
	for _, p := range c.node.WALPins() {
		at, ok := c.pins.since[p.Group]
		if !ok {
			at = now
		}
		if now.Sub(at) >= walPinGrace {
			due = append(due, p.Group)
			at = now
		}
		since[p.Group] = at
	}
	c.pins.since = since
	for _, g := range due {
		c.checkpointPinned(g, now)
	}
}

// checkpointPinned checkpoints this server's replica of group g, which
// keeps sealed WAL segments (releaseWAL). A failure is logged; the next
// walPinGrace tries again.
func (c *Cluster) checkpointPinned(g raftnode.GroupID, now time.Time) {
	if g == meta.MetaGroup {
		if err := c.meta.Checkpoint(); err != nil {
			c.cfg.Logf("jscluster: checkpoint of the meta group (it keeps Raft WAL segments): %v", err)
		}
		return
	}
	c.mu.Lock()
	var cr *creplica
	for _, r := range c.creplicas {
		if r.log != nil && r.ca.Group == g {
			cr = r
			break
		}
	}
	var r *replica
	for _, sr := range c.replicas {
		if sr.ckpt != nil && sr.sa.Group == g {
			r = sr
			break
		}
	}
	c.mu.Unlock()
	switch {
	case cr != nil:
		applied := cr.log.LastApplied()
		if _, err := cr.log.Checkpoint(); err != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: checkpoint (it keeps Raft WAL segments): %v", cr.ca.Account, cr.ca.Stream, cr.ca.Name, err)
			return
		}
		cr.ckptIndex, cr.ckptAt = applied, now
	case r != nil:
		r.ckpt.Poke()
	}
}
