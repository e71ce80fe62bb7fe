package jscluster

import (
	"fmt"
	"slices"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// Status types of a move's desired.status line (nats-server v2.15.2
// MigrationStatusType, stream.go): what has to change for the move to
// advance.
const (
	moveStatusMeta       = "meta"
	moveStatusMembership = "membership"
	moveStatusCatchup    = "catchup"
	moveStatusQuorum     = "quorum"
	moveStatusBlocked    = "blocked"
)

// moveStatus is the status line of stream sa's move (sa.Move set) as its
// group's leader sees it, st being this server's status of the group; nil
// on a server that does not lead the group, as nats-server v2.15.2
// reports the status its group leader keeps (jetstream_cluster.go,
// the stream's migration steps). The steps of a cairn move
// (docs/cluster.md "Moving a stream") map onto nats-server's lines:
//
//   - a target replica not yet a voter (not in the group, a learner, or
//     joining): catchup, "waiting for desired peers to catch up";
//   - a joint configuration: membership, "waiting for membership change
//     to commit";
//   - the next origin replica's removal refused because the voters left
//     would hold no live majority (keepsLiveQuorum): quorum, "waiting for
//     quorum to remove peer" (nats-server's line for canRemovePeer);
//   - an origin replica still in the group: membership, "removing peer
//     <server>";
//   - the group converged but a consumer of the stream still has a
//     replica off the targets (during a move, not a scale): blocked,
//     "waiting for consumer '<name>' to migrate";
//   - otherwise (the meta leader ends the move): meta, "waiting for peer
//     set to settle".
func (c *Cluster) moveStatus(sa meta.StreamAssignment, st raftnode.GroupStatus) *consumer.DesiredClusterInfoStatus {
	if sa.Move == nil || st.Role != raftnode.Leader {
		return nil
	}
	if s := groupMoveStatus(sa, heardLive(st, c.node.ContactWindow())); s != nil {
		return s
	}
	if name := c.unmovedConsumer(sa); name != "" && !sa.Scaling() {
		return &consumer.DesiredClusterInfoStatus{Type: moveStatusBlocked, Description: fmt.Sprintf("waiting for consumer '%s' to migrate", name)}
	}
	return &consumer.DesiredClusterInfoStatus{Type: moveStatusMeta, Description: "waiting for peer set to settle"}
}

// groupMoveStatus is moveStatus's line while the leader's group is not
// yet the move's targets alone, all voters; nil once it is. A replica
// is live when Active in st (moveStatus passes heardLive's status).
func groupMoveStatus(sa meta.StreamAssignment, st raftnode.GroupStatus) *consumer.DesiredClusterInfoStatus {
	inGroup := map[raftnode.ReplicaID]raftnode.ReplicaStatus{}
	for _, rs := range st.Replicas {
		inGroup[rs.Replica] = rs
	}
	for _, r := range sa.Replicas {
		if rs, ok := inGroup[r.ID]; !ok || rs.Learner || rs.Joining {
			return &consumer.DesiredClusterInfoStatus{Type: moveStatusCatchup, Description: "waiting for desired peers to catch up"}
		}
	}
	if st.Joint {
		return &consumer.DesiredClusterInfoStatus{Type: moveStatusMembership, Description: "waiting for membership change to commit"}
	}
	assigned := func(id raftnode.ReplicaID) bool {
		return slices.ContainsFunc(sa.Replicas, func(r meta.Replica) bool { return r.ID == id })
	}
	wanted := map[raftnode.ReplicaID]bool{}
	for _, r := range sa.Replicas {
		wanted[r.ID] = true
	}
	if leave := leavingVoters(st, wanted); len(leave) > 0 && !keepsLiveQuorum(st, []raftnode.Change{{Kind: raftnode.RemoveReplica, Replica: leave[0]}}) {
		return &consumer.DesiredClusterInfoStatus{Type: moveStatusQuorum, Description: "waiting for quorum to remove peer"}
	}
	for _, rs := range st.Replicas {
		if rs.Replica != st.Replica && !assigned(rs.Replica) {
			return &consumer.DesiredClusterInfoStatus{Type: moveStatusMembership, Description: fmt.Sprintf("removing peer %s", rs.Server)}
		}
	}
	if !assigned(st.Replica) {
		return &consumer.DesiredClusterInfoStatus{Type: moveStatusMembership, Description: "waiting for a desired peer to step down to"}
	}
	return nil
}

// unmovedConsumer names the first consumer (by the meta state's order)
// of stream sa with a replica on a server the move does not go to; ""
// when every consumer is on the targets.
func (c *Cluster) unmovedConsumer(sa meta.StreamAssignment) string {
	servers := meta.Servers(sa.Replicas)
	var cas []meta.ConsumerAssignment
	c.meta.View(func(st *meta.State) { cas = st.Consumers(sa.Account, sa.Name) })
	for _, ca := range cas {
		for _, r := range ca.Replicas {
			if !slices.Contains(servers, r.Server) {
				return ca.Name
			}
		}
	}
	return ""
}
