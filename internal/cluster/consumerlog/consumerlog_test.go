package consumerlog

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

type fakeReplica struct {
	ops     []consumer.Op
	tags    []uint64
	leading []bool
	last    uint64 // the index of the last batch applied
}

func (f *fakeReplica) ApplyBatch(index uint64, ops []consumer.Op, tag uint64) {
	f.last = index
	for _, op := range ops {
		f.ops = append(f.ops, op)
		f.tags = append(f.tags, tag)
	}
}
func (f *fakeReplica) SetLeading(on bool) { f.leading = append(f.leading, on) }
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

// A batch raft drops after Flush returned (its leader holds more than
// MaxUncommittedBytes it cannot commit: cut off from its followers) is
// reported by Dropped, once; a batch that entered the log is not, and
// Discard forgets what was flushed before it.
func TestDroppedAfterFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := raftnode.NewMemNetwork(1, nil)
		var peers []raftnode.Peer
		var nodes []*raftnode.Node
		var logs []*Log
		for i := range 3 {
			id := raftnode.ServerID(fmt.Sprintf("s%d", i+1))
			peers = append(peers, raftnode.Peer{Replica: raftnode.ReplicaID(i + 1), Server: id})
			n, err := raftnode.Open(raftnode.Config{FS: vfs.NewCrashFS(), Dir: "wal", Server: id, Transport: net.Transport(id), MaxUncommittedBytes: 256})
			if err != nil {
				t.Fatal(err)
			}
			net.Attach(id, n)
			nodes = append(nodes, n)
		}
		for i, n := range nodes {
			l := New(Config{Node: n, Group: 7}, &fakeReplica{})
			logs = append(logs, l)
			gc := raftnode.GroupConfig{ID: 7, Replica: raftnode.ReplicaID(i + 1), Incarnation: n.Incarnation(), Peers: peers}
			if err := n.AddGroup(gc, l.StateMachine()); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range nodes {
			n.Start()
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { net.Run(stop) })
		defer func() {
			close(stop)
			wg.Wait()
			for _, n := range nodes {
				_ = n.Close()
			}
		}()
		leader := -1
		for deadline := time.Now().Add(time.Minute); leader < 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no leader")
			}
			for i, l := range logs {
				if l.Leader() {
					leader = i
				}
			}
		}
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
		if l.Dropped() || len(l.flushed) != 0 {
			t.Fatalf("Discard kept %d proposals", len(l.flushed))
		}
	})
}
