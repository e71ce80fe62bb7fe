package raftnode

import (
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// HoldsCommitted (GroupStatus): a voter that led or was caught up with
// a leader holds what its group committed, and keeps saying so once its
// leader is gone and after a restart; a replica that joined empty does
// not, fed as a learner or not, until it is promoted; nor does a voter
// bootstrapped late that no leader fed yet.
func TestHoldsCommitted(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	voters := []Peer{{Replica: 1, Server: c.nodes[0].id}, {Replica: 2, Server: c.nodes[1].id}}
	add := func(i int, r ReplicaID, peers []Peer, join bool) {
		t.Helper()
		tn := c.nodes[i]
		sm := newHashSM(tn.fs, "sm", 1)
		tn.sms[1] = sm
		if err := tn.n.AddGroup(GroupConfig{ID: 1, Replica: r, Incarnation: tn.n.Incarnation(), Peers: peers, Join: join}, sm); err != nil {
			t.Fatal(err)
		}
	}
	holds := func(i int, want bool, when string) {
		t.Helper()
		if st := c.status(i, 1); st.HoldsCommitted != want {
			t.Fatalf("%s: node %d holds committed %v, want %v (%+v)", when, i, st.HoldsCommitted, want, st)
		}
	}
	add(0, 1, voters, false)
	add(1, 2, voters, false)
	holds(0, false, "bootstrapped, no leader yet")
	c.elect(0, 1)
	for _, d := range []string{"a", "b", "c"} {
		resolved(t, c.propose(0, 1, d))
	}
	c.tick(2)
	holds(0, true, "the leader")
	holds(1, true, "a follower caught up")

	all := append(voters[:2:2], Peer{Replica: 3, Server: c.nodes[2].id})
	add(2, 3, all, true)
	holds(2, false, "joined empty")
	for _, i := range []int{0, 1} {
		if err := c.nodes[i].n.SetPeers(1, all); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.nodes[0].n.ChangeMembership(1, []Change{{Kind: AddLearner, Replica: 3}}); err != nil {
		t.Fatal(err)
	}
	c.tick(3)
	if st := c.status(2, 1); !st.Member || !st.CaughtUp {
		t.Fatalf("the learner is not caught up: %+v", st)
	}
	holds(2, false, "a learner caught up")
	if _, err := c.nodes[0].n.ChangeMembership(1, []Change{{Kind: AddVoter, Replica: 3}}); err != nil {
		t.Fatal(err)
	}
	c.tick(3)
	holds(2, true, "promoted")

	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.waitLeaderless(1, 1)
	holds(1, true, "a voter that lost its leader")
	c.crash(1, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(1)
	add(1, 2, all, false)
	holds(1, true, "recovered from the WAL")

	// A voter of a group's first ones, added after the group committed
	// entries (its server was down at the creation): nothing yet.
	c.open(0)
	c.open(2)
	tn := c.nodes[0]
	late := []Peer{{Replica: 1, Server: c.nodes[0].id}, {Replica: 2, Server: c.nodes[1].id}, {Replica: 3, Server: c.nodes[2].id}}
	for i := range 3 {
		sm := newHashSM(c.nodes[i].fs, "sm2", 2)
		c.nodes[i].sms[2] = sm
		if i == 0 {
			continue
		}
		if err := c.nodes[i].n.AddGroup(GroupConfig{ID: 2, Replica: ReplicaID(i + 1), Incarnation: c.nodes[i].n.Incarnation(), Peers: late}, sm); err != nil {
			t.Fatal(err)
		}
	}
	c.elect(1, 2)
	resolved(t, c.propose(1, 2, "x"))
	if err := tn.n.AddGroup(GroupConfig{ID: 2, Replica: 1, Incarnation: tn.n.Incarnation(), Peers: late}, tn.sms[2]); err != nil {
		t.Fatal(err)
	}
	if st := c.status(0, 2); st.HoldsCommitted {
		t.Fatalf("a voter bootstrapped late, not fed yet, holds committed: %+v", st)
	}
	c.tick(3)
	if st := c.status(0, 2); !st.HoldsCommitted {
		t.Fatalf("a voter bootstrapped late and caught up does not hold committed: %+v", st)
	}
}
