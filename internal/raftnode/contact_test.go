package raftnode

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/vfs"
)

// Contact (contact.go): every replica reports how long ago it heard
// from the others; the leader is current, and so is a follower that
// heard from it within the window and applied what it said was
// committed. A follower cut off loses both, and one that lacks
// committed entries is not current until it has applied them.
func TestContactAndCurrent(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.TickInterval = 100 * time.Millisecond
		cfg.DisableQuiescence = true
		// One entry per append, one append in flight: a follower that
		// lacks entries gets them over several rounds.
		cfg.MaxSizePerMsg = 1
		cfg.MaxInflightMsgs = 1
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(2)
	window := c.nodes[0].n.ContactWindow()
	if window != 2*time.Second {
		t.Fatalf("window %v, want two election timeouts (2s)", window)
	}
	ls := c.status(0, 1)
	if !ls.Current || len(ls.Peers) != 2 {
		t.Fatalf("leader: %+v", ls)
	}
	for _, p := range ls.Peers {
		if !p.Heard || p.Ago > 200*time.Millisecond {
			t.Fatalf("leader's contact with %s: %+v", p.Server, p)
		}
	}
	for _, i := range []int{1, 2} {
		fs := c.status(i, 1)
		if !fs.Current || !fs.CaughtUp || fs.LeaderCommit != ls.Commit || fs.Leaderless != 0 {
			t.Fatalf("follower %d: %+v (leader commit %d)", i, fs, ls.Commit)
		}
	}

	// s3 is cut off while the leader commits more.
	c.net.Partition("s1", "s3")
	c.net.Partition("s2", "s3")
	for _, d := range []string{"b", "c", "d", "e", "f"} {
		c.propose(0, 1, d)
	}
	c.tick(25) // past the window: s3 has no word from s1, and loses it as leader
	cut := c.status(2, 1)
	if cut.Current || cut.Leader != 0 || cut.Leaderless == 0 {
		t.Fatalf("cut-off follower: %+v", cut)
	}
	for _, p := range c.status(0, 1).Peers {
		if p.Server == "s3" && p.Ago <= window {
			t.Fatalf("the leader heard from s3 %v ago", p.Ago)
		}
	}

	// Healed, s3 learns the leader's commit and catches up one entry per
	// round: not current until it has applied through it.
	c.net.HealAll()
	sawBehind := false
	for k := 0; ; k++ {
		if k > 200 {
			t.Fatal("s3 never caught up")
		}
		for _, tn := range c.nodes {
			tn.n.Tick()
		}
		for _, tn := range c.nodes {
			tn.n.RunRound()
		}
		c.net.DeliverAll()
		s := c.status(2, 1)
		if s.Leader != 0 && !s.CaughtUp && s.LeaderCommit > s.Applied {
			sawBehind = true
			if s.Current {
				t.Fatalf("current while behind: %+v", s)
			}
		}
		if s.Current {
			break
		}
	}
	if !sawBehind {
		t.Fatal("s3 never reported itself behind")
	}
	if s, l := c.status(2, 1), c.status(0, 1); s.Applied != l.Commit {
		t.Fatalf("current at %d, leader's commit %d", s.Applied, l.Commit)
	}
}

// A quiet group exchanges nothing: the beats of the replicas' servers
// stand for them, so its replicas stay heard and current.
func TestContactQuiet(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(40)
	for i := range c.nodes {
		s := c.status(i, 1)
		if !s.Quiesced || !s.Current {
			t.Fatalf("%s: %+v", c.nodes[i].id, s)
		}
		for _, p := range s.Peers {
			if s.Role == Leader && p.Ago > 200*time.Millisecond {
				t.Fatalf("%s: contact with %s %v ago", c.nodes[i].id, p.Server, p.Ago)
			}
		}
	}
	// The leader's server dies: a follower that loses it counts its time
	// without a leader from then, not from its last round.
	c.net.Detach("s1")
	c.nodes[0].n = nil
	c.net.Partition("s2", "s3") // no new leader either
	for k := 0; ; k++ {
		if k > 60 {
			t.Fatal("s2 never lost its leader")
		}
		c.tick(1)
		if s := c.status(1, 1); s.Leader == 0 {
			if s.Leaderless > time.Second || s.Current {
				t.Fatalf("s2 just lost its leader: %+v", s)
			}
			break
		}
	}
}

// A leader goes quiet without waiting for a replica on a server it finds
// dead; if that server hears the quiesce heartbeat (a one-way cut), its
// lagging replica must not take the heartbeat's commit index (what the
// leader knew it held) for the leader's: it is not current.
func TestContactQuiesceLagging(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(3)
	c.net.Partition("s1", "s3")
	c.net.Partition("s2", "s3")
	for _, d := range []string{"b", "c", "d"} {
		c.propose(0, 1, d)
	}
	c.net.Heal("s1", "s3") // s3 hears s1; s1 still finds s3 dead
	for k := 0; ; k++ {
		if k > 60 {
			t.Fatalf("the leader never went quiet: %+v", c.status(0, 1))
		}
		c.tick(1)
		if c.status(0, 1).Quiesced {
			break
		}
	}
	c.tick(2)
	s, l := c.status(2, 1), c.status(0, 1)
	if s.Applied >= l.Commit {
		t.Fatalf("s3 caught up through a one-way cut: %+v", s)
	}
	if s.Current || s.CaughtUp {
		t.Fatalf("s3 current at %d, the leader's commit %d: %+v", s.Applied, l.Commit, s)
	}
}

// A leader whose other replicas' servers all died does not go quiet (it
// would then lead alone for good): it goes on ticking until raft's
// CheckQuorum deposes it, and its replica then knows no leader.
func TestQuietLeaderLosesQuorum(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	for k := 0; !c.status(0, 1).Quiesced; k++ {
		if k > 60 {
			t.Fatalf("the leader never went quiet: %+v", c.status(0, 1))
		}
		c.tick(1)
	}
	c.crash(1, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	for k := 0; ; k++ {
		if k > 200 {
			t.Fatalf("still leading without a quorum: %+v", c.status(0, 1))
		}
		c.tick(1)
		if st := c.status(0, 1); st.Role != Leader && st.Leader == 0 {
			break
		}
	}
}

// A leader that decides to go quiet while its peers are alive, and whose
// peers are then found dead (a tick on another goroutine) before the
// round publishes the quiet, wakes once it publishes: wakeFor, run in
// between, saw a busy group and passed it by. Without that the leader
// stayed quiet for ever, so CheckQuorum never deposed it (a cluster test
// saw the last server of three name itself meta leader 20 s after the
// others stopped).
func TestQuietLeaderWakesForDeathsWhileQuiescing(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.stabilize()
	// Both followers stop, caught up: the leader may go quiet.
	c.net.Detach(c.nodes[1].id)
	c.net.Detach(c.nodes[2].id)
	n, g := c.nodes[0].n, c.nodes[0].n.group(1)
	hit := false
	n.testHook = func(p crashPoint) bool {
		g.mu.Lock()
		published := g.mu.quiet
		g.mu.Unlock()
		if p != afterSend || hit || !g.quiet || published {
			return false
		}
		// Decided, not yet published: the ticks find both peers dead.
		hit = true
		for range n.cfg.ElectionTicks + 1 {
			n.Tick()
		}
		if !n.isDead(c.nodes[1].id) || !n.isDead(c.nodes[2].id) {
			t.Fatal("the peers are not found dead")
		}
		return false
	}
	run := func() {
		n.Tick()
		for n.RunRound() {
		}
	}
	for k := 0; !hit; k++ {
		if k > 60 {
			t.Fatalf("the leader never went quiet: %+v", c.status(0, 1))
		}
		run()
	}
	for k := 0; ; k++ {
		if k > 200 {
			t.Fatalf("still leading without a quorum: %+v", c.status(0, 1))
		}
		run()
		if st := c.status(0, 1); st.Role != Leader && st.Leader == 0 {
			break
		}
	}
}

// A leader's view of its followers counts one heard from within the
// contact window as active, even when raft's CheckQuorum has just
// cleared its own count and no answer came since (a loaded server, a
// group just woken from quiet): lame duck mode hands a group over only
// to an active follower, and found none (docs/cluster.md, "Lame duck
// mode and shutdown").
func TestStatusActiveAfterCheckQuorum(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(3)
	// The leader alone ticks through an election timeout: raft's
	// CheckQuorum passes (its followers answered before) and clears its
	// count of them; what they send meanwhile is not delivered.
	leader := c.nodes[0].n
	for range leader.cfg.ElectionTicks + 1 {
		leader.Tick()
		leader.RunRound()
	}
	st := c.status(0, 1)
	if st.Role != Leader {
		t.Fatal("the leader stepped down (the test's premise)")
	}
	for _, rs := range st.Replicas {
		if !rs.Active {
			t.Fatalf("replicas %+v: a follower heard within the contact window is not active", st.Replicas)
		}
	}
}
