// Package consumerlog is the Raft-backed log of one replicated consumer:
// it implements the engine's consumer log (streamrun.Log[consumer.Op],
// consumerrun.ReplicatedLog) over one group of an internal/raftnode Node
// (docs/clustering.md, "Replicated consumers"). The cluster layer
// (internal/cluster/jscluster) makes one Log per replica of a consumer
// whose num_replicas is above one and hands it to the engine.
//
// # Entry format
//
// A group's log entry is exactly one consumer operation as the engine
// encodes it (consumer.AppendOp: kind byte, version byte, fields; drawn
// in docs/engine.md "Encoding"); raftnode frames it in its WAL record
// with the record's CRC:
//
//	raft entry data:  | kind (1) | version (1) | fields ... |   = consumer.AppendOp(op)
//
// Entries raft makes itself have no data: they are not handed to the
// consumer, but a new leader's own empty entry tells this package that
// the leader has applied every entry of earlier terms, so that the
// consumer may start to deliver (Replica.SetLeading).
//
// # Snapshots, checkpoints and restarts
//
// A snapshot is the consumer's committed state at an index, as the
// consumer encodes it (consumerrun's committedSnapshot: the stored
// delivery state, pause and dead-letter switch, JSON). Checkpoint saves
// one durably (Config.Save: the cluster layer writes it as a metafile,
// JSON with its CRC-32C, replaced atomically) and then lets the group
// drop its entries through that index (raftnode Node.Compact), on every
// replica: a replica that needs dropped entries gets the leader's
// snapshot (StateMachine.Snapshot), installs it and saves it before
// raftnode goes on (Restore). A replica starts from its saved snapshot
// (Start, before the group is added: StateMachine.Applied is its index,
// the entries after it are applied again), or from the first entry,
// which a consumer's first leader makes its starting position.
package consumerlog

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// Replica is the consumer a Log hands its committed operations to
// (consumerrun.Consumer): Apply is called on the raftnode worker that
// runs the group, never concurrently with itself or SetLeading.
// SetLeading(true) says this replica leads and has applied every entry
// of earlier terms; SetLeading(false) that it no longer leads. Neither
// may block. CommittedSnapshot returns the committed state and the index
// it reflects; RestoreCommitted replaces it with a snapshot (an error
// fences the replica).
type Replica interface {
	streamrun.Applier[consumer.Op]
	SetLeading(on bool)
	CommittedSnapshot() (index uint64, data []byte, err error)
	RestoreCommitted(index uint64, data []byte) error
}

// Config names the group a Log proposes to and applies from.
type Config struct {
	Node  *raftnode.Node
	Group raftnode.GroupID
	// Save makes a snapshot taken at index durable (the replica's
	// checkpoint), replacing the one saved before.
	Save func(index uint64, data []byte) error
	Logf func(format string, args ...any)
}

// Log is the replicated log of one consumer on one server. Make it with
// New, give its StateMachine to raftnode.Node.AddGroup once the consumer
// runs, and stop using it when the group is removed.
type Log struct {
	cfg   Config
	node  *raftnode.Node
	group raftnode.GroupID
	r     Replica
	logf  func(string, ...any)

	// start is the index of the snapshot the replica started from
	// (StateMachine.Applied); applied the last index applied (atomic).
	start   uint64
	applied atomic.Uint64
	// saveMu orders saves (Checkpoint on the cluster layer's goroutine,
	// Restore on a raftnode worker); saved is the index last saved, which
	// only grows.
	saveMu sync.Mutex
	saved  uint64

	// The raftnode worker's own (StateMachine): wantTerm is the term this
	// replica leads (0: not leading), emptyTerm the term of the last
	// empty entry applied, ready whether SetLeading(true) was said.
	mu        sync.Mutex
	wantTerm  uint64
	emptyTerm uint64
	ready     bool
}

// New returns the log of one consumer replica over cfg's group, handing
// what commits to r.
func New(cfg Config, r Replica) *Log {
	return &Log{cfg: cfg, node: cfg.Node, group: cfg.Group, r: r, logf: cfg.Logf}
}

// Start restores the replica from the snapshot it saved at index (its
// checkpoint), before the group is added. Errors: the Replica's
// (damage).
func (l *Log) Start(index uint64, data []byte) error {
	if err := l.r.RestoreCommitted(index, data); err != nil {
		return err
	}
	l.start, l.saved = index, index
	l.applied.Store(index)
	return nil
}

// Applied returns the index of the last entry applied (or of the
// snapshot started from).
func (l *Log) Applied() uint64 { return l.applied.Load() }

// Checkpoint saves the replica's committed state (Config.Save) and lets
// the group drop its entries through the index it reflects
// (raftnode.Node.Compact). It returns that index (0: nothing new to
// save). Errors: the Replica's, Save's, raftnode's (ErrUnknownGroup,
// ErrStopped, ErrFenced).
func (l *Log) Checkpoint() (uint64, error) {
	index, data, err := l.r.CommittedSnapshot()
	if err != nil {
		return 0, err
	}
	saved, err := l.save(index, data)
	if err != nil || !saved {
		return 0, err
	}
	return index, l.node.Compact(l.group, index)
}

// save saves a snapshot at index unless one at or beyond it is saved.
func (l *Log) save(index uint64, data []byte) (bool, error) {
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	if index <= l.saved || l.cfg.Save == nil {
		return false, nil
	}
	if err := l.cfg.Save(index, data); err != nil {
		return false, err
	}
	l.saved = index
	return true, nil
}

// Propose encodes op (consumer.AppendOp) and proposes it to the group
// under key (raftnode Entry.Tag: handed back to this replica's Apply for
// exactly this entry). Errors, all before anything entered the log:
// raftnode.ErrBusy, ErrFenced, ErrStopped, ErrUnknownGroup, and an
// encoding error (a bug). Being deposed meanwhile is learnt through
// SetLeading(false); the proposal is then lost or committed under the
// next leader, as a delivery in nats-server's consumer groups.
func (l *Log) Propose(op consumer.Op, key uint64) error {
	data, err := consumer.AppendOp(nil, op)
	if err != nil {
		return fmt.Errorf("consumerlog: encode %T: %w", op, err)
	}
	_, err = l.node.ProposeTagged(l.group, data, key)
	return err
}

// Leader reports whether this replica leads the group now and is not
// fenced (streamrun.Leader).
func (l *Log) Leader() bool {
	st, err := l.node.Status(l.group)
	return err == nil && st.Role == raftnode.Leader && st.Fenced == nil
}

// StepDown asks the group to elect another leader (raftnode
// Node.StepDown); an error is logged.
func (l *Log) StepDown() {
	if err := l.node.StepDown(l.group); err != nil && l.logf != nil {
		l.logf("consumerlog: group %d: step down: %v", l.group, err)
	}
}

// StateMachine returns the group's state machine, for
// raftnode.Node.AddGroup.
func (l *Log) StateMachine() raftnode.StateMachine { return stateMachine{l} }

type stateMachine struct{ l *Log }

// Apply decodes and applies entries in order. An entry that does not
// decode is damage: the error fences this replica (docs/clustering.md
// decision 12).
func (s stateMachine) Apply(entries []raftnode.Entry) error {
	l := s.l
	for i := range entries {
		e := &entries[i]
		if len(e.Data) == 0 {
			l.emptyApplied(e.Term)
			continue
		}
		// Decode a copy: e.Data is raftnode's only during Apply, and a
		// decoded Drop keeps its slice.
		op, err := consumer.DecodeOp(bytes.Clone(e.Data))
		if err != nil {
			return fmt.Errorf("consumerlog: group %d entry %d (term %d): %w", l.group, e.Index, e.Term, err)
		}
		l.r.Apply(e.Index, op, e.Tag)
		l.applied.Store(e.Index)
	}
	return nil
}

// emptyApplied notes an applied empty entry: a leader's first entry of
// its term, after which it holds every committed entry.
func (l *Log) emptyApplied(term uint64) {
	l.mu.Lock()
	l.emptyTerm = max(l.emptyTerm, term)
	say := !l.ready && l.wantTerm != 0 && l.emptyTerm >= l.wantTerm
	if say {
		l.ready = true
	}
	l.mu.Unlock()
	if say {
		l.r.SetLeading(true)
	}
}

// LeaderChanged follows this replica's leadership
// (raftnode.LeaderObserver): it leads from the moment its term's empty
// entry applied.
func (s stateMachine) LeaderChanged(leader bool, term uint64) {
	l := s.l
	l.mu.Lock()
	var say, on bool
	if leader {
		l.wantTerm = term
		if !l.ready && l.emptyTerm >= term {
			l.ready, say, on = true, true, true
		}
	} else {
		l.wantTerm = 0
		say = l.ready
		l.ready = false
	}
	l.mu.Unlock()
	if say {
		l.r.SetLeading(on)
	}
}

// Applied returns the index of the snapshot the replica started from (0:
// none, the whole log applies).
func (s stateMachine) Applied() uint64 { return s.l.start }

// Snapshot returns the replica's committed state, which is at the last
// index applied (Apply and CommittedSnapshot take the consumer's lock).
func (s stateMachine) Snapshot() ([]byte, error) {
	_, data, err := s.l.r.CommittedSnapshot()
	return data, err
}

// Restore installs a leader's snapshot taken at index and saves it
// before returning. An error fences the replica.
func (s stateMachine) Restore(index uint64, data []byte) error {
	l := s.l
	if err := l.r.RestoreCommitted(index, data); err != nil {
		return err
	}
	l.applied.Store(index)
	_, err := l.save(index, data)
	return err
}
