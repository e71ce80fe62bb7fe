package transport_test

import (
	"context"
	"errors"
	"fmt"
	. "github.com/cairnmq/cairn/internal/cluster/transport"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// listSM is a state machine that keeps the data of every entry it
// applied, in order. It keeps nothing on disk: after a restart the node
// applies the whole log again (Applied is 0).
type listSM struct {
	mu   sync.Mutex
	data []string
}

func (sm *listSM) Apply(ents []raftnode.Entry) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for _, e := range ents {
		if e.Data != nil {
			sm.data = append(sm.data, string(e.Data))
		}
	}
	return nil
}

func (sm *listSM) Applied() uint64              { return 0 }
func (sm *listSM) Snapshot() ([]byte, error)    { return nil, errors.New("listSM: no snapshots") }
func (sm *listSM) Restore(uint64, []byte) error { return errors.New("listSM: no snapshots") }

// has reports whether the entries applied are exactly want, in order.
func (sm *listSM) has(want []string) bool {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return slices.Equal(sm.data, want)
}

// raftServer is a server of the test cluster with its raft node.
type raftServer struct {
	*member
	dir  string
	node *raftnode.Node
	sm   *listSM
}

const group = raftnode.GroupID(1)

// groupPeers places replica i+1 of the group on server n<i+1>.
func groupPeers() []raftnode.Peer {
	var ps []raftnode.Peer
	for i := range 3 {
		ps = append(ps, raftnode.Peer{Replica: raftnode.ReplicaID(i + 1), Server: raftnode.ServerID(fmt.Sprintf("n%d", i+1))})
	}
	return ps
}

// openNode opens (or reopens) the node of server i on its directory over
// the server's transport, adds the R3 group and starts it.
func openNode(t testing.TB, s *raftServer, i int) {
	t.Helper()
	logf := func(f string, a ...any) { t.Logf(s.name+": "+f, a...) }
	if _, bench := t.(*testing.B); bench {
		logf = quiet
	}
	n, err := raftnode.Open(raftnode.Config{
		FS: vfs.OS(), Dir: filepath.Join(s.dir, "wal"), Server: raftnode.ServerID(s.name), Transport: s.tr,
		TickInterval: 50 * time.Millisecond, Logf: logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.node, s.sm = n, &listSM{}
	err = n.AddGroup(raftnode.GroupConfig{ID: group, Replica: raftnode.ReplicaID(i + 1), Incarnation: n.Incarnation(), Peers: groupPeers()}, s.sm)
	if err != nil {
		t.Fatal(err)
	}
	s.tr.Attach(n)
	n.Start()
}

// stopServer closes the node, then the transport, then the server (the
// order a server's shutdown follows).
func stopServer(s *raftServer) {
	if s.node != nil {
		s.node.Close()
		s.node = nil
	}
	s.member.stop()
}

// leaderOf returns the index of the server whose replica leads, among the
// running ones, or -1.
func leaderOf(ss []*raftServer) int {
	for i, s := range ss {
		if s.node == nil {
			continue
		}
		if st, err := s.node.Status(group); err == nil && st.Role == raftnode.Leader {
			return i
		}
	}
	return -1
}

// propose proposes each entry on the leader and waits for it to apply
// there; a proposal that fails (leadership moved meanwhile) is retried on
// the new leader.
func propose(t *testing.T, ss []*raftServer, entries ...string) {
	t.Helper()
	for _, e := range entries {
		waitFor(t, "entry "+e+" to commit", func() bool {
			l := leaderOf(ss)
			if l < 0 {
				return false
			}
			p, err := ss[l].node.Propose(group, []byte(e))
			if err != nil {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = p.Wait(ctx)
			return err == nil
		})
	}
}

// TestRaftOverTransport: three cairn servers joined by routes, each with
// a raftnode.Node over its transport, run one R3 group: a leader is
// elected, entries proposed on it apply on every replica in order; the
// leader's server is stopped, the other two elect a new leader and commit
// more; the stopped server comes back (a new process on a new port, its
// WAL kept) and catches up with everything committed while it was away.
func TestRaftOverTransport(t *testing.T) {
	root := t.TempDir()
	mk := func(i int, routes ...string) *raftServer {
		name := fmt.Sprintf("n%d", i+1)
		return &raftServer{member: startMember(t, name, cred{}, &Config{}, routes...), dir: filepath.Join(root, name)}
	}
	s1 := mk(0)
	ss := []*raftServer{s1, mk(1, s1.routeURL(cred{})), mk(2, s1.routeURL(cred{}))}
	t.Cleanup(func() {
		for _, s := range ss {
			stopServer(s)
		}
	})
	waitRoutes(t, ss[0].member, ss[1].member, ss[2].member)
	for i, s := range ss {
		openNode(t, s, i)
	}
	waitFor(t, "a leader", func() bool { return leaderOf(ss) >= 0 })
	var want []string
	for k := range 20 {
		want = append(want, fmt.Sprintf("e%d", k))
	}
	propose(t, ss, want...)
	for _, s := range ss {
		waitFor(t, s.name+" to apply every entry", func() bool { return s.sm.has(want) })
	}

	// The leader's server goes away: the other two elect a leader and commit.
	down := leaderOf(ss)
	oldTerm := status(t, ss[down]).Term
	stopServer(ss[down])
	var live []*raftServer
	for i, s := range ss {
		if i != down {
			live = append(live, s)
		}
	}
	waitFor(t, "a new leader among the two left", func() bool {
		l := leaderOf(live)
		return l >= 0 && status(t, live[l]).Term > oldTerm
	})
	var more []string
	for k := range 10 {
		more = append(more, fmt.Sprintf("f%d", k))
	}
	propose(t, live, more...)
	want = append(want, more...)
	for _, s := range live {
		waitFor(t, s.name+" to apply the entries committed by two", func() bool { return s.sm.has(want) })
	}

	// It comes back on a new port with its WAL, and catches up.
	back := &raftServer{member: startMember(t, ss[down].name, cred{}, &Config{}, live[0].routeURL(cred{}), live[1].routeURL(cred{})), dir: ss[down].dir}
	ss[down] = back
	waitRoutes(t, ss[0].member, ss[1].member, ss[2].member)
	openNode(t, back, down)
	waitFor(t, back.name+" to catch up", func() bool { return back.sm.has(want) })
	propose(t, ss, "g0")
	want = append(want, "g0")
	for _, s := range ss {
		waitFor(t, s.name+" to apply the entry after the restart", func() bool { return s.sm.has(want) })
	}
}

func status(t *testing.T, s *raftServer) raftnode.GroupStatus {
	t.Helper()
	st, err := s.node.Status(group)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
