package filestore

import (
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// SyncPolicy says when appended messages are made durable and when
// WaitDurable returns.
type SyncPolicy int

// Sync policies.
const (
	// SyncAlways fsyncs before WaitDurable returns, with group commit: one
	// fsync covers every append written before it. The default.
	SyncAlways SyncPolicy = iota
	// SyncEveryInterval acknowledges before the data is durable: it writes
	// and fsyncs every SyncInterval, and WaitDurable returns at once. A
	// power loss can lose up to an interval of acknowledged messages. It
	// must be chosen explicitly.
	SyncEveryInterval
)

// Defaults of Config.
const (
	DefaultBlockSize = 8 << 20 // bytes per segment before a new one
	// DefaultCacheBytes bounds the chunk cache of a store (each stream
	// has its own). A scan needs one chunk at a time; 4 MiB (64 chunks)
	// serve a few dozen consumers reading at different places. 32 MiB
	// before: at most that much live per stream, doubled by the
	// collector's heap target, for no measured gain (js fetch and js
	// ordered of 200k messages ran as fast with either).
	DefaultCacheBytes = 4 << 20
)

// maxBlockSize keeps record offsets within u32.
const maxBlockSize = 1 << 31

// Config configures a file store. The zero value of every field but Dir
// means its default.
type Config struct {
	// Dir is the store's directory; it is created if missing.
	Dir string
	// FS is the file system; nil means vfs.OS().
	FS vfs.FS
	// BlockSize is the size in bytes after which a new segment file is
	// started (DefaultBlockSize when zero).
	BlockSize int64
	// Sync is the sync policy (SyncAlways when zero).
	Sync SyncPolicy
	// SyncInterval is the interval of SyncEveryInterval; it must be set
	// with that policy and only with it.
	SyncInterval time.Duration
	// CacheBytes bounds the cache of sealed segment bytes used by loads
	// (DefaultCacheBytes when zero; negative disables it).
	CacheBytes int64
	// Logf receives problems: damage found in recovery, fencing, errors;
	// nil discards them.
	Logf func(format string, args ...any)
	// Infof receives the recovery summary of a healthy open; nil sends it
	// to Logf.
	Infof func(format string, args ...any)
	// SyncStats, when not nil, records each group commit: the fsync's
	// latency and the messages and bytes it made durable (for /metrics).
	SyncStats *store.SyncStats
	// RollbackMode keeps the segments a rollback to a position needs
	// until a later position is saved (Store.PositionSaved): the store
	// of a replica of a replicated stream (package comment, "Positions
	// and rollback"; docs/cluster.md, "Checkpoints").
	RollbackMode bool
	// RollbackTo, when not nil, returns the store to this position before
	// recovery: what was written after it is cut and set aside. It needs
	// RollbackMode. A position that does not match the files fails Open
	// with an error wrapping ErrBadPosition.
	RollbackTo *Position
	// DeferSync, with RollbackMode and SyncAlways, writes each batch at
	// once but fsyncs only when asked: a Position (which waits for it),
	// a segment left for a newer one, Close, or deferMaxBatches batches
	// written since the last fsync. WaitDurable and DurableSeq count
	// the messages written, not fsynced: the caller's own log holds them
	// (a replicated stream's Raft WAL, fsynced on a majority before an
	// entry applies here) and returns the store to its last Position
	// saved after a crash (RollbackTo), then applies the rest again
	// (package comment, "Deferred fsync"; docs/cluster.md,
	// "Checkpoints"). Removals return without waiting for the disk.
	DeferSync bool

	// forceS2 (tests only) stores every payload compressed, whatever
	// store.Config.Compress says and whether or not it pays.
	forceS2 bool
	// ckptMax (tests only) replaces ckptCompactMax when above 0.
	ckptMax int64
	// yield (tests only) is called instead of runtime.Gosched where the
	// writer yields to the waiters of its write (writer.yieldToWaiters).
	yield func()
}

// withDefaults returns c with defaults filled in, or an error for an
// impossible combination.
func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		return c, errors.New("filestore: Config.Dir is empty")
	}
	if c.FS == nil {
		c.FS = vfs.OS()
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.BlockSize < SegmentHeaderSize+RecordOverhead || c.BlockSize > maxBlockSize {
		return c, errors.New("filestore: Config.BlockSize out of range")
	}
	if c.ckptMax <= 0 {
		c.ckptMax = ckptCompactMax
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Infof == nil {
		c.Infof = c.Logf
	}
	if c.RollbackTo != nil && !c.RollbackMode {
		return c, errors.New("filestore: Config.RollbackTo needs RollbackMode")
	}
	if c.DeferSync && (!c.RollbackMode || c.Sync != SyncAlways) {
		return c, errors.New("filestore: Config.DeferSync needs RollbackMode and SyncAlways")
	}
	return c, c.checkSync()
}

// checkSync validates the sync policy and its interval.
func (c Config) checkSync() error {
	switch c.Sync {
	case SyncAlways:
		if c.SyncInterval != 0 {
			return errors.New("filestore: SyncInterval is only for SyncEveryInterval")
		}
	case SyncEveryInterval:
		if c.SyncInterval <= 0 {
			return errors.New("filestore: SyncEveryInterval needs a positive SyncInterval")
		}
	default:
		return errors.New("filestore: unknown SyncPolicy")
	}
	return nil
}
