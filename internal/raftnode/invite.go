package raftnode

import (
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A server that routes into a running cluster whose meta group does not
// have it yet waits to be added: the meta leader adds a replica of this
// server's as a learner and starts sending it the group's snapshot
// (docs/cluster.md, "Growing the meta group"). Until the cluster layer
// adds the group here (GroupConfig.Join), those messages are dropped;
// Invitation tells it that they came, from whom and to which replica.

// maxInvitations bounds the groups whose invitation a node remembers:
// messages for groups it does not run may come from any peer.
const maxInvitations = 16

// Invitation is the last message a node received for a group it does not
// run, addressed to a replica (its To was not 0).
type Invitation struct {
	// From is the server that sent it, Sender its replica (the group's
	// leader, adding this server's replica To).
	From   ServerID
	Sender ReplicaID
	To     ReplicaID
}

// invitations holds the Invitation of each group not run here.
type invitations struct {
	mu sync.Mutex
	by map[GroupID]Invitation
}

// note records msg (the raft message of an envelope for group id, which
// this node does not run) when it is addressed to a replica; bounded by
// maxInvitations groups.
func (iv *invitations) note(id GroupID, from ServerID, msg []byte) {
	m := new(pb.Message)
	if proto.Unmarshal(msg, m) != nil || m.GetTo() == 0 || m.GetFrom() == 0 {
		return
	}
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if _, ok := iv.by[id]; !ok && len(iv.by) >= maxInvitations {
		return
	}
	if iv.by == nil {
		iv.by = map[GroupID]Invitation{}
	}
	iv.by[id] = Invitation{From: from, Sender: ReplicaID(m.GetFrom()), To: ReplicaID(m.GetTo())}
}

// Invitation returns the last message received for group id while this
// node did not run it (false: none since the node opened or the group was
// added). The cluster layer of a server waiting to join a group reads it
// to learn that the group's leader is adding a replica of this server.
func (n *Node) Invitation(id GroupID) (Invitation, bool) {
	n.invites.mu.Lock()
	defer n.invites.mu.Unlock()
	iv, ok := n.invites.by[id]
	return iv, ok
}

// forgetInvitation drops group id's invitation (the group was added).
func (n *Node) forgetInvitation(id GroupID) {
	n.invites.mu.Lock()
	delete(n.invites.by, id)
	n.invites.mu.Unlock()
}
