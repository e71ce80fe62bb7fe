package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Config configures a Log.
type Config struct {
	// Node is this server's raftnode; the meta group is MetaGroup on it.
	Node *raftnode.Node
	// FS and Dir hold the checkpoint file (Dir/meta.snap). Without FS the
	// state lives in memory only (tests): nothing is loaded, Checkpoint
	// fails, and Restore is not durable.
	FS  vfs.FS
	Dir string
	// OnApply, if set, is called with every applied operation, in log
	// order, and after a snapshot replaced the state. It runs on the
	// raftnode worker that applies the meta group (never two at a time),
	// after the state changed and outside the state's lock, so it may
	// call View. It must not block or wait for the meta group: it hands
	// the event to the cluster layer's own goroutine.
	OnApply func(Event)
	// Now is the clock of the checkpoints' timing (Stats: when the last
	// was written, how long it took); nil: none (zero times). Apply
	// reads no clock.
	Now func() time.Time
}

// Event is one change of the state, as OnApply sees it.
type Event struct {
	// Index is the raft index of the entry (or of the snapshot).
	Index uint64
	// Op and Result are the applied operation and its outcome; nil and
	// zero when Restored.
	Op     Op
	Result Result
	// Restored: the whole state was replaced by a snapshot taken at Index
	// (this server was behind the leader's compacted log). The watcher
	// reconciles what it runs with View's state; no per-operation events
	// come for what the snapshot covers.
	Restored bool
}

// ErrNoCheckpoint is returned by Checkpoint when the Log has no FS.
var ErrNoCheckpoint = errors.New("meta: no checkpoint directory")

// Log is this server's replica of the meta group: the State, the
// proposer's side (Propose) and the raftnode side (StateMachine). Its
// methods are safe for concurrent use.
type Log struct {
	cfg Config

	mu      sync.RWMutex // guards st, applied, appliedBytes and ckpt
	st      *State
	applied uint64 // the index of the last entry applied (or snapshot restored)
	// appliedBytes counts the bytes of the entries applied since Open.
	appliedBytes uint64
	// ckpt is the last checkpoint file written (Checkpoint, Restore), or
	// the one Open read: the index it holds, appliedBytes as of it, when
	// its writing started and how long it took (zero for Open's).
	ckpt ckptMark

	fileMu  sync.Mutex // serialises checkpoint writes; guards durable
	durable uint64     // the index the checkpoint file holds (as of Open or the last write)
}

// ckptMark is a checkpoint file written or read (Log.ckpt).
type ckptMark struct {
	index, bytes uint64
	at           time.Time
	took         time.Duration
}

// Open returns the meta log, with the state of the checkpoint file if
// there is one (so StateMachine.Applied reports its index, and raftnode
// applies only the entries after it). Errors: a checkpoint file that is
// damaged (wrapping ErrBadSnapshot: the server must not join the meta
// group with a state it cannot trust; docs/cluster.md decision 12),
// and file-system errors.
func Open(cfg Config) (*Log, error) {
	l := &Log{cfg: cfg, st: NewState()}
	if cfg.FS == nil {
		return l, nil
	}
	st, index, err := readCheckpoint(cfg.FS, cfg.Dir)
	if err != nil {
		return nil, err
	}
	if st != nil {
		l.st, l.applied, l.durable = st, index, index
		l.ckpt.index = index
	}
	return l, nil
}

// Propose encodes op and proposes it to the meta group on this server
// (the meta leader). The Waiter resolves when the entry applies here,
// with its Result. Errors, all before anything entered the log: ErrBadOp
// (an invalid operation, a bug of the proposer), and raftnode's
// ErrUnknownGroup, ErrStopped, ErrFenced, ErrBusy. Being a follower is
// reported through the Waiter (raftnode.ErrNotLeader).
func (l *Log) Propose(op Op) (*Waiter, error) {
	data, err := AppendOp(nil, op)
	if err != nil {
		return nil, err
	}
	p, err := l.cfg.Node.Propose(MetaGroup, data)
	if err != nil {
		return nil, err
	}
	return &Waiter{p: p}, nil
}

// Waiter is the proposer's handle on one proposed operation
// (docs/cluster.md decision 7). It resolves once, on the server that
// proposed, and only for the exact entry it proposed: no other server
// answers for it.
type Waiter struct{ p *raftnode.Proposal }

// Done is closed when the waiter has resolved.
func (w *Waiter) Done() <-chan struct{} { return w.p.Done() }

// Result returns the outcome once Done is closed: the operation's Result
// (whose Err is the answer to the client when set), or an error from
// raftnode: ErrNotLeader, ErrDropped or ErrFenced (the operation never
// entered the log: retry on the leader, or answer 10008), ErrNoReply
// (leadership was lost after it entered the log: it may still apply, so
// say nothing; a retry of a create is idempotent and finds it). Before
// Done it returns a zero Result and nil.
func (w *Waiter) Result() (Result, error) {
	v, err := w.p.Result()
	if err != nil || v == nil {
		return Result{}, err
	}
	r, ok := v.(Result)
	if !ok {
		return Result{}, fmt.Errorf("meta: outcome of type %T", v)
	}
	return r, nil
}

// Wait blocks until the waiter resolves (Result) or ctx ends (ctx.Err();
// the operation may still apply later).
func (w *Waiter) Wait(ctx context.Context) (Result, error) {
	select {
	case <-w.p.Done():
		return w.Result()
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// View calls fn with the state under the read lock. fn must not keep the
// state or call other methods of the Log; what the State's queries return
// are copies and may be kept.
func (l *Log) View(fn func(*State)) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	fn(l.st)
}

// Applied returns the index of the last entry applied, or of the snapshot
// restored.
func (l *Log) Applied() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.applied
}

// Checkpoint writes the state to the checkpoint file durably, then lets
// the WAL drop the meta group's entries up to its index
// (raftnode.Node.Compact). Nothing is written if the file already holds
// that index. Errors: ErrNoCheckpoint, file-system errors (the file is
// then the previous one), and raftnode's (ErrStopped, ErrFenced).
func (l *Log) Checkpoint() error {
	if l.cfg.FS == nil {
		return ErrNoCheckpoint
	}
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	start := l.now()
	l.mu.RLock()
	index, bytes, snap := l.applied, l.appliedBytes, l.st.AppendSnapshot(nil)
	l.mu.RUnlock()
	if index <= l.durable {
		return nil
	}
	if err := writeCheckpoint(l.cfg.FS, l.cfg.Dir, index, snap); err != nil {
		return err
	}
	l.durable = index
	err := l.cfg.Node.Compact(MetaGroup, index)
	l.noteCheckpoint(ckptMark{index: index, bytes: bytes, at: start, took: l.now().Sub(start)})
	return err
}

// now reads Config.Now; without one, the zero time (Stats then shows
// no time).
func (l *Log) now() time.Time {
	if l.cfg.Now != nil {
		return l.cfg.Now()
	}
	return time.Time{}
}

// noteCheckpoint records m as the last checkpoint written (Stats).
func (l *Log) noteCheckpoint(m ckptMark) {
	l.mu.Lock()
	l.ckpt = m
	l.mu.Unlock()
}

// CheckpointStats is what a restart of this server would apply again of
// the meta group, and its last checkpoint (/jsz meta_cluster.snapshot,
// as nats-server v2.15.2's MetaSnapshotStats; docs/monitoring.md,
// "Replicas and the meta group").
type CheckpointStats struct {
	// PendingEntries are the entries applied since the checkpoint file's
	// index (raft's own entries among them), PendingBytes the bytes of
	// the operations among them: what a restart would apply again from
	// the WAL. Entries committed but not applied yet are not counted.
	PendingEntries, PendingBytes uint64
	// LastTime is when this process last started writing the checkpoint
	// file (Checkpoint, every 30 s while the state changed, or a
	// snapshot from the leader installed), LastDuration how long that
	// took (encoding, the file's fsync and rename, the WAL's
	// compaction); zero before its first since the start.
	LastTime     time.Time
	LastDuration time.Duration
}

// Stats returns the checkpoint statistics as of now.
func (l *Log) Stats() CheckpointStats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return CheckpointStats{
		PendingEntries: l.applied - min(l.ckpt.index, l.applied),
		PendingBytes:   l.appliedBytes - min(l.ckpt.bytes, l.appliedBytes),
		LastTime:       l.ckpt.at,
		LastDuration:   l.ckpt.took,
	}
}

// StateMachine returns the meta group's state machine, to give to
// raftnode.Node.AddGroup with GroupID MetaGroup.
func (l *Log) StateMachine() raftnode.StateMachine { return stateMachine{l} }

// stateMachine is the raftnode side of a Log, run by the worker that runs
// the meta group.
type stateMachine struct{ l *Log }

// Apply decodes and applies entries in order; each one's Result goes to
// the proposer's Waiter (raftnode hands it over on the proposing server
// only) and to OnApply. An entry that does not decode, or an index not
// after the last applied one, is damage: the error fences this replica
// (docs/cluster.md decision 12).
func (s stateMachine) Apply(entries []raftnode.Entry) error {
	l := s.l
	for i := range entries {
		e := &entries[i]
		var op Op
		if len(e.Data) > 0 {
			var err error
			if op, err = DecodeOp(e.Data); err != nil {
				return fmt.Errorf("meta: entry %d (term %d): %w", e.Index, e.Term, err)
			}
		}
		l.mu.Lock()
		if e.Index <= l.applied {
			last := l.applied
			l.mu.Unlock()
			return fmt.Errorf("meta: entry %d applied after %d", e.Index, last)
		}
		l.applied = e.Index
		l.appliedBytes += uint64(len(e.Data))
		var res Result
		if op != nil {
			res = l.st.Apply(op)
			e.Result = res
		}
		l.mu.Unlock()
		if op != nil && l.cfg.OnApply != nil {
			l.cfg.OnApply(Event{Index: e.Index, Op: op, Result: res})
		}
	}
	return nil
}

// Applied returns the index the checkpoint file held at Open (0 without
// one): raftnode applies the entries after it.
func (s stateMachine) Applied() uint64 {
	s.l.fileMu.Lock()
	defer s.l.fileMu.Unlock()
	return s.l.durable
}

// Snapshot returns the whole state (AppendSnapshot) as of the last
// applied entry.
func (s stateMachine) Snapshot() ([]byte, error) {
	s.l.mu.RLock()
	defer s.l.mu.RUnlock()
	return s.l.st.AppendSnapshot(nil), nil
}

// Restore replaces the state with a snapshot taken at index, durably
// (the checkpoint file) before returning, and tells OnApply. Errors (they
// fence the replica): a snapshot that does not decode (ErrBadSnapshot),
// file-system errors.
func (s stateMachine) Restore(index uint64, data []byte) error {
	l := s.l
	st, err := DecodeSnapshot(data)
	if err != nil {
		return err
	}
	l.fileMu.Lock()
	start := l.now()
	if l.cfg.FS != nil {
		if err := writeCheckpoint(l.cfg.FS, l.cfg.Dir, index, data); err != nil {
			l.fileMu.Unlock()
			return err
		}
	}
	l.durable = index
	l.mu.Lock()
	l.st, l.applied = st, index
	if l.cfg.FS != nil {
		l.ckpt = ckptMark{index: index, bytes: l.appliedBytes, at: start, took: l.now().Sub(start)}
	} else {
		l.ckpt = ckptMark{index: index, bytes: l.appliedBytes}
	}
	l.mu.Unlock()
	l.fileMu.Unlock()
	if l.cfg.OnApply != nil {
		l.cfg.OnApply(Event{Index: index, Restored: true})
	}
	return nil
}
