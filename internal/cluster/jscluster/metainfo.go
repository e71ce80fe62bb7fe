package jscluster

import (
	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// MetaInfo is the meta group as this server sees it, for the
// "meta_cluster" of /jsz and $SYS.REQ.SERVER.PING.JSZ (nats-server
// v2.15.2 MetaClusterInfo), which `nats server cluster step-down` reads
// to find the meta leader.
type MetaInfo struct {
	// Name is the cluster's name; Leader the meta leader's server name
	// ("" while there is none) and Peer its peer ID.
	Name, Leader, Peer string
	// Replicas are the other servers of the meta group (this one too
	// while it knows no leader), sorted by name, as nats-server's
	// ClusterInfo lists a group's replicas (peerInfos): on the meta
	// leader with what it knows of each (current, how long since it
	// heard from it, lag, offline), elsewhere the leader current when
	// heard from lately and the other followers not current.
	Replicas []*jetstream.PeerInfo
	// Size is the number of servers in the meta group, QuorumNeeded its
	// majority.
	Size, QuorumNeeded int
	// IsLeader: this server leads the meta group.
	IsLeader bool
	// Checkpoint is this server's checkpoint of the meta group
	// (meta.Log.Stats): what a restart would apply again, and when the
	// last checkpoint was written and how long it took.
	Checkpoint meta.CheckpointStats
}

// MetaInfo returns the meta group as this server sees it; nil before
// the meta group started here.
func (c *Cluster) MetaInfo() *MetaInfo {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil
	}
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil {
		return nil
	}
	members := c.metaMembers()
	size := len(st.Peers) + 1
	if members != nil {
		size = len(members)
	}
	mi := &MetaInfo{Name: c.host.ClusterName(), Leader: string(st.LeaderServer), Replicas: c.peerInfos(st, members),
		Size: size, IsLeader: st.Role == raftnode.Leader && st.Fenced == nil, Checkpoint: c.meta.Stats()}
	if mi.Leader != "" {
		mi.Peer = peerHash(st.LeaderServer)
	}
	mi.QuorumNeeded = mi.Size/2 + 1
	return mi
}

// metaMembers returns the meta replicas the catalogue wants: the replica
// of each server not removed, by its catalogued incarnation
// (metaReplica); nil for a meta group whose replica IDs are by position,
// or while the catalogue is empty (every replica of the group's is then
// listed).
func (c *Cluster) metaMembers() []meta.Replica {
	c.mu.Lock()
	byInc := c.metaByInc
	c.mu.Unlock()
	if !byInc {
		return nil
	}
	var out []meta.Replica
	c.meta.View(func(st *meta.State) {
		for _, sv := range st.Servers() {
			if !sv.Removed {
				out = append(out, meta.Replica{ID: metaReplica(sv.Incarnation), Server: sv.Name, Incarnation: sv.Incarnation})
			}
		}
	})
	return out
}
