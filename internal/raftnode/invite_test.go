package raftnode

import "testing"

// TestInvitation: messages for a group a node does not run are dropped,
// but the last one addressed to a replica is remembered (who sent it, to
// which replica) until the group is added there.
func TestInvitation(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	const g = GroupID(7)
	if _, ok := c.nodes[1].n.Invitation(g); ok {
		t.Fatal("an invitation before any message")
	}
	c.addReplica(0, g, 0) // s1 runs replica 1 of {1: s1, 2: s2}; s2 runs nothing
	c.tick(30)
	iv, ok := c.nodes[1].n.Invitation(g)
	if !ok || iv.From != "s1" || iv.Sender != 1 || iv.To != 2 {
		t.Fatalf("invitation = %+v, %v; want from s1, replica 1, to 2", iv, ok)
	}
	if _, ok := c.nodes[1].n.Invitation(g + 1); ok {
		t.Fatal("an invitation for a group nobody runs")
	}
	c.addReplica(1, g, 0)
	if _, ok := c.nodes[1].n.Invitation(g); ok {
		t.Fatal("the invitation outlived AddGroup")
	}
	c.tick(30)
	if st, err := c.nodes[1].n.Status(g); err != nil || st.Leader == 0 {
		t.Fatalf("the group elects no leader once both run it: %+v, %v", st, err)
	}
}

// TestInvitationBounded: a peer sending to many groups leaves at most
// maxInvitations remembered.
func TestInvitationBounded(t *testing.T) {
	var iv invitations
	msg := []byte{0x10, 0x02, 0x18, 0x03} // raftpb.Message{To: 2, From: 3}
	for g := GroupID(1); g <= 100; g++ {
		iv.note(g, "s9", msg)
	}
	if len(iv.by) != maxInvitations {
		t.Fatalf("%d invitations remembered, want %d", len(iv.by), maxInvitations)
	}
	if got := iv.by[1]; got.To != 2 || got.Sender != 3 || got.From != "s9" {
		t.Fatalf("invitation %+v", got)
	}
}
