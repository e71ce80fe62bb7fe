package raftnode

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

func TestElectProposeApply(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.stabilize()
	c.elect(0, 1)
	p := c.propose(0, 1, "hello")
	res, err := p.Result()
	if err != nil {
		t.Fatalf("proposal: %v", err)
	}
	term, index := p.Position()
	if term == 0 || index < 2 { // index 1 is the new leader's empty entry
		t.Fatalf("position %d/%d", term, index)
	}
	sm := c.nodes[0].sms[1]
	if res != sm.hash || sm.applied != index {
		t.Fatalf("result %x applied %d, want the hash after %d", res, sm.applied, index)
	}
	c.tick(2) // heartbeats carry the commit index to the followers
	c.checkSame(1)
	if s := c.status(1, 1); s.Commit != index || s.LeaderServer != "s1" {
		t.Fatalf("follower status %+v", s)
	}
}

func TestFollowerProposalNotLeader(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	p := c.propose(1, 1, "x")
	if _, err := p.Result(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("got %v, want ErrNotLeader", err)
	}
}

// A leader that loses leadership before its entry applies never answers
// success for an entry the next leader replaced: it keeps the waiter
// (kept.go) and answers ErrNoReply once another term's entry applies at
// its index.
func TestLeadershipLossNoReply(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.net.Partition("s1", "s2")
	c.net.Partition("s1", "s3")
	p, err := c.nodes[0].n.Propose(1, []byte("lost"))
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	select {
	case <-p.Done():
		t.Fatal("resolved without a majority")
	default:
	}
	c.tick(80) // s2 and s3 elect a new leader; s1 steps down (CheckQuorum)
	if c.status(0, 1).Role == Leader {
		t.Fatal("s1 still leads without a majority")
	}
	select {
	case <-p.Done():
		t.Fatal("resolved before s1 learnt what its index holds")
	default:
	}
	c.net.HealAll()
	c.tick(3) // the new leader's entries replace s1's at its index
	if _, err := p.Result(); !errors.Is(err, ErrNoReply) {
		t.Fatalf("got %v, want ErrNoReply", err)
	}
	c.tickUntilLeader(1, 1000, 1, 2)
}

// Many groups share one WAL: a round writes them together.
func TestManyGroupsOneWAL(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for g := GroupID(1); g <= 20; g++ {
		c.addGroup(g, 0)
	}
	c.stabilize()
	for g := GroupID(1); g <= 20; g++ {
		if err := c.nodes[int(g)%3].n.Campaign(g); err != nil {
			t.Fatal(err)
		}
	}
	c.stabilize()
	var ps []*Proposal
	for g := GroupID(1); g <= 20; g++ {
		p, err := c.nodes[int(g)%3].n.Propose(g, []byte{byte(g)})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	c.stabilize()
	for i, p := range ps {
		if _, err := p.Result(); err != nil {
			t.Fatalf("group %d: %v", i+1, err)
		}
	}
	if segs, _ := c.nodes[0].n.WALStats(); segs != 1 {
		t.Fatalf("%d segments", segs)
	}
}

// A restarted node recovers its groups from the WAL and its state
// machines' checkpoints, and replays only what they lack.
func TestRestartRecovers(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	for _, d := range []string{"a", "b", "c"} {
		c.propose(0, 1, d)
	}
	c.tick(2)
	want := *c.nodes[1].sms[1]
	if err := c.nodes[1].sms[1].checkpoint(); err != nil { // durable at 2
		t.Fatal(err)
	}
	c.propose(0, 1, "d")
	c.tick(2)
	want = *c.nodes[1].sms[1]
	c.crash(1, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(1)
	c.addReplica(1, 1, 0)
	c.tick(2)
	got := c.nodes[1].sms[1]
	if got.applied != want.applied || got.hash != want.hash {
		t.Fatalf("after restart at %d, want %d", got.applied, want.applied)
	}
}

// A replica bound to another store incarnation is fenced: it never
// votes or campaigns, and the others carry on without it.
func TestIncarnationMismatchFences(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	// s3's disk is wiped: a new WAL, a new incarnation.
	old := c.nodes[2].n.Incarnation()
	c.nodes[2].fs = vfs.NewCrashFS()
	c.open(2)
	if c.nodes[2].n.Incarnation() == old {
		t.Fatal("a new WAL kept the incarnation")
	}
	sm := newHashSM(c.nodes[2].fs, "sm", 1)
	c.nodes[2].sms[1] = sm
	err := c.nodes[2].n.AddGroup(GroupConfig{ID: 1, Replica: 3, Incarnation: old, Peers: c.peers(0)}, sm)
	if err != nil {
		t.Fatal(err)
	}
	s := c.status(2, 1)
	if !errors.Is(s.Fenced, ErrIdentity) {
		t.Fatalf("status %+v, want fenced with ErrIdentity", s)
	}
	if _, err := c.nodes[2].n.Propose(1, []byte("x")); !errors.Is(err, ErrFenced) {
		t.Fatalf("propose on fenced: %v", err)
	}
	// The fenced replica must not help elect: with s1 gone, s2 alone
	// cannot win (it needs s3's vote, which a fenced replica never gives).
	c.net.Detach("s1")
	c.nodes[0].n = nil
	c.tick(40)
	if l := c.leader(1); l != -1 {
		t.Fatalf("node %d became leader with a fenced replica's vote", l)
	}
	if sm.applied != 0 {
		t.Fatal("fenced replica applied entries")
	}
}

// A removed replica writes a tombstone: its ID is refused afterwards, and
// Removed reports it, before and after a crash.
func TestRemoveGroupTombstone(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	if c.nodes[0].n.Removed(1, 1) {
		t.Fatal("Removed before the removal")
	}
	done, err := c.nodes[0].n.RemoveGroup(1)
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	<-done
	if _, err := c.nodes[0].n.Status(1); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("status after removal: %v", err)
	}
	if !c.nodes[0].n.Removed(1, 1) {
		t.Fatal("not Removed after the removal")
	}
	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(0)
	if !c.nodes[0].n.Removed(1, 1) || c.nodes[0].n.Removed(2, 1) {
		t.Fatal("Removed after the restart: the tombstone is durable, of group 1 only")
	}
	sm := newHashSM(c.nodes[0].fs, "sm", 1)
	err = c.nodes[0].n.AddGroup(GroupConfig{ID: 1, Replica: 1, Incarnation: c.nodes[0].n.Incarnation(), Peers: c.peers(0)}, sm)
	if !errors.Is(err, ErrRemoved) {
		t.Fatalf("re-adding a removed replica: %v", err)
	}
	c.addReplica(0, 1, 1) // a new replica ID is fine
}

// An idle group goes quiet: after a few ticks nothing but the liveness
// beats (one per peer server every other tick, for all groups) is sent; a
// proposal wakes it; a quiet leader's server going silent makes the
// followers elect a new leader.
func TestQuiescence(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for g := GroupID(1); g <= 10; g++ {
		c.addGroup(g, 0)
	}
	c.stabilize()
	for g := GroupID(1); g <= 10; g++ {
		if err := c.nodes[0].n.Campaign(g); err != nil {
			t.Fatal(err)
		}
	}
	c.stabilize()
	c.propose(0, 1, "a")
	c.tick(3)
	for i := range c.nodes {
		for g := GroupID(1); g <= 10; g++ {
			if s := c.status(i, g); !s.Quiesced {
				t.Fatalf("%s group %d not quiet: %+v", c.nodes[i].id, g, s)
			}
		}
	}
	// Count what is sent over 20 ticks: beats only.
	frames, beats := 0, 0
	for range 20 {
		for _, tn := range c.nodes {
			tn.n.Tick()
		}
		for _, tn := range c.nodes {
			tn.n.RunRound()
		}
		frames += c.net.InFlight()
		for i := c.net.InFlight() - 1; i >= 0; i-- {
			c.net.mu.Lock()
			if beatOnly(c.net.inflight[i].frame) {
				beats++
			}
			c.net.mu.Unlock()
		}
		c.net.DeliverAll()
	}
	// One beat per peer server every beatTicks ticks (trial 37: a beat
	// every tick was most of an idle server's wake-ups).
	if frames != beats || frames != 60 {
		t.Fatalf("%d frames over 20 idle ticks, %d of them beats only; want 60 beats (3 servers, 2 peers each, every other tick)", frames, beats)
	}
	// A proposal wakes the group and commits.
	p := c.propose(0, 3, "b")
	if _, err := p.Result(); err != nil {
		t.Fatal(err)
	}
	c.tick(3)
	if !c.status(1, 3).Quiesced {
		t.Fatal("group 3 did not go quiet again")
	}
	// The leader's server dies: the followers hear no beat, wake, forget
	// the leader and elect another within a few election timeouts.
	c.net.Detach("s1")
	c.nodes[0].n = nil
	for k := 0; ; k++ {
		if k > 200 { // ten groups' elections: split votes repeat now and then (2 runs in 800 passed 60 ticks)
			t.Fatal("no new leader after the quiet leader's server died")
		}
		c.tick(1)
		done := true
		for g := GroupID(1); g <= 10; g++ {
			done = done && c.leader(g) > 0
		}
		if done {
			break
		}
	}
}

// Beats every other tick do not find a server dead sooner than beats
// every tick did: a peer is silent once it sent nothing for an election
// timeout (11 ticks after its last beat with a beat every tick, 11 or
// 12 now), so a stalled server is given as long as before.
func TestSilentAfterAnElectionTimeout(t *testing.T) {
	for extra := range beatTicks { // s1 stops right after a beat, or between two
		c := newTestCluster(t, 3, nil)
		c.addGroup(1, 0)
		c.elect(0, 1)
		c.tick(5 + extra)
		et := c.nodes[1].n.cfg.ElectionTicks
		c.net.Detach("s1")
		c.nodes[0].n = nil
		for k := 1; ; k++ {
			c.tick(1)
			if c.nodes[1].n.isDead("s1") {
				if k < et+1 || k > et+beatTicks {
					t.Errorf("s1 stopped %d tick(s) after a beat: found dead %d ticks after its last tick; want %d to %d", extra, k, et+1, et+beatTicks)
				}
				break
			}
			if k > 3*et {
				t.Fatalf("s1 not found dead after %d ticks", k)
			}
		}
	}
}

// A read on a leader cut off from the majority is never served (the
// leader cannot confirm it still leads); it fails once the leader steps
// down. On the majority side a read is served at the committed index.
func TestReadIndexNeedsQuorum(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.net.Partition("s1", "s2")
	c.net.Partition("s1", "s3")
	r, err := c.nodes[0].n.ReadIndex(1)
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	select {
	case <-r.Done():
		t.Fatal("a read served without a quorum")
	default:
	}
	c.tick(40)
	if _, err := r.Result(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read on a deposed leader: %v", err)
	}
	l := c.tickUntilLeader(1, 1000, 1, 2)
	r, err = c.nodes[3-l].n.ReadIndex(1) // the follower on the majority side
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	if _, err := r.Result(); err != nil {
		t.Fatal(err)
	}
	if _, index := r.Position(); index != c.status(l, 1).Commit {
		t.Fatalf("read at %d, commit %d", index, c.status(l, 1).Commit)
	}
}

// Proposals beyond a round's byte budget wait for the next round instead
// of making one oversized batch: every one is applied, in order.
func TestRoundProposalBudget(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxRoundProposalBytes = 1000 })
	c.addGroup(1, 0)
	c.elect(0, 1)
	var ps []*Proposal
	for k := range 50 {
		p, err := c.nodes[0].n.Propose(1, fmt.Appendf(nil, "%03d%s", k, strings.Repeat("x", 97)))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	c.nodes[0].n.RunRound()
	if got := c.status(0, 1).LastIndex; got > 3+10 {
		t.Fatalf("one round appended up to %d", got)
	}
	c.stabilize()
	for k, p := range ps {
		_, index := p.Position()
		if _, err := p.Result(); err != nil || (k > 0 && index != ps[k-1].index+1) {
			t.Fatalf("proposal %d: %v at %d", k, err, index)
		}
	}
}

// A leader whose WAL fsync fails after its appends went out is fenced
// with every group of its WAL: it never counts its own copy, never
// applies the entry and answers its proposal ErrNoReply; the others
// commit the entry (durable on both of them) under a new leader. The
// failed node then sends nothing, not even liveness beats, and its rounds
// settle instead of reporting work forever.
func TestLeaderSyncFailure(t *testing.T) {
	var ffs *vfs.FaultFS
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == "s1" {
			ffs = vfs.NewFaultFS(cfg.FS)
			cfg.FS = ffs
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "before")
	ffs.Inject(vfs.Rule{Op: vfs.OpSync, Match: func(name string) bool { return strings.HasSuffix(name, ".wal") }, Count: 1})
	p, err := c.nodes[0].n.Propose(1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[0].n.RunRound()
	if ffs.Injected(vfs.OpSync) != 1 {
		t.Fatalf("the leader's round did not fsync (%d failed)", ffs.Injected(vfs.OpSync))
	}
	if c.net.InFlight() != 2 {
		t.Fatalf("%d frames in flight, want the appends to s2 and s3 sent before the fsync", c.net.InFlight())
	}
	if _, err := p.Result(); !errors.Is(err, ErrNoReply) {
		t.Fatalf("proposal: %v, want ErrNoReply", err)
	}
	c.stabilize()
	if s := c.status(0, 1); !errors.Is(s.Fenced, ErrCorrupt) || s.Applied != c.nodes[0].sms[1].applied {
		t.Fatalf("leader status %+v", s)
	}
	if sm := c.nodes[0].sms[1]; sm.applied >= p.index {
		t.Fatalf("the leader applied %d, past its entry %d that it never made durable", sm.applied, p.index)
	}
	// raft randomises election timeouts, and s2 and s3 can split their
	// votes several times in a row: tick until one leads (at least 30
	// rounds, so that the failed node is watched for a while), bounded.
	for i := 0; i < 30 || (c.status(1, 1).Role != Leader && c.status(2, 1).Role != Leader); i++ {
		if i == 1000 {
			t.Fatal("no leader on s2 or s3 after 1000 ticks")
		}
		c.nodes[0].n.Tick()
		if c.nodes[0].n.RunRound(); c.nodes[0].n.RunRound() {
			t.Fatal("the failed node reports work round after round")
		}
		if c.net.InFlight() != 0 {
			t.Fatal("the failed node sent a frame")
		}
		c.nodes[1].n.Tick()
		c.nodes[2].n.Tick()
		c.stabilize()
	}
	for _, i := range []int{1, 2} {
		if sm := c.nodes[i].sms[1]; sm.applied <= p.index {
			t.Fatalf("%s applied %d, want past %d", c.nodes[i].id, sm.applied, p.index)
		}
	}
}

// A replica added with GroupConfig.Fence after a restart is fenced with
// that error, never votes or applies, keeps its WAL record (a new
// replica ID is refused as another identity until then), and its
// removal leaves the tombstone a replacement under a new ID needs.
func TestAddGroupFenced(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.stabilize()
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(2)
	damage := errors.New("store damaged")
	n := c.nodes[2].n
	sm := newHashSM(c.nodes[2].fs, "sm", 1)
	err := n.AddGroup(GroupConfig{ID: 1, Replica: 3, Incarnation: n.Incarnation(), Peers: c.peers(0), Fence: damage}, sm)
	if err != nil {
		t.Fatal(err)
	}
	c.propose(0, 1, "b")
	c.stabilize()
	if s := c.status(2, 1); !errors.Is(s.Fenced, damage) {
		t.Fatalf("status %+v, want fenced with the damage", s)
	}
	if sm.applied != 0 {
		t.Fatalf("the fenced replica's state machine applied %d", sm.applied)
	}
	done, err := n.RemoveGroup(1)
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	<-done
	if !n.Removed(1, 3) {
		t.Fatal("no tombstone after the removal")
	}
	sm = newHashSM(c.nodes[2].fs, "sm2", 1)
	peers := append(c.peers(0), Peer{Replica: 4, Server: c.nodes[2].id})
	if err := n.AddGroup(GroupConfig{ID: 1, Replica: 4, Incarnation: n.Incarnation(), Peers: peers, Join: true}, sm); err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	if s := c.status(2, 1); s.Fenced != nil {
		t.Fatalf("the replacement is fenced: %v", s.Fenced)
	}
}

// A replica added fenced under a newer ID than the one the WAL holds
// (its server restarted after the assignment had moved on): its removal
// drops the WAL's older record too, before and after a crash, so that
// the next replica is not taken for another identity.
func TestAddGroupFencedNewerID(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.stabilize()
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(2)
	n := c.nodes[2].n
	peers := append(c.peers(0), Peer{Replica: 4, Server: c.nodes[2].id})
	err := n.AddGroup(GroupConfig{ID: 1, Replica: 4, Incarnation: n.Incarnation(), Peers: peers, Join: true, Fence: errors.New("another replica's files")}, newHashSM(c.nodes[2].fs, "sm", 1))
	if err != nil {
		t.Fatal(err)
	}
	done, err := n.RemoveGroup(1)
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	<-done
	if !n.Removed(1, 3) || !n.Removed(1, 4) {
		t.Fatal("replicas 3 and 4 not both removed")
	}
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(2)
	n = c.nodes[2].n
	if len(n.RecoveredGroups()) != 0 {
		t.Fatalf("the WAL still holds %v", n.RecoveredGroups())
	}
	peers = append(c.peers(0), Peer{Replica: 5, Server: c.nodes[2].id})
	if err := n.AddGroup(GroupConfig{ID: 1, Replica: 5, Incarnation: n.Incarnation(), Peers: peers, Join: true}, newHashSM(c.nodes[2].fs, "sm5", 1)); err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	if s := c.status(2, 1); s.Fenced != nil {
		t.Fatalf("replica 5 is fenced: %v", s.Fenced)
	}
}

// RecoveredReplica names the replica of a group the WAL holds after a
// restart until AddGroup claims it; a group never added, or whose replica
// was removed (a tombstone), has none.
func TestRecoveredReplica(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	c.addGroup(1, 4) // replica 5
	c.addGroup(2, 0)
	c.elect(0, 1)
	c.elect(0, 2)
	c.propose(0, 1, "a")
	done, err := c.nodes[0].n.RemoveGroup(2)
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	<-done
	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(0)
	n := c.nodes[0].n
	if id, ok := n.RecoveredReplica(1); !ok || id != 5 {
		t.Fatalf("group 1: replica %d %v, want 5", id, ok)
	}
	for _, g := range []GroupID{2, 3} {
		if id, ok := n.RecoveredReplica(g); ok {
			t.Fatalf("group %d: replica %d, want none", g, id)
		}
	}
	c.addReplica(0, 1, 4)
	if id, ok := n.RecoveredReplica(1); ok {
		t.Fatalf("group 1 claimed: replica %d, want none", id)
	}
}

// A replica bound to the store a wiped server had is fenced as
// routine: its line goes to Infof (the cluster replaces it), where the
// same mismatch on a WAL the node opened, not made, goes to Logf (trial
// 38 counted these among 27 warnings of one wiped server).
func TestWipedStoreFenceIsInfo(t *testing.T) {
	warn, info := &infoLog{}, &infoLog{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == serverName(2) {
			cfg.Logf, cfg.Infof = warn.infof, info.infof
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	old := c.nodes[2].n.Incarnation()
	if c.nodes[2].n.NewWAL() != true {
		t.Fatal("a first start's WAL is not reported new")
	}
	c.nodes[2].fs = vfs.NewCrashFS() // wiped
	c.open(2)
	if !c.nodes[2].n.NewWAL() {
		t.Fatal("a wiped store's WAL is not reported new")
	}
	sm := newHashSM(c.nodes[2].fs, "sm", 1)
	if err := c.nodes[2].n.AddGroup(GroupConfig{ID: 1, Replica: 3, Incarnation: old, Peers: c.peers(0)}, sm); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(c.status(2, 1).Fenced, ErrIdentity) {
		t.Fatal("not fenced")
	}
	if got := warn.matching("group 1 replica 3"); len(got) != 0 {
		t.Errorf("wiped store: warned %q", got)
	}
	if got := info.matching("group 1 replica 3 is not started: it belonged to this server's earlier store"); len(got) != 1 {
		t.Errorf("wiped store: info %q", info.lines)
	}
	// Reopened over the same store: the WAL is not new, and a binding to
	// another store is a warning.
	c.crash(2, vfs.CrashOptions{})
	c.open(2)
	if c.nodes[2].n.NewWAL() {
		t.Fatal("a reopened WAL is reported new")
	}
	var other Incarnation
	other[0] = 1
	sm = newHashSM(c.nodes[2].fs, "sm2", 2)
	if err := c.nodes[2].n.AddGroup(GroupConfig{ID: 2, Replica: 3, Incarnation: other, Peers: c.peers(0)}, sm); err != nil {
		t.Fatal(err)
	}
	if got := warn.matching("group 2 replica 3 fenced: raftnode: replica identity mismatch"); len(got) != 1 {
		t.Errorf("opened WAL: warn %q, info %q", warn.lines, info.lines)
	}
}
