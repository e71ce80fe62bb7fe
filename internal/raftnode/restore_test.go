package raftnode

import (
	"fmt"
	"testing"
	"testing/synctest"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairnmq/cairn/internal/vfs"
)

// bgSM is a hashSM whose Restore runs in the background
// (BackgroundRestorer) when gate is set, and waits for the test to send
// its outcome (nil: install). It snapshots at an index it captured
// (SnapshotIndexer): asked for an index it has no capture at or above, it
// captures its state and answers ErrSnapshotPending.
type bgSM struct {
	*hashSM
	gate     chan error
	started  chan uint64
	captured *hashSM
	mins     []uint64
}

func (sm *bgSM) RestoreInBackground() bool { return sm.gate != nil }

func (sm *bgSM) Restore(index uint64, data []byte) error {
	if sm.gate != nil {
		sm.started <- index
		if err := <-sm.gate; err != nil {
			return err
		}
	}
	return sm.hashSM.Restore(index, data)
}

func (sm *bgSM) SnapshotAt(min uint64) (uint64, []byte, error) {
	sm.mins = append(sm.mins, min)
	if sm.captured == nil || sm.captured.applied < min {
		c := *sm.hashSM
		sm.captured = &c
		return 0, nil, ErrSnapshotPending
	}
	return sm.captured.applied, sm.captured.state(), nil
}

// addBG adds group g on node i with a bgSM (gated when gated).
func (c *testCluster) addBG(i int, g GroupID, gated bool) *bgSM {
	tn := c.nodes[i]
	h := newHashSM(tn.fs, "sm", g)
	sm := &bgSM{hashSM: h}
	if gated {
		sm.gate, sm.started = make(chan error), make(chan uint64, 1)
	}
	tn.sms[g] = h
	if err := tn.n.AddGroup(GroupConfig{ID: g, Replica: ReplicaID(i + 1), Incarnation: tn.n.Incarnation(), Peers: c.peers(0)}, sm); err != nil {
		c.t.Fatal(err)
	}
	return sm
}

// waitRestore ticks until the follower's Restore started, and returns its
// index (0: none within the ticks).
func (c *testCluster) waitRestore(sm *bgSM, ticks int) uint64 {
	for range ticks {
		c.tick(1)
		synctest.Wait()
		select {
		case index := <-sm.started:
			return index
		default:
		}
	}
	return 0
}

// A follower that needs a snapshot installs it in the background: its
// group sends nothing and applies nothing meanwhile (the leader commits
// with the other follower and does not count it), other groups go on; a
// Restore that asks to be retried leaves it as it was, not fenced; the
// next snapshot, taken at an index the leader's state machine chose (at
// least the one raftnode asked for), installs, and the replicas agree.
func TestBackgroundRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCluster(t, 3, nil)
		c.addGroup(2, 0) // another group, never parked
		leader := c.addBG(0, 1, false)
		c.addBG(1, 1, false)
		follower := c.addBG(2, 1, true)
		c.elect(0, 1)
		c.elect(0, 2)
		c.propose(0, 1, "a")
		c.net.Partition("s1", "s3")
		for _, d := range []string{"b", "c", "d"} {
			c.propose(0, 1, d)
		}
		c.tick(2)
		for i := range 2 { // nodes 0 and 1 checkpoint and compact
			if err := c.nodes[i].sms[1].checkpoint(); err != nil {
				t.Fatal(err)
			}
			if err := c.nodes[i].n.Compact(1, c.nodes[i].sms[1].applied); err != nil {
				t.Fatal(err)
			}
		}
		c.stabilize()
		before := follower.applied
		c.net.HealAll()
		index := c.waitRestore(follower, 30)
		if index == 0 {
			t.Fatal("no snapshot reached the follower")
		}
		if len(leader.mins) == 0 || index < leader.mins[0] || index > c.status(0, 1).Applied {
			t.Fatalf("snapshot at %d, asked for at least %v", index, leader.mins)
		}
		// Parked: the others commit without it, other groups go on.
		p := c.propose(0, 1, "e")
		p2 := c.propose(0, 2, "x")
		c.tick(3)
		for _, p := range []*Proposal{p, p2} {
			if _, err := p.Result(); err != nil {
				t.Fatalf("proposal while a follower restores: %v", err)
			}
		}
		if follower.applied != before {
			t.Fatalf("a parked follower applied through %d", follower.applied)
		}
		if m := matchOf(c.status(0, 1), 3); m >= index {
			t.Fatalf("the leader counts the parked follower at %d (snapshot %d)", m, index)
		}
		// Retry: nothing changes, the replica is not fenced.
		follower.gate <- fmt.Errorf("source gone: %w", ErrRestoreRetry)
		synctest.Wait()
		c.stabilize()
		if st := c.status(2, 1); st.Fenced != nil || follower.applied != before || st.FirstIndex > before+1 {
			t.Fatalf("after a retry: %+v, applied %d", st, follower.applied)
		}
		// The next snapshot installs.
		if index = c.waitRestore(follower, 30); index == 0 {
			t.Fatal("no second snapshot")
		}
		follower.gate <- nil
		synctest.Wait()
		c.tick(3)
		c.checkSame(1)
		if st := c.status(2, 1); st.Fenced != nil || st.Applied != c.status(0, 1).Applied || st.FirstIndex != index+1 {
			t.Fatalf("after the install of %d: %+v", index, st)
		}
		// Restarted, it comes back from the snapshot's base.
		if err := follower.checkpoint(); err != nil {
			t.Fatal(err)
		}
		c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
		c.open(2)
		c.addBG(2, 1, false)
		c.tick(3)
		c.checkSame(1)
	})
}

func matchOf(st GroupStatus, r ReplicaID) uint64 {
	for _, rs := range st.Replicas {
		if rs.Replica == r {
			return rs.Match
		}
	}
	return 0
}

// An abandoned install (snapbegin, then snapabort) is forgotten by
// recovery: a state machine past its index later does not make recovery
// complete it and drop the log.
func TestWALSnapAbort(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 1<<20)
	walBatch(t, w, 1, 1, 3, 0)
	m := snapMeta{index: 10, term: 2, conf: &pb.ConfState{Voters: []uint64{1}}}
	if err := w.snapBegin(1, m); err != nil {
		t.Fatal(err)
	}
	var it items
	it.b = []byte{bodyBatch}
	it.snap(itemSnapAbort, 1, m)
	if err := w.write(it.b, []walUpdate{{group: 1}}); err != nil {
		t.Fatal(err)
	}
	walBatch(t, w, 1, 4, 10, 0)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	w.close()
	w = mustOpenWAL(t, fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), 1<<20)
	if rec := w.recovered[1]; rec == nil || rec.pending != nil || lastIndexOf(w, 1) != 13 {
		t.Fatalf("recovered %+v, last %d", rec, lastIndexOf(w, 1))
	}
}

// A replica bootstrapped late starts from the group's initial voters
// (GroupConfig.Voters), not from every peer it is told of; and a message
// from a replica no peer list names teaches the group its server, so it
// can be answered (a leader that left the assignment but still leads).
func TestBootstrapVotersAndLearnedPeers(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	// Group 1's voters are replicas 1 and 2; replica 3 is named as a peer
	// but bootstraps with the same two voters, so it is not one.
	for i, tn := range c.nodes {
		sm := newHashSM(tn.fs, "sm", 1)
		tn.sms[1] = sm
		if err := tn.n.AddGroup(GroupConfig{ID: 1, Replica: ReplicaID(i + 1), Incarnation: tn.n.Incarnation(), Peers: c.peers(0),
			Voters: []ReplicaID{1, 2}}, sm); err != nil {
			t.Fatal(err)
		}
	}
	c.elect(0, 1)
	st := c.status(0, 1)
	if len(st.Replicas) != 2 {
		t.Fatalf("the leader's configuration: %+v", st.Replicas)
	}
	// Node 1 forgets where replica 1 lives; the leader's next message
	// teaches it, and the group goes on.
	if err := c.nodes[1].n.SetPeers(1, []Peer{{Replica: 2, Server: "s2"}}); err != nil {
		t.Fatal(err)
	}
	p := c.propose(0, 1, "x")
	c.tick(3)
	select {
	case <-p.Done():
	default:
		t.Fatal("the proposal did not commit: the follower could not answer the leader")
	}
	if _, err := p.Result(); err != nil {
		t.Fatalf("proposal with a peer learned from its messages: %v", err)
	}
	if st := c.status(1, 1); !st.Member || st.Applied < 2 {
		t.Fatalf("follower %+v", st)
	}
	if st := c.status(2, 1); st.Member {
		t.Fatalf("replica 3 thinks it is a member: %+v", st)
	}
}
