package jscluster

import (
	"encoding/json"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Removing a server (docs/cluster.md, "Removing a server"):
// $JS.API.SERVER.REMOVE on the meta leader proposes meta.RemoveServer,
// which marks the server removed in the catalogue (placement skips it);
// the answer waits for that entry to apply, as nats-server answers once
// its remove-peer entry applied. Then the meta leader moves each replica
// of a replicated stream off it (moveOffRemoved: meta.MoveReplica to a
// server placed as a create places, or with none, dropRemoved), the
// removed server hands over every leadership it holds (stepMembership),
// and, once no such move is left to
// make (movesPending), the meta leader removes the server's meta replica from the group
// (reconcileMeta: one membership change, after handing its own
// leadership over when it is the one removed). The server is not
// catalogued again while it runs the store it was removed with.

// RemoveServer implements jsapi.SystemCluster, as nats-server v2.15.2
// jsLeaderServerRemoveRequest, in its order: 10202 "cluster member
// change is in progress" while a removal is under way
// (metaMembershipChanging); 10044 when no member of the meta group has
// the name (or the peer ID, nats-server's 8-character hash of the name,
// which takes precedence); 10009 for a cluster whose meta replica IDs are by position
// (bootstrapped before they derived from store incarnations: its members
// cannot be told apart from their successors), and 10008 when the
// removal does not commit within the proposal timeout.
func (c *Cluster) RemoveServer(name, peerID string) *jserr.Error {
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil {
		return jserr.New(jserr.ClusterNotAvail)
	}
	if c.metaMembershipChanging(st) {
		return jserr.New(jserr.ClusterServerMemberChangeInflight)
	}
	found := c.memberNamed(st, name, peerID)
	if found == "" {
		return jserr.New(jserr.ClusterServerNotMember)
	}
	c.mu.Lock()
	byInc := c.metaByInc
	c.mu.Unlock()
	if !byInc {
		return jserr.New(jserr.ClusterNotLeader)
	}
	if _, jerr := c.propose(&meta.RemoveServer{Name: found}); jerr != nil {
		if jerr.ErrCode == uint16(jserr.ClusterServerNotMember) {
			return jserr.New(jserr.ClusterServerMemberChangeInflight) // removed already, still leaving
		}
		return jerr
	}
	c.cfg.Infof("JetStream cluster: server %s removed from the meta group (SERVER.REMOVE)", found)
	return nil
}

// memberNamed returns the member of the meta group (leader's status st)
// with peer ID peerID (nats-server's 8-character hash of the name, which
// takes precedence) or, with none given, named name; "" when none is.
func (c *Cluster) memberNamed(st raftnode.GroupStatus, name, peerID string) raftnode.ServerID {
	for _, rs := range c.members(st) {
		if (peerID != "" && peerHash(rs) == peerID) || (peerID == "" && string(rs) == name) {
			return rs
		}
	}
	return ""
}

// metaMembershipChanging reports, from the meta leader's status st,
// whether a removal is under way: a joint configuration, or a replica of
// a server the catalogue marks removed still in the group. A learner
// being added is not (one that never catches up, its server gone, must
// not block its own removal; reconcileMeta makes one change at a time).
func (c *Cluster) metaMembershipChanging(st raftnode.GroupStatus) bool {
	if st.Joint {
		return true
	}
	_, removing := c.removedReplica(st)
	return removing
}

// removedReplica returns the replica of the meta leader's status st that
// belongs to a server the catalogue marks removed (false: none), but for
// one a server not removed holds (the store of a removed name runs under
// another: rename.go).
func (c *Cluster) removedReplica(st raftnode.GroupStatus) (raftnode.ReplicaStatus, bool) {
	var out raftnode.ReplicaStatus
	found := false
	c.meta.View(func(ms *meta.State) {
		for _, rs := range st.Replicas {
			if sv, ok := ms.Server(rs.Server); ok && sv.Removed && !found && !renamedReplica(ms, rs.Replica) {
				out, found = rs, true
			}
		}
	})
	return out, found
}

// movesPending reports whether a replicated stream still has a replica
// on server, removed, that another server can take (place) or that the
// stream can drop (dropRemoved): the meta
// leader removes the server's meta replica only once none has, so that
// the server applies every move of its replicas (meta.MoveReplica)
// while it is still in the meta group, and its replicas, a stream's
// leader among them, carry the moves out in their groups.
func (c *Cluster) movesPending(server raftnode.ServerID) bool {
	var sas []meta.StreamAssignment
	c.meta.View(func(st *meta.State) {
		ss, _ := st.Assigned(server)
		for _, sa := range ss {
			if len(sa.Replicas) > 1 {
				sas = append(sas, sa)
			}
		}
	})
	for _, sa := range sas {
		var cfg stream.Config
		if json.Unmarshal(sa.Config, &cfg) != nil {
			continue
		}
		if _, err := c.place(sa, cfg, server); err == nil || len(sa.Replicas) > 2 {
			return true // a move, or a drop (dropRemoved)
		}
	}
	return false
}

// handOverMeta transfers the meta group's leadership, which this server
// holds and must give up (its server was removed), to the most
// up-to-date active voter of another server.
func (c *Cluster) handOverMeta(st raftnode.GroupStatus) {
	var to raftnode.ReplicaStatus
	for _, rs := range st.Replicas {
		if rs.Server != c.name && !rs.Learner && rs.Active && rs.Match >= to.Match {
			to = rs
		}
	}
	if to.Replica == 0 {
		return
	}
	if err := c.node.HandOver(meta.MetaGroup, to.Replica); err == nil {
		c.cfg.Infof("JetStream cluster: meta group leadership handed to %s: this server was removed", to.Server)
	}
}

// moveOffRemoved, on the meta leader, proposes a meta.MoveReplica of
// each replica of a replicated stream on a server the catalogue marks
// removed, to a server placed as a create places (replacement), or,
// with no such server, drops it from a stream of three replicas or more
// (dropRemoved); at most once per staleRetry per replica. The stream's
// consumers of one replica on that server move first, with their state
// (moveSinglesThen). A stream of one replica stays (its data has no
// other copy to catch a new replica up from), and so does a stream of
// two with no server to take it (one replica left would need the
// conversion of a scale-down to one).
func (c *Cluster) moveOffRemoved() {
	if !c.metaLeader() {
		return
	}
	type move struct {
		sa   meta.StreamAssignment
		from meta.Replica
	}
	c.renameRemoved() // a removed name whose store runs under another: its replicas stay
	var moves []move
	c.meta.View(func(st *meta.State) {
		succ := successors(st)
		for _, sv := range st.Servers() {
			if !sv.Removed {
				continue
			}
			ss, _ := st.Assigned(sv.Name)
			for _, sa := range ss {
				if _, _, single := singleStreamMove(sa); single {
					continue // a stream of one replica moving: it finishes or rolls back first (singlestream.go)
				}
				if r, ok := meta.On(sa.Replicas, sv.Name); ok && len(sa.Replicas) > 1 && !renamedHeld(succ, r) {
					moves = append(moves, move{sa, r})
				}
			}
		}
	})
	now := time.Now()
	for _, m := range moves {
		if !c.staleAsked.due(staleKey{k: streamKey{m.sa.Account, m.sa.Name}, id: m.from.ID}, now, staleRetry) {
			continue
		}
		var cfg stream.Config
		if json.Unmarshal(m.sa.Config, &cfg) != nil {
			continue
		}
		to, perr := c.place(m.sa, cfg, m.from.Server)
		if perr != nil {
			if len(m.sa.Replicas) > 2 && !c.dropRemoved(m.sa, m.from.Server, perr) {
				return
			}
			continue
		}
		move := func() bool {
			if _, err := c.meta.Propose(&meta.MoveReplica{Account: m.sa.Account, Stream: m.sa.Name, Replica: m.from.ID, To: to}); err != nil {
				return false
			}
			c.cfg.Infof("JetStream cluster: stream '%s > %s': its replica on removed server %s moves to %s", m.sa.Account, m.sa.Name, m.from.Server, to)
			c.moveConsumers(m.sa.Account, m.sa.Name, m.from.Server, to)
			return true
		}
		// Its consumers of one replica there move first (singles.go).
		if c.moveSinglesThen(m.sa, m.from.Server, func() { move() }) {
			continue
		}
		if !move() {
			return
		}
	}
}

// dropRemoved proposes a meta.UpdateStream of stream sa with its config
// unchanged and its servers without gone, a removed server no other
// server can replace (perr: why): the stream runs on the others, one
// replica short of its num_replicas, as nats-server v2.15.2 drops a
// removed peer it cannot replace (reassignStreamPeers with remove set);
// its leader removes the replica from the group, handing its
// leadership over first when it is that replica (docs/cluster.md,
// "Removing a server"). It reports false when the proposal failed.
func (c *Cluster) dropRemoved(sa meta.StreamAssignment, gone raftnode.ServerID, perr *jserr.Error) bool {
	var servers []raftnode.ServerID
	for _, r := range sa.Replicas {
		if r.Server != gone {
			servers = append(servers, r.Server)
		}
	}
	if _, err := c.meta.Propose(&meta.UpdateStream{Account: sa.Account, Name: sa.Name, Config: sa.Config, Servers: servers}); err != nil {
		return false
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s': its replica on server %s (removed or evacuated) is dropped, no server can take it (%v): it runs on %v", sa.Account, sa.Name, gone, perr, servers)
	return true
}
