package jscluster

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/cluster/streamckpt"
	"github.com/cairnmq/cairn/internal/cluster/streamlog"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// replica is this server's replica of a stream the meta group assigned
// to it. sa and log are set before the replica is published in
// Cluster.replicas and not changed after (an update replaces the
// replica).
type replica struct {
	sa  meta.StreamAssignment
	log *streamlog.Log // nil for a stream with one replica
	// ckpt checkpoints a file stream's replica (nil for memory streams
	// and streams with one replica): docs/clustering.md, "Checkpoints".
	ckpt *streamckpt.Replica
	// leads and since: this server leads the stream's group, since when
	// (unix ns); for one replica, always.
	leads atomic.Bool
	since atomic.Int64
}

// apply makes this server's replicas follow one applied meta operation.
func (c *Cluster) apply(ev meta.Event) {
	if ev.Restored {
		c.reconcileAll()
		return
	}
	switch op := ev.Op.(type) {
	case *meta.AssignStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.UpdateStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.RemoveStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.AssignConsumer:
		c.reconcileConsumer(consumerKey{op.Account, op.Stream, op.Name})
	case *meta.RemoveConsumer:
		c.reconcileConsumer(consumerKey{op.Account, op.Stream, op.Name})
	}
}

// reconcileAll reconciles every stream the meta group assigns and every
// replica running.
func (c *Cluster) reconcileAll() {
	keys := map[streamKey]bool{}
	c.meta.View(func(st *meta.State) {
		c.mu.Lock()
		for name := range c.accounts {
			for _, sa := range st.Streams(name) {
				keys[streamKey{sa.Account, sa.Name}] = true
			}
		}
		c.mu.Unlock()
	})
	c.mu.Lock()
	for k := range c.replicas {
		keys[k] = true
	}
	c.mu.Unlock()
	for k := range keys {
		c.reconcile(k)
	}
}

// assignment returns the meta group's assignment of stream k and this
// server's replica in it.
func (c *Cluster) assignment(k streamKey) (sa meta.StreamAssignment, mine meta.Replica, assigned, here bool) {
	c.meta.View(func(st *meta.State) {
		sa, assigned = st.Stream(k.account, k.name)
	})
	if assigned {
		mine, here = meta.On(sa.Replicas, c.name)
	}
	return sa, mine, assigned, here
}

// reconcile starts, keeps or stops this server's replica of stream k to
// match the meta group's assignment.
func (c *Cluster) reconcile(k streamKey) {
	sa, mine, _, here := c.assignment(k)
	c.mu.Lock()
	cur := c.replicas[k]
	acc := c.accounts[k.account]
	ready := acc != nil && acc.js != nil
	c.mu.Unlock()
	switch {
	case !ready:
		return // the account has no JetStream here (yet): AddAccount reconciles
	case cur != nil && (!here || cur.sa.Group != sa.Group || !sameServers(cur.sa.Replicas, sa.Replicas)):
		c.stopReplica(acc, k, cur)
		if here {
			c.startReplica(acc, k, sa, mine)
		}
	case cur == nil && here:
		c.startReplica(acc, k, sa, mine)
	}
	c.markConfig(k) // the config the assignment names, where this server leads (update.go)
	c.reconcileConsumers(k)
}

// sameServers reports whether two replica lists name the same replicas.
func sameServers(a, b []meta.Replica) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// startReplica creates stream k in the account's engine as sa assigns it
// and, for more than one replica, adds its group with this server's
// replica mine.
func (c *Cluster) startReplica(acc *account, k streamKey, sa meta.StreamAssignment, mine meta.Replica) {
	var cfg stream.Config
	if err := json.Unmarshal(startConfig(sa), &cfg); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: its assigned config does not decode: %v", k.account, k.name, err)
		return
	}
	r := &replica{sa: sa}
	if len(sa.Replicas) == 1 {
		r.leads.Store(true)
		r.since.Store(sa.Created)
	}
	if len(sa.Replicas) > 1 && cfg.Storage == stream.FileStorage {
		c.startFileReplica(acc, k, r, cfg, mine)
		return
	}
	if len(sa.Replicas) == 1 && cfg.Storage == stream.FileStorage {
		// One replica has no log to rebuild it: after a restart its
		// files are the stream, restored as a single server restores.
		if found, jerr := acc.js.RestoreStream(k.name); found {
			if jerr != nil {
				c.cfg.Logf("jscluster: stream %s > %s: not restored (left on disk): %v", k.account, k.name, jerr)
				return
			}
			c.mu.Lock()
			c.replicas[k] = r
			c.mu.Unlock()
			return
		}
	}
	acc.starting.Store(r)
	_, jerr := acc.js.StreamCreate(jetstream.StreamRequest{Config: cfg, Created: time.Unix(0, sa.Created).UTC()})
	acc.starting.Store(nil)
	if jerr != nil {
		c.cfg.Logf("jscluster: stream %s > %s: this server's replica cannot start: %v", k.account, k.name, jerr)
		if r.log != nil {
			r.log.Close()
		}
		return
	}
	c.mu.Lock()
	c.replicas[k] = r
	c.mu.Unlock()
	if r.log == nil {
		return
	}
	gc := raftnode.GroupConfig{ID: sa.Group, Replica: mine.ID, Incarnation: mine.Incarnation, Peers: meta.Peers(sa.Replicas)}
	if err := c.node.AddGroup(gc, r.log.StateMachine()); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: its group %d cannot start here: %v", k.account, k.name, sa.Group, err)
	}
}

// startFileReplica starts this server's replica of a replicated file
// stream from its checkpoint (streamckpt: the store rolled back to the
// checkpoint's position, the stream's state restored, the group applying
// what followed), or as a new replica with an empty store. A checkpoint
// or store that does not match fences the replica: it is reported and
// not started, and its files are left as they are.
func (c *Cluster) startFileReplica(acc *account, k streamKey, r *replica, cfg stream.Config, mine meta.Replica) {
	sa := r.sa
	dir := acc.js.StreamDir(k.name)
	ck, err := streamckpt.Open(streamckpt.Config{
		Dir: dir, Store: acc.js.FileStoreConfig(dir), Node: c.node, Group: sa.Group, Replica: mine.ID, Logf: c.cfg.Logf, Infof: c.cfg.Infof,
	}, cfg)
	if err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: this server's replica is fenced (not started, files left as they are): %v", k.account, k.name, err)
		return
	}
	r.ckpt = ck
	_, jerr := acc.js.StartReplica(ck.StreamConfig(), jetstream.ReplicaStart{
		Created: time.Unix(0, sa.Created).UTC(), Store: ck.Store(),
		NewLog: ck.NewLog(c.onLeader(acc, k.name, r)), Start: ck.Start,
	})
	if jerr != nil {
		c.cfg.Logf("jscluster: stream %s > %s: this server's replica cannot start: %v", k.account, k.name, jerr)
		_ = ck.Stop()
		return
	}
	r.log = ck.Log()
	c.mu.Lock()
	c.replicas[k] = r
	c.mu.Unlock()
	gc := raftnode.GroupConfig{ID: sa.Group, Replica: mine.ID, Incarnation: mine.Incarnation, Peers: meta.Peers(sa.Replicas)}
	if err := c.node.AddGroup(gc, r.log.StateMachine()); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: its group %d cannot start here: %v", k.account, k.name, sa.Group, err)
	}
}

// onLeader returns the OnLeader of replica r of stream name: it records
// the leadership and subscribes or unsubscribes the stream.
func (c *Cluster) onLeader(acc *account, name string, r *replica) func(bool) {
	return func(leader bool) {
		if leader {
			r.since.Store(c.cfg.Now().UnixNano())
		}
		r.leads.Store(leader)
		if err := acc.js.SetStreamLeader(name, leader); err != nil {
			c.cfg.Logf("jscluster: stream %s > %s: leadership %v: %v", acc.name, name, leader, err)
		}
		if leader {
			c.markConfig(streamKey{acc.name, name}) // an update the previous leader did not propose (update.go)
		}
	}
}

// stopReplica deletes this server's replica of stream k: the local
// stream, then its group.
func (c *Cluster) stopReplica(acc *account, k streamKey, r *replica) {
	c.mu.Lock()
	delete(c.replicas, k)
	c.mu.Unlock()
	c.stopStreamConsumers(k)
	if r.ckpt != nil {
		_ = r.ckpt.Stop()
	}
	if err := acc.js.DeleteStream(k.name); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: delete this server's replica: %v", k.account, k.name, err)
	}
	if r.log == nil {
		return
	}
	r.log.Close()
	if _, err := c.node.RemoveGroup(r.sa.Group); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: remove group %d: %v", k.account, k.name, r.sa.Group, err)
	}
}

// replicaOf returns this server's running replica of stream k, or nil.
func (c *Cluster) replicaOf(k streamKey) *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas[k]
}

// newLog is the engine's NewReplicatedLog for account acc: the log of
// the replica being started (startReplica), over its group; nil for a
// stream with one replica, which uses the engine's local log.
func (c *Cluster) newLog(acc *account, name string, a jetstream.Applier[stream.Op]) jetstream.Log[stream.Op] {
	r := acc.starting.Load()
	if r == nil || r.sa.Name != name || len(r.sa.Replicas) == 1 {
		return nil
	}
	r.log = streamlog.New(streamlog.Config{Node: c.node, Group: r.sa.Group, OnLeader: c.onLeader(acc, name, r)}, a)
	return r.log
}
