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

// Usage is the server's storage accounting, shared by the engines of
// all its accounts (one engine per account) and by every stream's
// runtime: the bytes stored, the limits (max_memory_store,
// max_file_store) and the bytes reserved by the streams' max_bytes, by
// storage type. Its fields are atomics: safe for concurrent use. Make
// one with NewUsage.
type Usage struct {
	used     [2]atomic.Int64 // stored bytes by storage type, every account
	limit    [2]atomic.Int64 // by storage type: 0 unlimited, negative none at all, else bytes
	reserved [2]atomic.Int64 // the max_bytes of every account's streams
}

// NewUsage returns an empty Usage: nothing stored or reserved, no limit.
func NewUsage() *Usage { return &Usage{} }

// Reserved returns the bytes every account's streams of storage type st
// reserve (max_bytes).
func (u *Usage) Reserved(st stream.StorageType) int64 { return u.reserved[st].Load() }

// AddReserved adds delta (negative to release) to the reservations of
// storage type st.
func (u *Usage) AddReserved(st stream.StorageType, delta int64) { u.reserved[st].Add(delta) }

// Storage is one account's view of the server's storage accounting,
// which every stream's runtime of the account shares: the server's
// limits and usage (Usage, shared with the other accounts), the
// account's own usage and limits (nats-server's account jetstream
// block), and the disk guard. It is safe for concurrent use.
type Storage struct {
	fs    vfs.FS
	dir   string // the store directory, whose file system the disk guard reads
	now   func() time.Time
	logf  func(format string, args ...any)
	infof func(format string, args ...any)

	server  *Usage
	used    [2]atomic.Int64 // this account's stored bytes by storage type
	account [2]atomic.Int64 // this account's limits by storage type: negative for none, else bytes
	// others and copies are what this account's streams hold on the
	// cluster's other servers, by storage type (AccountClusterUsed):
	// others as their last reports say (SetOthers); copies as this
	// server's replicas of replicated streams imply, each one's bytes
	// times its other replicas (syncUsage). Both 0 on one server.
	others [2]atomic.Int64
	copies [2]atomic.Int64
	disk   diskGuard
}

// NewStorage returns the accounting of an account whose store directory
// dir is on fs, within the server's usage server (shared by the
// accounts), with no account limits: now is the clock of the disk
// guard, logf and infof its logs.
func NewStorage(fs vfs.FS, dir string, server *Usage, now func() time.Time, logf, infof func(string, ...any)) *Storage {
	s := &Storage{fs: fs, dir: dir, server: server, now: now, logf: logf, infof: infof}
	s.account[stream.MemoryStorage].Store(-1)
	s.account[stream.FileStorage].Store(-1)
	return s
}

// Server returns the server's usage, which the accounts share.
func (s *Storage) Server() *Usage { return s.server }

// SetLimit sets the server's limit of storage type st: 0 for none, a
// negative value for no storage of that type at all, else bytes.
func (s *Storage) SetLimit(st stream.StorageType, v int64) { s.server.limit[st].Store(v) }

// Limit returns the server's limit in bytes for storage type st and
// whether there is one (no storage at all is a limit of 0 bytes).
func (s *Storage) Limit(st stream.StorageType) (int64, bool) {
	limit := s.server.limit[st].Load()
	return max(limit, 0), limit != 0
}

// Used returns the bytes the streams of storage type st hold, on the
// whole server (every account).
func (s *Storage) Used(st stream.StorageType) int64 { return s.server.used[st].Load() }

// AccountUsed returns the bytes this account's streams of storage type
// st hold.
func (s *Storage) AccountUsed(st stream.StorageType) int64 { return s.used[st].Load() }

// OverLimit reports whether the streams of storage type st, on the
// whole server, already use more than its limit (a publish then gets
// 10023).
func (s *Storage) OverLimit(st stream.StorageType) bool {
	limit, limited := s.Limit(st)
	return limited && s.server.used[st].Load() > limit
}

// SetAccountLimit sets the account's limit of storage type st
// (max_memory or max_store of its jetstream block): negative for none,
// else bytes (0: no storage of that type).
func (s *Storage) SetAccountLimit(st stream.StorageType, v int64) { s.account[st].Store(v) }

// SetOthers sets what this account's streams of storage type st hold on
// the cluster's other servers, the sum of their last reports
// (internal/cluster/usage).
func (s *Storage) SetOthers(st stream.StorageType, v int64) { s.others[st].Store(v) }

// AccountClusterUsed returns the bytes this account's streams of
// storage type st hold over the whole cluster, every replica counted, as
// a publish is checked with: this server's bytes, plus the larger of
// what the other servers last reported (SetOthers) and what this
// server's replicas of replicated streams imply the other replicas hold
// (each one's bytes times its other replicas). The reports are sent at
// most every 250 ms, so the leader of a stream filling fast would
// otherwise count its followers' copies late (nats-server v2.15.2 counts
// the reports alone: an R3 stream published to without pause took 190
// messages of 10 KB in an account of 2 MiB, 69 with 20 ms between
// them); its own replica's bytes tell it what they will hold. On one
// server it is the account's bytes.
func (s *Storage) AccountClusterUsed(st stream.StorageType) int64 {
	return s.used[st].Load() + max(s.others[st].Load(), s.copies[st].Load())
}

// OverAccountLimit reports whether the account's streams of storage
// type st already use more than the account allows, over the whole
// cluster (AccountClusterUsed): a publish then gets 10002, as nats-server
// v2.15.2's wouldExceedLimits refuses it.
func (s *Storage) OverAccountLimit(st stream.StorageType) bool {
	limit := s.account[st].Load()
	return limit >= 0 && s.AccountClusterUsed(st) > limit
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
// call to the account's and the server's usage (Storage) of its storage
// type, and, for a replicated stream, the change in what its other
// replicas hold by this one's measure (its bytes times copyFactor) to
// the account's copies. It runs on the apply goroutine.
func (r *Stream) syncUsage() {
	b := int64(storedBytes(r.store))
	if b != r.usedBytes {
		r.env.Storage.used[r.storage].Add(b - r.usedBytes)
		r.env.Storage.server.used[r.storage].Add(b - r.usedBytes)
		r.usedBytes = b
	}
	if c := b * r.copyFactor; c != r.copyBytes {
		r.env.Storage.copies[r.storage].Add(c - r.copyBytes)
		r.copyBytes = c
	}
}

// setCopyFactor sets, from cfg, how many other replicas hold a copy of
// this one: its num_replicas less one for a replicated stream, else 0
// (a clustered stream of one replica, or one on a single server). Apply
// goroutine, or before it runs.
func (r *Stream) setCopyFactor(cfg *stream.Config) {
	r.copyFactor = 0
	if r.Replicated() && cfg.Replicas > 1 {
		r.copyFactor = int64(cfg.Replicas - 1)
	}
}

// byteCounter is a store that tells its State().Bytes without building
// the rest of the state (the file store's State reads a record for
// FirstTime): syncUsage asks after every batch.
type byteCounter interface {
	StoredBytes() uint64
}

// StoredBytes returns State().Bytes of st, cheaply when it can: what the
// store counts against the storage limits.
func StoredBytes(st store.Store) uint64 { return storedBytes(st) }

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
	r.env.Storage.server.used[r.storage].Add(-r.usedBytes)
	r.env.Storage.copies[r.storage].Add(-r.copyBytes)
	r.usedBytes, r.copyBytes = 0, 0
}
