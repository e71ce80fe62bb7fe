// Package consumerlog is the Raft-backed log of one replicated consumer:
// it implements the engine's consumer log (streamrun.Log[consumer.Op],
// consumerrun.ReplicatedLog) over one group of an internal/raftnode Node
// (docs/cluster.md, "Replicated consumers"). The cluster layer
// (internal/cluster/jscluster) makes one Log per replica of a consumer
// whose num_replicas is above one and hands it to the engine.
//
// # Entry format
//
// A group's log entry is the batch of consumer operations one round of
// the consumer's leader decided, each as the engine encodes it
// (consumer.AppendOp: kind byte, version byte, fields; drawn in
// docs/engine.md "Encoding"); raftnode frames the entry in its WAL
// record with the record's CRC:
//
//	raft entry data:  | 0x00 | count (uvarint) | count × ( length (uvarint) | consumer.AppendOp(op) ) |
//
// The leading zero is no operation kind (kinds start at 1). Propose only
// adds an operation to the batch; Flush proposes it as one entry (one
// proposal per round of the consumer, however many deliveries and acks
// it made), and a batch raftnode refuses for back-pressure (ErrBusy) is
// kept and proposed with the next. A batch is applied whole, under one
// hold of the consumer's lock (Replica.ApplyBatch), so that a snapshot
// never holds part of an entry.
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
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// Replica is the consumer a Log hands its committed operations to
// (consumerrun.Consumer): Apply is called on the raftnode worker that
// runs the group, never concurrently with itself or SetLeading.
// SetLeading(true) says this replica leads and has applied every entry
// of earlier terms; SetLeading(false) that it no longer leads. Neither
// may block. ApplyBatch applies the operations of one committed entry,
// in order, with the tag of the entry (its proposer's key, on the
// replica that proposed it). CommittedSnapshot returns the committed
// state and the index it reflects; RestoreCommitted replaces it with a snapshot (an error
// fences the replica). HandOver calls transfer (the request of a
// leadership transfer of the group) once every operation the replica
// decided is queued to the group ahead of it, and has the replica
// decide nothing more until the transfer ended (Log.MayDecide): raft
// drops what is proposed while it transfers, and a delivery whose
// operation is dropped would be delivered again by the next leader as a
// first delivery (docs/cluster.md, "Replicated consumers"). It
// returns transfer's error, or nil when transfer is called later (the
// batch waits for back-pressure) or not at all (the replica stopped
// leading meanwhile).
type Replica interface {
	ApplyBatch(index uint64, ops []consumer.Op, tag uint64)
	SetLeading(on bool)
	CommittedSnapshot() (index uint64, data []byte, err error)
	RestoreCommitted(index uint64, data []byte) error
	HandOver(transfer func() error) error
}

// Config names the group a Log proposes to and applies from.
type Config struct {
	Node  *raftnode.Node
	Group raftnode.GroupID
	// Save makes a snapshot taken at index durable (the replica's
	// checkpoint), replacing the one saved before.
	Save func(index uint64, data []byte) error
	Logf func(format string, args ...any)
	// AwaitSuccessor, when set, is called on the raftnode worker each
	// time this replica stops leading; it must not block. It calls done
	// (once, from any goroutine) when the replica that leads next has
	// subscribed and every route peer has processed its subscriptions
	// (the cluster layer asks the successor over $JSC.CI), and never
	// when it could not learn that. Until then SuccessorReady reports
	// false (docs/cluster.md, "Moving the subscriptions"). Nil:
	// SuccessorReady reports the first entry of a later term applied.
	AwaitSuccessor func(done func())
	// PeersLevel, when set, returns the lowest feature level the servers
	// of the consumer's other replicas announced (internal/cluster/transport
	// FeatureLevel; 0 for a server of an earlier build, or one not heard
	// from since this server started). Nil: every peer is of this build.
	PeersLevel func() int
}

// PullRequestLevel is the feature level from which a server's build
// decodes consumer.PullRequest operations (consumer kind 14).
const PullRequestLevel = 1

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
	// seenData and seenLatest, under seenMu: the index of the last entry
	// handed to the Replica and of the last entry applied of any kind,
	// published together at the end of each Apply (Checkpoint).
	seenMu     sync.Mutex
	seenData   uint64
	seenLatest uint64
	// saveMu orders saves (Checkpoint on the cluster layer's goroutine,
	// Restore on a raftnode worker); saved is the index last saved, which
	// only grows.
	saveMu sync.Mutex
	saved  uint64

	// The batch being built (Propose, Flush, Discard: the consumer's
	// loop, under the consumer's lock): the encoded operations, their
	// count and the last one's key.
	batch   []byte
	nbatch  int
	key     uint64
	scratch []byte // one operation's encoding
	// flushed holds the proposals of the batches flushed that have not
	// resolved yet, oldest first, with their tags and the leadership
	// (lead, counted by Discard) that flushed them (Dropped, Outstanding;
	// the consumer's loop, under the consumer's lock). Those of an
	// earlier leadership are raftnode's kept waiters: they resolve once
	// raftnode learns what became of their entries, ten election timeouts
	// after the loss at the latest.
	flushed []flushedBatch
	lead    uint64

	// The raftnode worker's own (StateMachine): wantTerm is the term this
	// replica leads (0: not leading), emptyTerm the term of the last
	// empty entry applied, ready whether SetLeading(true) was said.
	mu        sync.Mutex
	wantTerm  uint64
	emptyTerm uint64
	ready     bool
	// ledTerm is the last term this replica led (SuccessorReady).
	ledTerm uint64
	// handedTerm is the last term this replica was handed the
	// leadership of by its predecessor (raftnode.SuccessionObserver;
	// HandedOver).
	handedTerm uint64
	// lost counts the times this replica stopped leading; announced is
	// the count at the last of them whose successor was announced
	// (Config.AwaitSuccessor).
	lost      uint64
	announced uint64
}

// flushedBatch is a batch flushed and not yet resolved (Log.flushed).
type flushedBatch struct {
	p    *raftnode.Proposal
	tag  uint64
	lead uint64
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
	l.see(index, index)
	return nil
}

// Applied returns the index of the last entry applied (or of the
// snapshot started from).
func (l *Log) Applied() uint64 { return l.applied.Load() }

// LastApplied returns the index of the last entry applied of any kind:
// Applied, or a later entry without data (a new leader's empty entry, a
// membership change), which a Checkpoint reflects too. The cluster
// layer's checkpoint trigger counts from it: counted from Applied, a
// leader change after the last checkpoint left the empty entry in the
// WAL for as long as the consumer stayed idle, and the segment holding
// it, with every newer one, on disk (docs/cluster.md, "The WAL").
func (l *Log) LastApplied() uint64 {
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	return max(l.seenLatest, l.applied.Load())
}

// Checkpoint saves the replica's committed state (Config.Save) and lets
// the group drop its entries through the index it reflects
// (raftnode.Node.Compact). It returns that index (0: nothing new to
// save). Errors: the Replica's, Save's, raftnode's (ErrUnknownGroup,
// ErrStopped, ErrFenced).
//
// When only entries without data (a new leader's empty entry, a
// membership change) were applied after the last batch the snapshot
// holds, the snapshot is saved at the last of them: the state is the
// same there, and a restart need not hand them back (raftnode
// GroupStatus.Reapplied; docs/cluster.md, "Restarts").
func (l *Log) Checkpoint() (uint64, error) {
	index, data, err := l.r.CommittedSnapshot()
	if err != nil {
		return 0, err
	}
	index = l.reflected(index)
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

// Propose adds op, encoded (consumer.AppendOp), to the batch Flush
// proposes, under key (raftnode Entry.Tag of the batch's entry, handed
// back to this replica's ApplyBatch for exactly that entry). The only
// error is an encoding error (a bug). Being deposed is learnt through
// SetLeading(false); a batch proposed then is lost or committed under the
// next leader, as a delivery in nats-server's consumer groups.
func (l *Log) Propose(op consumer.Op, key uint64) error {
	enc, err := consumer.AppendOp(l.scratch[:0], op)
	if err != nil {
		return fmt.Errorf("consumerlog: encode %T: %w", op, err)
	}
	l.scratch = enc
	l.batch = binary.AppendUvarint(l.batch, uint64(len(enc)))
	l.batch = append(l.batch, enc...)
	l.nbatch++
	l.key = key
	return nil
}

// Flush proposes the batch as one entry. A batch raftnode refuses for
// back-pressure (raftnode.ErrBusy) is kept for the next Flush; pending
// reports that operations wait. Errors (the batch is dropped; the
// replica must stop leading): raftnode.ErrFenced, ErrStopped,
// ErrUnknownGroup.
func (l *Log) Flush() (pending bool, err error) {
	if l.nbatch == 0 {
		return false, nil
	}
	key := l.key
	p, err := l.node.ProposeTagged(l.group, l.batchEntry(), key)
	if errors.Is(err, raftnode.ErrBusy) {
		return true, nil
	}
	l.batch, l.nbatch, l.key = l.batch[:0], 0, 0
	if err == nil {
		l.flushed = append(l.flushed, flushedBatch{p: p, tag: key, lead: l.lead})
	}
	return false, err
}

// Dropped reports whether raft refused one of the batches flushed since
// the last Discard after Flush returned (raftnode.ErrDropped: raft
// dropped the proposal, which never entered the log, as when its leader
// holds more than MaxUncommittedBytes it cannot commit); a batch that
// lost its leader (ErrNotLeader, ErrNoReply, ErrFenced, ErrStopped) is
// learnt of otherwise (SetLeading(false), Flush's errors). It forgets
// the proposals that resolved: a look costs a check of a channel per
// batch flushed and not yet applied (a few while the group commits).
func (l *Log) Dropped() bool {
	dropped := false
	l.prune(func(b flushedBatch, err error) {
		if b.lead == l.lead && errors.Is(err, raftnode.ErrDropped) {
			dropped = true
		}
	})
	return dropped
}

// Outstanding returns the largest tag of the batches this replica
// flushed, in this leadership or an earlier one, whose proposals have not
// resolved (0: none). Only those may still apply here with their tag
// (raftnode hands a deposed leader's entry its tag when it applies at its
// index with the term it was proposed in; decision 7); a tag above it
// never comes. It forgets the proposals that resolved, at the cost of a
// check of a channel each.
func (l *Log) Outstanding() uint64 {
	l.prune(nil)
	if len(l.flushed) == 0 {
		return 0
	}
	return l.flushed[len(l.flushed)-1].tag
}

// prune forgets the flushed batches whose proposals resolved, handing
// each to resolved (if not nil) with its error.
func (l *Log) prune(resolved func(flushedBatch, error)) {
	kept := l.flushed[:0]
	for _, b := range l.flushed {
		select {
		case <-b.p.Done():
			if resolved != nil {
				_, err := b.p.Result()
				resolved(b, err)
			}
		default:
			kept = append(kept, b)
		}
	}
	clear(l.flushed[len(kept):])
	l.flushed = kept
}

// batchEntry returns the batch as an entry's data (package comment).
func (l *Log) batchEntry() []byte {
	data := make([]byte, 0, 1+binary.MaxVarintLen64+len(l.batch))
	data = append(data, 0)
	data = binary.AppendUvarint(data, uint64(l.nbatch))
	return append(data, l.batch...)
}

// Discard drops the batch (the replica stopped leading: what it decided
// and did not propose is delivered again by the next leader) and starts
// a new leadership for Dropped (what the batches flushed before come to
// is not this leadership's any more); Outstanding still counts them
// until they resolve.
func (l *Log) Discard() {
	l.batch, l.nbatch, l.key = l.batch[:0], 0, 0
	l.lead++
	l.prune(nil)
}

// Leader reports whether this replica leads the group now, is not
// fenced, and has applied every entry of earlier terms (streamrun.Leader;
// raftnode GroupStatus.LeaderReady).
func (l *Log) Leader() bool {
	st, err := l.node.Status(l.group)
	return err == nil && st.LeaderReady
}

// MayDecide reports whether the leading replica may decide and deliver
// now: its group knows this replica as leader, is not fenced and has no
// leadership transfer asked or under way (raftnode Brief.Transferring).
// An operation decided otherwise may never enter the log (raft drops
// proposals during a transfer; a deposed leader's are refused), and the
// next leader would deliver again, as first deliveries, the messages it
// delivered. It costs one look at the group's published status.
func (l *Log) MayDecide() bool {
	b, err := l.node.Brief(l.group)
	return err == nil && b.Role == raftnode.Leader && b.Fenced == nil && !b.Transferring
}

// SuccessorReady reports, on a replica that stopped leading, whether the
// replica leading after it is known to serve the consumer's subjects
// from every server: with Config.AwaitSuccessor, once it said so for the
// last time this replica stopped leading (never while raft still has it
// lead); without, once this replica applied the first entry of a term
// after the last it led (the successor has applied it too, or is about
// to, and then subscribes).
func (l *Log) SuccessorReady() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.AwaitSuccessor != nil {
		// Not while raft still has this replica lead (a consumer that
		// left its leadership on its own, a refused proposal, waits for
		// the loss it asked and that loss's successor).
		return !l.ready && l.lost > 0 && l.announced == l.lost
	}
	return l.emptyTerm > l.ledTerm
}

// awaitSuccessor asks Config.AwaitSuccessor about the successor of the
// leadership this replica lost the lost-th time.
func (l *Log) awaitSuccessor(lost uint64) {
	if l.cfg.AwaitSuccessor == nil {
		return
	}
	l.cfg.AwaitSuccessor(func() {
		l.mu.Lock()
		if l.lost == lost {
			l.announced = lost
		}
		l.mu.Unlock()
	})
}

// HandOver asks the group's leadership transfer through the replica
// (Replica.HandOver): transfer (a raftnode TransferLeader, HandOver or
// StepDown of this group) is called once what the replica decided is
// queued ahead of it. Its error is transfer's.
func (l *Log) HandOver(transfer func() error) error { return l.r.HandOver(transfer) }

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
// decode is damage: the error fences this replica (docs/cluster.md
// decision 12).
func (s stateMachine) Apply(entries []raftnode.Entry) error {
	l := s.l
	var data uint64
	defer func() {
		if len(entries) > 0 {
			l.see(data, entries[len(entries)-1].Index)
		}
	}()
	for i := range entries {
		e := &entries[i]
		if len(e.Data) == 0 {
			l.emptyApplied(e.Term)
			continue
		}
		// Decode a copy: a decoded Drop keeps its slice in the
		// consumer's state, which would keep the whole entry (after a
		// restart, the group's entries of a replayed WAL record) in
		// memory (raftnode.Entry).
		ops, err := decodeBatch(bytes.Clone(e.Data))
		if err != nil {
			return fmt.Errorf("consumerlog: group %d entry %d (term %d): %w", l.group, e.Index, e.Term, err)
		}
		l.r.ApplyBatch(e.Index, ops, e.Tag)
		l.applied.Store(e.Index)
		data = e.Index
	}
	return nil
}

// reflected returns the last index a committed snapshot taken at index
// reflects: the last entry applied when every entry after index had no
// data (Checkpoint), else index.
func (l *Log) reflected(index uint64) uint64 {
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	if l.seenData <= index {
		return max(index, l.seenLatest)
	}
	return index
}

// see publishes, at the end of an Apply (or a restore at index, as both),
// the last entry handed to the Replica (data; 0: none this time) and the
// last entry applied (latest), for Checkpoint.
func (l *Log) see(data, latest uint64) {
	l.seenMu.Lock()
	if data != 0 {
		l.seenData = data
	}
	l.seenLatest = max(l.seenLatest, latest)
	l.seenMu.Unlock()
}

// errBadBatch is the error of an entry that is not a well-formed batch.
var errBadBatch = errors.New("consumerlog: malformed batch")

// decodeBatch decodes an entry's batch (package comment): the marker,
// then count operations, each of the length it states, and nothing
// after them.
func decodeBatch(b []byte) ([]consumer.Op, error) {
	if len(b) == 0 || b[0] != 0 {
		return nil, errBadBatch
	}
	b = b[1:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count == 0 || count > uint64(len(b)) {
		return nil, errBadBatch
	}
	b = b[n:]
	ops := make([]consumer.Op, 0, count)
	for range count {
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errBadBatch
		}
		op, err := consumer.DecodeOp(b[n : n+int(size)])
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		b = b[n+int(size):]
	}
	if len(b) != 0 {
		return nil, errBadBatch
	}
	return ops, nil
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
		l.wantTerm, l.ledTerm = term, term
		if !l.ready && l.emptyTerm >= term {
			l.ready, say, on = true, true, true
		}
	} else {
		l.wantTerm = 0
		say = l.ready
		l.ready = false
		if say {
			l.lost++
		}
	}
	lost := l.lost
	l.mu.Unlock()
	if say {
		l.r.SetLeading(on)
		if !on {
			l.awaitSuccessor(lost)
		}
	}
}

// Succeeded notes whether this replica leads term because its
// predecessor handed it over (raftnode.SuccessionObserver).
func (s stateMachine) Succeeded(term uint64, handedOver bool) {
	if !handedOver {
		return
	}
	s.l.mu.Lock()
	s.l.handedTerm = max(s.l.handedTerm, term)
	s.l.mu.Unlock()
}

// HandedOver reports whether the predecessor of this replica's last
// leadership handed it over (a transfer: the predecessor is alive and
// ends the pull requests that waited on it itself) rather than going
// silent (killed, partitioned, paused: it ends nothing); false before
// this replica led.
func (l *Log) HandedOver() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ledTerm != 0 && l.handedTerm == l.ledTerm
}

// RecordsPulls reports whether the consumer may add PullRequest
// operations to its log: every other replica's server announced a
// feature level of at least PullRequestLevel (Config.PeersLevel). A
// server of an earlier build would fail to decode the entry and fence
// its replica (docs/cluster.md, "Feature levels").
func (l *Log) RecordsPulls() bool {
	return l.cfg.PeersLevel == nil || l.cfg.PeersLevel() >= PullRequestLevel
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
	l.see(index, index)
	_, err := l.save(index, data)
	return err
}
