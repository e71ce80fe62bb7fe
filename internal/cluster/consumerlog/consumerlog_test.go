package consumerlog

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Log is the engine's replicated consumer log: a method missing would
// make the consumer treat it as a local log.
var _ consumerrun.ReplicatedLog = (*Log)(nil)

type fakeReplica struct {
	mu      sync.Mutex // for tests that read while raftnode applies (tagsSeen)
	ops     []consumer.Op
	tags    []uint64
	leading []bool
	last    uint64 // the index of the last batch applied
}

func (f *fakeReplica) ApplyBatch(index uint64, ops []consumer.Op, tag uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = index
	for _, op := range ops {
		f.ops = append(f.ops, op)
		f.tags = append(f.tags, tag)
	}
}
func (f *fakeReplica) SetLeading(on bool) {
	f.mu.Lock()
	f.leading = append(f.leading, on)
	f.mu.Unlock()
}

// tagsSeen returns the tags of the operations applied so far.
func (f *fakeReplica) tagsSeen() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.tags...)
}
func (f *fakeReplica) CommittedSnapshot() (uint64, []byte, error) {
	return uint64(len(f.ops)), []byte("{}"), nil
}
func (f *fakeReplica) RestoreCommitted(uint64, []byte) error { return nil }
func (f *fakeReplica) HandOver(transfer func() error) error  { return transfer() }

func entry(t *testing.T, index, term uint64, op consumer.Op, tag uint64) raftnode.Entry {
	t.Helper()
	e := raftnode.Entry{Index: index, Term: term, Tag: tag}
	if op != nil {
		l := New(Config{}, nil)
		if err := l.Propose(op, tag); err != nil {
			t.Fatal(err)
		}
		e.Data = l.batchEntry()
	}
	return e
}

// A replica is told it leads only once the empty entry of its own term
// has applied (it then holds every entry of earlier terms), whichever
// comes first, and that it no longer leads when raft says so; committed
// operations reach the consumer with their tags, empty entries never.
func TestLeadingAfterOwnTermsEmptyEntry(t *testing.T) {
	f := &fakeReplica{}
	sm := New(Config{Group: 7}, f).StateMachine()
	lo := sm.(raftnode.LeaderObserver)
	must := func(es ...raftnode.Entry) {
		t.Helper()
		if err := sm.Apply(es); err != nil {
			t.Fatal(err)
		}
	}
	must(entry(t, 1, 1, nil, 0), entry(t, 2, 1, &consumer.Reset{Stream: 5}, 0))
	lo.LeaderChanged(true, 2)
	must(entry(t, 3, 1, &consumer.Deliver{Stream: 5, Time: 9}, 0))
	if len(f.leading) != 0 {
		t.Fatalf("told it leads before its term's empty entry applied: %v", f.leading)
	}
	must(entry(t, 4, 2, nil, 0), entry(t, 5, 2, &consumer.Ack{Stream: 5, Consumer: 1}, 11))
	lo.LeaderChanged(false, 2)
	// Its next term's empty entry applies before raft reports the
	// leadership (it may, within one round): told at LeaderChanged.
	must(entry(t, 6, 4, nil, 0))
	lo.LeaderChanged(true, 4)
	if want := []bool{true, false, true}; !reflect.DeepEqual(f.leading, want) {
		t.Fatalf("leadership told %v, want %v", f.leading, want)
	}
	if len(f.ops) != 3 || !reflect.DeepEqual(f.tags, []uint64{0, 0, 11}) {
		t.Fatalf("applied %d operations with tags %v", len(f.ops), f.tags)
	}
	// Damage fences the replica.
	if err := sm.Apply([]raftnode.Entry{{Index: 7, Term: 4, Data: []byte{0xff, 1, 2}}}); err == nil {
		t.Fatal("an entry that does not decode applied")
	}
}

// A batch entry holds every operation proposed since the last flush, in
// order, and decodes back to them; malformed entries are refused.
func TestBatchRoundTripAndRefusals(t *testing.T) {
	l := New(Config{}, nil)
	ops := []consumer.Op{&consumer.Reset{Stream: 3}, &consumer.Deliver{Stream: 3, Time: 7}, &consumer.Drop{Seqs: []uint64{1, 2}}, &consumer.Ack{Stream: 3, Consumer: 1}}
	for i, op := range ops {
		if err := l.Propose(op, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	data := l.batchEntry()
	got, err := decodeBatch(data)
	if err != nil || !reflect.DeepEqual(got, ops) || l.key != 4 {
		t.Fatalf("decoded %v (%v), key %d", got, err, l.key)
	}
	bad := [][]byte{nil, {1}, {0}, {0, 0}, {0, 1}, {0, 1, 9, 1}, append(append([]byte(nil), data...), 0), data[:len(data)-1]}
	for _, b := range bad {
		if _, err := decodeBatch(b); err == nil {
			t.Errorf("decoded the malformed batch %v", b)
		}
	}
}

// A checkpoint taken when only entries without data followed the last
// batch (the empty entry of a leader that took over at a shutdown's
// handover) is at the last of them, so a clean restart is handed back
// no entry; one taken with a batch applied after the snapshot's index
// stays at that index.
func TestCheckpointCoversTrailingEmptyEntries(t *testing.T) {
	f := &fakeReplica{}
	l := New(Config{Group: 7}, f)
	sm := l.StateMachine()
	if err := sm.Apply([]raftnode.Entry{entry(t, 1, 1, nil, 0), entry(t, 2, 1, &consumer.Reset{Stream: 5}, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := sm.Apply([]raftnode.Entry{entry(t, 3, 2, nil, 0), entry(t, 4, 3, nil, 0)}); err != nil {
		t.Fatal(err)
	}
	if got := l.reflected(f.last); got != 4 {
		t.Fatalf("a snapshot at %d is saved at %d, want 4 (the empty entries after it)", f.last, got)
	}
	// The cluster layer's checkpoint trigger counts the empty entries
	// too: counted from Applied (2), an idle consumer never checkpointed
	// them, and they kept the WAL's segments (docs/cluster.md, "The WAL").
	if l.Applied() != 2 || l.LastApplied() != 4 {
		t.Fatalf("Applied %d, LastApplied %d: want 2 and 4", l.Applied(), l.LastApplied())
	}
	if err := sm.Apply([]raftnode.Entry{entry(t, 5, 3, &consumer.Deliver{Stream: 5, Time: 9}, 0), entry(t, 6, 3, nil, 0)}); err != nil {
		t.Fatal(err)
	}
	if got := l.reflected(4); got != 4 {
		t.Fatalf("a snapshot at 4 taken before the batch at 5 is saved at %d", got)
	}
	if got := l.reflected(f.last); got != 6 {
		t.Fatalf("a snapshot at 5 is saved at %d, want 6", got)
	}
	if l.Applied() != 5 || l.LastApplied() != 6 {
		t.Fatalf("Applied %d, LastApplied %d: want 5 and 6", l.Applied(), l.LastApplied())
	}
}

// With Config.AwaitSuccessor, a replica that stopped leading reports its
// successor ready only once the cluster layer said it was announced for
// that very loss: an answer about an earlier loss, or the next term's
// first entry applied here, is not enough (docs/cluster.md, "Moving
// the subscriptions").
func TestSuccessorReadyAfterAnnouncement(t *testing.T) {
	f := &fakeReplica{}
	var dones []func()
	l := New(Config{Group: 7, AwaitSuccessor: func(done func()) { dones = append(dones, done) }}, f)
	sm := l.StateMachine()
	lo := sm.(raftnode.LeaderObserver)
	must := func(es ...raftnode.Entry) {
		t.Helper()
		if err := sm.Apply(es); err != nil {
			t.Fatal(err)
		}
	}
	lo.LeaderChanged(true, 1)
	must(entry(t, 1, 1, nil, 0))
	if l.SuccessorReady() || len(dones) != 0 {
		t.Fatal("successor ready, or asked about, while leading")
	}
	lo.LeaderChanged(false, 1)
	must(entry(t, 2, 2, nil, 0)) // the successor's first entry
	if len(dones) != 1 || l.SuccessorReady() {
		t.Fatalf("asked %d times; ready before the announcement: %v", len(dones), l.SuccessorReady())
	}
	lo.LeaderChanged(true, 3)
	must(entry(t, 3, 3, nil, 0))
	lo.LeaderChanged(false, 3)
	dones[0]() // about the first loss: late
	if l.SuccessorReady() {
		t.Fatal("ready on the announcement of an earlier successor")
	}
	dones[1]()
	if !l.SuccessorReady() {
		t.Fatal("not ready once the successor was announced")
	}
}

// group3 is group 7 of three replicas on three nodes over a memory
// network (synctest: its goroutines stop at the end of the test's
// bubble, by t.Cleanup).
type group3 struct {
	t        *testing.T
	net      *raftnode.MemNetwork
	peers    []raftnode.Peer
	nodes    []*raftnode.Node
	logs     []*Log
	replicas []*fakeReplica
}

// newGroup3 starts a group3 whose nodes take cfg (FS, Dir, Server and
// Transport set here).
func newGroup3(t *testing.T, cfg raftnode.Config) *group3 {
	t.Helper()
	g := &group3{t: t, net: raftnode.NewMemNetwork(1, nil)}
	for i := range 3 {
		id := raftnode.ServerID(fmt.Sprintf("s%d", i+1))
		g.peers = append(g.peers, raftnode.Peer{Replica: raftnode.ReplicaID(i + 1), Server: id})
		c := cfg
		c.FS, c.Dir, c.Server, c.Transport = vfs.NewCrashFS(), "wal", id, g.net.Transport(id)
		n, err := raftnode.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		g.net.Attach(id, n)
		g.nodes = append(g.nodes, n)
	}
	for i, n := range g.nodes {
		r := &fakeReplica{}
		l := New(Config{Node: n, Group: 7}, r)
		g.replicas, g.logs = append(g.replicas, r), append(g.logs, l)
		gc := raftnode.GroupConfig{ID: 7, Replica: raftnode.ReplicaID(i + 1), Incarnation: n.Incarnation(), Peers: g.peers}
		if err := n.AddGroup(gc, l.StateMachine()); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range g.nodes {
		n.Start()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { g.net.Run(stop) })
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		for _, n := range g.nodes {
			_ = n.Close()
		}
	})
	return g
}

// leaderAmong waits (a minute of the bubble's time at most) until one of
// the replicas given leads, and returns it.
func (g *group3) leaderAmong(among ...int) int {
	g.t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		for _, i := range among {
			if g.logs[i].Leader() {
				return i
			}
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("no leader among %v", among)
		}
	}
}

// server returns replica i's server.
func (g *group3) server(i int) raftnode.ServerID { return g.peers[i].Server }

// A batch raft drops after Flush returned (its leader holds more than
// MaxUncommittedBytes it cannot commit: cut off from its followers) is
// reported by Dropped, once; a batch that entered the log is not, and
// after Discard Dropped reports nothing flushed before it, while
// Outstanding still counts the batch that may commit.
func TestDroppedAfterFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup3(t, raftnode.Config{MaxUncommittedBytes: 256})
		net, peers := g.net, g.peers
		leader := g.leaderAmong(0, 1, 2)
		logs := g.logs
		l := logs[leader]
		flush := func(op consumer.Op, key uint64) {
			t.Helper()
			if err := l.Propose(op, key); err != nil {
				t.Fatal(err)
			}
			if pending, err := l.Flush(); pending || err != nil {
				t.Fatalf("flush: pending %v, %v", pending, err)
			}
			synctest.Wait() // the group's round took it
		}
		flush(&consumer.Deliver{Stream: 1, Time: 1}, 1)
		if l.Dropped() {
			t.Fatal("a batch raft took reported dropped")
		}
		for i, p := range peers {
			if i != leader {
				net.Partition(peers[leader].Server, p.Server)
			}
		}
		flush(&consumer.Deliver{Stream: 2, Time: 2}, 2) // enters the log, uncommitted
		if l.Dropped() {
			t.Fatal("a batch that entered the log reported dropped")
		}
		seqs := make([]uint64, 100)
		for i := range seqs {
			seqs[i] = 1<<40 + uint64(i) // 6 bytes each
		}
		flush(&consumer.Drop{Seqs: seqs}, 3) // beyond MaxUncommittedBytes
		if !l.Dropped() {
			t.Fatal("a batch raft dropped not reported")
		}
		if l.Dropped() || len(l.flushed) != 1 {
			t.Fatalf("a dropped batch reported twice, or forgotten with the one before it (%d kept)", len(l.flushed))
		}
		flush(&consumer.Drop{Seqs: seqs}, 4)
		l.Discard()
		if l.Dropped() {
			t.Fatal("a batch dropped in an earlier leadership reported after Discard")
		}
		if got := l.Outstanding(); got != 2 || len(l.flushed) != 1 {
			t.Fatalf("after Discard: Outstanding %d with %d proposals kept; want the batch in the log (2) alone", got, len(l.flushed))
		}
	})
}

// A deposed leader's batch that the next leader committed applies on it
// with its tag, and one whose index the next leader's entries took
// applies without; either way Outstanding stops counting it once its
// proposal resolved (raftnode kept.go). The consumer confirms the double
// acks of the first and drops those of the second
// (consumerrun.ReplicatedLog.Outstanding).
func TestDeposedBatchTagsAndOutstanding(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { deposedBatch(t, committed) })
		})
	}
}

// deposedBatch strands a batch on the leader of a group3, in the log of
// one follower too (committed) or of none, has the followers elect one of
// them, and heals the network.
func deposedBatch(t *testing.T, committed bool) {
	g := newGroup3(t, raftnode.Config{})
	old := g.leaderAmong(0, 1, 2)
	a, b := (old+1)%3, (old+2)%3
	l := g.logs[old]
	if err := l.Propose(&consumer.Ack{Stream: 1, Consumer: 1}, 5); err != nil {
		t.Fatal(err)
	}
	if committed {
		g.net.Cut(g.server(a), g.server(old)) // a holds the batch; the leader cannot know
	} else {
		g.net.Partition(g.server(old), g.server(a))
	}
	g.net.Partition(g.server(old), g.server(b))
	if pending, err := l.Flush(); pending || err != nil {
		t.Fatalf("flush: pending %v, %v", pending, err)
	}
	synctest.Wait()
	g.net.Partition(g.server(old), g.server(a))
	next := g.leaderAmong(a, b)
	if committed && next != a {
		t.Fatalf("replica %d elected, want %d, which holds the batch", next, a)
	}
	if !committed {
		nl := g.logs[next] // its entry takes the stranded batch's index
		if err := nl.Propose(&consumer.Ack{Stream: 2, Consumer: 2}, 9); err != nil {
			t.Fatal(err)
		}
		if _, err := nl.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Outstanding(); got != 5 {
		t.Fatalf("the cut-off leader's Outstanding is %d, want the stranded batch's 5", got)
	}
	g.net.HealAll()
	for deadline := time.Now().Add(time.Minute); l.Outstanding() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the deposed leader's batch still outstanding a minute after the heal")
		}
	}
	tags := g.replicas[old].tagsSeen()
	seen5 := slices.Contains(tags, 5)
	if seen5 != committed {
		t.Fatalf("the old leader applied tags %v: batch 5 with its tag %v, want %v", tags, seen5, committed)
	}
	if l.Leader() {
		t.Fatal("the old leader leads again")
	}
}

// HandedOver says how the last leadership came: handed over by the
// predecessor (raft's transfer) or won after it went silent; the
// consumer's new leader ends the pull requests it saw only in the second
// case (consumerrun, endShadowPulls).
func TestHandedOverFollowsSuccession(t *testing.T) {
	l := New(Config{Group: 7}, &fakeReplica{})
	sm := l.StateMachine()
	lo, so := sm.(raftnode.LeaderObserver), sm.(raftnode.SuccessionObserver)
	if l.HandedOver() {
		t.Fatal("handed over before it led")
	}
	so.Succeeded(2, true)
	lo.LeaderChanged(true, 2)
	if !l.HandedOver() {
		t.Fatal("term 2, handed over: HandedOver false")
	}
	lo.LeaderChanged(false, 2)
	so.Succeeded(5, false)
	lo.LeaderChanged(true, 5)
	if l.HandedOver() {
		t.Fatal("term 5, elected: HandedOver true")
	}
}

// RecordsPulls: only when every other replica's server announced a
// feature level that decodes PullRequest operations.
func TestRecordsPullsFollowsPeersLevel(t *testing.T) {
	level := 0
	l := New(Config{PeersLevel: func() int { return level }}, nil)
	if l.RecordsPulls() {
		t.Fatal("records pull requests with a peer of level 0")
	}
	level = PullRequestLevel
	if !l.RecordsPulls() {
		t.Fatalf("records none with every peer at level %d", level)
	}
	if !New(Config{}, nil).RecordsPulls() {
		t.Fatal("records none without PeersLevel")
	}
}
