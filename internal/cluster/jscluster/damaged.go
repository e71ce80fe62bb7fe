package jscluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A replica fenced for damage (docs/cluster.md, "Fencing"): the
// store of this server's replica of a replicated file stream that its
// checkpoint refuses at the start (streamckpt.Open: a damaged
// checkpoint file, a store that lost sequences the checkpoint holds, a
// position that does not match, another replica's files). The replica
// is not started; its group is added fenced (raftnode.GroupConfig.Fence)
// so that its WAL record stays, Status and /healthz report it, and its
// removal leaves the tombstone a replacement needs. Its server reports
// it to the meta leader as a replica that lost its state ($SYS.JSC.
// STREAM.REPLICA.LOST, lost.go), which replaces it on the same server
// (meta.MoveReplica: a new replica ID, added as a learner, caught up by
// a stream snapshot, promoted while the fenced one is removed). When the
// assignment no longer names the fenced replica, reconcile removes its
// group and moves its files aside (jetstream.JetStream.QuarantineStream:
// kept for an operator, never deleted, never served) before the
// replacement starts in an empty directory.

// damagedReplica is this server's replica of a stream fenced for damage
// at its start: its group, its replica ID, why.
type damagedReplica struct {
	group   raftnode.GroupID
	replica raftnode.ReplicaID
	err     error
}

// fenceDamaged records this server's replica mine of stream k (assigned
// as sa), whose store its checkpoint refused with err, and adds its
// group fenced.
func (c *Cluster) fenceDamaged(k streamKey, sa meta.StreamAssignment, mine meta.Replica, err error) {
	c.cfg.Logf("jscluster: stream %s > %s: this server's replica %d is fenced (not started, files left as they are; it is reported for replacement): %v", k.account, k.name, mine.ID, err)
	gc := groupConfig(sa, mine)
	gc.Fence = fmt.Errorf("%w: the replica's store is damaged: %w", raftnode.ErrCorrupt, err)
	if aerr := c.node.AddGroup(gc, fencedSM{}); aerr != nil && !errors.Is(aerr, raftnode.ErrGroupExists) {
		c.cfg.Logf("jscluster: stream %s > %s: its fenced group %d: %v", k.account, k.name, sa.Group, aerr)
	}
	c.mu.Lock()
	if c.damaged == nil {
		c.damaged = map[streamKey]damagedReplica{}
	}
	c.damaged[k] = damagedReplica{group: sa.Group, replica: mine.ID, err: gc.Fence}
	c.mu.Unlock()
}

// damagedOf returns this server's replica of stream k fenced for damage,
// if any.
func (c *Cluster) damagedOf(k streamKey) (damagedReplica, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.damaged[k]
	return d, ok
}

// settleDamaged, in reconcile, handles this server's replica d of
// stream k fenced for damage, as the assignment (sa, mine, assigned,
// here) now stands: it reports true while the assignment still names
// it (nothing to do: the meta leader replaces it). Otherwise the fenced
// group is removed (its tombstone written), the replica's files are
// moved aside, and the record dropped: it reports false, and reconcile
// goes on (starting the replacement if it is here). A failure to remove
// or move keeps the record, and reports true: nothing starts over the
// damaged files; the next reconcile tries again.
func (c *Cluster) settleDamaged(acc *account, k streamKey, d damagedReplica, sa meta.StreamAssignment, mine meta.Replica, assigned, here bool) bool {
	if assigned && here && sa.Group == d.group && mine.ID == d.replica {
		return true
	}
	switch err := c.removeGroupWait(d.group); {
	case err == nil || errors.Is(err, raftnode.ErrUnknownGroup):
	case errors.Is(err, errRemoveStopping):
		return true
	default:
		c.cfg.Logf("jscluster: stream %s > %s: remove fenced group %d: %v", k.account, k.name, d.group, err)
		return true
	}
	to, err := acc.js.QuarantineStream(k.name, fmt.Sprintf("g%d.r%d", d.group, d.replica))
	if err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: moving the damaged files of replica %d aside: %v", k.account, k.name, d.replica, err)
		return true
	}
	c.mu.Lock()
	delete(c.damaged, k)
	c.mu.Unlock()
	if to != "" {
		c.cfg.Logf("JetStream cluster: stream '%s > %s': the damaged files of this server's replica %d were moved to %s (kept for inspection; nothing reads them)", k.account, k.name, d.replica, to)
	}
	return false
}

// fencedSM is the state machine of a group added fenced: raftnode never
// calls it (raftnode.GroupConfig.Fence); each method fails.
type fencedSM struct{}

var errFencedSM = errors.New("jscluster: the replica is fenced for damage")

func (fencedSM) Apply([]raftnode.Entry) error { return errFencedSM }
func (fencedSM) Applied() uint64              { return 0 }
func (fencedSM) Snapshot() ([]byte, error)    { return nil, errFencedSM }
func (fencedSM) Restore(uint64, []byte) error { return errFencedSM }

// holdDamaged reports whether reconcile must leave stream k alone: this
// server's replica of it is fenced for damage and either still assigned
// or not yet moved aside (settleDamaged).
func (c *Cluster) holdDamaged(acc *account, k streamKey, sa meta.StreamAssignment, mine meta.Replica, assigned, here bool) bool {
	d, ok := c.damagedOf(k)
	return ok && c.settleDamaged(acc, k, d, sa, mine, assigned, here)
}

// askReplaceDamaged, in askReplaceLost, reports each replica of this
// server fenced for damage to the meta leader as one that lost its
// state, at most every staleRetry per replica.
func (c *Cluster) askReplaceDamaged(now time.Time) {
	c.mu.Lock()
	var ms []replicaLostMsg
	for k, d := range c.damaged {
		ms = append(ms, replicaLostMsg{Account: k.account, Stream: k.name, Group: d.group, Replica: d.replica, Server: c.name})
	}
	c.mu.Unlock()
	for _, m := range ms {
		key := staleKey{k: streamKey{m.Account, m.Stream}, id: m.Replica}
		if !c.lostAsked.due(key, now, staleRetry) {
			continue
		}
		if c.askMeta(replicaLost, m) {
			c.cfg.Infof("JetStream cluster: replica %d of stream '%s > %s' is fenced for damage: reported to the meta leader for replacement", m.Replica, m.Account, m.Stream)
		}
	}
}
