package jscluster

import (
	"slices"
	"strings"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
)

// MetaInfo is the meta group as this server sees it, for the
// "meta_cluster" of /jsz and $SYS.REQ.SERVER.PING.JSZ (nats-server
// v2.15.2 MetaClusterInfo), which `nats server cluster step-down` reads
// to find the meta leader.
type MetaInfo struct {
	// Name is the cluster's name; Leader the meta leader's server name
	// ("" while there is none) and Peer its peer ID.
	Name, Leader, Peer string
	// Replicas are the other servers of the meta group, sorted by name:
	// on the meta leader with what it knows of each (current, lag,
	// offline), elsewhere the servers of the catalogue, the leader
	// current and the others not, as a nats-server follower shows them.
	Replicas []*jetstream.PeerInfo
	// Size is the number of servers in the meta group, QuorumNeeded its
	// majority.
	Size, QuorumNeeded int
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
	mi := &MetaInfo{Name: c.host.ClusterName(), Leader: string(st.LeaderServer)}
	if mi.Leader != "" {
		mi.Peer = peerHash(st.LeaderServer)
	}
	off := c.offline()
	if len(st.Replicas) > 0 { // the leader's view
		mi.Size = len(st.Replicas)
		for _, rs := range st.Replicas {
			if rs.Server == c.name {
				continue
			}
			pi := &jetstream.PeerInfo{Name: string(rs.Server), Current: rs.Match >= st.Commit && rs.Active, Peer: peerHash(rs.Server), Offline: off[rs.Server]}
			if rs.Match < st.Commit {
				pi.Lag = st.Commit - rs.Match
			}
			mi.Replicas = append(mi.Replicas, pi)
		}
	} else {
		c.meta.View(func(ms *meta.State) {
			for _, sv := range ms.Servers() {
				if sv.Removed {
					continue
				}
				mi.Size++
				if sv.Name != c.name {
					mi.Replicas = append(mi.Replicas, &jetstream.PeerInfo{Name: string(sv.Name), Current: sv.Name == st.LeaderServer, Peer: peerHash(sv.Name), Offline: off[sv.Name]})
				}
			}
		})
		mi.Size = max(mi.Size, 1)
	}
	slices.SortFunc(mi.Replicas, func(a, b *jetstream.PeerInfo) int { return strings.Compare(a.Name, b.Name) })
	mi.QuorumNeeded = mi.Size/2 + 1
	return mi
}
