package streamckpt

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// scaleDownStep names the moments of a scale-down to one replica (the
// package comment of release.go) at which the test cuts the power.
type scaleDownStep int

const (
	crashAfterBarrier   scaleDownStep = iota // sealed, barrier applied, no last checkpoint yet
	crashInFinal                             // the last checkpoint's file written, not renamed
	crashAfterFinal                          // the last checkpoint durable, the group still there
	crashAfterTombstone                      // the group's tombstone fsynced, the checkpoint not released
	crashInRelease                           // the checkpoint file removed, the directory not fsynced
	crashAfterRelease                        // done
)

// Scaling down to one replica: the group shrinks to the leader's replica
// alone, more is acknowledged by it, and it then turns into a stream of
// one replica, its power cut at each step. Restarted as the cluster
// layer restarts it (a checkpoint and a live group: the replica again,
// which converts again; a checkpoint and a tombstone: the release; no
// checkpoint: a store of one replica), its store holds every
// acknowledged message at its sequence, none twice, and no checkpoint
// file is left. Releasing before the tombstone is durable, or
// removing the group before the last checkpoint, would lose the
// messages acknowledged since the previous checkpoint.
func TestScaleDownToOneCrash(t *testing.T) {
	for step := crashAfterBarrier; step <= crashAfterRelease; step++ {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			// Checkpoints only at stops: the WAL alone holds what the
			// last checkpoint does not.
			c := newCluster(t, ordersConfig(), 1<<20, time.Hour)
			h := newHistory()
			for n := 1; n <= 20; n++ {
				c.publish(h, n, false)
			}
			c.do(&stream.DeleteMsg{Seq: deletedSeq})
			l := c.leader(-1)
			for i := range c.srv {
				if i != l {
					c.change(l, raftnode.Change{Kind: raftnode.RemoveReplica, Replica: c.srv[i].replica})
				}
			}
			for i := range c.srv {
				if i != l {
					c.stop(i)
				}
			}
			for n := 21; n <= 40; n++ {
				c.publish(h, n, false) // acknowledged by the one voter
			}
			s := c.srv[l]
			if step == crashInFinal {
				s.hook.arm("rename", "stream/"+FileName+".new", false, vfs.CrashOptions{})
			}
			done := c.convertOne(l, step)
			if !done {
				c.powerCut(l)
				c.resume(l)
			}
			c.checkSingle(l, h)
		})
	}
}

// convertOne runs the scale-down on server l up to step (all of it when
// step is past the last), and reports whether it ran to the end without
// the power being cut.
func (c *cluster) convertOne(l int, step scaleDownStep) bool {
	t, s := c.t, c.srv[l]
	s.rep.Log().Seal()
	_ = s.rt.SetLeader(false)
	p, err := s.rep.Log().Barrier()
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if _, err := p.Result(); err != nil {
		t.Fatal(err)
	}
	_, last := p.Position()
	if step == crashAfterBarrier {
		return false
	}
	err = s.rep.Final(last, 10*time.Second)
	if step == crashInFinal {
		if s.hook.crashed == nil {
			t.Fatalf("no crash in Final (%v)", err)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if step == crashAfterFinal {
		return false
	}
	_ = s.rt.Stop(nil)
	s.rep.Log().Close()
	gone, err := s.node.RemoveGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	<-gone
	c.net.Detach(s.id)
	s.svc.Unregister(group, s.rep)
	_ = s.node.Close()
	s.svc.Close()
	s.node = nil
	if step == crashAfterTombstone {
		return false
	}
	if step == crashInRelease {
		s.hook.arm("syncdir", "stream", false, vfs.CrashOptions{})
	}
	c.release(l)
	if step == crashInRelease && s.hook.crashed == nil {
		t.Fatal("no crash in Release")
	}
	return step > crashAfterRelease
}

// release runs Release on server l's disk.
func (c *cluster) release(l int) {
	s := c.srv[l]
	err := Release(Config{Dir: "stream", Store: filestore.Config{Dir: "stream/msgs", FS: s.hook, BlockSize: 512}, Group: group, Replica: s.replica})
	if err != nil && s.hook.crashed == nil {
		c.t.Fatal(err)
	}
}

// powerCut cuts server l's power (unless its hook did) and stops what
// ran on the old disk, without a last checkpoint.
func (c *cluster) powerCut(l int) {
	s := c.srv[l]
	s.hook.mu.Lock()
	if s.hook.crashed == nil {
		s.hook.crashed = s.disk.Crash(vfs.CrashOptions{})
	}
	s.hook.mu.Unlock()
	if s.node != nil {
		c.net.Detach(s.id)
		s.svc.Unregister(group, s.rep)
		_ = s.rt.Stop(nil)
		s.rep.Log().Close()
		_ = s.node.Close()
		s.svc.Close()
		s.node = nil
	}
	s.disk = s.hook.crashed
	s.hook = &hookFS{FS: s.disk, disk: s.disk}
}

// resume restarts server l as the cluster layer does after a crash
// during a scale-down to one replica, and completes it.
func (c *cluster) resume(l int) {
	t, s := c.t, c.srv[l]
	if !Exists(s.hook, "stream") {
		return // a stream of one replica
	}
	n, err := raftnode.Open(raftnode.Config{FS: s.hook, Dir: "wal", Server: s.id, Transport: c.net.Transport(s.id), Logf: s.logf(t)})
	if err != nil {
		t.Fatal(err)
	}
	removed := n.Removed(group, s.replica)
	_ = n.Close()
	if removed {
		c.release(l)
		return
	}
	c.start(l)
	c.waitFor("the one voter leads", func() bool { return s.rep.Log().Leader() })
	if !c.convertOne(l, crashAfterRelease+1) {
		t.Fatal("the second scale-down did not complete")
	}
}

// checkSingle opens server l's store as a stream of one replica opens it
// and requires every acknowledged message at its sequence, none twice,
// and no checkpoint file left.
func (c *cluster) checkSingle(l int, h *history) {
	t, s := c.t, c.srv[l]
	if Exists(s.hook, "stream") {
		t.Fatal("the replica's checkpoint file is still there")
	}
	st, err := filestore.Open(filestore.Config{Dir: "stream/msgs", FS: s.hook, BlockSize: 512}, c.cfg.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seen := map[string]uint64{}
	for seq := uint64(1); ; {
		m, err := st.LoadNext(nil, seq)
		if err != nil {
			break
		}
		if prev, ok := seen[string(m.Data)]; ok {
			t.Fatalf("%s stored at %d and %d", m.Data, prev, m.Seq)
		}
		seen[string(m.Data)] = m.Seq
		seq = m.Seq + 1
	}
	for payload, seq := range h.acked {
		got, ok := seen[payload]
		switch {
		case h.removed[seq] && ok:
			t.Fatalf("%s (deleted) is back at %d", payload, got)
		case !h.removed[seq] && !ok:
			t.Fatalf("%s (acknowledged at %d) lost", payload, seq)
		case ok && got != seq:
			t.Fatalf("%s at %d, acknowledged at %d", payload, got, seq)
		}
	}
	if len(seen) != len(h.acked)-1 {
		t.Fatalf("%d messages stored, %d acknowledged and one deleted", len(seen), len(h.acked))
	}
}
