package raftnode

import (
	"slices"
	"testing"
)

// A state machine that observes leadership hears of each change once,
// in order: the elected replica that it leads, then that it no longer
// does when it steps down, and the next leader that it leads.
func TestLeaderObserver(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	sm0 := c.nodes[0].sms[1]
	term := c.status(0, 1).Term
	if !slices.Equal(sm0.leads, []int64{int64(term)}) {
		t.Fatalf("leader's observations %v, want [%d]", sm0.leads, term)
	}
	for _, i := range []int{1, 2} {
		if got := c.nodes[i].sms[1].leads; len(got) != 0 {
			t.Fatalf("follower %d observed %v", i, got)
		}
	}
	if err := c.nodes[0].n.TransferLeader(1, 2); err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	if l := c.leader(1); l != 1 {
		t.Fatalf("leader after the transfer: node %d, want 1", l)
	}
	term2 := c.status(1, 1).Term
	if !slices.Equal(sm0.leads, []int64{int64(term), -int64(term2)}) {
		t.Fatalf("old leader's observations %v, want [%d %d]", sm0.leads, term, -int64(term2))
	}
	if got := c.nodes[1].sms[1].leads; !slices.Equal(got, []int64{int64(term2)}) {
		t.Fatalf("new leader's observations %v, want [%d]", got, term2)
	}
}
