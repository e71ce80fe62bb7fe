package raftnode

import (
	"bytes"
	"errors"
	"path"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// A WAL found damaged at replay is moved aside whole, byte for byte, and
// a new empty WAL with a new incarnation takes its place: the old
// replicas are refused (their binding names the old store), nothing of
// the damaged log is read again, and the node writes again. A sound WAL,
// or one a group already runs on, is left where it is.
func TestQuarantineDamagedWAL(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	for _, d := range []string{"a", "b", "c"} {
		c.propose(0, 1, d)
	}
	if _, err := c.nodes[0].n.QuarantineWAL("q/raft"); !errors.Is(err, ErrNotDamaged) {
		t.Fatalf("a sound WAL: %v, want ErrNotDamaged", err)
	}
	old := c.nodes[2].n.Incarnation()
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	seg := path.Join("wal", segName(1))
	if err := c.nodes[2].fs.FlipBit(seg, (segmentHeaderSize+30)*8+3); err != nil {
		t.Fatal(err)
	}
	damaged, _ := c.nodes[2].fs.ReadFile(seg)

	// A group added over the damaged WAL keeps it there.
	other := c.nodes[2].fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	n2, err := Open(Config{FS: other, Dir: "wal", Server: c.nodes[2].id, Transport: c.net.Transport("spare")})
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.AddGroup(GroupConfig{ID: 1, Replica: 3, Incarnation: old, Peers: c.peers(0)}, newHashSM(other, "sm", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.QuarantineWAL("q/raft"); !errors.Is(err, ErrGroupsAdded) {
		t.Fatalf("with a group added: %v, want ErrGroupsAdded", err)
	}
	n2.Close()

	c.nodes[2].fs = other.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(2)
	n := c.nodes[2].n
	if !errors.Is(n.Damage(), ErrCorrupt) {
		t.Fatalf("damage %v", n.Damage())
	}
	inc, err := n.QuarantineWAL("q/raft")
	if err != nil {
		t.Fatal(err)
	}
	if inc == old || n.Incarnation() != inc || n.Damage() != nil {
		t.Fatalf("incarnation %s (was %s, node says %s), damage %v", inc, old, n.Incarnation(), n.Damage())
	}
	if kept, err := c.nodes[2].fs.ReadFile(path.Join("q/raft", segName(1))); err != nil || !bytes.Equal(kept, damaged) {
		t.Fatalf("the damaged segment in quarantine: %d bytes, %v (want the %d damaged bytes)", len(kept), err, len(damaged))
	}
	if got, err := readIncarnation(c.nodes[2].fs, seg); err != nil || got != inc {
		t.Fatalf("the new WAL's incarnation %s, %v, want %s", got, err, inc)
	}
	// The old replica is refused (docs/cluster.md decision 3).
	sm := newHashSM(c.nodes[2].fs, "sm", 1)
	if err := n.AddGroup(GroupConfig{ID: 1, Replica: 3, Incarnation: old, Peers: c.peers(0)}, sm); err != nil {
		t.Fatal(err)
	}
	if st, err := n.Status(1); err != nil || !errors.Is(st.Fenced, ErrIdentity) {
		t.Fatalf("the old replica on the new WAL: %+v, %v", st, err)
	}
}

// A sound WAL retired (a server removed and started again on its store)
// is removed whole, and a new empty WAL with a new incarnation takes its
// place: the old replica is refused (decision 3), so it never votes
// again with its state from before; a node whose group runs keeps its WAL.
func TestRetireWAL(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	for _, d := range []string{"a", "b", "c"} {
		c.propose(0, 1, d)
	}
	if _, err := c.nodes[0].n.RetireWAL("retired/raft"); !errors.Is(err, ErrGroupsAdded) {
		t.Fatalf("with a group running: %v, want ErrGroupsAdded", err)
	}
	old := c.nodes[2].n.Incarnation()
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(2)
	n := c.nodes[2].n
	if n.Damage() != nil || n.Incarnation() != old {
		t.Fatalf("reopened: damage %v, incarnation %s (was %s)", n.Damage(), n.Incarnation(), old)
	}
	inc, err := n.RetireWAL("retired/raft")
	if err != nil {
		t.Fatal(err)
	}
	if inc == old || n.Incarnation() != inc || !n.NewWAL() {
		t.Fatalf("incarnation %s (was %s, node says %s), new WAL %v", inc, old, n.Incarnation(), n.NewWAL())
	}
	if _, _, err := c.nodes[2].fs.Stat("retired/raft"); !vfs.IsNotExist(err) {
		t.Fatalf("the retired WAL: %v, want it removed", err)
	}
	if got, err := readIncarnation(c.nodes[2].fs, path.Join("wal", segName(1))); err != nil || got != inc {
		t.Fatalf("the new WAL's incarnation %s, %v, want %s", got, err, inc)
	}
	sm := newHashSM(c.nodes[2].fs, "sm", 1)
	if err := n.AddGroup(GroupConfig{ID: 1, Replica: 3, Incarnation: old, Peers: c.peers(0)}, sm); err != nil {
		t.Fatal(err)
	}
	if st, err := n.Status(1); err != nil || !errors.Is(st.Fenced, ErrIdentity) {
		t.Fatalf("the old replica on the new WAL: %+v, %v", st, err)
	}
}
