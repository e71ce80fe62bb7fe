package jscluster

import (
	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// RaftGroup is one Raft group this server runs a replica of, for /raftz
// and $SYS.REQ.SERVER.PING.RAFTZ (nats-server v2.15.2 monitor.go
// Raftz; docs/monitoring.md, "/raftz").
type RaftGroup struct {
	// Account is the account the group belongs to: the system account's
	// name for the meta group (sysAccount of RaftGroups), the stream's
	// account for a stream's or a consumer's group, as nats-server files
	// them. Name is nats-server's group name: "_meta_", "S-R3F-<id>",
	// "C-R3F-<id>".
	Account, Name string
	// ID is this server's peer ID in the group (the 8 characters of
	// /jsz's peer; PeerID).
	ID     string
	Status raftnode.GroupStatus
}

// PeerID returns the peer ID nats-server's style gives a server (8
// characters, /jsz meta_cluster.peer).
func PeerID(server raftnode.ServerID) string { return peerHash(server) }

// metaGroupName is the meta group's name in nats-server's /raftz.
const metaGroupName = "_meta_"

// RaftGroups returns the Raft groups of this server of the account
// named (the meta group's is sysAccount), or of group only when it is
// not "", unsorted; none before the meta group started. A group that
// stopped between the listing and its status is left out.
func (c *Cluster) RaftGroups(sysAccount, account, group string) []RaftGroup {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil
	}
	type named struct{ account, name string }
	names := map[raftnode.GroupID]named{meta.MetaGroup: {sysAccount, metaGroupName}}
	c.meta.View(func(ms *meta.State) {
		for _, acc := range ms.Accounts() {
			if acc != account {
				continue
			}
			for _, sa := range ms.Streams(acc) {
				names[sa.Group] = named{acc, groupName(sa)}
				for _, ca := range ms.Consumers(acc, sa.Name) {
					names[ca.Group] = named{acc, consumerGroupName(ca)}
				}
			}
		}
	})
	var out []RaftGroup
	for _, id := range c.node.Groups() {
		n, ok := names[id]
		if !ok || n.account != account || (group != "" && n.name != group) {
			continue
		}
		st, err := c.node.Status(id)
		if err != nil {
			continue
		}
		out = append(out, RaftGroup{Account: n.account, Name: n.name, ID: peerHash(c.name), Status: st})
	}
	return out
}
