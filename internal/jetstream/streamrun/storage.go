package streamrun

import (
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
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

// Storage is the server's storage accounting, which every stream's
// runtime shares: the limits of memory and file storage
// (max_memory_store, max_file_store), the bytes the streams of each type
// hold, and the disk guard. It is safe for concurrent use.
type Storage struct {
	fs    vfs.FS
	dir   string // the store directory, whose file system the disk guard reads
	now   func() time.Time
	logf  func(format string, args ...any)
	infof func(format string, args ...any)

	used  [2]atomic.Int64 // stored bytes by storage type
	limit [2]atomic.Int64 // by storage type: 0 unlimited, negative none at all, else bytes
	disk  diskGuard
}

// NewStorage returns the accounting of a server whose store directory
// dir is on fs, with no limits set: now is the clock of the disk guard,
// logf and infof its logs.
func NewStorage(fs vfs.FS, dir string, now func() time.Time, logf, infof func(string, ...any)) *Storage {
	return &Storage{fs: fs, dir: dir, now: now, logf: logf, infof: infof}
}

// SetLimit sets the limit of storage type st: 0 for none, a negative
// value for no storage of that type at all, else bytes.
func (s *Storage) SetLimit(st stream.StorageType, v int64) { s.limit[st].Store(v) }

// Limit returns the limit in bytes for storage type st and whether there
// is one (no storage at all is a limit of 0 bytes).
func (s *Storage) Limit(st stream.StorageType) (int64, bool) {
	limit := s.limit[st].Load()
	return max(limit, 0), limit != 0
}

// Used returns the bytes the streams of storage type st hold.
func (s *Storage) Used(st stream.StorageType) int64 { return s.used[st].Load() }

// OverLimit reports whether the streams of storage type st already use
// more than its limit (a publish then gets 10023).
func (s *Storage) OverLimit(st stream.StorageType) bool {
	limit, limited := s.Limit(st)
	return limited && s.used[st].Load() > limit
}

// DiskLow reports whether the store's file system has less than
// diskReserve free, for a message of size bytes about to be stored; it
// reads the free space again once diskCheckEvery has passed or a quarter
// of the reserve has been offered since the last read. An FS that cannot
// tell (vfs.Space) is never low.
func (s *Storage) DiskLow(size int) bool {
	sp, ok := s.fs.(vfs.Space)
	if !ok {
		return false
	}
	g := &s.disk
	now := s.now().UnixNano()
	last := g.checked.Load()
	written := g.written.Add(int64(size))
	due := now-last >= int64(diskCheckEvery) || written >= g.budget.Load()
	if due && g.checked.CompareAndSwap(last, now) {
		g.written.Store(0)
		free, total, err := sp.Space(s.dir)
		g.budget.Store(int64(diskReserve(total) / 4))
		low := err == nil && free < diskReserve(total)
		if low && !g.low.Load() {
			s.logf("jetstream: %d bytes free on the file system of %s, under the %d kept in reserve: publishes to file streams get 10023 insufficient resources", free, s.dir, diskReserve(total))
		} else if !low && g.low.Load() {
			s.infof("jetstream: free space on the file system of %s is back above the reserve (%d bytes free)", s.dir, free)
		}
		g.low.Store(low)
	}
	return g.low.Load()
}

// syncUsage adds the change in the stream's stored bytes since the last
// call to the server's usage (Storage) of its storage type. It runs on the apply
// goroutine.
func (r *Stream) syncUsage() {
	b := int64(storedBytes(r.store))
	r.env.Storage.used[r.storage].Add(b - r.usedBytes)
	r.usedBytes = b
}

// byteCounter is a store that tells its State().Bytes without building
// the rest of the state (the file store's State reads a record for
// FirstTime): syncUsage asks after every batch.
type byteCounter interface {
	StoredBytes() uint64
}

// storedBytes returns State().Bytes of st, cheaply when it can.
func storedBytes(st store.Store) uint64 {
	if bc, ok := st.(byteCounter); ok {
		return bc.StoredBytes()
	}
	return st.State(false).Bytes
}

// releaseUsage removes a stopped stream's bytes from the usage.
func (r *Stream) releaseUsage() {
	r.env.Storage.used[r.storage].Add(-r.usedBytes)
	r.usedBytes = 0
}
