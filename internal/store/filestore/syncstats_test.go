package filestore

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Every group commit is recorded: the fsyncs counted, and together they
// made exactly the appended messages durable.
func TestSyncStatsCountGroupCommits(t *testing.T) {
	cfg := memConfig(vfs.NewCrashFS(), 1<<20)
	cfg.SyncStats = store.NewSyncStats()
	s := mustOpen(t, cfg, store.Config{})
	defer s.Close()
	var last uint64
	for round := range 3 {
		for range 10 * (round + 1) {
			seq, err := s.Append(store.Msg{Subject: "a", Data: []byte("hello"), Time: 1})
			if err != nil {
				t.Fatal(err)
			}
			last = seq
		}
		if err := s.WaitDurable(last); err != nil {
			t.Fatal(err)
		}
	}
	syncs, _, _ := cfg.SyncStats.Latency.Snapshot()
	n, msgs, buckets := cfg.SyncStats.Msgs.Snapshot()
	if syncs < 3 || n != syncs || msgs != 60 {
		t.Fatalf("%d fsyncs recorded, %d batches making %v messages durable; want at least 3 and 60", syncs, n, msgs)
	}
	if buckets[16384] != n {
		t.Fatalf("cumulative buckets %v do not end at the count %d", buckets, n)
	}
	if _, b, _ := cfg.SyncStats.Bytes.Snapshot(); b < 60*5 {
		t.Fatalf("%v bytes written, want at least the payloads", b)
	}
}

// With DeferSync a store fsyncs nothing while messages are appended and
// waited for (WaitDurable returns once they are written, DurableSeq
// counts them), and fsyncs once when a Position is asked: a replicated
// stream's store, whose Raft WAL holds what it applied, paid a second
// fsync per publish on every server before.
func TestDeferSyncFsyncsOnPosition(t *testing.T) {
	cfg := memConfig(vfs.NewCrashFS(), 1<<20)
	cfg.SyncStats = store.NewSyncStats()
	cfg.RollbackMode, cfg.DeferSync = true, true
	s := mustOpen(t, cfg, store.Config{})
	defer s.Close()
	var last uint64
	for range 50 {
		seq, err := s.Append(store.Msg{Subject: "a", Data: []byte("hello"), Time: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitDurable(seq); err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	if got := s.DurableSeq(); got != last {
		t.Fatalf("DurableSeq %d after WaitDurable(%d)", got, last)
	}
	if err := s.Delete(1); err != nil {
		t.Fatal(err)
	}
	if syncs, _, _ := cfg.SyncStats.Latency.Snapshot(); syncs != 0 {
		t.Fatalf("%d fsyncs before a position was asked, want 0", syncs)
	}
	p, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	syncs, _, _ := cfg.SyncStats.Latency.Snapshot()
	if _, msgs, _ := cfg.SyncStats.Msgs.Snapshot(); syncs != 1 || msgs != 50 || p.LastSeq != last {
		t.Fatalf("after Position: %d fsyncs making %v messages durable, position %v; want 1, 50, last sequence %d", syncs, msgs, p, last)
	}
}

// DeferSync needs rollback mode (a position to return to) and the
// default sync policy.
func TestDeferSyncNeedsRollbackMode(t *testing.T) {
	cfg := memConfig(vfs.NewCrashFS(), 1<<20)
	cfg.DeferSync = true
	if s, err := Open(cfg, store.Config{}); err == nil {
		s.Close()
		t.Fatal("DeferSync without RollbackMode opened")
	}
}
