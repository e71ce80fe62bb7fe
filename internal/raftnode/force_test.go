package raftnode

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// addForced adds node i's replica (base+i+1) of group g with ForceSole.
func (c *testCluster) addForced(i int, g GroupID, base ReplicaID, force bool) {
	tn := c.nodes[i]
	sm := newHashSM(tn.fs, "sm", g)
	tn.sms[g] = sm
	gc := GroupConfig{ID: g, Replica: base + ReplicaID(i) + 1, Incarnation: tn.n.Incarnation(), Peers: c.peers(base), ForceSole: force}
	if err := tn.n.AddGroup(gc, sm); err != nil {
		c.t.Fatalf("add group %d on %s: %v", g, tn.id, err)
	}
}

// resolved fails unless p resolved without error.
func resolved(t *testing.T, p *Proposal) {
	t.Helper()
	select {
	case <-p.Done():
	default:
		t.Fatal("the proposal has not resolved")
	}
	if _, err := p.Result(); err != nil {
		t.Fatal(err)
	}
}

// Two of three replicas lost for good: the survivor never elects a
// leader again, until it restarts with ForceSole. Then it is the only
// voter, leads, has applied every entry its log held (the one appended
// after the others were gone, never committed before, included),
// commits new entries alone, and a new replica on a fresh store joins
// it, is promoted and converges.
func TestForceSoleRecoversLostMajority(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	for i := range 5 {
		c.propose(0, 1, fmt.Sprint(i))
	}
	c.tick(2)
	c.crash(1, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.propose(0, 1, "tail") // appended and fsynced here, never committed
	c.tick(1)
	held := c.status(0, 1).Commit
	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})

	c.open(0)
	c.addForced(0, 1, 0, false)
	c.tick(60)
	if l := c.leader(1); l != -1 {
		t.Fatalf("node %d leads with one voter of three", l)
	}
	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})

	c.open(0)
	c.addForced(0, 1, 0, true)
	c.tickUntilLeader(1, 60, 0)
	st := c.status(0, 1)
	if len(st.Replicas) != 1 || st.Replicas[0].Replica != 1 {
		t.Fatalf("replicas after the force: %+v", st.Replicas)
	}
	sm := c.nodes[0].sms[1]
	if sm.applied <= held {
		t.Fatalf("applied %d: the held entry after commit %d was not applied", sm.applied, held)
	}
	resolved(t, c.propose(0, 1, "after"))

	// A new replica on a fresh store joins the forced group.
	c.nodes[1].fs = vfs.NewCrashFS()
	c.open(1)
	n1 := c.nodes[1].n
	peers := []Peer{{Replica: 1, Server: c.nodes[0].id}, {Replica: 4, Server: c.nodes[1].id}}
	c.nodes[1].sms[1] = newHashSM(c.nodes[1].fs, "sm", 1)
	if err := n1.AddGroup(GroupConfig{ID: 1, Replica: 4, Incarnation: n1.Incarnation(), Peers: peers, Join: true}, c.nodes[1].sms[1]); err != nil {
		t.Fatal(err)
	}
	n0 := c.nodes[0].n
	if err := n0.SetPeers(1, peers); err != nil {
		t.Fatal(err)
	}
	for _, k := range []ChangeKind{AddLearner, AddVoter} {
		p, err := n0.ChangeMembership(1, []Change{{Kind: k, Replica: 4}})
		if err != nil {
			t.Fatal(err)
		}
		c.tick(3)
		resolved(t, p)
	}
	resolved(t, c.propose(0, 1, "two"))
	c.tick(2)
	c.checkSame(1)
	if st := c.status(0, 1); len(st.Replicas) != 2 {
		t.Fatalf("replicas: %+v", st.Replicas)
	}
}

// A replica that is already its group's only voter gets nothing forced:
// its log and commit index are as they were.
func TestForceSoleAloneIsNoop(t *testing.T) {
	var logs []string
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
		cfg.Infof = cfg.Logf
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(2)
	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(0)
	logs = nil
	c.addForced(0, 1, 0, true)
	c.tickUntilLeader(1, 60, 0)
	if s := strings.Join(logs, "\n"); strings.Contains(s, "FORCED") || !strings.Contains(s, "only voter already") {
		t.Fatalf("logs:\n%s", s)
	}
}

// confEntry encodes cc as the conf change entry at index.
func confEntry(t *testing.T, index uint64, cc *pb.ConfChangeV2) *pb.Entry {
	data, err := proto.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Entry{Index: new(index), Term: new(uint64(2)), Type: pb.EntryConfChangeV2.Enum(), Data: data}
}

// The changes that force a replica alone: a log ending in a joint
// configuration (a learner promoted while a voter is removed) is left
// first, then every other voter and learner removed one by one; a
// replica that is not an incoming voter is refused (ErrForce).
func TestSoleChanges(t *testing.T) {
	single := func(typ pb.ConfChangeType, id uint64) *pb.ConfChangeSingle {
		return &pb.ConfChangeSingle{Type: typ.Enum(), NodeId: new(id)}
	}
	base := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	ents := []*pb.Entry{
		confEntry(t, 2, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{single(pb.ConfChangeAddLearnerNode, 4)}}),
		confEntry(t, 3, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{single(pb.ConfChangeAddNode, 4), single(pb.ConfChangeRemoveNode, 3)}}),
		confEntry(t, 4, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{single(pb.ConfChangeAddLearnerNode, 5)}}),
	}
	cfg, err := lastConf(base, ents[:2])
	if err != nil {
		t.Fatal(err)
	}
	ccs, removed, err := soleChanges(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ccs) != 3 || !ccs[0].LeaveJoint() || fmt.Sprint(removed) != "[2 4]" {
		t.Fatalf("changes %v, removed %v", ccs, removed)
	}
	// Applied in order, they leave 1 alone.
	if got := applyAll(t, cfg, ccs); fmt.Sprint(got.Voters[0].Slice()) != "[1]" || len(got.Voters[1]) != 0 || len(got.Learners) != 0 {
		t.Fatalf("after the changes: %s", got)
	}
	if _, _, err := soleChanges(cfg, 3); !errors.Is(err, ErrForce) {
		t.Fatalf("replica 3 (outgoing only): %v, want ErrForce", err)
	}
	// A simple change in a joint configuration does not rebuild.
	if _, err := lastConf(base, ents); err == nil {
		t.Fatal("a simple change in a joint configuration rebuilt")
	}
}

// applyAll applies ccs to cfg as raft does and returns the result.
func applyAll(t *testing.T, cfg tracker.Config, ccs []*pb.ConfChangeV2) tracker.Config {
	t.Helper()
	var ents []*pb.Entry
	for i, cc := range ccs {
		ents = append(ents, confEntry(t, uint64(10+i), cc))
	}
	trk := tracker.MakeProgressTracker(1, 0)
	trk.Config = cfg
	got, err := lastConf(trk.ConfState(), ents)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// pendingChange has node 0, leading group 1 of two whose other node
// crashed, propose the change kind of a new replica 3 (on a server that
// does not exist), which stays in its log, never applied, and waits
// until it knows no leader.
func (c *testCluster) pendingChange(kind ChangeKind) {
	c.t.Helper()
	if err := c.nodes[0].n.SetPeers(1, append(c.peers(0), Peer{Replica: 3, Server: "s9"})); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nodes[0].n.ChangeMembership(1, []Change{{Kind: kind, Replica: 3}}); err != nil {
		c.t.Fatal(err)
	}
	c.stabilize()
	c.waitLeaderless(0, 1)
}

// waitLeaderless ticks until node i's replica of g knows no leader.
func (c *testCluster) waitLeaderless(i int, g GroupID) {
	c.t.Helper()
	for range 100 {
		if st := c.status(i, g); st.Leader == 0 && st.Role != Leader {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("node %d's replica of %d still knows a leader: %+v", i, g, c.status(i, g))
}

// lostVoterOfTwo starts two nodes (cfg as newTestCluster takes it) with
// group 1 led by node 0, commits entries entries there ("0", "1", …),
// ticks twice, and crashes node 1 (its unsynced tail dropped): the group's
// other voter is lost.
func lostVoterOfTwo(t *testing.T, entries int, cfg func(*Config)) *testCluster {
	t.Helper()
	c := newTestCluster(t, 2, cfg)
	c.addGroup(1, 0)
	c.elect(0, 1)
	for i := range entries {
		resolved(t, c.propose(0, 1, fmt.Sprint(i)))
	}
	c.tick(2)
	c.crash(1, vfs.CrashOptions{Tail: vfs.TailDrop})
	return c
}

// forceOutLeads checks that node 0, the survivor of lostVoterOfTwo,
// elects no leader in 60 ticks, then forces replica 2 out of group 1
// and ticks until node 0 leads.
func (c *testCluster) forceOutLeads() {
	c.t.Helper()
	c.tick(60)
	if l := c.leader(1); l != -1 {
		c.t.Fatalf("node %d leads with one voter of two", l)
	}
	if err := c.nodes[0].n.ForceOut(1, 2); err != nil {
		c.t.Fatal(err)
	}
	c.tickUntilLeader(1, 60, 0)
}

// A group of two whose other voter is lost for good: the survivor knows
// no leader and never elects one, until ForceOut makes it the only
// voter, at run time. Then it leads, holds every entry it had (the
// tail appended after the other was gone, never committed, included,
// as ForceSole commits it), commits alone, and stays the only voter
// after a restart.
func TestForceOutLostVoterOfTwo(t *testing.T) {
	c := lostVoterOfTwo(t, 5, nil)
	c.propose(0, 1, "tail") // appended here, never committed
	// The leader adds a new replica as a learner just before it loses
	// its quorum: the change is in its log, never applied.
	c.pendingChange(AddLearner)
	held := c.status(0, 1).Commit
	c.forceOutLeads()
	if st := c.status(0, 1); !slices.Equal(st.Voters, []ReplicaID{1}) || len(st.Replicas) != 2 || !st.Replicas[1].Learner {
		t.Fatalf("voters %v, replicas %+v after the force (want the learner kept)", st.Voters, st.Replicas)
	}
	sm := c.nodes[0].sms[1]
	if sm.applied <= held+1 {
		t.Fatalf("applied %d: the tail after commit %d was not applied", sm.applied, held)
	}
	resolved(t, c.propose(0, 1, "after"))
	applied := sm.applied

	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(0)
	c.addReplica(0, 1, 0)
	c.tickUntilLeader(1, 60, 0)
	sm = c.nodes[0].sms[1]
	if st := c.status(0, 1); !slices.Equal(st.Voters, []ReplicaID{1}) {
		t.Fatalf("voters %v after a restart", st.Voters)
	}
	resolved(t, c.propose(0, 1, "restarted"))
	if sm.applied <= applied {
		t.Fatalf("applied %d after the restart, %d before", sm.applied, applied)
	}
}

// ForceOut is refused while a leader is known, for a group of three
// (two of three lost: a committed entry may be on the lost ones alone),
// and for a replica that is not the other voter: the group is as it
// was.
func TestForceOutRefused(t *testing.T) {
	var logs []string
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	resolved(t, c.propose(0, 1, "a"))
	c.tick(2)
	if err := c.nodes[1].n.ForceOut(1, 3); err != nil {
		t.Fatal(err)
	}
	c.tick(1)
	if st := c.status(1, 1); len(st.Voters) != 3 || c.leader(1) != 0 {
		t.Fatalf("a follower with a leader forced: voters %v, leader %d", st.Voters, c.leader(1))
	}
	c.crash(1, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.waitLeaderless(0, 1)
	for _, gone := range []ReplicaID{2, 1, 7} {
		if err := c.nodes[0].n.ForceOut(1, gone); err != nil {
			t.Fatal(err)
		}
	}
	c.tick(60)
	if st := c.status(0, 1); len(st.Voters) != 3 || c.leader(1) != -1 {
		t.Fatalf("a replica of three forced: voters %v, leader %d", st.Voters, c.leader(1))
	}
	if s := strings.Join(logs, "\n"); strings.Contains(s, "FORCED") || strings.Count(s, "not forced out") != 4 {
		t.Fatalf("logs:\n%s", s)
	}
}

// ForceOut is refused when a membership change that adds a voter
// follows the applied configuration in the log: had it committed, the
// group's quorum would no longer need this replica.
func TestForceOutRefusedPendingVoter(t *testing.T) {
	var logs []string
	c := lostVoterOfTwo(t, 1, func(cfg *Config) {
		cfg.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	})
	c.pendingChange(AddVoter)
	if err := c.nodes[0].n.ForceOut(1, 2); err != nil {
		t.Fatal(err)
	}
	c.tick(60)
	if c.leader(1) != -1 || !strings.Contains(strings.Join(logs, "\n"), "is not applied yet") {
		t.Fatalf("leader %d; logs:\n%s", c.leader(1), strings.Join(logs, "\n"))
	}
}

// A group of two whose leader shrinks it to itself (a scale-down to one
// replica) just as the other voter is lost: the removal is in its log,
// never committed, and the group has no leader for good. ForceOut
// takes it all the same (the removal only keeps this replica's vote
// needed): the survivor leads alone, with every entry it held.
func TestForceOutPendingRemoval(t *testing.T) {
	c := lostVoterOfTwo(t, 3, nil)
	if _, err := c.nodes[0].n.ChangeMembership(1, []Change{{Kind: RemoveReplica, Replica: 2}}); err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	c.waitLeaderless(0, 1)
	c.forceOutLeads()
	if st := c.status(0, 1); !slices.Equal(st.Voters, []ReplicaID{1}) {
		t.Fatalf("voters %v after the force", st.Voters)
	}
	resolved(t, c.propose(0, 1, "after"))
}
