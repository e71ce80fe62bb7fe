package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// metaServer is one server of the test cluster: its raftnode over a
// crash file system and its meta Log (checkpoint on the same file
// system), recording what OnApply saw.
type metaServer struct {
	id   raftnode.ServerID
	fs   *vfs.CrashFS
	node *raftnode.Node
	log  *Log

	mu     sync.Mutex
	events []Event
}

func (s *metaServer) seen() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

type metaCluster struct {
	t     *testing.T
	net   *raftnode.MemNetwork
	srv   []*metaServer
	peers []raftnode.Peer
	stop  chan struct{}
	wg    sync.WaitGroup
}

// newMetaCluster starts three servers with the meta group (replica i+1
// on server s<i+1>) on the in-memory network, inside the caller's
// synctest bubble.
func newMetaCluster(t *testing.T) *metaCluster {
	c := &metaCluster{t: t, net: raftnode.NewMemNetwork(1, nil), stop: make(chan struct{})}
	for i := range 3 {
		id := raftnode.ServerID(fmt.Sprintf("s%d", i+1))
		c.peers = append(c.peers, raftnode.Peer{Replica: raftnode.ReplicaID(i + 1), Server: id})
		c.srv = append(c.srv, &metaServer{id: id, fs: vfs.NewCrashFS()})
	}
	for i := range c.srv {
		c.open(i)
	}
	c.wg.Go(func() { c.net.Run(c.stop) })
	return c
}

// open opens server i's node and log from its file system and starts it.
func (c *metaCluster) open(i int) {
	s := c.srv[i]
	n, err := raftnode.Open(raftnode.Config{FS: s.fs, Dir: "wal", Server: s.id, Transport: c.net.Transport(s.id)})
	if err != nil {
		c.t.Fatal(err)
	}
	l, err := Open(Config{Node: n, FS: s.fs, Dir: "meta", Now: time.Now, OnApply: func(e Event) {
		s.mu.Lock()
		s.events = append(s.events, e)
		s.mu.Unlock()
	}})
	if err != nil {
		c.t.Fatal(err)
	}
	s.node, s.log = n, l
	c.net.Attach(s.id, n)
	gc := raftnode.GroupConfig{ID: MetaGroup, Replica: raftnode.ReplicaID(i + 1), Incarnation: n.Incarnation(), Peers: c.peers}
	if err := n.AddGroup(gc, l.StateMachine()); err != nil {
		c.t.Fatal(err)
	}
	n.Start()
}

func (c *metaCluster) close() {
	for _, s := range c.srv {
		s.node.Close()
	}
	close(c.stop)
	c.wg.Wait()
}

func (c *metaCluster) leader() int {
	for i, s := range c.srv {
		if st, err := s.node.Status(MetaGroup); err == nil && st.Role == raftnode.Leader {
			return i
		}
	}
	return -1
}

// waitLeader waits (virtual time) for a meta leader other than not.
func (c *metaCluster) waitLeader(not int) int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if l := c.leader(); l >= 0 && l != not {
			return l
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("no meta leader")
	return -1
}

// propose proposes op on server i and waits for its outcome.
func (c *metaCluster) propose(i int, op Op) (Result, error) {
	w, err := c.srv[i].log.Propose(op)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.Wait(ctx)
}

// do proposes op on the leader until it applies (retrying a lost
// leadership), and fails on an outcome error.
func (c *metaCluster) do(op Op) Result {
	c.t.Helper()
	for range 20 {
		r, err := c.propose(c.waitLeader(-1), op)
		if err == nil {
			if r.Err != nil {
				c.t.Fatalf("%T: %v", op, r.Err)
			}
			return r
		}
		if !errors.Is(err, raftnode.ErrNotLeader) && !errors.Is(err, raftnode.ErrNoReply) && !errors.Is(err, raftnode.ErrDropped) {
			c.t.Fatalf("%T: %v", op, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%T never applied", op)
	return Result{}
}

// converge waits until every server applied what the leader applied,
// then requires identical snapshots everywhere and returns it.
func (c *metaCluster) converge() []byte {
	c.t.Helper()
	want := c.srv[c.waitLeader(-1)].log.Applied()
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.srv {
		for s.log.Applied() < want {
			if time.Now().After(deadline) {
				c.t.Fatalf("%s applied %d, leader %d", s.id, s.log.Applied(), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var ref []byte
	for _, s := range c.srv {
		var snap []byte
		s.log.View(func(st *State) { snap = st.AppendSnapshot(nil) })
		if ref == nil {
			ref = snap
		} else if !bytes.Equal(snap, ref) {
			c.t.Fatalf("%s holds another state than %s", s.id, c.srv[0].id)
		}
	}
	return ref
}

// addServers puts the three servers in the catalogue.
func (c *metaCluster) addServers() {
	for _, s := range c.srv {
		c.do(&AddServer{Name: s.id, Cluster: "C1", Incarnation: s.node.Incarnation()})
	}
}

// The meta group on three servers: an assignment proposed on the leader,
// placed there, applies on all three to the same state, binds each
// replica to its server's store, and is seen in the same order by every
// server's watcher; a follower cannot propose.
func TestMetaGroupReplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMetaCluster(t)
		defer c.close()
		c.addServers()

		l := c.waitLeader(-1)
		var placed []raftnode.ServerID
		c.srv[l].log.View(func(st *State) {
			var err *jserr.Error
			if placed, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Seed: 7}); err != nil {
				t.Fatal(err)
			}
		})
		r := c.do(&AssignStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS", "orders.>"), Created: 1, Servers: placed})
		if r.Stream == nil || r.Stream.Group != FirstGroup || !slices.Equal(Servers(r.Stream.Replicas), placed) {
			t.Fatalf("assignment %+v", r.Stream)
		}
		for _, rep := range r.Stream.Replicas {
			srv := c.srv[slices.IndexFunc(c.srv, func(s *metaServer) bool { return s.id == rep.Server })]
			if rep.Incarnation != srv.node.Incarnation() {
				t.Fatalf("replica %d bound to %v, %s's store is %v", rep.ID, rep.Incarnation, rep.Server, srv.node.Incarnation())
			}
		}
		sa := *r.Stream
		var one []raftnode.ServerID
		c.srv[l].log.View(func(st *State) {
			var err *jserr.Error
			if one, err = PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 1, Seed: 3}); err != nil {
				t.Fatal(err)
			}
		})
		c.do(&AssignConsumer{Account: "A", Stream: "ORDERS", Name: "C", Action: Create, Config: consumerJSON("C", ""), Servers: one})

		// A follower's proposal never enters the log.
		f := (l + 1) % 3
		if _, err := c.propose(f, &RemoveStream{Account: "A", Name: "ORDERS"}); !errors.Is(err, raftnode.ErrNotLeader) {
			t.Fatalf("proposal on a follower: %v", err)
		}

		c.converge()
		ref := c.srv[0].seen()
		if len(ref) != 5 {
			t.Fatalf("%d events, want 3 servers, a stream and a consumer: %+v", len(ref), ref)
		}
		for _, s := range c.srv {
			got := s.seen()
			if len(got) != len(ref) {
				t.Fatalf("%s saw %d events, s1 %d", s.id, len(got), len(ref))
			}
			for k := range got {
				if got[k].Index != ref[k].Index || got[k].Op.Kind() != ref[k].Op.Kind() || (got[k].Result.Err == nil) != (ref[k].Result.Err == nil) {
					t.Fatalf("%s event %d: %+v, s1 %+v", s.id, k, got[k], ref[k])
				}
			}
			// What the watcher learns is what the server must run.
			var ss []StreamAssignment
			var cs []ConsumerAssignment
			s.log.View(func(st *State) { ss, cs = st.Assigned(s.id) })
			if len(ss) != 1 || ss[0].Group != FirstGroup || (len(cs) == 1) != slices.Contains(one, s.id) {
				t.Fatalf("%s runs %+v %+v (consumer on %v)", s.id, ss, cs, one)
			}
		}
	})
}

// A leader that loses its leadership with an assignment in flight keeps
// its waiter (only the proposer has one, so no other server answers):
// when the next leader replaced the entry, it says nothing (ErrNoReply)
// and the client's retry on the new leader creates the stream; when the
// next leader committed it, the waiter resolves with its Result once the
// entry applies on the old leader (docs/cluster.md, decision 7). Either
// way exactly one stream is left.
func TestMetaGroupLeaderLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMetaCluster(t)
		defer c.close()
		c.addServers()

		// Nowhere: the leader is cut off both ways before it proposes.
		op := &AssignStream{Account: "A", Name: "NOWHERE", Config: streamJSON("NOWHERE", "n"), Created: 1, Servers: servers("s1", "s2", "s3")}
		l := c.waitLeader(-1)
		for _, s := range c.srv {
			if s.id != c.srv[l].id {
				c.net.Partition(c.srv[l].id, s.id)
			}
		}
		w, err := c.srv[l].log.Propose(op)
		if err != nil {
			t.Fatal(err)
		}
		c.waitLeader(l)
		c.net.HealAll() // the new leader's entries replace the stranded one
		if _, err := waitResult(w); !errors.Is(err, raftnode.ErrNoReply) {
			t.Fatalf("stranded proposal: %v", err)
		}
		if r := c.do(op); r.Existed || r.Stream.Group != FirstGroup {
			t.Fatalf("retry of a lost assignment: %+v", r)
		}
		c.converge()

		// Everywhere: the leader's appends reach the followers but their
		// answers do not reach it; it steps down (CheckQuorum) without
		// knowing, and the next leader commits the entry.
		op = &AssignStream{Account: "A", Name: "EVERYWHERE", Config: streamJSON("EVERYWHERE", "e"), Created: 2, Servers: servers("s1", "s2", "s3")}
		l = c.waitLeader(-1)
		for _, s := range c.srv {
			if s.id != c.srv[l].id {
				c.net.Cut(s.id, c.srv[l].id)
			}
		}
		w, err = c.srv[l].log.Propose(op)
		if err != nil {
			t.Fatal(err)
		}
		c.waitLeader(l)
		c.net.HealAll()
		r, err := waitResult(w)
		if err != nil || r.Err != nil || r.Existed || r.Stream.Group != FirstGroup+1 || r.Stream.Created != 2 {
			t.Fatalf("the deposed leader's waiter of an assignment the next leader committed: %+v, %v", r, err)
		}
		if r = c.do(op); !r.Existed || r.Stream.Group != FirstGroup+1 || r.Stream.Created != 2 {
			t.Fatalf("retry of a committed assignment: %+v", r)
		}
		st, err := DecodeSnapshot(c.converge())
		if err != nil {
			t.Fatal(err)
		}
		if n := len(st.Streams("A")); n != 2 || st.NextGroup() != FirstGroup+2 {
			t.Fatalf("%d streams, next group %d", n, st.NextGroup())
		}
	})
}

// waitResult waits (virtual time, at most 5 s: less than the ten election
// timeouts a deposed leader keeps a waiter it learns nothing of) for w.
func waitResult(w *Waiter) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return w.Wait(ctx)
}

// A server cut off while the others checkpoint and compact the meta log
// is caught up by a snapshot (its watcher told the state was replaced),
// and a server restarted after a power loss comes back from its
// checkpoint file and the WAL to the same state.
func TestMetaGroupSnapshotCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMetaCluster(t)
		defer c.close()
		c.addServers()
		c.converge()

		behind := 2
		for i, s := range c.srv {
			if i != behind {
				c.net.Partition(s.id, c.srv[behind].id)
			}
		}
		for k := range 5 {
			name := fmt.Sprintf("S%d", k)
			c.do(&AssignStream{Account: "A", Name: name, Config: streamJSON(name, name), Servers: servers("s1", "s2")})
		}
		// Checkpoint and compact on the two connected servers, once they
		// applied everything.
		want := c.srv[c.waitLeader(behind)].log.Applied()
		for i, s := range c.srv {
			if i == behind {
				continue
			}
			for s.log.Applied() < want {
				time.Sleep(50 * time.Millisecond)
			}
			if err := s.log.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		c.net.HealAll()
		snap := c.converge()
		if !slices.ContainsFunc(c.srv[behind].seen(), func(e Event) bool { return e.Restored }) {
			t.Fatalf("%s caught up without a snapshot", c.srv[behind].id)
		}

		// Power loss on s1 (the one that checkpointed and compacted):
		// back from its checkpoint and WAL to the same state.
		s := c.srv[0]
		s.node.Close()
		c.net.Detach(s.id)
		s.fs = s.fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
		s.events = nil
		c.open(0)
		if s.log.StateMachine().Applied() == 0 {
			t.Fatal("the checkpoint was not loaded")
		}
		if got := c.converge(); !bytes.Equal(got, snap) {
			t.Fatal("state after restart differs")
		}
		// And it goes on applying.
		c.do(&RemoveStream{Account: "A", Name: "S0"})
		c.converge()
	})
}

// Checkpoint statistics (/jsz meta_cluster.snapshot): the entries and
// bytes applied since the checkpoint file's index, which a restart
// applies again, fall to nothing at a checkpoint and count again after
// it; the checkpoint's start and duration are kept; a restart from the
// file counts only what its WAL applies again past the file's index.
func TestMetaCheckpointStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMetaCluster(t)
		defer c.close()
		c.addServers()
		c.converge()
		s := c.srv[0]
		st := s.log.Stats()
		if st.PendingEntries == 0 || st.PendingEntries != s.log.Applied() || st.PendingBytes == 0 || !st.LastTime.IsZero() || st.LastDuration != 0 {
			t.Fatalf("before any checkpoint: %+v (applied %d)", st, s.log.Applied())
		}
		time.Sleep(time.Minute)
		at, ckptIndex := time.Now(), s.log.Applied()
		if err := s.log.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		st = s.log.Stats()
		if st.PendingEntries != 0 || st.PendingBytes != 0 || !st.LastTime.Equal(at) {
			t.Fatalf("after the checkpoint at %v: %+v", at, st)
		}

		// One assignment more: its entry, its operation's bytes (a new
		// leader's empty entry would count too, with no bytes).
		op := &AssignStream{Account: "A", Name: "S1", Config: streamJSON("S1", "S1"), Servers: servers("s1", "s2")}
		data, err := AppendOp(nil, op)
		if err != nil {
			t.Fatal(err)
		}
		c.do(op)
		c.converge()
		st = s.log.Stats()
		if st.PendingEntries == 0 || st.PendingEntries != s.log.Applied()-ckptIndex || st.PendingBytes != uint64(len(data)) || !st.LastTime.Equal(at) {
			t.Fatalf("one operation after the checkpoint at %d (%d bytes), applied %d: %+v", ckptIndex, len(data), s.log.Applied(), st)
		}

		// A restart replays those entries from the WAL: still pending
		// (with the entry of a leader elected meanwhile), and no
		// checkpoint written by this process yet.
		s.node.Close()
		c.net.Detach(s.id)
		c.open(0)
		c.converge()
		st = s.log.Stats()
		if st.PendingEntries == 0 || st.PendingEntries != s.log.Applied()-ckptIndex || st.PendingBytes != uint64(len(data)) || !st.LastTime.IsZero() {
			t.Fatalf("after a restart (checkpoint at %d, applied %d): %+v", ckptIndex, s.log.Applied(), st)
		}
	})
}
