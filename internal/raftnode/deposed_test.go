package raftnode

import (
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// holdFS holds the Sync of its files while armed: the round that syncs
// waits until the test releases it.
type holdFS struct {
	vfs.FS
	h *syncHold
}

type syncHold struct {
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (f holdFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	return holdFile{file, f.h}, err
}

func (f holdFS) OpenAppend(name string) (vfs.File, error) {
	file, err := f.FS.OpenAppend(name)
	return holdFile{file, f.h}, err
}

type holdFile struct {
	vfs.File
	h *syncHold
}

func (f holdFile) Sync() error {
	if f.h.armed {
		f.h.armed = false
		f.h.entered <- struct{}{}
		<-f.h.release
	}
	return f.File.Sync()
}

// A leader that CheckQuorum deposes says so (Brief.Role) in the round
// that deposed it, before that round's fsync: a replicated consumer
// looks at it before each of its rounds, and what it decided while the
// node synced would be refused in the next round (ErrNotLeader) after
// it had delivered it (docs/cluster.md, "Replicated consumers"). The
// node leads a group of one replica too, whose entry makes the round
// sync.
func TestDeposedBeforeSync(t *testing.T) {
	h := &syncHold{entered: make(chan struct{}), release: make(chan struct{})}
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.DisableQuiescence = true
		if cfg.Server == serverName(0) {
			cfg.FS = holdFS{FS: cfg.FS, h: h}
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	leader := c.nodes[0].n
	alone := newHashSM(c.nodes[0].fs, "sm2", 2)
	if err := leader.AddGroup(GroupConfig{ID: 2, Replica: 1, Incarnation: leader.Incarnation(), Peers: []Peer{{Replica: 1, Server: serverName(0)}}}, alone); err != nil {
		t.Fatal(err)
	}
	c.elect(0, 2)
	c.tick(3)
	c.net.Partition(serverName(0), serverName(1))
	c.net.Partition(serverName(0), serverName(2))
	for range 4 * leader.cfg.ElectionTicks {
		if _, err := leader.Propose(2, []byte("x")); err != nil {
			t.Fatal(err)
		}
		h.armed = true
		leader.Tick()
		done := make(chan struct{})
		go func() { defer close(done); leader.RunRound() }()
		<-h.entered
		during, err := leader.Brief(1)
		if err != nil {
			t.Fatal(err)
		}
		h.release <- struct{}{}
		<-done
		if c.status(0, 1).Role == Leader {
			continue
		}
		if during.Role == Leader || during.LeaderReady {
			t.Fatalf("while the round that deposed it synced, the replica still said it led (%+v)", during)
		}
		return
	}
	t.Fatal("CheckQuorum never deposed the cut-off leader (the test's premise)")
}

// A quiet group's leader asked to hand over (Node.HandOver, as a server
// does at shutdown: docs/cluster.md, "Lame duck mode and shutdown")
// loses its leadership to the transferee in the next term without an
// election timeout, and the status it publishes in the round that
// deposed it, before that round's fsync, is a deposed replica's: it does
// not name itself leader, and its term is the transferee's. The cluster
// layer's HandOver polls that status: one that said follower but kept
// the term it led and itself as leader read as a step-down with no
// election (CheckQuorum), and an idle cluster's rolling restart counted
// 101 of 204 groups "lost without a successor" that had moved.
func TestQuietHandOverDeposedStatus(t *testing.T) {
	h := &syncHold{entered: make(chan struct{}), release: make(chan struct{})}
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == serverName(0) {
			cfg.FS = holdFS{FS: cfg.FS, h: h}
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(3)
	for i := range c.nodes {
		if s := c.status(i, 1); !s.Quiesced {
			t.Fatalf("%s not quiet before the hand-over (the test's premise): %+v", c.nodes[i].id, s)
		}
	}
	led := c.status(0, 1).Term
	old := c.nodes[0].n
	if err := old.HandOver(1, 2); err != nil {
		t.Fatal(err)
	}
	// Rounds and deliveries only, no tick: an election would need an
	// election timeout of them.
	var during []GroupStatus
	for range 50 {
		h.armed = true
		done := make(chan struct{})
		go func() { defer close(done); old.RunRound() }()
		select {
		case <-h.entered:
			s, err := old.Status(1)
			if err != nil {
				t.Fatal(err)
			}
			during = append(during, s)
			h.release <- struct{}{}
			<-done
		case <-done:
		}
		h.armed = false
		c.nodes[1].n.RunRound()
		c.nodes[2].n.RunRound()
		c.net.DeliverAll()
	}
	c.stabilize()
	deposed := false
	for _, s := range during {
		if s.Role == Leader {
			continue
		}
		deposed = true
		if s.Leader == s.Replica || s.Term <= led || s.Transferee != 0 {
			t.Fatalf("while the round that deposed it synced, the old leader's status read as a step-down in its own term (led term %d): role %v, term %d, leader %d (itself %d), transferee %d",
				led, s.Role, s.Term, s.Leader, s.Replica, s.Transferee)
		}
	}
	if !deposed {
		t.Fatal("no round of the old leader synced while deposed (the test's premise)")
	}
	if l := c.leader(1); l != 1 {
		t.Fatalf("leader after the hand-over without a tick: node %d, want node 1", l)
	}
	if s := c.status(1, 1); s.Term != led+1 {
		t.Fatalf("the transferee leads term %d, want %d (the next term: no election)", s.Term, led+1)
	}
	if s := c.status(0, 1); s.Role != Follower || s.Leader != 2 || s.Term != led+1 {
		t.Fatalf("the old leader after the hand-over: role %v, leader %d, term %d", s.Role, s.Leader, s.Term)
	}
}
