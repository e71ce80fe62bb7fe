package jscluster

import (
	"path"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A removed server taken back (docs/cluster.md, "Removing a server").
// Once this server knows its store was removed with SERVER.REMOVE (it
// applied its own removal while it ran, or another server answered so
// after it started on a store removed while it was down: removedSelf),
// it records so in Dir/removed (recordRemoval). The record outlives the
// process: at the next start, before the meta group is added, the
// Raft WAL of the removed store is retired (retireRemoved: removed, a
// new WAL under a new store incarnation in its place), so that no
// replica of the removed store ever votes again with a state from
// before its removal (decision 3). The server then enters the meta
// group as a wiped server does: it joins as a new replica (its voters
// record names the old store: storeChanged), the meta leader catalogues
// it again under the new incarnation (AddServer clears the removed
// mark), adds its replica as a learner and promotes it once caught up,
// and placement counts it again. A server that learns, after it
// started, that its store was removed before this start (removed while
// it was down) does not wait for another start: once its replicas
// retired it removes its meta replica, retires the WAL and joins again
// at once (rejoinRemoved); one removed while it runs stays out until it
// is started again, as nats-server's disables JetStream. nats-server
// v2.15.2 deletes the removed server's meta state and takes the server
// back into its meta group 5 minutes after the removal (raft.go
// peerRemoveTimeout) once the leader hears from it.

// removedFile is the record of this server's removal (Dir/removed, a
// metafile).
type removedFile struct {
	// Incarnation is the store incarnation that was removed (32
	// hexadecimal digits): a record naming another is stale.
	Incarnation string `json:"incarnation"`
	// At is when this server learned its removal.
	At time.Time `json:"at"`
}

// removedDir is where the record of this server's removal is kept.
func (c *Cluster) removedDir() string { return path.Join(c.cfg.Dir, "removed") }

// recordRemoval, on the run goroutine's housekeeping, writes the record
// of this server's removal once it knows of it (removedSelf), once per
// store; a write that fails is logged and tried again at the next tick.
func (c *Cluster) recordRemoval() {
	inc := c.node.Incarnation().String()
	if c.removalRecorded == inc || !c.removedSelf() {
		return
	}
	if !c.removedAtStart && !c.removedAnswered.Load() && c.removedIndex == 0 {
		return // its event is not handled yet (noteRemovedAt)
	}
	dir := c.removedDir()
	rec := removedFile{Incarnation: inc, At: c.cfg.Now().UTC()}
	if err := c.cfg.FS.MkdirAll(dir); err != nil {
		c.cfg.Logf("jscluster: record this server's removal: %v", err)
		return
	}
	if err := metafile.Write(c.cfg.FS, dir, rec); err != nil {
		c.cfg.Logf("jscluster: record this server's removal: %v", err)
		return
	}
	c.removalRecorded = inc
	before := c.firstCommit // what had committed before this start, as far as it knows
	if st, err := c.node.Status(meta.MetaGroup); err == nil {
		before = max(before, st.ReplayTo)
	}
	c.rejoinNow = c.removedAnswered.Load() || c.removedAtStart || c.removedIndex <= before
	if c.rejoinNow {
		c.cfg.Logf("JetStream cluster: this server's store was removed before this start (recorded in %s): once its replicas retired, it retires its Raft WAL and rejoins the meta group as a new replica", dir)
		return
	}
	c.cfg.Logf("JetStream cluster: this server's removal is recorded in %s: restarted, it retires its Raft WAL and rejoins the meta group as a new replica", dir)
}

// noteRemovedAt, on the run goroutine, notes the meta index at which
// this server's replica applied its removal (the RemoveServer entry's,
// or a restored snapshot's that holds it), once. A removal at or below
// the commit index the WAL recovered the replica with (ReplayTo), or the
// first a leader told it since this start (firstCommit), was committed
// before this start (or while it was starting, before the replica
// caught up): recordRemoval then has the server rejoin at once.
func (c *Cluster) noteRemovedAt(index uint64) {
	if c.removedIndex == 0 && c.removedSelf() {
		c.removedIndex = index
	}
}

// retireRemoved, at the start after the replay and before the meta
// group is added, retires the Raft WAL when the record of this
// server's removal names its store (raftnode.Node.RetireWAL), tells
// the transport the new incarnation, and removes the record (a stale
// one too). A WAL that cannot be retired stays, and so does the record
// (the server stays out of the meta group, as before its restart).
func (c *Cluster) retireRemoved() {
	dir := c.removedDir()
	var rec removedFile
	switch err := metafile.Read(c.cfg.FS, dir, &rec); {
	case vfs.IsNotExist(err):
		return
	case err != nil:
		c.cfg.Logf("jscluster: the record of this server's removal (%s) cannot be read: %v", dir, err)
		return
	}
	old := c.node.Incarnation()
	if rec.Incarnation == old.String() {
		inc, err := c.node.RetireWAL(path.Join(c.cfg.Dir, "raft.retired"))
		if err != nil {
			c.cfg.Logf("jscluster: the Raft WAL of this removed store cannot be retired (this server stays out of the meta group): %v", err)
			return
		}
		c.tr.SetIncarnation(inc)
		c.tr.Rehello()
		c.cfg.Logf("JetStream cluster: this server's store %s was removed from the meta group (SERVER.REMOVE) at %s: its Raft WAL is retired and a new one, store %s, replaces it: this server rejoins the meta group as a new replica", old, rec.At.Format(time.RFC3339), inc)
	}
	if err := metafile.RemoveAll(c.cfg.FS, dir); err != nil && !vfs.IsNotExist(err) {
		c.cfg.Logf("jscluster: remove the record of this server's removal (%s): %v", dir, err)
	}
}

// rejoinRemoved, on the run goroutine's housekeeping, takes back into
// the meta group a server that learned, after it started on its store,
// that the store was removed before this start (rejoinNow: another
// server answered so, or its replica applied its removal while catching
// up), and recorded so: once every replica of a replicated stream or consumer it
// held retired (retireReplicas, retireConsumers: the node runs no group
// but the meta group's), it removes its meta replica, retires the Raft
// WAL (raftnode.Node.RetireWAL: a new store incarnation), clears what
// it knew of its removal and of the meta group it ran, and reports true:
// run then enters the meta group again as a new replica (bootstrap,
// storeChanged). A server removed while it ran stays out until it is
// started again (retireRemoved), as nats-server v2.15.2 disables
// JetStream on it.
func (c *Cluster) rejoinRemoved() bool {
	old := c.node.Incarnation()
	if !c.rejoinNow || c.removalRecorded != old.String() {
		return false
	}
	for _, g := range c.node.Groups() {
		if g != meta.MetaGroup {
			return false // a replica still retiring
		}
	}
	c.mu.Lock()
	c.started = false
	c.metaPeers = nil
	c.mu.Unlock()
	if done, err := c.node.RemoveGroup(meta.MetaGroup); err == nil {
		select {
		case <-done:
		case <-c.quit:
			return false
		}
	}
	inc, err := c.node.RetireWAL(path.Join(c.cfg.Dir, "raft.retired"))
	if err != nil {
		c.cfg.Logf("jscluster: the Raft WAL of this removed store cannot be retired (this server stays out of the meta group until it is restarted): %v", err)
		return false
	}
	c.tr.SetIncarnation(inc)
	c.removedAnswered.Store(false)
	c.removalRecorded, c.removedIndex, c.rejoinNow, c.removedAtStart = "", 0, false, false
	c.membersLogged, c.membersSince = false, time.Time{}
	c.leaderless.Store(0)
	if err := metafile.RemoveAll(c.cfg.FS, c.removedDir()); err != nil && !vfs.IsNotExist(err) {
		c.cfg.Logf("jscluster: remove the record of this server's removal (%s): %v", c.removedDir(), err)
	}
	c.tr.Rehello()
	c.cfg.Logf("JetStream cluster: this server's store %s was removed from the meta group before this start: its replicas retired, its Raft WAL is retired and a new one, store %s, replaces it: this server rejoins the meta group as a new replica", old, inc)
	return true
}
