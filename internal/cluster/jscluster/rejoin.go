package jscluster

import (
	"path"
	"time"

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
// and placement counts it again. nats-server v2.15.2 deletes the
// removed server's meta state and takes the server back into its meta
// group 5 minutes after the removal (raft.go peerRemoveTimeout) once
// the leader hears from it.

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
	c.cfg.Logf("JetStream cluster: this server's removal is recorded in %s: restarted, it retires its Raft WAL and rejoins the meta group as a new replica", dir)
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
