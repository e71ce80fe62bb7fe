package jscluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/cluster/streamckpt"
	"github.com/cairnmq/cairn/internal/cluster/streamlog"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// replica is this server's replica of a stream the meta group assigned
// to it. sa and log are set before the replica is published in
// Cluster.replicas and not changed after: an update that keeps this
// server's replica publishes a copy with the new assignment and the same
// log, checkpointing and leadership (keepReplica).
type replica struct {
	sa  meta.StreamAssignment
	log *streamlog.Log // nil for a stream with one replica
	// ckpt checkpoints a file stream's replica and captures and installs
	// the snapshots of any replicated stream's (nil for streams with one
	// replica): docs/cluster.md, "Checkpoints", "Stream snapshots".
	ckpt *streamckpt.Replica
	// server is this server's name (mine).
	server raftnode.ServerID
	*leadState
}

// leadState is what a replica's copies share: its leadership, and the
// membership change its leader has in flight.
type leadState struct {
	// leads and since: this server leads the stream's group, since when
	// (unix ns); for one replica, always.
	leads atomic.Bool
	since atomic.Int64
	// subMu orders the changes of the stream's subscriptions that follow
	// its leadership: OnLeader's, and a step-down's that subscribes again
	// when the replica kept the leadership (resumeIfStayed). A leaf but
	// for the engine's locks SetStreamLeader takes.
	subMu sync.Mutex
	// announced: since it came to lead, this replica's server flushed its
	// routes once with the stream's subscriptions in place
	// (announceStream), so a publish through any server finds them.
	announced atomic.Bool
	// changing is the membership change this server, leading the group,
	// proposed last (membership.go); leaderless is since when a leaving
	// replica has known no leader (retireReplicas); the run goroutine's.
	changing   *raftnode.Proposal
	leaderless time.Time
	// forceSince: since when its group of two has had no leader and
	// its other voter left the assignment (lostvoter.go); the run
	// goroutine's.
	forceSince time.Time
	// convertAt: when a scale-down to one replica last failed here, or
	// the settle was last asked (scaledown.go); the run goroutine's.
	convertAt time.Time
}

// apply makes this server's replicas follow one applied meta operation.
func (c *Cluster) apply(ev meta.Event) {
	if ev.Restored {
		c.noteRemovedAt(ev.Index)
		c.syncMetaPeers()
		c.reconcileAll()
		return
	}
	switch op := ev.Op.(type) {
	case *meta.AssignStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.UpdateStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.MoveStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.ScaleStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.CancelMove:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.RemoveStream:
		c.reconcile(streamKey{op.Account, op.Name})
	case *meta.MoveReplica:
		c.reconcile(streamKey{op.Account, op.Stream})
	case *meta.SettleStream:
		c.reconcile(streamKey{op.Account, op.Stream})
	case *meta.ResetStream:
		if ev.Result.Err == nil {
			c.cfg.Infof("JetStream cluster: memory stream '%s > %s' starts over empty in group %d (reset: its replicas that lost their state were a majority)", op.Account, op.Stream, ev.Result.Stream.Group)
		}
		c.reconcile(streamKey{op.Account, op.Stream})
	case *meta.AssignConsumer:
		c.reconcileConsumer(consumerKey{op.Account, op.Stream, op.Name})
	case *meta.RemoveConsumer:
		c.reconcileConsumer(consumerKey{op.Account, op.Stream, op.Name})
	case *meta.SettleConsumer:
		c.reconcileConsumer(consumerKey{op.Account, op.Stream, op.Name})
	case *meta.MoveConsumer:
		c.reconcileConsumer(consumerKey{op.Account, op.Stream, op.Name})
	case *meta.RenameReplicas:
		if ev.Result.Err == nil {
			c.reconcileAll() // every stream and consumer, with their servers
		}
	case *meta.AddServer:
		c.syncMetaPeers()
	case *meta.RemoveServer:
		if op.Name == c.name && ev.Result.Err == nil {
			c.noteRemovedAt(ev.Index)
			// nats-server v2.15.2 disables JetStream on the removed
			// server; this one keeps running outside the meta group
			// (docs/cluster.md, "Removing a server").
			c.cfg.Logf(removedText)
		}
	}
}

// syncMetaPeers tells the node the server of every meta replica: those
// the group was added with, and the replica each catalogued server's
// incarnation gives (metaReplica), so that any server may lead the group
// through a replacement; a replica whose store runs under another name
// now is sent there (metaAddress: a server renamed over its store,
// rename.go).
func (c *Cluster) syncMetaPeers() {
	c.mu.Lock()
	byInc, started := c.metaByInc, c.started
	c.mu.Unlock()
	if !byInc || !started {
		return
	}
	var add []raftnode.Peer
	c.meta.View(func(st *meta.State) {
		for _, sv := range st.Servers() {
			add = append(add, raftnode.Peer{Replica: metaReplica(sv.Incarnation), Server: sv.Name})
		}
	})
	names := c.catalogueNames()
	routed := c.routedNames()
	c.mu.Lock()
	for _, p := range add {
		if !slices.ContainsFunc(c.metaPeers, func(q raftnode.Peer) bool { return q.Replica == p.Replica }) {
			c.metaPeers = append(c.metaPeers, p)
		}
	}
	cur := slices.Clone(c.metaPeers)
	c.mu.Unlock()
	// metaAddress asks the transport: not under c.mu.
	moved := map[raftnode.ReplicaID]raftnode.ServerID{}
	for _, p := range cur {
		if to := c.metaAddress(p.Replica, names[p.Replica], p.Server, routed); to != p.Server {
			moved[p.Replica] = to
			c.cfg.Infof("JetStream cluster: meta replica %d, known as server %s, runs as server %s now (its store renamed)", p.Replica, p.Server, to)
		}
	}
	c.mu.Lock()
	for i, p := range c.metaPeers {
		if to, ok := moved[p.Replica]; ok {
			c.metaPeers[i].Server = to
		}
	}
	peers := slices.Clone(c.metaPeers)
	c.mu.Unlock()
	if err := c.node.SetPeers(meta.MetaGroup, peers); err != nil {
		c.cfg.Logf("jscluster: the meta group's servers: %v", err)
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
	sa, mine, assigned, here := c.assignment(k)
	c.mu.Lock()
	cur := c.replicas[k]
	acc := c.accounts[k.account]
	ready := acc != nil && acc.js != nil
	c.mu.Unlock()
	switch {
	case !ready:
		return // the account has no JetStream here (yet): AddAccount reconciles
	case cur == nil && c.holdDamaged(acc, k, sa, mine, assigned, here):
		c.markConfig(k)
		return // fenced for damage, waiting for its replacement (damaged.go)
	case cur != nil && !here && assigned && cur.log != nil && cur.sa.Group == sa.Group && (c.member(cur) || c.consumersLeaving(k)):
		// Leaving: it runs, and may lead, until its group removed it
		// and its consumers' replicas here left theirs
		// (retireReplicas).
		if !sameServers(cur.sa.Replicas, sa.Replicas) {
			c.keepReplica(k, cur, sa)
		}
	case cur != nil && here && cur.sa.Group == sa.Group && cur.mine() == mine.ID && len(cur.sa.Replicas) == 1 && len(sa.Replicas) > 1 && cur.log == nil:
		c.scaleUpFromOne(acc, k, cur, sa, mine)
	case cur != nil && here && cur.sa.Group == sa.Group && cur.mine() == mine.ID && cur.log != nil:
		// Another replica moved, or the stream scaled (down to this one
		// replica too: it runs in its group until it is the group's only
		// voter, then converts: scaledown.go). This one stays.
		if !sameServers(cur.sa.Replicas, sa.Replicas) {
			c.keepReplica(k, cur, sa)
		}
	case cur != nil && here && cur.log == nil && cur.sa.Unsettled() && len(sa.Replicas) == 1 && cur.sa.Created == sa.Created:
		// Settled (meta.SettleStream): the same stream of one replica,
		// under its new group.
		c.mu.Lock()
		c.replicas[k] = &replica{sa: sa, leadState: cur.leadState, server: cur.server}
		c.mu.Unlock()
	case cur != nil && here && cur.log == nil && cur.sa.Unsettled() && cur.sa.Created == sa.Created && sa.Group != cur.sa.Group &&
		len(sa.Replicas) > 1 && mine.ID == 1:
		// Settled and scaled up since, both applied before this
		// reconcile: the settled group's first replica, here, starts
		// from the stream's files as a scale-up from one does (stopping
		// the stream and starting an empty replica would lose them).
		c.scaleUpFromOne(acc, k, cur, sa, mine)
	case cur != nil && here && cur.sa.Group == sa.Group && cur.mine() != mine.ID && c.returning(cur, mine.ID):
		// A cancelled move assigns this server the replica it was
		// leaving with, still in its group (meta.CancelMove): it stays.
		c.keepReplica(k, cur, sa)
	case cur != nil && (!here || cur.sa.Group != sa.Group || !sameServers(cur.sa.Replicas, sa.Replicas)):
		c.stopReplica(acc, k, cur)
		if here {
			c.startReplica(acc, k, sa, mine)
		}
	case cur == nil && here:
		c.startReplica(acc, k, sa, mine)
	case cur == nil && !here && assigned:
		c.startLeaving(acc, k, sa)
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

// mine returns this server's replica ID in the replica's assignment.
func (r *replica) mine() raftnode.ReplicaID {
	for _, x := range r.sa.Replicas {
		if x.Server == r.server {
			return x.ID
		}
	}
	return 0
}

// member reports whether replica r is still in its group's configuration
// as it last applied it (and not fenced).
func (c *Cluster) member(r *replica) bool {
	st, err := c.node.Status(r.sa.Group)
	return err == nil && st.Fenced == nil && st.Member
}

// keepReplica publishes a copy of replica cur with the assignment sa,
// which moved another replica of the group: the node learns the new
// replica's server (the old one's stays known until the leader removed
// it from the group).
func (c *Cluster) keepReplica(k streamKey, cur *replica, sa meta.StreamAssignment) {
	nr := &replica{sa: sa, log: cur.log, ckpt: cur.ckpt, leadState: cur.leadState, server: cur.server}
	c.mu.Lock()
	c.replicas[k] = nr
	c.mu.Unlock()
	if err := c.node.SetPeers(sa.Group, c.keptPeers(sa.Group, cur.sa.Replicas, sa.Replicas)); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: the servers of group %d: %v", k.account, k.name, sa.Group, err)
	}
}

// keptPeers returns the peers group's replica here must know after its
// assignment changed from old to next: both lists' (unionPeers) and
// every peer it knows already. Two changes in a row (two MoveConsumer
// of one consumer, as a move of its stream makes) must not make it
// forget a replica the first one moved away that is still in the
// group: its leader would send it nothing, lose its quorum and step
// down (found by TestJetStreamClusterStreamMove, 1 run in 37 under
// load). The leader prunes the peers that left (stepMembership).
func (c *Cluster) keptPeers(group raftnode.GroupID, old, next []meta.Replica) []raftnode.Peer {
	ps := unionPeers(old, next)
	if st, err := c.node.Status(group); err == nil {
		for _, p := range st.Peers {
			if p.Server != "" && !slices.ContainsFunc(ps, func(q raftnode.Peer) bool { return q.Replica == p.Replica }) {
				ps = append(ps, raftnode.Peer{Replica: p.Replica, Server: p.Server})
			}
		}
	}
	return ps
}

// unionPeers returns the peers of both replica lists (a replica in
// both once, on its server in b: a replica renamed with its server,
// meta.RenameReplicas, is sent to the new name).
func unionPeers(a, b []meta.Replica) []raftnode.Peer {
	seen := map[raftnode.ReplicaID]bool{}
	var ps []raftnode.Peer
	for _, r := range append(slices.Clone(b), a...) {
		if !seen[r.ID] {
			seen[r.ID] = true
			ps = append(ps, raftnode.Peer{Replica: r.ID, Server: r.Server})
		}
	}
	return ps
}

// groupNotStarted logs why this server's replica mine of group g (of
// what) could not be added to the Raft node. A replica the node removed
// already (raftnode.ErrRemoved: its tombstone) belongs to an assignment
// since replaced (a wiped server's stale replica, applied once more
// while its replacement is under way: trial 38's wipe), which is
// routine, at [INF]; any other error is a warning. The group was not
// added, so its removal later finds nothing (raftnode.ErrUnknownGroup,
// not logged).
func (c *Cluster) groupNotStarted(what string, g raftnode.GroupID, mine raftnode.ReplicaID, err error) {
	if errors.Is(err, raftnode.ErrRemoved) {
		c.cfg.Infof("jscluster: %s: its replica %d of group %d is not started here: this server removed it already (its assignment is being replaced): %v", what, mine, g, err)
		return
	}
	c.cfg.Logf("jscluster: %s: its group %d cannot start here: %v", what, g, err)
}

// groupConfig is the raftnode configuration of this server's replica
// mine of stream sa: a replica among the group's first ones bootstraps
// with them as its voters (IDs 1 to the LogConfig's num_replicas, however
// the group changed since); a later one (a replacement, a scale-up) joins
// empty, to be added by the leader as a learner and sent a snapshot.
func groupConfig(sa meta.StreamAssignment, mine meta.Replica) raftnode.GroupConfig {
	gc := raftnode.GroupConfig{ID: sa.Group, Replica: mine.ID, Incarnation: mine.Incarnation, Peers: meta.Peers(sa.Replicas), HoldPastUncommitted: true,
		Label: fmt.Sprintf("stream '%s > %s'", sa.Account, sa.Name)}
	if !slices.ContainsFunc(gc.Peers, func(p raftnode.Peer) bool { return p.Replica == mine.ID }) {
		gc.Peers = append(gc.Peers, raftnode.Peer{Replica: mine.ID, Server: mine.Server}) // a leaving replica (startLeaving)
	}
	n := initialReplicas(sa)
	if uint64(mine.ID) > n {
		gc.Join = true
		return gc
	}
	for id := range n {
		gc.Voters = append(gc.Voters, raftnode.ReplicaID(id+1))
	}
	// A memory stream scaled up from one replica: its first replica's
	// state at the group's base is the messages the stream held then,
	// which an empty store after a restart cannot rebuild.
	gc.BaseHoldsState = n == 1 && !fileStream(sa)
	return gc
}

// initialReplicas is the number of replicas stream sa's group was
// created with: its first replica IDs (the LogConfig's num_replicas).
func initialReplicas(sa meta.StreamAssignment) uint64 {
	cfg := sa.LogConfig
	if len(cfg) == 0 {
		cfg = sa.Config
	}
	var rc struct {
		Replicas int `json:"num_replicas"`
	}
	if json.Unmarshal(cfg, &rc) != nil || rc.Replicas < 1 {
		return uint64(len(sa.Replicas))
	}
	return uint64(rc.Replicas)
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
	r := &replica{sa: sa, leadState: &leadState{}, server: c.name}
	if len(sa.Replicas) == 1 {
		r.leads.Store(true)
		r.since.Store(sa.Created)
	}
	if len(sa.Replicas) > 1 {
		if !c.clearStale(acc, k, sa, mine) {
			return
		}
		c.startFileReplica(acc, k, r, cfg, mine)
		return
	}
	if c.takeRestored(k) {
		c.mu.Lock()
		c.replicas[k] = r // the stream a restore installed here runs already
		c.mu.Unlock()
		return
	}
	if len(sa.Replicas) == 1 && cfg.Storage == stream.MemoryStorage && sa.Unsettled() && !c.node.Removed(sa.Group, mine.ID) {
		// Scaled down to this replica, its group not removed yet (a
		// restart before the conversion's tombstone): the replica replays
		// its group's log and converts again (memscale.go).
		r.leads.Store(false)
		c.startFileReplica(acc, k, r, cfg, mine)
		return
	}
	if len(sa.Replicas) == 1 && cfg.Storage == stream.FileStorage {
		if dir := acc.js.StreamDir(k.name); streamckpt.Exists(acc.js.FileStoreConfig(dir).FS, dir) {
			// A replica's checkpoint: scaled down to this replica,
			// not yet converted (scaledown.go).
			r.leads.Store(false)
			c.resumeConvert(acc, k, r, cfg, mine)
			return
		}
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
	gc := groupConfig(sa, mine)
	gc.ForceSole = c.forcing.Load()
	if err := c.node.AddGroup(gc, r.log.StateMachine()); err != nil {
		c.groupNotStarted(fmt.Sprintf("stream %s > %s", k.account, k.name), sa.Group, mine.ID, err)
	}
}

// startLeaving starts this server's replica of stream k, which its
// assignment sa no longer names, when the WAL still holds it in sa's
// group: the server stopped while the replica was leaving (a move, a
// peer or server removal, a scale-down), before its group removed it,
// and the group may need its vote (a group of two replicas has no quorum
// without it; docs/cluster.md, "Replacing a replica"). It runs, and
// may lead, until its group removed it, as it did before the stop
// (retireReplicas), which then deletes its files.
func (c *Cluster) startLeaving(acc *account, k streamKey, sa meta.StreamAssignment) {
	id, ok := c.node.RecoveredReplica(sa.Group)
	if !ok || slices.ContainsFunc(sa.Replicas, func(x meta.Replica) bool { return x.ID == id }) {
		return
	}
	var cfg stream.Config
	start := sa.LogConfig // the config its group runs, for a scale-down to one replica too
	if len(start) == 0 {
		start = sa.Config
	}
	if err := json.Unmarshal(start, &cfg); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: its assigned config does not decode: %v", k.account, k.name, err)
		return
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s': restarting this server's replica %d, which was leaving group %d", k.account, k.name, id, sa.Group)
	mine := meta.Replica{ID: id, Server: c.name, Incarnation: c.node.Incarnation()}
	c.startFileReplica(acc, k, &replica{sa: sa, leadState: &leadState{}, server: c.name}, cfg, mine)
}

// scaleUpFromOne makes this server's stream of one replica, cur, the
// first replica of the group its new assignment sa gives it
// (docs/cluster.md, "Scaling"): the stream stops with its files kept
// (jetstream.JetStream.DetachStream), its store becomes the replica's
// (streamckpt.Adopt: a checkpoint at the group's base index with the
// stream's state), and the replica starts from it, bootstrapping the
// group alone; its leader then adds the new servers' replicas as learners.
// A failure leaves the stream stopped and is reported: its files are not
// touched further.
func (c *Cluster) scaleUpFromOne(acc *account, k streamKey, cur *replica, sa meta.StreamAssignment, mine meta.Replica) {
	var cfg stream.Config
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		c.stopReplica(acc, k, cur)
		c.startReplica(acc, k, sa, mine)
		return
	}
	c.mu.Lock()
	delete(c.replicas, k)
	c.mu.Unlock()
	// Consumers kept in memory (a memory stream's, a file stream's
	// mem_storage ones) have their state only in their runtimes, which
	// the stream's stop ends: handed over (memscale.go).
	c.handConsumers(acc, k, cfg.Storage == stream.MemoryStorage)
	c.stopStreamConsumers(k)
	c.quiesceStream(acc, k) // no publish on its way left unanswered (scaledown.go)
	state, st, jerr := acc.js.DetachStream(k.name)
	if jerr != nil {
		c.cfg.Logf("jscluster: stream %s > %s: scaling up from one replica, it could not be stopped: %v", k.account, k.name, jerr)
		return
	}
	if cfg.Storage == stream.MemoryStorage {
		c.adoptMemory(acc, k, sa, mine, st, state)
		return
	}
	dir := acc.js.StreamDir(k.name)
	err := streamckpt.Adopt(streamckpt.Config{Dir: dir, Store: acc.js.FileStoreConfig(dir), Node: c.node, Group: sa.Group, Replica: mine.ID, Logf: c.cfg.Logf}, state)
	if err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: scaling up from one replica, its store cannot become the group's (left as it is): %v", k.account, k.name, err)
		return
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s' scales up from one replica: this server's store starts its group", k.account, k.name)
	c.startReplica(acc, k, sa, mine)
	// Its replica, the group's only voter, campaigns at once rather than
	// after an election timeout: nobody answers about the stream until
	// it leads (waitScaled).
	_ = c.node.Campaign(sa.Group)
}

// adoptMemory makes the memory store st of this server's stream of one
// replica, detached with its own state, the first replica of the group
// its new assignment sa gives it (streamckpt.AdoptMemory:
// docs/cluster.md, "Memory streams").
func (c *Cluster) adoptMemory(acc *account, k streamKey, sa meta.StreamAssignment, mine meta.Replica, st store.Store, state []byte) {
	ms, ok := st.(*memstore.Store)
	if !ok {
		c.cfg.Logf("jscluster: stream %s > %s: scaling up from one replica, its store is not a memory store", k.account, k.name)
		return
	}
	ms.Reopen()
	ck, err := streamckpt.AdoptMemory(c.ckptConfig(acc, k, sa, mine), ms, state)
	if err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: scaling up from one replica, its store cannot become the group's: %v", k.account, k.name, err)
		return
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s' scales up from one replica: this server's memory store starts its group", k.account, k.name)
	r := &replica{sa: sa, leadState: &leadState{}, server: c.name}
	c.runReplica(acc, k, r, mine, ck)
	_ = c.node.Campaign(sa.Group) // as scaleUpFromOne's
}

// ckptConfig is the streamckpt.Config of this server's replica mine of
// stream k, assigned as sa.
func (c *Cluster) ckptConfig(acc *account, k streamKey, sa meta.StreamAssignment, mine meta.Replica) streamckpt.Config {
	dir := acc.js.StreamDir(k.name)
	return streamckpt.Config{
		Dir: dir, Store: acc.js.FileStoreConfig(dir), Node: c.node, Group: sa.Group, Replica: mine.ID, Logf: c.cfg.Logf, Infof: c.cfg.Infof,
		Catchup: c.svc, Server: c.name, Retain: c.cfg.Retain, Peers: func() []raftnode.ServerID {
			if cur := c.replicaOf(k); cur != nil {
				return meta.Servers(cur.sa.Replicas)
			}
			return meta.Servers(sa.Replicas)
		},
	}
}

// startFileReplica starts this server's replica of a replicated file
// stream from its checkpoint (streamckpt: the store rolled back to the
// checkpoint's position, the stream's state restored, the group applying
// what followed), or as a new replica with an empty store. A checkpoint
// or store that does not match fences the replica: it is reported and
// not started, and its files are left as they are.
//
// A memory stream's replica (streamckpt.OpenMemory) starts empty and
// replays its group's whole log; one caught up by a snapshot before
// this start lost what the log no longer holds: raftnode fences it
// (raftnode.ErrStateLost) and the meta leader is asked to replace it
// (askReplaceLost).
func (c *Cluster) startFileReplica(acc *account, k streamKey, r *replica, cfg stream.Config, mine meta.Replica) {
	open := streamckpt.Open
	if cfg.Storage == stream.MemoryStorage {
		open = streamckpt.OpenMemory
	}
	ck, err := open(c.ckptConfig(acc, k, r.sa, mine), cfg)
	if err != nil && cfg.Storage == stream.FileStorage {
		c.fenceDamaged(k, r.sa, mine, err)
		return
	}
	if err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: this server's replica is fenced (not started): %v", k.account, k.name, err)
		return
	}
	c.runReplica(acc, k, r, mine, ck)
}

// runReplica starts the engine's stream over the opened replica ck and
// adds its group with this server's replica mine.
func (c *Cluster) runReplica(acc *account, k streamKey, r *replica, mine meta.Replica, ck *streamckpt.Replica) {
	sa := r.sa
	r.ckpt = ck
	_, jerr := acc.js.StartReplica(ck.StreamConfig(), jetstream.ReplicaStart{
		Created: time.Unix(0, sa.Created).UTC(), Store: ck.StreamStore(),
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
	c.svc.Register(sa.Group, ck)
	gc := groupConfig(sa, mine)
	gc.ForceSole = c.forcing.Load()
	_, recovered := c.node.RecoveredReplica(sa.Group)
	if err := c.node.AddGroup(gc, r.log.StateMachine()); err != nil {
		c.groupNotStarted(fmt.Sprintf("stream %s > %s", k.account, k.name), sa.Group, mine.ID, err)
		return
	}
	if !gc.Join && r.mine() == mine.ID && (!recovered || initialReplicas(sa) == 1) && c.campaignsFirst(sa) {
		// The group's chosen first replica (firstleader.go), new here,
		// or the only voter of a group scaled up from one replica. A
		// replica that joins (a learner, which raft refuses to
		// campaign: "unpromotable") or leaves does not campaign, nor
		// one the WAL recovered (its group elected before; nats-server
		// v2.15.2's preferred peer campaigns at term 0 only).
		c.campaignFresh(sa.Group)
	}
}

// onLeader returns the OnLeader of replica r of stream name: it records
// the leadership and subscribes or unsubscribes the stream.
func (c *Cluster) onLeader(acc *account, name string, r *replica) func(bool) {
	return func(leader bool) {
		if leader {
			r.announced.Store(false)
			r.since.Store(c.cfg.Now().UnixNano())
			c.cfg.Infof("JetStream cluster new stream leader for '%s > %s'", acc.name, name) // nats-server v2.15.2's words
		}
		r.subMu.Lock()
		r.leads.Store(leader)
		if err := acc.js.SetStreamLeader(name, leader); err != nil {
			c.cfg.Logf("jscluster: stream %s > %s: leadership %v: %v", acc.name, name, leader, err)
		}
		r.subMu.Unlock()
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
		c.svc.Unregister(r.sa.Group, r.ckpt)
		_ = r.ckpt.Stop()
	}
	if err := acc.js.DeleteStream(k.name); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: delete this server's replica: %v", k.account, k.name, err)
	}
	if r.log == nil {
		return
	}
	r.log.Close()
	// A replica started next for the same group (a replacement on this
	// server) needs the node to be done with this one.
	if err := c.removeGroupWait(r.sa.Group); err != nil && !errors.Is(err, errRemoveStopping) && !errors.Is(err, raftnode.ErrUnknownGroup) {
		c.cfg.Logf("jscluster: stream %s > %s: remove group %d: %v", k.account, k.name, r.sa.Group, err)
	}
}

// removeWait bounds the wait for a replica's group to leave the node.
const removeWait = 5 * time.Second

// errRemoveStopping and errRemoveSlow are removeGroupWait's failures.
var (
	errRemoveStopping = errors.New("stopping")
	errRemoveSlow     = errors.New("the group was not removed in time")
)

// removeGroupWait removes group g from the node and waits, at most
// removeWait, until the node is done with it (a replica started next for
// the same group, or files taken over from it, need that). It returns
// RemoveGroup's error (raftnode.ErrUnknownGroup for a group not here),
// errRemoveStopping when the cluster stops meanwhile, or errRemoveSlow.
func (c *Cluster) removeGroupWait(g raftnode.GroupID) error {
	done, err := c.node.RemoveGroup(g)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-c.quit:
		return errRemoveStopping
	case <-time.After(removeWait):
		return errRemoveSlow
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
