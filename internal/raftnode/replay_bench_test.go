package raftnode

import (
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// BenchmarkWALReplay opens a WAL holding one group's log of n entries of
// 128 bytes written two per record (a busy group's rounds), the work a
// server's start does before anything else of its JetStream cluster
// (docs/cluster.md, "Restarts"):
//
//	go test -run '^$' -bench BenchmarkWALReplay -benchtime 5x ./internal/raftnode/
func BenchmarkWALReplay(b *testing.B) {
	for _, n := range []uint64{25_000, 100_000, 200_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			fs := vfs.NewCrashFS()
			w, err := openWAL(fs, "wal", 1<<30, b.Logf, b.Logf)
			if err != nil {
				b.Fatal(err)
			}
			for i := uint64(1); i <= n; i += 2 {
				walBatch(b, w, 1, i, 2, 100)
			}
			if err := w.sync(); err != nil {
				b.Fatal(err)
			}
			w.close()
			b.ResetTimer()
			for range b.N {
				w, err := openWAL(fs, "wal", 1<<30, func(string, ...any) {}, func(string, ...any) {})
				if err != nil {
					b.Fatal(err)
				}
				if got := lastIndexOf(w, 1); got != n {
					b.Fatalf("recovered through %d, want %d", got, n)
				}
				w.close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
		})
	}
}
