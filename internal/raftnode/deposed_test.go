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
