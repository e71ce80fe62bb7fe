package raftnode

import (
	"math/rand/v2"
	"path"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// A record larger than largeRecord is written as its header and its body
// (writeRecord), past the zeros written ahead without zeros under it: it
// replays after an fsync, with a small record after it, in place and
// appending; unsynced, a crash tears it in any way and the replay cuts it
// as a torn tail, keeping what was fsynced before it.
func TestWALLargeRecord(t *testing.T) {
	for _, inPlace := range []bool{true, false} {
		open := func(fs vfs.FS) *wal {
			if !inPlace {
				fs = plainWALFS{fs}
			}
			return mustOpenWAL(t, fs, 64<<20)
		}
		fs := vfs.NewCrashFS()
		w := open(fs)
		walBatch(t, w, 1, 1, 2, 100)
		walBatch(t, w, 1, 3, 1, 3<<20) // passes the zeros ahead by more than a chunk
		walBatch(t, w, 1, 4, 1, 100)
		if err := w.sync(); err != nil {
			t.Fatal(err)
		}
		if inPlace {
			onDisk, _, _ := fs.Stat(path.Join("wal", segName(1)))
			if onDisk != w.end || onDisk > w.size+int64(w.chunk()) {
				t.Fatalf("segment of %d bytes for %d bytes of records: zeros written under the large record", onDisk, w.size)
			}
		}
		w.close()
		w = open(fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}))
		if w.damage != nil || w.torn != 0 || lastIndexOf(w, 1) != 4 {
			t.Fatalf("in place %v: damage %v, torn %d, last index %d", inPlace, w.damage, w.torn, lastIndexOf(w, 1))
		}
		for seed := range uint64(20) {
			walBatch(t, w, 1, 5, 1, 3<<20) // unsynced
			after := fs.Crash(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, 3)), Tail: vfs.TailAny})
			w2 := open(after)
			if got := lastIndexOf(w2, 1); w2.damage != nil || (got != 4 && got != 5) {
				t.Fatalf("in place %v, seed %d: damage %v, recovered through %d", inPlace, seed, w2.damage, got)
			}
			w2.close()
			w.close()
			w = open(fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}))
		}
	}
}
