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
// # Restarts
//
// A replica restarts by applying its group's whole log again to a new
// consumer (StateMachine.Applied is 0); the first entry a consumer's
// first leader proposes is its starting position. Consumer checkpoints
// and snapshots are not built yet, so a consumer group's WAL entries are
// never compacted (docs/clustering.md, "Not yet built").
package consumerlog

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// ErrNoSnapshot is returned by the state machine's Snapshot and Restore:
// consumer snapshots are not built yet, and a group's WAL keeps every
// entry (package comment). A Restore error fences the replica.
var ErrNoSnapshot = errors.New("consumerlog: consumer snapshots are not built yet")

// Replica is the consumer a Log hands its committed operations to
// (consumerrun.Consumer): Apply is called on the raftnode worker that
// runs the group, never concurrently with itself or SetLeading.
// SetLeading(true) says this replica leads and has applied every entry
// of earlier terms; SetLeading(false) that it no longer leads. Neither
// may block.
type Replica interface {
	streamrun.Applier[consumer.Op]
	SetLeading(on bool)
}

// Log is the replicated log of one consumer on one server. Make it with
// New, give its StateMachine to raftnode.Node.AddGroup once the consumer
// runs, and stop using it when the group is removed.
type Log struct {
	node  *raftnode.Node
	group raftnode.GroupID
	r     Replica
	logf  func(string, ...any)

	// The raftnode worker's own (StateMachine): wantTerm is the term this
	// replica leads (0: not leading), emptyTerm the term of the last
	// empty entry applied, ready whether SetLeading(true) was said.
	mu        sync.Mutex
	wantTerm  uint64
	emptyTerm uint64
	ready     bool
}

// New returns the log of one consumer replica over group on node,
// handing what commits to r.
func New(node *raftnode.Node, group raftnode.GroupID, r Replica, logf func(string, ...any)) *Log {
	return &Log{node: node, group: group, r: r, logf: logf}
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

// Applied is 0: a replica applies its whole log again (package comment).
func (stateMachine) Applied() uint64 { return 0 }

// Snapshot is not built yet (ErrNoSnapshot).
func (stateMachine) Snapshot() ([]byte, error) { return nil, ErrNoSnapshot }

// Restore is not built yet (ErrNoSnapshot, which fences the replica).
func (stateMachine) Restore(uint64, []byte) error { return ErrNoSnapshot }
