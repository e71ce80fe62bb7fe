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
