package streamlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

const group raftnode.GroupID = 7

// engine is one replica's stream engine as the test runs it: the stream
// state machine (stream.Stream over a memory store) behind the engine's
// Applier contract, recording the replies a proposer would send (the
// engine's PubAck, stream.AppendPubAck) by key, and the keys forgotten.
type engine struct {
	mu        sync.Mutex
	st        *stream.Stream
	store     store.Store
	out       stream.Outcome
	last      uint64            // last index applied
	acks      map[uint64][]byte // key -> PubAck, only for keys handed back
	forgotten map[uint64]error
}

func newEngine(t *testing.T) *engine {
	cfg := stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.MemoryStorage}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ms := memstore.New(cfg.StoreConfig())
	return &engine{st: stream.New(cfg, ms), store: ms, acks: map[uint64][]byte{}, forgotten: map[uint64]error{}}
}

func (e *engine) Apply(index uint64, op stream.Op, key uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if index <= e.last {
		panic(fmt.Sprintf("index %d after %d", index, e.last))
	}
	e.last = index
	e.st.ApplyOp(op, &e.out)
	if key != 0 {
		e.acks[key] = stream.AppendPubAck(nil, "ORDERS", e.out.Results[0], "")
	}
}

func (e *engine) Forget(key uint64, err error) {
	e.mu.Lock()
	e.forgotten[key] = err
	e.mu.Unlock()
}

// outcome returns the PubAck for key, or the error it was forgotten
// with; ok false while neither happened.
func (e *engine) outcome(key uint64) (ack []byte, err error, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, found := e.acks[key]; found {
		return a, nil, true
	}
	if err, found := e.forgotten[key]; found {
		return nil, err, true
	}
	return nil, nil, false
}

type replica struct {
	id   raftnode.ServerID
	node *raftnode.Node
	log  *Log
	eng  *engine
}

type cluster struct {
	t    *testing.T
	net  *raftnode.MemNetwork
	reps []*replica
}

// newCluster opens three nodes (WALs on crash file systems) on the
// in-memory network, each with the stream's group, its Log and engine,
// and starts them.
func newCluster(t *testing.T, opts ...func(*Config)) *cluster {
	c := &cluster{t: t, net: raftnode.NewMemNetwork(1, nil)}
	var peers []raftnode.Peer
	for i := range 3 {
		id := raftnode.ServerID(fmt.Sprintf("s%d", i+1))
		peers = append(peers, raftnode.Peer{Replica: raftnode.ReplicaID(i + 1), Server: id})
		n, err := raftnode.Open(raftnode.Config{FS: vfs.NewCrashFS(), Dir: "wal", Server: id, Transport: c.net.Transport(id)})
		if err != nil {
			t.Fatal(err)
		}
		c.net.Attach(id, n)
		c.reps = append(c.reps, &replica{id: id, node: n})
	}
	for i, r := range c.reps {
		r.eng = newEngine(t)
		cfg := Config{Node: r.node, Group: group}
		for _, o := range opts {
			o(&cfg)
		}
		r.log = New(cfg, r.eng)
		gc := raftnode.GroupConfig{ID: group, Replica: raftnode.ReplicaID(i + 1), Incarnation: r.node.Incarnation(), Peers: peers}
		if err := r.node.AddGroup(gc, r.log.StateMachine()); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range c.reps {
		r.node.Start()
	}
	return c
}

// run delivers the network's frames on a goroutine until the returned
// function, which also closes every node and log, is called.
func (c *cluster) run() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.net.Run(done) })
	return func() {
		close(done)
		wg.Wait()
		for _, r := range c.reps {
			r.node.Close()
			r.log.Close()
		}
	}
}

func (c *cluster) leader() int {
	for i, r := range c.reps {
		if st, err := r.node.Status(group); err == nil && st.Role == raftnode.Leader {
			return i
		}
	}
	return -1
}

// waitLeader waits (virtual time) for a leader other than not (-1: any).
func (c *cluster) waitLeader(not int) int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if l := c.leader(); l >= 0 && l != not {
			return l
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return -1
}

type pubAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
}

// publisher proposes publishes on whichever replica leads, as the
// cluster layer will: retried on "not the leader" and, with the same
// Nats-Msg-Id, when the proposal was forgotten (no reply).
type publisher struct {
	c        *cluster
	key      uint64
	acked    map[string]uint64 // message -> acknowledged sequence
	forgot   int
	proposer map[uint64]int // key -> replica that proposed it
	// before, if set, runs once with the leader chosen for a proposal,
	// before it is proposed (a fault the proposal meets in flight).
	before func(leader int)
}

func (p *publisher) publish(msg string, at int64) {
	c := p.c
	c.t.Helper()
	hdr := []byte("NATS/1.0\r\nNats-Msg-Id: " + msg + "\r\n\r\n")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		l := c.waitLeader(-1)
		p.key++
		key := p.key
		if h := p.before; h != nil {
			p.before = nil
			h(l)
		}
		op := &stream.Publish{Entries: []stream.Entry{{Subject: "orders." + msg, Header: hdr, Data: []byte("body of " + msg), Time: at}}}
		if err := c.reps[l].log.Propose(op, key); err != nil {
			if !errors.Is(err, raftnode.ErrNotLeader) && !errors.Is(err, raftnode.ErrDropped) {
				c.t.Fatalf("propose %s on %s: %v", msg, c.reps[l].id, err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		p.proposer[key] = l
		for {
			ack, err, ok := c.reps[l].eng.outcome(key)
			if !ok {
				if time.Now().After(deadline) {
					c.t.Fatalf("%s: no outcome for key %d", msg, key)
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if err != nil {
				if !errors.Is(err, raftnode.ErrNoReply) {
					c.t.Fatalf("%s forgotten with %v", msg, err)
				}
				p.forgot++
				break // retry, deduplicated by its Nats-Msg-Id if it committed
			}
			var pa pubAck
			if err := json.Unmarshal(ack, &pa); err != nil || pa.Seq == 0 {
				c.t.Fatalf("%s: PubAck %s (%v)", msg, ack, err)
			}
			p.acked[msg] = pa.Seq
			return
		}
	}
	c.t.Fatalf("%s: never acknowledged", msg)
}

// Three replicas of a stream on raftnode: publishes proposed on the
// leader are applied on every replica to byte-identical stream state; the
// PubAck is produced only where the entry was proposed, after apply; a
// step-down and a partitioned leader with a publish in flight lose no
// acknowledged message, and the publish whose leader was lost is retried
// and stored once.
func TestReplicatedPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		defer c.run()()

		p := &publisher{c: c, acked: map[string]uint64{}, proposer: map[uint64]int{}}
		base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		n := 0
		pub := func(k int) {
			for range k {
				n++
				p.publish(fmt.Sprintf("m%03d", n), base+int64(n)*int64(time.Millisecond))
			}
		}
		pub(10)

		// A leadership transfer: the next publishes go to the new leader.
		old := c.leader()
		if err := c.reps[old].node.StepDown(group); err != nil {
			t.Fatal(err)
		}
		c.waitLeader(old)
		pub(10)

		// The leader is cut off both ways just before it accepts a publish:
		// it cannot commit it, loses its leadership (CheckQuorum), and the
		// publish is forgotten there without a reply; the others elect a
		// leader, and the retry is stored once.
		p.before = func(l int) {
			for i, r := range c.reps {
				if i != l {
					c.net.Partition(c.reps[l].id, r.id)
				}
			}
			go func() {
				c.waitLeader(l)
				c.net.HealAll()
			}()
		}
		pub(1)
		pub(10)

		// Every replica applies everything the leader applied.
		l := c.waitLeader(-1)
		want, _ := c.reps[l].node.Status(group)
		deadline := time.Now().Add(30 * time.Second)
		for _, r := range c.reps {
			for {
				st, _ := r.node.Status(group)
				if st.Applied >= want.Applied {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s applied %d, leader %d", r.id, st.Applied, want.Applied)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		for _, r := range c.reps {
			r.node.Close() // no more applies: the engines can be read
		}

		if len(p.acked) != n {
			t.Fatalf("%d of %d acknowledged", len(p.acked), n)
		}
		if p.forgot != 1 {
			t.Fatalf("%d proposals forgotten, want the partitioned leader's one", p.forgot)
		}
		ref := c.reps[0].eng.st.AppendState(nil)
		for _, r := range c.reps[1:] {
			if got := r.eng.st.AppendState(nil); !bytes.Equal(got, ref) {
				t.Fatalf("%s state differs from s1:\n%s\n---\n%s", r.id, got, ref)
			}
		}
		// Every acknowledged message is stored, once, at its sequence.
		st := c.reps[0].eng.store.State(false)
		if st.Msgs != uint64(n) {
			t.Fatalf("%d messages stored, %d acknowledged", st.Msgs, n)
		}
		for msg, seq := range p.acked {
			m, err := c.reps[0].eng.store.Load(seq)
			if err != nil || m.Subject != "orders."+msg {
				t.Fatalf("%s acknowledged at %d, stored %v (%v)", msg, seq, m, err)
			}
		}
		// A PubAck is made only on the replica that proposed, only for its
		// own keys, never for a key forgotten.
		for i, r := range c.reps {
			for key := range r.eng.acks {
				if p.proposer[key] != i {
					t.Fatalf("%s made the PubAck of key %d, proposed on %s", r.id, key, c.reps[p.proposer[key]].id)
				}
				if _, f := r.eng.forgotten[key]; f {
					t.Fatalf("%s: key %d acknowledged and forgotten", r.id, key)
				}
			}
		}
		var total int
		for _, r := range c.reps {
			total += len(r.eng.acks)
		}
		if total != n {
			t.Fatalf("%d PubAcks made for %d messages", total, n)
		}
	})
}

// appliedIndex returns the last index the engine applied.
func (e *engine) appliedIndex() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// Followers compact too, through the compaction floor their leader
// proposed when it compacted: before it they keep everything; after it
// every replica's log starts past the floor, and a replica that leads
// next still serves the others (publishes go on, every replica applies
// them).
func TestFollowersCompactThroughTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		defer c.run()()
		p := &publisher{c: c, acked: map[string]uint64{}, proposer: map[uint64]int{}}
		base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		n := 0
		pub := func(k int) {
			for range k {
				n++
				p.publish(fmt.Sprintf("m%03d", n), base+int64(n)*int64(time.Millisecond))
			}
		}
		pub(20)
		l := c.waitLeader(-1)
		f := (l + 1) % 3
		waitApplied := func(r *replica, index uint64) {
			deadline := time.Now().Add(30 * time.Second)
			for r.eng.appliedIndex() < index {
				if time.Now().After(deadline) {
					t.Fatalf("%s applied %d, want %d", r.id, r.eng.appliedIndex(), index)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		waitApplied(c.reps[f], c.reps[l].eng.appliedIndex())
		if to, err := c.reps[f].log.Checkpoint(c.reps[f].eng.appliedIndex()); err != nil || to != 0 {
			t.Fatalf("a follower compacted through %d (%v) before any floor", to, err)
		}
		to, err := c.reps[l].log.Checkpoint(c.reps[l].eng.appliedIndex())
		if err != nil || to == 0 {
			t.Fatalf("leader checkpoint: %d, %v", to, err)
		}
		pub(5) // the floor entry commits with them
		deadline := time.Now().Add(30 * time.Second)
		for c.reps[f].log.Floor() < to {
			if time.Now().After(deadline) {
				t.Fatalf("follower floor %d, want %d", c.reps[f].log.Floor(), to)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The floor entry follows no operation after to: it covers itself
		// (TestIdleFloorCoversItself), so the follower's floor is its index.
		fto, err := c.reps[f].log.Checkpoint(c.reps[f].eng.appliedIndex())
		if err != nil || fto < to || fto != c.reps[f].log.Floor() {
			t.Fatalf("follower compacted through %d (%v), want its floor %d (at least %d)", fto, err, c.reps[f].log.Floor(), to)
		}
		deadline = time.Now().Add(30 * time.Second)
		for {
			st, _ := c.reps[f].node.Status(group)
			if st.FirstIndex > to {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("follower log still starts at %d", st.FirstIndex)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The follower that compacted leads next; the others catch up
		// from it.
		for c.leader() != f {
			if err := c.reps[c.leader()].node.TransferLeader(group, raftnode.ReplicaID(f+1)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		pub(10)
		last := c.reps[f].eng.appliedIndex()
		for _, r := range c.reps {
			waitApplied(r, last)
		}
	})
}

// An idle group's log ends compacted and quiet: the leader's checkpoint
// proposes a floor, every replica takes the floor entry's own index as
// its floor (no operation follows the floor), checkpoints through it and
// drops its whole log, and the leader's next checkpoint proposes nothing.
// Without the rule every checkpoint would propose one more floor entry
// for the next checkpoint to cover, and the last would pin the WAL.
func TestIdleFloorCoversItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		defer c.run()()
		p := &publisher{c: c, acked: map[string]uint64{}, proposer: map[uint64]int{}}
		base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		for n := range 10 {
			p.publish(fmt.Sprintf("m%03d", n), base+int64(n)*int64(time.Millisecond))
		}
		l := c.waitLeader(-1)
		// checkpointAll lets every message arrive and every replica apply
		// what it has, then checkpoints each as streamckpt does (through
		// the last entry applied when no operation follows the last one
		// handed over).
		checkpointAll := func() {
			time.Sleep(time.Second)
			synctest.Wait()
			for _, r := range c.reps {
				if _, err := r.log.Checkpoint(max(r.log.Seen())); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkpointAll() // the leader proposes a floor
		checkpointAll() // every replica applied it and compacts through it
		st, _ := c.reps[l].node.Status(group)
		checkpointAll() // nothing new: no floor proposed
		time.Sleep(time.Second)
		synctest.Wait()
		for i, r := range c.reps {
			rs, _ := r.node.Status(group)
			if rs.LastIndex != st.LastIndex {
				t.Fatalf("replica %d: log ends at %d, was %d: a checkpoint of an idle group proposed an entry", i, rs.LastIndex, st.LastIndex)
			}
			if r.log.Floor() != rs.LastIndex || rs.FirstIndex != rs.LastIndex+1 {
				t.Fatalf("replica %d: floor %d, log %d..%d: want the whole log compacted", i, r.log.Floor(), rs.FirstIndex, rs.LastIndex)
			}
		}
	})
}

// A sealed log takes no stream operation (ErrNotLeader) and its leader
// is not Leader; Barrier's entry applies after every operation proposed
// before the seal, and hands nothing to the engine.
func TestSealAndBarrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		defer c.run()()

		p := &publisher{c: c, acked: map[string]uint64{}, proposer: map[uint64]int{}}
		base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		p.publish("m1", base)
		l := c.waitLeader(-1)
		r := c.reps[l]
		op := &stream.Publish{Entries: []stream.Entry{{Subject: "orders.m2", Data: []byte("m2"), Time: base + 1}}}
		if err := r.log.Propose(op, 1000); err != nil {
			t.Fatal(err)
		}
		r.log.Seal()
		if err := r.log.Propose(op, 1001); !errors.Is(err, raftnode.ErrNotLeader) {
			t.Fatalf("propose on a sealed log: %v", err)
		}
		if r.log.Leader() {
			t.Fatal("a sealed log is Leader")
		}
		b, err := r.log.Barrier()
		if err != nil {
			t.Fatal(err)
		}
		<-b.Done()
		if _, err := b.Result(); err != nil {
			t.Fatal(err)
		}
		_, idx := b.Position()
		if _, _, ok := r.eng.outcome(1000); !ok {
			t.Fatal("the operation proposed before the seal had not applied when the barrier did")
		}
		if data, latest := r.log.Seen(); latest < idx || data >= idx || r.eng.appliedIndex() >= idx {
			t.Fatalf("barrier at %d: seen %d/%d, engine at %d", idx, data, latest, r.eng.appliedIndex())
		}
	})
}

// TestRetainBytes: the entries kept behind a checkpoint for a replica
// that lags are bounded by their bytes as well as their number: the
// compaction reaches the newest checkpoint with RetainBytes applied after
// it (with 128 KiB messages, 16,384 entries were 2 GiB of WAL).
func TestRetainBytes(t *testing.T) {
	var m byteMarks
	const mib = 1 << 20
	for _, tc := range []struct {
		index, bytes, want uint64
	}{
		{100, 10 * mib, 0},    // nothing behind yet
		{200, 50 * mib, 0},    // 40 MiB after the mark at 100
		{300, 90 * mib, 100},  // 80 MiB after the mark at 100
		{400, 140 * mib, 200}, // 90 after 200, 130 after 100: the newest such, 200
		{450, 150 * mib, 200}, // 100 after 200, 60 after 300
		{500, 300 * mib, 450}, // 150 after 450
	} {
		got := m.floor(tc.bytes, 64*mib)
		m.note(tc.index, tc.bytes)
		if got != tc.want {
			t.Errorf("checkpoint at %d with %d MiB: floor %d, want %d", tc.index, tc.bytes/mib, got, tc.want)
		}
	}
	if len(m) > 3 {
		t.Errorf("%d marks kept: %v", len(m), m)
	}
}
