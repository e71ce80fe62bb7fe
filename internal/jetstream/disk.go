package jetstream

import (
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/vfs"
)

// The disk guard refuses publishes to file streams with 10023
// "insufficient resources" while the file system holding the store has
// less than diskReserve left, so that a filling disk stops publishes
// cleanly before a write fails. A write that fails (ENOSPC) fences the
// stream's store until the server restarts (store package comment, rule
// 4), and a purge needs room for its records. nats-server v2.15.2 counts
// on its max_file_store default, sized from the free disk space at its
// start (cairn sizes it the same way, limits.go), but other programs may
// fill the disk after that; so cairn looks at the free space itself, at most
// every diskCheckEvery and again whenever the streams have appended a
// quarter of the reserve since the last look (fast publishers fill a
// small disk's reserve well within diskCheckEvery), from each stream's
// apply goroutine.

// diskCheckEvery is how often the free space is read at most.
const diskCheckEvery = 100 * time.Millisecond

// diskReserveMax bounds the reserve: 64 MiB is more than a stream writes
// in diskCheckEvery at the speeds measured (docs/benchmarks.md).
const diskReserveMax = 64 << 20

// diskReserve returns the free bytes kept back on a file system of total
// bytes: a tenth of it, at most diskReserveMax.
func diskReserve(total uint64) uint64 { return min(total/10, diskReserveMax) }

// diskGuard caches whether the store's file system is short of space.
// Safe for concurrent use.
type diskGuard struct {
	checked atomic.Int64 // unix nanoseconds of the last read; 0 = never
	low     atomic.Bool
	written atomic.Int64 // bytes offered to file streams since the last read
	budget  atomic.Int64 // a quarter of the reserve at the last read: bytes allowed before the next
}

// diskLow reports whether the store's file system has less than
// diskReserve free, for a message of size bytes about to be stored; it
// reads the free space again once diskCheckEvery has passed or a quarter
// of the reserve has been offered since the last read. An FS that cannot
// tell (vfs.Space) is never low.
func (js *JetStream) diskLow(size int) bool {
	sp, ok := js.cfg.FS.(vfs.Space)
	if !ok {
		return false
	}
	g := &js.disk
	now := js.now().UnixNano()
	last := g.checked.Load()
	written := g.written.Add(int64(size))
	due := now-last >= int64(diskCheckEvery) || written >= g.budget.Load()
	if due && g.checked.CompareAndSwap(last, now) {
		g.written.Store(0)
		free, total, err := sp.Space(js.cfg.StoreDir)
		g.budget.Store(int64(diskReserve(total) / 4))
		low := err == nil && free < diskReserve(total)
		if low && !g.low.Load() {
			js.logf("jetstream: %d bytes free on the file system of %s, under the %d kept in reserve: publishes to file streams get 10023 insufficient resources", free, js.cfg.StoreDir, diskReserve(total))
		} else if !low && g.low.Load() {
			js.cfg.Infof("jetstream: free space on the file system of %s is back above the reserve (%d bytes free)", js.cfg.StoreDir, free)
		}
		g.low.Store(low)
	}
	return g.low.Load()
}
