package streamckpt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/catchup"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// convergedAmong is converged for the servers listed only (the others
// are stopped).
func (c *cluster) convergedAmong(h *history, live ...int) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		first := c.state(live[0])
		same := true
		for _, i := range live[1:] {
			same = same && bytes.Equal(first, c.state(i))
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatal("timed out waiting for identical states")
		}
		time.Sleep(20 * time.Millisecond)
	}
	saved := c.srv
	c.srv = nil
	for _, i := range live {
		c.srv = append(c.srv, saved[i])
	}
	c.checkMessages(h)
	c.srv = saved
}

// compactedPast waits until the leader's WAL dropped the entries after
// index (the entries a replica stopped at index would need).
func (c *cluster) compactedPast(l int, index uint64) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("the leader's WAL compacted past %d", index), func() bool {
		st, err := c.srv[l].node.Status(group)
		return err == nil && st.FirstIndex > index+1
	})
}

// publishMany publishes messages from..to, deleting one message in ten
// (the snapshot's gaps) and purging the front once.
func (c *cluster) publishMany(h *history, from, to int) {
	for n := from; n <= to; n++ {
		c.publish(h, n, false)
		if n%10 == 0 {
			seq := h.acked[fmt.Sprintf("m%d", n-3)]
			c.do(&stream.DeleteMsg{Seq: seq})
			h.removed[seq] = true
		}
	}
}

// A follower stopped while the others checkpoint and compact their WALs
// past it (Retain 2) comes back needing entries no replica holds: it is
// sent a snapshot, fetches the messages it lacks (deleted ones in the
// middle left out, a purged front dropped), and converges to a
// byte-identical state; its WAL starts at the snapshot's index.
func TestSnapshotCatchesUpAStoppedFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 5, time.Hour)
		c.retain = 2
		for i := range c.srv { // restart with the retention
			c.stop(i)
			c.start(i)
		}
		h := newHistory()
		c.publishMany(h, 1, 30)
		c.converged(h)
		l := c.leader(-1)
		v := (l + 1) % 3
		c.stop(v)
		ck, err := readFile(c.srv[v].disk, "stream")
		if err != nil || ck == nil {
			t.Fatal(ck, err)
		}
		c.publishMany(h, 31, 60)
		c.do(&stream.Purge{Request: store.PurgeRequest{Seq: 20}})
		for seq := uint64(1); seq < 20; seq++ {
			h.removed[seq] = true
		}
		c.publishMany(h, 61, 90)
		c.compactedPast(c.leader(-1), ck.index)
		c.start(v)
		c.converged(h)
		// The store holds the snapshot's messages before raft records
		// the install (its log then starts past the checkpoint): a
		// moment later, in the bubble's time.
		for i := 0; ; i++ {
			st, err := c.srv[v].node.Status(group)
			if err == nil && st.FirstIndex > ck.index+1 {
				break
			}
			if i == 1000 {
				t.Fatalf("%s's log starts at %d (checkpoint %d): no snapshot installed (%v)", c.srv[v].id, st.FirstIndex, ck.index, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := c.srv[v].disk.ReadFile("stream/" + StageName); err == nil {
			t.Fatal("the staging file was left behind")
		}
		c.publish(h, deletedSeq, true) // the duplicate window came with the snapshot
	})
}

// A follower whose disk was wiped comes back as a new replica (ID 4,
// bound to its new store), added as a learner: it is caught up by a
// snapshot (its conf state names it: the capture is at or after the
// change), promoted while its old self is removed in one joint change,
// and then carries acknowledged writes: with the other follower down it
// and the leader acknowledge more; with the leader gone, it and the
// other follower elect a leader that has every acknowledged message.
func TestSnapshotWipedFollowerReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 5, time.Hour)
		h := newHistory()
		c.publishMany(h, 1, 40)
		c.converged(h)
		l := c.leader(-1)
		v, o := (l+1)%3, (l+2)%3
		old := c.srv[v].replica
		c.stop(v)
		c.srv[v].disk = vfs.NewCrashFS() // wiped
		c.srv[v].hook = &hookFS{FS: c.srv[v].disk, disk: c.srv[v].disk}
		c.srv[v].replica, c.srv[v].join = 4, true
		c.peers = append(c.peers, raftnode.Peer{Replica: 4, Server: c.srv[v].id})
		for _, s := range c.srv {
			if s.node != nil {
				if err := s.node.SetPeers(group, c.peers); err != nil {
					t.Fatal(err)
				}
			}
		}
		c.change(l, raftnode.Change{Kind: raftnode.AddLearner, Replica: 4})
		c.publishMany(h, 41, 50)
		c.start(v)
		c.waitFor("the learner caught up", func() bool {
			st, err := c.srv[l].node.Status(group)
			return err == nil && matchOf(st, 4) >= st.Commit
		})
		c.change(l, raftnode.Change{Kind: raftnode.AddVoter, Replica: 4}, raftnode.Change{Kind: raftnode.RemoveReplica, Replica: old})
		c.converged(h)
		c.stop(o)
		c.publishMany(h, 51, 60) // acknowledged by the leader and the new replica
		c.stop(l)
		c.start(o)
		c.leader(l)
		c.publishMany(h, 61, 65)
		c.convergedAmong(h, v, o)
	})
}

// change proposes a membership change on server l and waits for it to
// be applied there, joint configuration left.
func (c *cluster) change(l int, changes ...raftnode.Change) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("membership change %+v", changes), func() bool {
		p, err := c.srv[l].node.ChangeMembership(group, changes)
		if err != nil {
			return false
		}
		<-p.Done()
		_, err = p.Result()
		return err == nil
	})
	// A change of more than one voter goes through a joint configuration,
	// which raft leaves by an entry of its own that needs a majority of
	// the old voters too: a test that stops a server must wait for it.
	c.waitFor("the joint configuration left", func() bool {
		st, err := c.srv[l].node.Status(group)
		return err == nil && !st.Joint
	})
}

func matchOf(st raftnode.GroupStatus, r raftnode.ReplicaID) uint64 {
	for _, rs := range st.Replicas {
		if rs.Replica == r {
			return rs.Match
		}
	}
	return 0
}

// A follower installing a snapshot loses power: after it changed its
// store but before the checkpoint of the snapshot's index replaced the
// old one (its restart rolls the store back to the old checkpoint and
// the install starts again), and after that checkpoint but before raft
// recorded the install (recovery completes it). Either way it converges.
func TestSnapshotInstallCrash(t *testing.T) {
	cases := []struct {
		name, op, file string
		after          bool
		completes      bool
	}{
		{"before the checkpoint's rename", "rename", "stream/replica.ckpt.new", false, false},
		{"after the checkpoint is durable", "syncdir", "stream", true, true},
	}
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, ordersConfig(), 5, time.Hour)
				c.retain = 2
				for i := range c.srv {
					c.stop(i)
					c.start(i)
				}
				h := newHistory()
				c.publishMany(h, 1, 30)
				c.converged(h)
				l := c.leader(-1)
				v := (l + 1) % 3
				c.stop(v)
				ck, _ := readFile(c.srv[v].disk, "stream")
				c.publishMany(h, 31, 70)
				c.compactedPast(l, ck.index)
				c.srv[v].hook.arm(tc.op, tc.file, tc.after, vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(k), 1)), Tail: vfs.TailAny})
				c.start(v)
				c.waitFor("the crash during the install", func() bool {
					c.srv[v].hook.mu.Lock()
					defer c.srv[v].hook.mu.Unlock()
					return c.srv[v].hook.crashed != nil
				})
				c.crash(v, vfs.CrashOptions{})
				if got := c.srv[v].logged("completing the install"); got != tc.completes {
					t.Fatalf("recovery completed the install: %v, want %v", got, tc.completes)
				}
				c.publishMany(h, 71, 80)
				c.converged(h)
			})
		})
	}
}

// A replica that cannot be sent the messages a snapshot names (no
// replica serves them: every source refuses) is not fenced: the install
// is abandoned, its state stays as it was, and it is caught up once a
// source serves again.
func TestSnapshotSourcesUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 5, time.Hour)
		c.retain = 2
		for i := range c.srv {
			c.stop(i)
			c.start(i)
		}
		h := newHistory()
		c.publishMany(h, 1, 30)
		c.converged(h)
		l := c.leader(-1)
		v := (l + 1) % 3
		c.stop(v)
		ck, _ := readFile(c.srv[v].disk, "stream")
		c.publishMany(h, 31, 60)
		c.compactedPast(l, ck.index)
		for i, s := range c.srv {
			if i != v {
				s.svc.Unregister(group, s.rep) // nobody serves
			}
		}
		c.start(v)
		c.waitFor("an abandoned install", func() bool { return c.srv[v].logged("was not installed") })
		if st, err := c.srv[v].node.Status(group); err != nil || st.Fenced != nil || st.FirstIndex > ck.index+1 {
			t.Fatalf("after an abandoned install: %+v, %v", st, err)
		}
		for i, s := range c.srv {
			if i != v {
				s.svc.Register(group, s.rep)
			}
		}
		c.converged(h)
		if st, _ := c.srv[v].node.Status(group); st.Fenced != nil {
			t.Fatal(st.Fenced)
		}
	})
}

// A manifest survives encoding and its checks refuse damage.
func TestManifestCodec(t *testing.T) {
	m := &manifest{index: 42, source: "n1", first: 3, last: 20, msgs: 12, bytes: 999,
		gaps: []catchup.Range{{From: 5, To: 6}, {From: 10, To: 12}, {From: 20, To: 20}}, state: []byte("state")}
	b := m.encode()
	got, err := decodeManifest(b)
	if err != nil || got.index != 42 || got.source != "n1" || got.first != 3 || got.last != 20 || got.msgs != 12 ||
		got.bytes != 999 || fmt.Sprint(got.gaps) != fmt.Sprint(m.gaps) || string(got.state) != "state" {
		t.Fatalf("%+v, %v", got, err)
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x10
		if _, err := decodeManifest(bad); !errors.Is(err, ErrBadManifest) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	m.msgs++ // inconsistent with the gaps
	if _, err := decodeManifest(m.encode()); !errors.Is(err, ErrBadManifest) {
		t.Fatalf("inconsistent counts: %v", err)
	}
}

// A capture pins the records of what is removed after it: a purge and
// checkpoints later, the capturing replica still serves the purged
// messages to a fetch (the store keeps their segments); once no fetch
// has asked for PinFor, the next checkpoint lets the segments go.
func TestCapturePinsRemovedRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 1<<40, time.Hour)
		h := newHistory()
		c.publishMany(h, 1, 40)
		l := c.leader(-1)
		rep := c.srv[l].rep
		c.waitFor("a capture", func() bool {
			_, _, err := rep.SnapshotAt(1)
			return err == nil
		})
		c.do(&stream.Purge{Request: store.PurgeRequest{Seq: 30}})
		c.publishMany(h, 41, 45)
		if err := rep.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		c.publishMany(h, 46, 50) // the store's next batches (segments emptied by the purge would go now)
		if m, err := rep.Message(5); err != nil || m.Seq != 5 {
			t.Fatalf("a purged message of the capture: %+v, %v", m, err)
		}
		time.Sleep(PinFor + time.Second)
		c.publishMany(h, 51, 55)
		if err := rep.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		c.publishMany(h, 56, 60)
		c.waitFor("the purged segments removed", func() bool {
			_, err := rep.store.LoadRemoved(5)
			return errors.Is(err, store.ErrNotFound)
		})
	})
}
