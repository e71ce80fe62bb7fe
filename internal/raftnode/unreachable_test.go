package raftnode

import (
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// A leader's server reported gone by the transport (PeerUnreachable: its
// Raft connection ended and its port refused the redial) is replaced
// within the randomised part of the followers' election timeout, in most
// trials (about 9 in 10 here; the rest are split votes or a pre-vote
// reaching a follower not yet told) in less than an election timeout;
// waiting for the timeout itself takes at least a whole one after the
// last heartbeat, so no trial is that quick without the report.
func TestPeerUnreachableElectsSooner(t *testing.T) {
	const trials = 20
	quick, et := 0, 0
	for range trials {
		c := newTestCluster(t, 3, nil)
		c.addGroup(1, 0)
		c.elect(0, 1)
		c.propose(0, 1, "a")
		c.tick(1) // the peers are known (checkLiveness) and the group is busy
		et = c.nodes[1].n.cfg.ElectionTicks
		c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
		c.nodes[1].n.PeerUnreachable("s1")
		c.nodes[2].n.PeerUnreachable("s1")
		c.stabilize()
		ticks := 0
		for c.leader(1) < 0 {
			if ticks > 200 { // split votes can repeat (tickUntilLeader)
				t.Fatalf("no leader %d ticks after the leader's server was reported gone", ticks)
			}
			c.tick(1)
			ticks++
		}
		if ticks < et-2 {
			quick++
		}
	}
	if quick < trials/2 {
		t.Fatalf("a new leader within %d ticks of the old one's server reported gone in %d of %d trials (election timeout %d ticks)", et-3, quick, trials, et)
	}
}

// A server reported gone that then sends a frame is alive again, and a
// follower that forgot a leader still alive follows it again: the other
// followers, still in its lease, refuse the forgetful one's pre-votes, so
// the leadership stays where it is.
func TestPeerUnreachableFalseAlarm(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(1)
	c.nodes[1].n.PeerUnreachable("s1")
	c.stabilize()
	for i := range 40 {
		c.tick(1)
		if l := c.leader(1); l != 0 {
			t.Fatalf("tick %d: leader %d after a false report of the leader's server", i, l)
		}
	}
	if c.nodes[1].n.isDead("s1") {
		t.Fatal("s1 still counted dead after its frames came again")
	}
	if _, err := c.propose(0, 1, "b").Result(); err != nil {
		t.Fatal(err)
	}
}

// The peer servers liveness watches follow the groups' peer lists: a
// server named by SetPeers after the last tick is watched from the next
// one, and one no group names any more is dropped (checkLiveness gathers
// them again only after such a change, not on every tick).
func TestLivenessPeersFollowChanges(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.tick(1)
	n := c.nodes[0].n
	watched := func() []ServerID {
		n.alive.mu.Lock()
		defer n.alive.mu.Unlock()
		return append([]ServerID(nil), n.alive.peers...)
	}
	if got := watched(); len(got) != 2 || got[0] != "s2" || got[1] != "s3" {
		t.Fatalf("watched %v, want [s2 s3]", got)
	}
	c.tick(1)
	if err := n.SetPeers(1, []Peer{{Replica: 1, Server: "s1"}, {Replica: 2, Server: "s2"}, {Replica: 4, Server: "s4"}}); err != nil {
		t.Fatal(err)
	}
	c.tick(1)
	if got := watched(); len(got) != 2 || got[0] != "s2" || got[1] != "s4" {
		t.Fatalf("watched %v after SetPeers, want [s2 s4]", got)
	}
}

// Config.PeerDead hears of a server found dead, once: from its silence
// (no beat for ElectionTicks) or at once from PeerUnreachable.
func TestPeerDeadReported(t *testing.T) {
	var told []ServerID
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == "s2" {
			cfg.PeerDead = func(s ServerID) { told = append(told, s) }
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(1)
	et := c.nodes[1].n.cfg.ElectionTicks
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	for i := 0; len(told) == 0; i++ {
		if i > et+2 {
			t.Fatalf("s3 silent for %d ticks, not reported dead", i)
		}
		c.tick(1)
	}
	c.tick(3)
	c.nodes[1].n.PeerUnreachable("s1")
	if len(told) != 2 || told[0] != "s3" || told[1] != "s1" {
		t.Fatalf("told %v, want [s3 s1]", told)
	}
}
