package streamckpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/catchup"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// These tests run three replicas of a FILE stream: on each server a
// raftnode node, the stream's runtime (streamrun.Stream) over a file
// store, its streamlog.Log and its Replica, all on one crash file system
// (the server's disk: WAL, store and checkpoint file). One replica is
// crashed (power loss: unsynced writes lost or torn) or stopped, and
// restarted from its disk; the replicas must converge to byte-identical
// states with every acknowledged message at its sequence, none twice.

const group raftnode.GroupID = 7

// memTransport is the messaging side of one runtime: its subscriptions
// by subject, and every message it published by subject.
type memTransport struct {
	mu   sync.Mutex
	subs map[string]streamrun.MsgHandler
	sent map[string][][]byte
}

type memSub struct {
	t    *memTransport
	subj string
}

func (s memSub) Unsubscribe() {
	s.t.mu.Lock()
	delete(s.t.subs, s.subj)
	s.t.mu.Unlock()
}

func newTransport() *memTransport {
	return &memTransport{subs: map[string]streamrun.MsgHandler{}, sent: map[string][][]byte{}}
}

func (t *memTransport) Subscribe(subject, _ string, h streamrun.MsgHandler) (streamrun.Subscription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.subs[subject] = h
	return memSub{t, subject}, nil
}

func (t *memTransport) Publish(subject, _ string, _, data []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent[subject] = append(t.sent[subject], bytes.Clone(data))
	return true
}

func (t *memTransport) PublishAs(route, _, reply string, hdr, data []byte) bool {
	return t.Publish(route, reply, hdr, data)
}

func (t *memTransport) HasInterest(string) bool { return false }

// publish hands a message to the subscription on pattern; false when
// there is none (not the leader).
func (t *memTransport) publish(pattern, subject, reply string, hdr, data []byte) bool {
	t.mu.Lock()
	h := t.subs[pattern]
	t.mu.Unlock()
	if h == nil {
		return false
	}
	h(subject, reply, hdr, data)
	return true
}

func (t *memTransport) replies(subject string) [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent[subject]
}

// hookFS crashes its disk at one operation, once armed: before the
// operation (or after it, with after set) whose kind is op and whose
// name is name.
type hookFS struct {
	vfs.FS
	disk    *vfs.CrashFS
	mu      sync.Mutex
	op      string
	name    string
	after   bool
	opts    vfs.CrashOptions
	crashed *vfs.CrashFS
	// onSync, if set, runs before each fsync of a file (its name).
	onSync func(name string)
}

// arm makes the hook crash the disk at op on name.
func (h *hookFS) arm(op, name string, after bool, opts vfs.CrashOptions) {
	h.mu.Lock()
	h.op, h.name, h.after, h.opts = op, name, after, opts
	h.mu.Unlock()
}

// hit crashes the disk if op on name is the armed one and when is its
// moment (after: the operation returned).
func (h *hookFS) hit(op, name string, after bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.op != "" && h.crashed == nil && op == h.op && name == h.name && after == h.after {
		h.crashed = h.disk.Crash(h.opts)
	}
}

func (h *hookFS) Create(name string) (vfs.File, error) {
	f, err := h.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, h: h, name: name}, nil
}

func (h *hookFS) Rename(a, b string) error {
	h.hit("rename", a, false)
	err := h.FS.Rename(a, b)
	h.hit("rename", a, true)
	return err
}

func (h *hookFS) SyncDir(dir string) error {
	h.hit("syncdir", dir, false)
	err := h.FS.SyncDir(dir)
	h.hit("syncdir", dir, true)
	return err
}

type hookFile struct {
	vfs.File
	h    *hookFS
	name string
}

func (f *hookFile) Sync() error {
	f.h.mu.Lock()
	on := f.h.onSync
	f.h.mu.Unlock()
	if on != nil {
		on(f.name)
	}
	f.h.hit("sync", f.name, false)
	err := f.File.Sync()
	f.h.hit("sync", f.name, true)
	return err
}

// server is one server of the test cluster.
type server struct {
	id   raftnode.ServerID
	disk *vfs.CrashFS
	hook *hookFS
	node *raftnode.Node
	rep  *Replica
	rt   *streamrun.Stream
	tr   *memTransport
	svc  *catchup.Service
	// replica is this server's replica ID (i+1 unless replaced); join
	// makes its replica start empty, to be added by the leader.
	replica raftnode.ReplicaID
	join    bool
	// logs holds what the server's node and replica logged.
	logs struct {
		sync.Mutex
		lines []string
	}
}

// logf logs for server s: to the test, and into s.logs.
func (s *server) logf(t *testing.T) func(string, ...any) {
	return func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		s.logs.Lock()
		s.logs.lines = append(s.logs.lines, line)
		s.logs.Unlock()
		t.Logf("%s: %s", s.id, line)
	}
}

// logged reports whether a line of s's log contains sub.
func (s *server) logged(sub string) bool {
	s.logs.Lock()
	defer s.logs.Unlock()
	for _, l := range s.logs.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

type cluster struct {
	t        *testing.T
	cfg      stream.Config
	net      *raftnode.MemNetwork
	srv      []*server
	peers    []raftnode.Peer
	every    uint64
	interval time.Duration
	// everyBytes is Config.EveryBytes (0: the default).
	everyBytes uint64
	created    time.Time
	retain     uint64 // Config.Retain (0: the default)
}

// newCluster starts three servers with a replica each of stream cfg
// (file storage), checkpointing every `every` entries and interval, and
// waits for a leader.
func newCluster(t *testing.T, cfg stream.Config, every uint64, interval time.Duration) *cluster {
	return newClusterBytes(t, cfg, every, 0, interval)
}

// newClusterBytes is newCluster with Config.EveryBytes everyBytes.
func newClusterBytes(t *testing.T, cfg stream.Config, every, everyBytes uint64, interval time.Duration) *cluster {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, cfg: cfg, net: raftnode.NewMemNetwork(1, nil), every: every, interval: interval, everyBytes: everyBytes, created: time.Now()}
	for i := range 3 {
		id := raftnode.ServerID(fmt.Sprintf("s%d", i+1))
		c.peers = append(c.peers, raftnode.Peer{Replica: raftnode.ReplicaID(i + 1), Server: id})
		disk := vfs.NewCrashFS()
		c.srv = append(c.srv, &server{id: id, disk: disk, hook: &hookFS{FS: disk, disk: disk}, replica: raftnode.ReplicaID(i + 1)})
	}
	for i := range c.srv {
		c.start(i)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.net.Run(stop) })
	t.Cleanup(func() {
		for i := range c.srv {
			c.stop(i)
		}
		close(stop)
		wg.Wait()
	})
	c.leader(-1)
	return c
}

// start starts server i's node, replica and runtime from its disk.
func (c *cluster) start(i int) {
	t, s := c.t, c.srv[i]
	n, err := raftnode.Open(raftnode.Config{FS: s.hook, Dir: "wal", Server: s.id, Transport: c.net.Transport(s.id), Logf: s.logf(t)})
	if err != nil {
		t.Fatalf("%s: open node: %v", s.id, err)
	}
	// Nothing this replica's store held at its checkpoint may be lost
	// when it returns there (a segment removed too early would be).
	storeLog := func(format string, args ...any) {
		if line := fmt.Sprintf(format, args...); strings.Contains(line, ": lost ") {
			t.Errorf("%s: %s", s.id, line)
		}
	}
	svc := catchup.New(catchup.Config{Send: c.net.Transport(s.id).Send, Logf: s.logf(t)})
	rep, err := Open(Config{
		Dir: "stream", Store: filestore.Config{Dir: "stream/msgs", FS: s.hook, BlockSize: 512, Logf: storeLog, Infof: s.logf(t)},
		Node: n, Group: group, Replica: s.replica, Every: c.every, EveryBytes: c.everyBytes, Interval: c.interval, Logf: s.logf(t),
		Catchup: svc, Server: s.id, Retain: c.retain, Peers: func() []raftnode.ServerID {
			var ids []raftnode.ServerID
			for _, o := range c.srv {
				ids = append(ids, o.id)
			}
			return ids
		},
	}, c.cfg)
	if err != nil {
		t.Fatalf("%s: open replica: %v", s.id, err)
	}
	tr := newTransport()
	var rt *streamrun.Stream
	env := streamrun.Env{
		Transport: tr, Now: time.Now, Logf: t.Logf,
		Storage: streamrun.NewStorage(nil, "", streamrun.NewUsage(), time.Now, t.Logf, t.Logf),
		NewReplicatedLog: rep.NewLog(func(leader bool) {
			if err := rt.SetLeader(leader); err != nil {
				t.Errorf("%s: SetLeader(%v): %v", s.id, leader, err)
			}
		}),
	}
	rt = streamrun.New(env, rep.StreamConfig(), c.created, "stream", rep.Store())
	if err := rep.Start(rt); err != nil {
		t.Fatalf("%s: start: %v", s.id, err)
	}
	if err := rt.Serve(); err != nil {
		t.Fatal(err)
	}
	svc.Register(group, rep)
	gc := raftnode.GroupConfig{ID: group, Replica: s.replica, Incarnation: n.Incarnation(), Peers: c.peers, Join: s.join,
		Voters: []raftnode.ReplicaID{1, 2, 3}}
	if err := n.AddGroup(gc, rep.Log().StateMachine()); err != nil {
		t.Fatal(err)
	}
	c.net.Attach(s.id, catchup.Mux(n, svc))
	n.Start()
	s.node, s.rep, s.rt, s.tr, s.svc = n, rep, rt, tr, svc
}

// stop stops server i cleanly (a last checkpoint) if it runs.
func (c *cluster) stop(i int) {
	s := c.srv[i]
	if s.node == nil {
		return
	}
	c.net.Detach(s.id)
	s.svc.Unregister(group, s.rep)
	if err := s.rep.Stop(); err != nil && s.hook.crashed == nil {
		c.t.Errorf("%s: last checkpoint: %v", s.id, err)
	}
	_ = s.rt.Stop(nil)
	s.rep.Log().Close()
	_ = s.node.Close()
	s.svc.Close()
	s.node = nil
}

// crash cuts server i's power now (unless its hook did already), stops
// what ran on the old disk and restarts it on what the disk kept.
func (c *cluster) crash(i int, opts vfs.CrashOptions) {
	s := c.srv[i]
	s.hook.mu.Lock()
	if s.hook.crashed == nil {
		s.hook.crashed = s.disk.Crash(opts)
	}
	s.hook.mu.Unlock()
	c.stop(i)
	s.disk = s.hook.crashed
	s.hook = &hookFS{FS: s.disk, disk: s.disk}
	c.start(i)
}

// leader waits for a leader other than not (-1: any) subscribed to the
// stream's subjects and returns it.
func (c *cluster) leader(not int) int {
	c.t.Helper()
	l := -1
	c.waitFor("a subscribed leader", func() bool {
		for i, s := range c.srv {
			if i != not && s.node != nil && s.rep.Log().Leader() {
				s.tr.mu.Lock()
				subscribed := s.tr.subs[c.cfg.Subjects[0]] != nil
				s.tr.mu.Unlock()
				if subscribed {
					l = i
					return true
				}
			}
		}
		return false
	})
	return l
}

// waitFor waits (virtual time) until cond holds.
func (c *cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			for _, s := range c.srv {
				if s.node != nil {
					st, err := s.node.Status(group)
					c.t.Logf("%s: %+v %v", s.id, st, err)
				}
			}
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type pubAck struct {
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code int `json:"err_code"`
	} `json:"error"`
}

// history is what the clients were told, and what the test removed.
type history struct {
	acked   map[string]uint64 // payload -> acknowledged sequence
	removed map[uint64]bool   // sequences deleted or purged
	n       int
}

func newHistory() *history {
	return &history{acked: map[string]uint64{}, removed: map[uint64]bool{deletedSeq: true}}
}

// publish publishes message n (payload "m<n>", Nats-Msg-Id "id<n>") to
// the leader and waits for its PubAck, which must store it (or, with
// dup, name it a duplicate of the acknowledged sequence).
func (c *cluster) publish(h *history, n int, dup bool) {
	c.t.Helper()
	l := c.leader(-1)
	h.n++
	reply := fmt.Sprintf("reply.%d", h.n)
	hdr := fmt.Appendf(nil, "NATS/1.0\r\nNats-Msg-Id: id%d\r\n\r\n", n)
	payload := fmt.Sprintf("m%d", n)
	if !c.srv[l].tr.publish(c.cfg.Subjects[0], fmt.Sprintf("orders.%d", n%5), reply, hdr, []byte(payload)) {
		c.t.Fatal("the leader is not subscribed")
	}
	var got [][]byte
	c.waitFor("the PubAck on "+reply, func() bool {
		got = c.srv[l].tr.replies(reply)
		return len(got) > 0
	})
	var a pubAck
	if err := json.Unmarshal(got[0], &a); err != nil || a.Error != nil {
		c.t.Fatalf("PubAck %s: %q", reply, got[0])
	}
	if a.Duplicate != dup || dup && a.Seq != h.acked[payload] {
		c.t.Fatalf("PubAck of %s: %q (duplicate expected: %v)", payload, got[0], dup)
	}
	if !dup {
		h.acked[payload] = a.Seq
	}
}

// do runs op on the leader's runtime.
func (c *cluster) do(op stream.Op) {
	c.t.Helper()
	l := c.leader(-1)
	if out, ok := c.srv[l].rt.Do(op); !ok || out.Err != nil {
		c.t.Fatalf("%T: ok %v, %+v", op, ok, out.Err)
	}
}

// state returns replica i's whole state, its apply goroutine held.
func (c *cluster) state(i int) []byte {
	var b []byte
	c.srv[i].rt.Held(func() { b = c.srv[i].rt.AppendState(nil) })
	return b
}

// converged waits until the replicas' states are byte-identical, then
// checks every acknowledged message is at its sequence on each, and that
// no message is stored twice.
func (c *cluster) converged(h *history) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		first := c.state(0)
		if bytes.Equal(first, c.state(1)) && bytes.Equal(first, c.state(2)) {
			break
		}
		if time.Now().After(deadline) {
			c.checkMessages(h) // says how they differ, if it is there
			c.t.Fatal("timed out waiting for identical states")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.checkMessages(h)
}

// checkMessages requires every acknowledged message at its sequence on
// every replica, and none stored twice.
func (c *cluster) checkMessages(h *history) {
	c.t.Helper()
	for _, s := range c.srv {
		st := s.rep.Store()
		seen := map[string]uint64{}
		for seq := uint64(1); ; {
			m, err := st.LoadNext(nil, seq)
			if err != nil {
				break
			}
			if prev, ok := seen[string(m.Data)]; ok {
				c.t.Fatalf("%s: %s stored at %d and %d", s.id, m.Data, prev, m.Seq)
			}
			seen[string(m.Data)] = m.Seq
			seq = m.Seq + 1
		}
		for payload, seq := range h.acked {
			if got, ok := seen[payload]; ok && got != seq {
				c.t.Fatalf("%s: %s at %d, acknowledged at %d", s.id, payload, got, seq)
			}
			if _, ok := seen[payload]; !ok && !h.removed[seq] {
				c.t.Fatalf("%s: %s (acknowledged at %d) missing", s.id, payload, seq)
			}
		}
	}
}

// deletedSeq is the message the scenarios delete (its Nats-Msg-Id stays
// in the duplicate window, which only the checkpoint carries across a
// restart).
const deletedSeq = 3

func ordersConfig() stream.Config {
	return stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.FileStorage, DuplicateWindow: time.Hour}
}

// A follower's power is cut after a checkpoint and more publishes; it
// restarts from its checkpoint (at the moment named by the case: after
// the checkpoint, between its file and the WAL's compaction, or during a
// second checkpoint that never completed, after a purge emptied
// segments) and converges with the others. Without the store's rollback
// the restarted replica stores the entries after its checkpoint twice;
// without the stream state it takes the deleted message's id for new.
func TestRestartAfterPowerLoss(t *testing.T) {
	cases := []struct {
		name  string
		op    string // "": cut the power after the checkpoint
		file  string
		after bool
		purge bool // empty segments after the first checkpoint
	}{
		{name: "after the checkpoint"},
		{name: "between the checkpoint file and the compaction", op: "syncdir", file: "stream", after: true},
		{name: "during a checkpoint, before its rename", op: "rename", file: "stream/replica.ckpt.new", purge: true},
		{name: "during a checkpoint, before its fsync", op: "sync", file: "stream/replica.ckpt.new", purge: true},
	}
	for k, tc := range cases {
		for _, tail := range []vfs.TailMode{vfs.TailDrop, vfs.TailAny} {
			t.Run(fmt.Sprintf("%s/tail%d", tc.name, tail), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					opts := vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(k), uint64(tail))), Tail: tail}
					c := newCluster(t, ordersConfig(), 1<<40, time.Hour)
					h := newHistory()
					for n := 1; n <= 20; n++ {
						c.publish(h, n, false)
					}
					l := c.leader(-1)
					v := (l + 1) % 3 // the victim: a follower
					c.do(&stream.DeleteMsg{Seq: deletedSeq})
					c.converged(h)
					if err := c.srv[v].rep.Checkpoint(); err != nil {
						t.Fatal(err)
					}
					for n := 21; n <= 40; n++ {
						c.publish(h, n, false)
					}
					if tc.purge {
						// A purge empties front segments that the
						// first checkpoint's store still needs.
						c.do(&stream.Purge{Request: store.PurgeRequest{Seq: 16}})
						for seq := uint64(1); seq < 16; seq++ {
							h.removed[seq] = true
						}
						for n := 41; n <= 60; n++ {
							c.publish(h, n, false)
						}
					}
					c.converged(h)
					if tc.op != "" {
						c.srv[v].hook.arm(tc.op, tc.file, tc.after, opts)
						_ = c.srv[v].rep.Checkpoint()
						if c.srv[v].hook.crashed == nil {
							t.Fatalf("no %s of %s in the checkpoint", tc.op, tc.file)
						}
					}
					c.crash(v, opts)
					c.publish(h, deletedSeq, true) // its id is still in the window
					for n := 61; n <= 80; n++ {
						c.publish(h, n, false)
					}
					c.converged(h)
				})
			})
		}
	}
}

// Checkpoints come every Every entries on every replica; the leader's
// let its WAL drop what every replica holds. A replica stopped cleanly
// takes a last one and restarts from it, then catches up with what it
// missed from the leader's log, which kept it.
func TestPeriodicCheckpointsAndCleanRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 5, time.Hour)
		h := newHistory()
		for n := 1; n <= 30; n++ {
			c.publish(h, n, false)
		}
		c.converged(h)
		for _, s := range c.srv {
			c.waitFor(string(s.id)+"'s checkpoint", func() bool {
				ck, err := readFile(s.disk, "stream")
				return err == nil && ck != nil && ck.index > 20
			})
		}
		l := c.leader(-1)
		c.waitFor("the leader's WAL compacted by a checkpoint", func() bool {
			st, err := c.srv[l].node.Status(group)
			return err == nil && st.FirstIndex > 20
		})
		v := (l + 2) % 3
		c.stop(v)
		var applied uint64
		ck, err := readFile(c.srv[v].disk, "stream")
		if err != nil {
			t.Fatal(err)
		}
		applied = ck.index
		for n := 31; n <= 40; n++ {
			c.publish(h, n, false)
		}
		for n := 41; n <= 60; n++ { // checkpoints meanwhile: the leader keeps what v lacks
			c.publish(h, n, false)
		}
		if _, err := c.srv[l].rep.Log().Checkpoint(1 << 40); err != nil {
			t.Fatal(err)
		}
		c.start(v)
		if got := c.srv[v].rep.Applied(); got != applied {
			t.Fatalf("restarted at %d, stopped at %d", got, applied)
		}
		c.converged(h)
	})
}

// A clean stop after a restart that applied nothing still checkpoints
// what the reopened store wrote (its low water's compact record and a
// sync mark, at its first batch or its Close), so the next restart rolls
// nothing back (trial 38 logged "rollback to segment ... set aside" after
// each clean stop and restart with nothing applied between).
func TestCleanRestartsRollNothingBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 5, time.Hour)
		h := newHistory()
		for n := 1; n <= 12; n++ {
			c.publish(h, n, false)
		}
		c.converged(h)
		v := (c.leader(-1) + 1) % 3
		for range 3 {
			c.stop(v)
			c.start(v)
			c.converged(h)
		}
		c.srv[v].logs.Lock()
		defer c.srv[v].logs.Unlock()
		for _, l := range c.srv[v].logs.lines {
			if strings.Contains(l, "rollback to") {
				t.Errorf("%s after clean stops: %s", c.srv[v].id, l)
			}
		}
	})
}

// A round's publishes are one entry, so a count of entries alone does not
// bound what a crash makes a replica apply again: a checkpoint also comes
// once EveryBytes of operations were applied since the last one.
// A replica's store fsyncs only for its checkpoints
// (filestore.Config.DeferSync), and a checkpoint fsyncs what was applied
// since the last one before it holds the stream's apply goroutine, so
// that the replica goes on applying during that fsync (the Position
// taken held then has little left to fsync): a publish made while the
// first fsync of the checkpoint is under way applies on the replica
// before that fsync ends.
func TestCheckpointSyncsBeforeItHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 1<<40, time.Hour)
		h := newHistory()
		for n := 1; n <= 30; n++ {
			c.publish(h, n, false)
		}
		c.converged(h)
		l := c.leader(-1)
		s := c.srv[(l+1)%3] // a follower: the publish commits without it
		applied := make(chan bool, 1)
		var once sync.Once
		s.hook.mu.Lock()
		s.hook.onSync = func(name string) {
			if !strings.Contains(name, "msgs/") {
				return
			}
			once.Do(func() {
				before := s.rt.AppliedIndex()
				c.srv[l].tr.publish(c.cfg.Subjects[0], "orders.1", "reply.during", nil, []byte("during"))
				deadline := time.Now().Add(5 * time.Second)
				for s.rt.AppliedIndex() == before && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				applied <- s.rt.AppliedIndex() > before
			})
		}
		s.hook.mu.Unlock()
		if err := s.rep.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		select {
		case ok := <-applied:
			if !ok {
				t.Fatal("the replica applied nothing during its checkpoint's first fsync")
			}
		default:
			t.Fatal("the checkpoint fsynced no segment")
		}
	})
}

func TestCheckpointsByBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClusterBytes(t, ordersConfig(), 1<<30, 300, time.Hour)
		h := newHistory()
		for n := 1; n <= 30; n++ {
			c.publish(h, n, false)
		}
		c.converged(h)
		for _, s := range c.srv {
			c.waitFor(string(s.id)+"'s checkpoint", func() bool {
				ck, err := readFile(s.disk, "stream")
				return err == nil && ck != nil && ck.index > 15
			})
		}
	})
}

// A damaged checkpoint file, a store whose checkpoint file is gone, and
// a checkpoint of another replica each fail Open: the replica is fenced,
// never started from a guess.
func TestOpenRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 1<<40, time.Hour)
		h := newHistory()
		for n := 1; n <= 10; n++ {
			c.publish(h, n, false)
		}
		c.converged(h)
		v := (c.leader(-1) + 1) % 3
		c.stop(v)
		disk := c.srv[v].disk
		good, err := disk.ReadFile("stream/" + FileName)
		if err != nil {
			t.Fatal(err)
		}
		open := func() error {
			rep, err := Open(Config{Dir: "stream", Store: filestore.Config{Dir: "stream/msgs", FS: disk, BlockSize: 512},
				Node: c.srv[(v+1)%3].node, Group: group, Replica: raftnode.ReplicaID(v + 1)}, c.cfg)
			if err == nil {
				rep.Store().Close()
			}
			return err
		}
		bad := bytes.Clone(good)
		bad[len(bad)/2] ^= 1
		if err := disk.WriteFile("stream/"+FileName, bad); err != nil {
			t.Fatal(err)
		}
		if err := open(); !errors.Is(err, ErrDamaged) {
			t.Errorf("damaged file: %v", err)
		}
		other := bytes.Clone(good)
		ck, _ := decode(other)
		ck.replica++
		if err := disk.WriteFile("stream/"+FileName, ck.encode()); err != nil {
			t.Fatal(err)
		}
		if err := open(); !errors.Is(err, ErrDamaged) {
			t.Errorf("another replica's file: %v", err)
		}
		if err := disk.Remove("stream/" + FileName); err != nil {
			t.Fatal(err)
		}
		if err := open(); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("no file: %v", err)
		}
		if err := disk.WriteFile("stream/"+FileName, good); err != nil {
			t.Fatal(err)
		}
		c.start(v)
		c.converged(h)
	})
}

// A new replica writes its first checkpoint (index 0) at once; a store
// left empty by a crash before that checkpoint is taken for new again;
// a memory stream is refused.
func TestOpenNew(t *testing.T) {
	disk := vfs.NewCrashFS()
	n, err := raftnode.Open(raftnode.Config{FS: vfs.NewCrashFS(), Dir: "wal", Server: "s1", Transport: raftnode.NewMemNetwork(1, nil).Transport("s1")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cfg := ordersConfig()
	cfg.SetDefaults()
	open := func() (*Replica, error) {
		return Open(Config{Dir: "streams/ORDERS", Store: filestore.Config{Dir: "streams/ORDERS/msgs", FS: disk}, Node: n, Group: group, Replica: 1}, cfg)
	}
	rep, err := open()
	if err != nil {
		t.Fatal(err)
	}
	rep.Store().Close()
	ck, err := readFile(disk, "streams/ORDERS")
	if err != nil || ck == nil || ck.index != 0 || ck.group != group || ck.replica != 1 {
		t.Fatalf("first checkpoint %+v, %v", ck, err)
	}
	disk = disk.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	if got, err := readFile(disk, "streams/ORDERS"); err != nil || got == nil {
		t.Fatalf("the first checkpoint is not durable: %+v, %v", got, err)
	}
	if err := disk.Remove("streams/ORDERS/" + FileName); err != nil {
		t.Fatal(err)
	}
	if rep, err = open(); err != nil {
		t.Fatalf("an empty store without a checkpoint: %v", err)
	}
	rep.Store().Close()
	mem := cfg
	mem.Storage = stream.MemoryStorage
	if _, err := Open(Config{Dir: "m", Store: filestore.Config{Dir: "m/msgs", FS: disk}, Node: n, Group: group, Replica: 1}, mem); !errors.Is(err, ErrMemoryStream) {
		t.Fatalf("memory stream: %v", err)
	}
}

// A store whose records the checkpoint holds were damaged on disk (bytes
// flipped in a stopped replica's segment) fails Open: rolled back to the
// checkpoint, the store reports the damaged sequences lost, and the log
// was compacted through the checkpoint, so nothing could apply them
// again. Started, the replica would report current with messages
// missing and, as the leader, answer them as not found (the
// process-level fault suite's corrupt-msgs after a checkpoint).
func TestOpenRefusesDamagedStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, ordersConfig(), 5, time.Hour)
		h := newHistory()
		for n := 1; n <= 30; n++ {
			c.publish(h, n, false)
		}
		c.converged(h)
		v := (c.leader(-1) + 1) % 3
		c.waitFor("a checkpoint past the first messages", func() bool {
			ck, err := readFile(c.srv[v].disk, "stream")
			return err == nil && ck != nil && ck.index > 20
		})
		c.stop(v)
		disk := c.srv[v].disk
		segs, err := disk.ReadDir("stream/msgs/msgs")
		if err != nil || len(segs) == 0 {
			t.Fatalf("segments: %v %v", segs, err)
		}
		name := "stream/msgs/msgs/" + segs[0]
		data, err := disk.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []int{len(data) / 4, len(data) / 2, 3 * len(data) / 4} {
			for i := range 8 {
				data[at+i] ^= 0x5a
			}
		}
		if err := disk.WriteFile(name, data); err != nil {
			t.Fatal(err)
		}
		rep, err := Open(Config{Dir: "stream", Store: filestore.Config{Dir: "stream/msgs", FS: disk, BlockSize: 512},
			Node: c.srv[(v+1)%3].node, Group: group, Replica: raftnode.ReplicaID(v + 1)}, c.cfg)
		if err == nil {
			rep.Store().Close()
		}
		if !errors.Is(err, ErrStoreDamaged) {
			t.Fatalf("Open of a damaged store: %v", err)
		}
	})
}
