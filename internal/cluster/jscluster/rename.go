package jscluster

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A server renamed over its store (docs/cluster.md, "A server
// renamed over its store"): restarted with another server_name over the
// same store directory, a server keeps its WAL, so its store
// incarnation and with it its meta replica (metaReplica), its log and
// its hard state (term, vote). That replica is the same voter under
// another name: it enters the meta group at once (addMeta, renamedFrom),
// and every server learns its new address once the meta leader
// catalogued the new name (meta.AddServer) and a route reaches it
// (syncMetaPeers, metaAddress). The replica never votes twice: it is one
// replica with one hard state, and the old name's messages would no
// longer be taken from any other server (raftnode drops a replica's
// messages from a server its peer list does not name).
//
// As nats-server v2.15.2 does, the new name is a new member of the
// catalogue and the old one stays listed, offline, until SERVER.REMOVE
// removes it; the replicas the old name held in streams and consumers
// are not served under the new name until then (the assignment names
// the old one; the store keeps their files, never deleted). Removing the
// old name leaves the meta replica alone: the new name holds it
// (removedReplica, renamedReplica); the meta leader then names the old
// name's replicas bound to the store on the new name, their replica IDs
// kept (renameRemoved, meta.RenameReplicas): the same Raft replicas, so
// their groups keep their voters, and a group of two its quorum.

// renamedFrom returns the member of the voters record rec whose store
// incarnation is this server's when this server's name is not in rec:
// the name this store ran under when the record was written.
func (c *Cluster) renamedFrom(rec votersFile) (string, bool) {
	if rec.Incarnations == nil || slices.Contains(rec.Voters, string(c.name)) {
		return "", false
	}
	self := c.node.Incarnation()
	for _, n := range rec.Voters {
		if inc, err := parseIncarnation(rec.Incarnations[n]); err == nil && inc == self {
			return n, true
		}
	}
	return "", false
}

// renamedRecord returns rec with the member old, this store's former
// name, named as this server instead.
func (c *Cluster) renamedRecord(rec votersFile, old string) votersFile {
	out := votersFile{Join: rec.Join, Incarnations: map[string]string{}}
	for _, n := range rec.Voters {
		name := n
		if n == old {
			name = string(c.name)
		}
		out.Voters = append(out.Voters, name)
		out.Incarnations[name] = rec.Incarnations[n]
	}
	slices.Sort(out.Voters)
	return out
}

// metaAddress returns the server to send meta replica id to, given the
// catalogue's servers not removed whose incarnation gives id (names) and
// the server the node knows it at now (cur): this server for its own
// replica; else the one name among them that is routed here and whose
// transport hello carried that incarnation (a store renamed: the old
// name is not routed); else cur. Two such names (two servers presenting
// one store: a copied store directory) change nothing.
func (c *Cluster) metaAddress(id raftnode.ReplicaID, names []raftnode.ServerID, cur raftnode.ServerID, routed map[raftnode.ServerID]bool) raftnode.ServerID {
	if len(names) == 0 || (len(names) == 1 && names[0] == cur) {
		return cur
	}
	if slices.Contains(names, c.name) && id == metaReplica(c.node.Incarnation()) {
		return c.name
	}
	var live []raftnode.ServerID
	for _, n := range names {
		if inc, ok := c.tr.PeerIncarnation(n); ok && routed[n] && metaReplica(inc) == id {
			live = append(live, n)
		}
	}
	if len(live) == 1 {
		return live[0]
	}
	return cur
}

// routedNames returns the servers with a route to this one.
func (c *Cluster) routedNames() map[raftnode.ServerID]bool {
	out := map[raftnode.ServerID]bool{}
	for _, p := range c.host.ClusterPeers() {
		out[raftnode.ServerID(p.Name)] = true
	}
	return out
}

// renamedReplica reports whether meta replica id is the replica of a
// server the catalogue st holds, not removed: a removed server's name
// whose store runs under another name keeps its replica there.
func renamedReplica(st *meta.State, id raftnode.ReplicaID) bool {
	for _, sv := range st.Servers() {
		if !sv.Removed && metaReplica(sv.Incarnation) == id {
			return true
		}
	}
	return false
}

// followRenames, on every server, tells the node a meta replica's new
// server once it changed (metaAddress): syncMetaPeers runs only then.
func (c *Cluster) followRenames() {
	c.mu.Lock()
	byInc, started := c.metaByInc, c.started
	peers := slices.Clone(c.metaPeers)
	c.mu.Unlock()
	if !byInc || !started {
		return
	}
	names := c.catalogueNames()
	routed := c.routedNames()
	for _, p := range peers {
		if c.metaAddress(p.Replica, names[p.Replica], p.Server, routed) != p.Server {
			c.syncMetaPeers()
			return
		}
	}
}

// catalogueNames returns, by meta replica, the names its store goes
// by: the catalogue's servers not removed whose incarnation gives it,
// and each routed server whose transport hello carried such a store
// under a name the catalogue does not have yet (a server renamed over
// its store, before the meta leader catalogued its new name: the meta
// group may need its vote to elect that leader).
func (c *Cluster) catalogueNames() map[raftnode.ReplicaID][]raftnode.ServerID {
	hellos := map[raftnode.ServerID]raftnode.Incarnation{}
	for n := range c.routedNames() { // the transport is asked outside meta.View
		if inc, ok := c.tr.PeerIncarnation(n); ok {
			hellos[n] = inc
		}
	}
	out := map[raftnode.ReplicaID][]raftnode.ServerID{}
	c.meta.View(func(st *meta.State) {
		for _, sv := range st.Servers() {
			if !sv.Removed {
				id := metaReplica(sv.Incarnation)
				out[id] = append(out[id], sv.Name)
			}
		}
		for n, inc := range hellos {
			id := metaReplica(inc)
			if _, known := st.Server(n); !known && len(out[id]) > 0 && !slices.Contains(out[id], n) {
				out[id] = append(out[id], n)
			}
		}
	})
	return out
}

// storeRemoved reports whether the catalogue st marks the store inc
// removed (SERVER.REMOVE) and no server not removed holds it: a server
// removed and restarted under another name over the same store is not
// catalogued again, nor takes part, as under its old name
// (docs/cluster.md, "Removing a server").
func storeRemoved(st *meta.State, inc raftnode.Incarnation) bool {
	removed := false
	for _, sv := range st.Servers() {
		if sv.Incarnation != inc {
			continue
		}
		if !sv.Removed {
			return false
		}
		removed = true
	}
	return removed
}

// retireStale makes room for this server's new replica mine of group g
// (label names its stream or consumer for the log): when the WAL holds
// an older replica of g of this store, live and not claimed (the
// replica the store held under its old name, after a rename, which the
// assignment replaced by mine), that one is added fenced and removed, so
// that its tombstone keeps it from ever voting again and mine can start
// (raftnode holds one replica of a group per store). It returns the old
// replica's ID (0: none) and false when it is still there (a failure,
// logged; the next reconcile tries again).
func (c *Cluster) retireStale(g raftnode.GroupID, mine raftnode.ReplicaID, label string) (raftnode.ReplicaID, bool) {
	id, ok := c.node.RecoveredReplica(g)
	if !ok || id >= mine {
		return 0, true
	}
	gc := raftnode.GroupConfig{ID: g, Replica: id, Incarnation: c.node.Incarnation(), Peers: []raftnode.Peer{{Replica: id, Server: c.name}},
		Fence: fmt.Errorf("%w: replica %d of this store, replaced by replica %d", raftnode.ErrIdentity, id, mine)}
	if err := c.node.AddGroup(gc, fencedSM{}); err != nil {
		c.cfg.Logf("jscluster: %s: this store's earlier replica %d of group %d: %v", label, id, g, err)
		return id, false
	}
	if err := c.removeGroupWait(g); err != nil && !errors.Is(err, raftnode.ErrUnknownGroup) {
		c.cfg.Logf("jscluster: %s: remove this store's earlier replica %d of group %d: %v", label, id, g, err)
		return id, false
	}
	c.cfg.Infof("JetStream cluster: %s: this store's earlier replica %d of group %d is removed for its replica %d", label, id, g, mine)
	return id, true
}

// clearStale, before this server's replica mine of replicated stream k
// (assigned as sa) starts, retires an earlier replica of the group this
// store holds (retireStale) and moves that replica's files aside
// (jetstream.JetStream.QuarantineStream: kept, never read), so that mine
// starts in an empty directory, caught up by a stream snapshot. It
// reports false when mine must not start yet.
func (c *Cluster) clearStale(acc *account, k streamKey, sa meta.StreamAssignment, mine meta.Replica) bool {
	label := "stream '" + k.account + " > " + k.name + "'"
	old, ok := c.retireStale(sa.Group, mine.ID, label)
	if !ok || old == 0 {
		return ok
	}
	to, err := acc.js.QuarantineStream(k.name, fmt.Sprintf("g%d.r%d", sa.Group, old))
	if err != nil {
		c.cfg.Logf("jscluster: %s: moving the files of this store's earlier replica %d aside: %v", label, old, err)
		return false
	}
	if to != "" {
		c.cfg.Infof("JetStream cluster: %s: the files of this store's earlier replica %d were moved to %s", label, old, to)
	}
	return true
}

// successors returns, from the catalogue st, each removed server whose
// store runs under another name not removed (a server renamed over its
// store, its old name removed since) with that name: the replicas the
// old name holds bound to that store are the new name's
// (meta.RenameReplicas). Two names not removed presenting the old name's
// store (a copied store directory) give none.
func successors(st *meta.State) map[raftnode.ServerID]meta.Server {
	out := map[raftnode.ServerID]meta.Server{}
	servers := st.Servers()
	for _, old := range servers {
		if !old.Removed {
			continue
		}
		var found []meta.Server
		for _, sv := range servers {
			if !sv.Removed && sv.Incarnation == old.Incarnation {
				found = append(found, sv)
			}
		}
		if len(found) == 1 {
			out[old.Name] = found[0]
		}
	}
	return out
}

// renamedHeld reports whether replica r, on a removed server, is bound
// to the store its successor (successors) runs: it is renamed, never
// moved.
func renamedHeld(succ map[raftnode.ServerID]meta.Server, r meta.Replica) bool {
	sv, ok := succ[r.Server]
	return ok && sv.Incarnation == r.Incarnation
}

// renameRemoved, on the meta leader, proposes a meta.RenameReplicas for
// every removed server holding a replica of a stream or a consumer bound
// to the store a server not removed now runs under another name, at
// most once per staleRetry per server: that server's replica of each
// group is the same Raft replica (its WAL, its hard state, its files),
// so it keeps its ID and its vote, and a group of two keeps its quorum
// (moving it to a new replica on the same store would need the old
// one retired first, by a leader that group cannot elect without it).
func (c *Cluster) renameRemoved() {
	type rename struct{ from, to raftnode.ServerID }
	var renames []rename
	c.meta.View(func(st *meta.State) {
		for from, to := range successors(st) {
			ss, cs := st.Assigned(from)
			held := slices.ContainsFunc(ss, func(sa meta.StreamAssignment) bool {
				r, _ := meta.On(sa.Replicas, from)
				return r.Incarnation == to.Incarnation
			}) || slices.ContainsFunc(cs, func(ca meta.ConsumerAssignment) bool {
				r, _ := meta.On(ca.Replicas, from)
				return r.Incarnation == to.Incarnation
			})
			if held {
				renames = append(renames, rename{from, to.Name})
			}
		}
	})
	now := time.Now()
	for _, r := range renames {
		if !c.staleAsked.due(staleKey{k: streamKey{name: string(r.from)}, consumer: "\x00rename"}, now, staleRetry) {
			continue
		}
		if _, err := c.meta.Propose(&meta.RenameReplicas{From: r.from, To: r.to}); err != nil {
			return
		}
		c.cfg.Infof("JetStream cluster: the replicas of removed server %s, whose store runs as %s, are %s's now (their replica IDs kept)", r.from, r.to, r.to)
	}
}
