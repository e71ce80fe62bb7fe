// Package streamlog is the Raft-backed log of one replicated stream: it
// implements the engine's streamrun.Log[stream.Op] over one group of an
// internal/raftnode Node (docs/cluster.md, "The life of a replicated
// publish"; docs/engine.md, "Logs that commit later"). It knows nothing
// of the server, routes or the JetStream API: the cluster layer makes one
// Log per replica of a replicated stream and hands it to the engine
// (jetstream.Config.NewReplicatedLog, internal/cluster/jscluster).
//
// # Entry format
//
// A group's log entry is exactly one stream operation as the engine
// encodes it (stream.AppendOp: kind byte, version byte, fields; drawn in
// docs/engine.md "Encoding"); raftnode frames it in its WAL record
// (index, term, type, data) with the record's CRC:
//
//	raft entry data:  | kind (1) | version (1) | fields ... |   = stream.AppendOp(op)
//
// Entries raft makes itself (a new leader's empty entry, membership
// changes) have no data and are skipped; they still advance the index.
// One entry of the log's own is not a stream operation and is not handed
// to the engine either, the compaction floor:
//
//	raft entry data:  | 0xff | floor (uvarint) |
//
// (0xff is no operation kind.) The leader proposes it when it compacts
// (Checkpoint): every replica held every entry through floor then, so
// none ever needs them again, and a follower compacts through it too.
// An idle group's last floor: a floor entry is itself an entry the next
// checkpoint covers, and that checkpoint's floor would be proposed as
// another entry, one every checkpoint interval for ever. So a replica
// that applies a floor entry above its current floor with no stream
// operation after floor (only raft's own entries and floor entries lie
// between) takes the entry's own index as its floor: a checkpoint at that
// index compacts the whole log, the leader proposes nothing higher, and
// the group goes quiet (docs/cluster.md, "Idle groups"). The entries
// it drops carry nothing the engine applies; a replica that lacks them is
// caught up by a snapshot, as one that lags past Config.Retain is. A
// Barrier repeats the current floor, which changes nothing.
//
// The proposer's key is not in the entry: raftnode hands it back as
// Entry.Tag on the node that proposed the entry, for that exact entry
// under the term it was proposed in (docs/cluster.md decision 7).
//
// # Indexes
//
// The Applier is given raft's index of each entry. They increase but
// have gaps (the skipped entries above); the engine's Applier contract
// (streamrun.Applier) allows gaps, so a checkpoint names a raft index
// directly and Compact takes it unchanged.
package streamlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// ErrNoSnapshot is returned by the state machine's Snapshot, SnapshotAt
// and Restore for a log without Config.Snapshots (a memory stream's: its
// replicas replay the group's whole log, which its WAL therefore keeps).
// A Restore error fences the replica (docs/cluster.md, decision 12).
var ErrNoSnapshot = errors.New("streamlog: this stream has no snapshots")

// Snapshotter takes and installs a replicated stream's snapshots: a
// manifest in the Raft snapshot, the messages out of band
// (docs/cluster.md decision 8, "Stream snapshots";
// internal/cluster/streamckpt's Replica).
type Snapshotter interface {
	// SnapshotAt is raftnode.SnapshotIndexer's: the manifest of a
	// capture at an index at or above min, or raftnode.ErrSnapshotPending
	// while one is being taken. It must not block.
	SnapshotAt(min uint64) (index uint64, data []byte, err error)
	// Restore installs the snapshot at index whose manifest is data: it
	// fetches what the replica lacks, makes it durable and replaces the
	// stream's state; it runs in the background (raftnode
	// BackgroundRestorer) and may fail with raftnode.ErrRestoreRetry.
	Restore(index uint64, data []byte) error
}

// DefaultRetain is Config.Retain's default: the entries behind a
// checkpoint a log with snapshots keeps for a replica that lags, so a
// short absence catches up from the log rather than by snapshot.
const DefaultRetain = 16384

// DefaultRetainBytes is Config.RetainBytes's default: with large
// messages, 16,384 entries kept for a replica that lags were gigabytes
// of WAL on its peers (128 KiB object store chunks: 2 GiB per group),
// which every restart read again.
const DefaultRetainBytes = 64 << 20

// Config names the group a Log proposes to and applies from.
type Config struct {
	// Node is this server's raftnode; Group the stream's group on it.
	Node  *raftnode.Node
	Group raftnode.GroupID
	// Applied returns the raft index through which the stream's store
	// holds the log's effects durably (its checkpoint); entries after it
	// are applied again when the group is added (raftnode
	// StateMachine.Applied). nil means 0: every entry is applied again
	// (a memory stream).
	Applied func() uint64
	// OnLeader, if set, is told when this replica becomes the group's
	// leader (true) and when it no longer is (false), on the raftnode
	// worker that runs the group, after the round's entries were applied
	// (raftnode.LeaderObserver): the stream subscribes to its subjects
	// only where it leads (streamrun.Stream.SetLeader). It must not block.
	OnLeader func(leader bool)
	// Snapshots, if set, takes and installs the stream's snapshots; a
	// replica that lags past the leader's compaction point is then caught
	// up by one, and Checkpoint compacts without waiting for every
	// replica (Retain). nil: no snapshots (ErrNoSnapshot).
	Snapshots Snapshotter
	// Retain is how many entries behind a checkpoint the WAL keeps for a
	// replica that lags, with Snapshots (DefaultRetain when 0).
	Retain uint64
	// RetainBytes bounds the same by the bytes of the stream operations
	// behind the checkpoint (DefaultRetainBytes when 0), to the
	// granularity of the checkpoints: whichever of the two keeps less
	// applies.
	RetainBytes uint64
	// MaxPendingBytes bounds the bytes of proposals awaiting their
	// outcome: Propose blocks while they would pass it (maxPendingBytes,
	// 64 MiB, when 0).
	MaxPendingBytes int
}

// Log is the replicated log of one stream on one server: Propose on the
// leader, and, through StateMachine, the group's committed entries handed
// to the engine's Applier on every replica. Make it with New, add its
// StateMachine to the node (raftnode.Node.AddGroup), end it with Close.
type Log struct {
	cfg Config
	a   streamrun.Applier[stream.Op]

	// pending carries the accepted proposals whose key waits, in order,
	// to the watcher goroutine (watch), which tells a streamrun.Forgetter
	// of those that fail. Closed by Close.
	pending chan pendingProposal
	done    chan struct{}
	once    sync.Once
	// gate bounds the bytes of those proposals (maxPendingBytes).
	gate byteGate

	// floor is the highest compaction floor applied (package comment);
	// proposed the highest this replica proposed as leader.
	floor    atomic.Uint64
	proposed atomic.Uint64
	// appliedBytes counts the bytes of the stream operations applied
	// (AppliedBytes).
	appliedBytes atomic.Uint64
	// marks are the checkpoints' indexes with AppliedBytes then, for
	// RetainBytes; used by Checkpoint only, under marksMu.
	marksMu sync.Mutex
	marks   byteMarks

	// seen: the index of the last entry handed to the Applier (data) and
	// of the last entry applied of any kind (last), under seenMu; a
	// capture reads both (Seen).
	seenMu     sync.Mutex
	seenData   uint64
	seenLatest uint64

	// sealMu orders Seal after every Propose under way; sealed: Propose
	// refuses and Leader is false (Seal).
	sealMu sync.RWMutex
	sealed bool
}

var (
	_ streamrun.Log[stream.Op] = (*Log)(nil)
	_ streamrun.Leader         = (*Log)(nil)
	_ streamrun.EntryLimiter   = (*Log)(nil)
)

type pendingProposal struct {
	key  uint64
	size int // bytes held in Log.gate
	p    outcome
}

// outcome is what watch reads of a proposal (*raftnode.Proposal).
type outcome interface {
	Done() <-chan struct{}
	Result() (any, error)
}

// maxPending bounds the proposals awaiting their outcome, and
// maxPendingBytes their bytes; Propose blocks (back-pressure on the
// proposer, whose ingest queue then answers 429) while either is reached.
// They are raftnode's default MaxPendingProposals and MaxUncommittedBytes:
// a publish burst holds at most about that much on the leader beyond its
// ingest queue, where 4,096 proposals of 1 MiB held gigabytes.
const (
	maxPending      = 4096
	maxPendingBytes = 64 << 20
)

func (l *Log) maxPendingBytes() int {
	if l.cfg.MaxPendingBytes > 0 {
		return l.cfg.MaxPendingBytes
	}
	return maxPendingBytes
}

// byteGate bounds a count of bytes: acquire waits while the bytes held
// and n would pass the limit (one holder of any size passes), until
// release makes room or close lets everyone through.
type byteGate struct {
	mu     sync.Mutex
	cond   sync.Cond
	held   int
	closed bool
}

func (g *byteGate) acquire(n, limit int) {
	g.mu.Lock()
	for !g.closed && g.held > 0 && g.held+n > limit {
		g.cond.Wait()
	}
	g.held += n
	g.mu.Unlock()
}

func (g *byteGate) release(n int) {
	g.mu.Lock()
	g.held -= n
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *byteGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cond.Broadcast()
}

// New returns the log of one replicated stream, handing what its group
// commits to a (the stream's runtime, or any streamrun.Applier). When a
// implements streamrun.Forgetter it is told of every key whose proposal
// will not be handed back here (its entry never entered the log, or this
// replica cannot tell whether it committed). New
// starts one goroutine (watch), ended by Close.
func New(cfg Config, a streamrun.Applier[stream.Op]) *Log {
	l := &Log{cfg: cfg, a: a, pending: make(chan pendingProposal, maxPending), done: make(chan struct{})}
	l.gate.cond.L = &l.gate.mu
	go l.watch()
	return l
}

// Propose encodes op (stream.AppendOp) and proposes it to the group under
// key (Entry.Tag). With a key, it first waits while the proposals awaiting
// their outcome number maxPending or would pass Config.MaxPendingBytes
// (back-pressure on the stream's apply goroutine). Errors, all before anything entered the log, so the
// key is never handed back: raftnode.ErrNotLeader (not the leader: the
// cluster layer forwards the publish or answers "no leader", 10008 family),
// raftnode.ErrBusy and raftnode.ErrDropped (back-pressure: the engine's
// 429 path), raftnode.ErrFenced, raftnode.ErrStopped, and an encoding
// error (a bug). A proposal that entered the log and then loses its
// leader is kept (raftnode's kept waiters, docs/cluster.md decision 7):
// when its entry commits under the next leader and applies here, the key
// is handed back with it as on the leader and the client is answered;
// when another entry takes its index, or nothing is learnt of it for ten
// election timeouts, it resolves raftnode.ErrNoReply: the Applier's
// Forget (streamrun.Forgetter) is called with its key and the client is
// told nothing, since the entry may still commit elsewhere. One
// that raft refuses after Propose returned (dropped during a leadership
// transfer, leadership lost before it was stepped) is forgotten with
// streamrun.ErrUnproposed wrapped (forgotten): nothing of it was logged.
// An operation larger than MaxEntryBytes fails with raftnode.ErrTooLarge
// (the proposer never makes one: streamrun.EntryLimiter).
func (l *Log) Propose(op stream.Op, key uint64) error {
	data, err := stream.AppendOp(nil, op)
	if err != nil {
		return fmt.Errorf("streamlog: encode %T: %w", op, err)
	}
	size := 0
	if key != 0 {
		size = len(data)
		l.gate.acquire(size, l.maxPendingBytes())
	}
	l.sealMu.RLock()
	if l.sealed {
		l.sealMu.RUnlock()
		l.gate.release(size)
		return raftnode.ErrNotLeader
	}
	p, err := l.cfg.Node.ProposeTagged(l.cfg.Group, data, key)
	l.sealMu.RUnlock()
	if err != nil {
		l.gate.release(size)
		return err
	}
	if key != 0 {
		select {
		case l.pending <- pendingProposal{key: key, size: size, p: p}:
		case <-l.done:
		}
	}
	return nil
}

// watch waits for the accepted proposals and tells the Applier (if it is
// a streamrun.Forgetter) of those that resolved with an error. It holds
// up to maxPending of them beside the pending channel's (so at most twice
// maxPending await their outcome, within the gate's bytes) and settles
// each as it resolves, in any order: proposals in the log resolve in
// index order (a replica that lost the leadership keeps them until their
// indexes apply or are replaced here, at most ten election timeouts while
// it is cut off), but those raft refused after Propose returned
// (ErrNotLeader, ErrDropped) resolve at once, and their publishes are
// answered 503 at once rather than behind the kept ones. When the oldest
// resolves, it and the resolved ones right behind it are settled (those
// in the log resolve in order: a look past the first unresolved one at
// every resolution cost a scan of up to maxPending per proposal); all
// of them are looked at every watchScan while more than one waits.
func (l *Log) watch() {
	f, _ := l.a.(streamrun.Forgetter)
	l.watchWith(f)
}

// watchWith is watch with the Forgetter f (nil: none).
func (l *Log) watchWith(f streamrun.Forgetter) {
	var waiting []pendingProposal
	scan := time.NewTimer(watchScan)
	scan.Stop()
	scanning := false
	for {
		in := l.pending
		if len(waiting) >= maxPending {
			in = nil
		}
		var head <-chan struct{}
		if len(waiting) > 0 {
			head = waiting[0].p.Done()
		}
		if len(waiting) > 1 && !scanning {
			scan.Reset(watchScan)
			scanning = true
		}
		select {
		case <-l.done:
			scan.Stop()
			return
		case pp := <-in:
			waiting = append(waiting, pp)
		case <-head:
			waiting = l.settleFront(waiting, f)
		case <-scan.C:
			scanning = false
			waiting = l.settle(waiting, f)
		}
	}
}

// watchScan is how often watch looks past an unresolved oldest proposal
// for later ones that resolved.
const watchScan = 20 * time.Millisecond

// settle removes the resolved proposals from waiting, keeping the order
// of the rest (settled1).
func (l *Log) settle(waiting []pendingProposal, f streamrun.Forgetter) []pendingProposal {
	kept := waiting[:0]
	for _, pp := range waiting {
		if !l.settled1(pp, f) {
			kept = append(kept, pp)
		}
	}
	clear(waiting[len(kept):])
	return kept
}

// settleFront removes the resolved proposals at the front of waiting, up
// to the first unresolved one (settled1).
func (l *Log) settleFront(waiting []pendingProposal, f streamrun.Forgetter) []pendingProposal {
	n := 0
	for n < len(waiting) && l.settled1(waiting[n], f) {
		n++
	}
	clear(waiting[:n])
	return waiting[n:]
}

// settled1 reports whether pp resolved and, if so, settles it: its bytes
// leave the gate, and the Applier forgets its key if it failed
// (forgotten).
func (l *Log) settled1(pp pendingProposal, f streamrun.Forgetter) bool {
	select {
	case <-pp.p.Done():
	default:
		return false
	}
	l.gate.release(pp.size)
	if _, err := pp.p.Result(); err != nil && f != nil {
		f.Forget(pp.key, forgotten(err))
	}
	return true
}

// forgotten returns the error a Forgetter is told of for a proposal that
// resolved with err: raftnode.ErrNoReply (it entered the log and may
// still commit under another leader) as it is; any other
// (raftnode.ErrNotLeader, ErrDropped, ErrFenced, ErrStopped: raft never
// took it, internal/raftnode/types.go) wrapped with
// streamrun.ErrUnproposed, so that the stream answers its publishes 503
// and the client's retry finds the new leader instead of timing out.
func forgotten(err error) error {
	if errors.Is(err, raftnode.ErrNoReply) {
		return err
	}
	return fmt.Errorf("%w: %w", streamrun.ErrUnproposed, err)
}

// MaxEntryBytes returns the largest stream operation, in byte form, the
// log carries: its entry is exactly the operation (package comment), so
// it is the node's largest entry, the largest a follower can receive in
// one transport frame (raftnode.Node.MaxEntryBytes; 67,108,714 bytes for
// the cluster transport's 64 MiB frames). The stream's proposer keeps
// every operation within it (streamrun.EntryLimiter; docs/cluster.md,
// "Entries larger than a frame").
func (l *Log) MaxEntryBytes() int { return l.cfg.Node.MaxEntryBytes() }

// Leader reports whether this node leads the group now (and is not
// fenced), having applied every entry of earlier terms (raftnode
// GroupStatus.LeaderReady), so that its proposals can enter the log and
// its decisions start from a state current with the log
// (streamrun.Leader): a stream runtime makes the leader's decisions
// (expiry, retention removals) only while it does. A leadership lost a moment later is
// caught by Propose's ErrNotLeader or by the proposal's ErrNoReply.
func (l *Log) Leader() bool {
	l.sealMu.RLock()
	sealed := l.sealed
	l.sealMu.RUnlock()
	if sealed {
		return false
	}
	b, err := l.cfg.Node.Brief(l.cfg.Group)
	return err == nil && b.LeaderReady
}

// Seal stops the log taking stream operations, for good: Propose answers
// raftnode.ErrNotLeader (the engine's publish path: the client's retry
// finds the stream where it runs next) and Leader is false, so the
// runtime makes no leader decisions (expiry, retention removals). Every
// Propose that returned before Seal returned entered raftnode's queue
// before anything proposed after it, Barrier's entry in particular. A
// replica sealed before its group is removed from under its stream (a
// scale-down to one replica: docs/cluster.md, "Scaling down to one
// replica") so that its log ends with what it applied.
func (l *Log) Seal() {
	l.sealMu.Lock()
	l.sealed = true
	l.sealMu.Unlock()
}

// Barrier proposes an entry that carries no stream operation (a
// compaction floor no higher than the one applied, which changes
// nothing) and returns its proposal: once it resolved, every entry
// proposed before it, on a sealed log every stream operation the log
// will ever hold, has been handed to the Applier; Position names its
// index. Errors: raftnode's Propose errors.
func (l *Log) Barrier() (*raftnode.Proposal, error) {
	data := binary.AppendUvarint([]byte{floorMarker}, l.floor.Load())
	return l.cfg.Node.Propose(l.cfg.Group, data)
}

// Checkpoint tells the group that the stream's store holds the log's
// effects durably through raft index (as Config.Applied will report after
// a restart), so the WAL may drop the group's entries up to it
// (raftnode.Node.Compact). The leader compacts through the lowest index
// every replica of its view holds (raftnode.ReplicaStatus.Match: a
// replica that is down keeps the last one heard, one not heard from yet
// since this leader took over counts 0) and proposes that index as the
// compaction floor (package comment); a follower compacts through the
// highest floor it applied, since every replica held those entries when
// the leader proposed it, and should it lead none will need them. With
// Config.Snapshots, either also compacts through index minus
// Config.Retain, whatever the other replicas hold: one that lags further
// is caught up by a snapshot. Without (a memory stream), a replica that
// needs an entry no replica holds could never catch up, so nothing more
// is dropped. Checkpoint returns the index it asked the WAL to drop
// through (0: none). Errors: raftnode's (ErrUnknownGroup, ErrStopped,
// ErrFenced).
func (l *Log) Checkpoint(index uint64) (uint64, error) {
	st, err := l.cfg.Node.Status(l.cfg.Group)
	if err != nil {
		return 0, err
	}
	if st.Fenced != nil {
		return 0, raftnode.ErrFenced
	}
	to := min(index, l.floor.Load())
	if st.Role == raftnode.Leader {
		to = index
		for _, r := range st.Replicas {
			to = min(to, r.Match)
		}
		l.proposeFloor(to)
	}
	if l.cfg.Snapshots != nil {
		// A replica that lags further than Retain is caught up by a
		// snapshot: the log need not wait for it.
		retain := l.cfg.Retain
		if retain == 0 {
			retain = DefaultRetain
		}
		if index > retain {
			to = max(to, index-retain)
		}
		retainBytes := l.cfg.RetainBytes
		if retainBytes == 0 {
			retainBytes = DefaultRetainBytes
		}
		l.marksMu.Lock()
		now := l.appliedBytes.Load()
		to = max(to, l.marks.floor(now, retainBytes))
		l.marks.note(index, now)
		l.marksMu.Unlock()
	}
	if to == 0 || to < st.FirstIndex {
		return 0, nil
	}
	return to, l.cfg.Node.Compact(l.cfg.Group, to)
}

// floorMarker is the first byte of a compaction floor entry.
const floorMarker = 0xff

// proposeFloor proposes floor as the compaction floor when it is higher
// than the last this replica proposed (a failed proposal is proposed
// again at the next checkpoint).
func (l *Log) proposeFloor(floor uint64) {
	if floor == 0 || floor <= max(l.proposed.Load(), l.floor.Load()) {
		return
	}
	data := binary.AppendUvarint([]byte{floorMarker}, floor)
	if _, err := l.cfg.Node.Propose(l.cfg.Group, data); err == nil {
		l.proposed.Store(floor)
	}
}

// AppliedBytes returns the bytes of the stream operations this Log has
// handed to its Applier (their encoded size in the log): what a crash
// would make the replica apply again, were no checkpoint taken since
// (streamckpt's checkpoints by size).
func (l *Log) AppliedBytes() uint64 { return l.appliedBytes.Load() }

// Floor returns the highest compaction floor this replica applied.
func (l *Log) Floor() uint64 { return l.floor.Load() }

// Seen returns the index of the last entry handed to the Applier (data)
// and of the last entry applied, data or not (latest): when the Applier
// has applied through data, its state is the log's state at latest too,
// the entries after data being ones the engine never sees (membership
// changes, empty entries, compaction floors). A capture taken then may
// name latest (a snapshot must be at or after the last membership change,
// so that its configuration names the replica it is sent to).
func (l *Log) Seen() (data, latest uint64) {
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	return l.seenData, l.seenLatest
}

// Restored records that the stream's state was replaced by a snapshot's
// at index (Snapshotter.Restore, before it returns).
func (l *Log) Restored(index uint64) {
	l.seenMu.Lock()
	l.seenData, l.seenLatest = index, index
	l.seenMu.Unlock()
}

func (l *Log) see(data, latest uint64) {
	l.seenMu.Lock()
	if data != 0 {
		l.seenData = data
	}
	l.seenLatest = max(l.seenLatest, latest)
	l.seenMu.Unlock()
}

// Close ends the watcher goroutine; it does not remove the group from the
// node. Proposals still in flight are not reported to the Forgetter.
func (l *Log) Close() {
	l.once.Do(func() {
		close(l.done)
		l.gate.close()
	})
}

// StateMachine returns the group's state machine, to give to
// raftnode.Node.AddGroup.
func (l *Log) StateMachine() raftnode.StateMachine { return stateMachine{l} }

// stateMachine is the raftnode side of a Log: it decodes each committed
// entry and applies it through the engine's Applier, on the raftnode
// worker that runs the group (never two at a time for one group).
type stateMachine struct{ l *Log }

// Apply decodes and applies entries in order. An entry that does not
// decode is damage (every replica wrote what a leader encoded): the error
// fences this replica (docs/cluster.md decision 12).
func (s stateMachine) Apply(entries []raftnode.Entry) error {
	var data uint64
	defer func() {
		if len(entries) > 0 {
			s.l.see(data, entries[len(entries)-1].Index)
		}
	}()
	for i := range entries {
		e := &entries[i]
		if len(e.Data) == 0 {
			continue
		}
		if e.Data[0] == floorMarker {
			floor, n := binary.Uvarint(e.Data[1:])
			if n <= 0 || n != len(e.Data)-1 {
				return fmt.Errorf("streamlog: group %d entry %d (term %d): malformed compaction floor", s.l.cfg.Group, e.Index, e.Term)
			}
			if cur := s.l.floor.Load(); floor > cur {
				s.l.floor.Store(s.coveredFloor(floor, e.Index, data))
			}
			continue
		}
		// The decoded operation aliases e.Data, which the Applier may
		// keep past this call (a stream runtime applies on its own
		// goroutine): raftnode lets it (raftnode.Entry), and the log
		// holds the same bytes until it is compacted. A copy here was a
		// second copy of every entry committed and not yet applied:
		// 100 MB and more on a leader taking a burst (docs/memory.md,
		// "Memory after bursts").
		op, err := stream.DecodeOp(e.Data)
		if err != nil {
			return fmt.Errorf("streamlog: group %d entry %d (term %d): %w", s.l.cfg.Group, e.Index, e.Term, err)
		}
		s.l.appliedBytes.Add(uint64(len(e.Data)))
		s.l.a.Apply(e.Index, op, e.Tag)
		data = e.Index
	}
	return nil
}

// coveredFloor returns the floor a new compaction floor entry at index
// sets: its own index when no stream operation lies after floor (data is
// the last one handed to the Applier in this call, 0 for none), else
// floor (package comment, "An idle group's last floor").
func (s stateMachine) coveredFloor(floor, index, data uint64) uint64 {
	last, _ := s.l.Seen()
	if last = max(last, data); last == 0 {
		// Nothing handed over since the start: the last operation is at
		// or before the checkpoint the replica started from.
		last = s.Applied()
	}
	if last <= floor {
		return index
	}
	return floor
}

// Handed returns the index of the last operation handed to the Applier
// (0 before any): a stream runtime that applies on its own goroutine has
// caught up with its log when its applied index reaches it.
func (l *Log) Handed() uint64 {
	data, _ := l.Seen()
	return data
}

// LeaderChanged passes a change of leadership to Config.OnLeader
// (raftnode.LeaderObserver).
func (s stateMachine) LeaderChanged(leader bool, _ uint64) {
	if f := s.l.cfg.OnLeader; f != nil {
		f(leader)
	}
}

// Applied returns Config.Applied's checkpoint (0 without one).
func (s stateMachine) Applied() uint64 {
	if s.l.cfg.Applied == nil {
		return 0
	}
	return s.l.cfg.Applied()
}

// Snapshot is never called: raftnode asks SnapshotAt (ErrNoSnapshot).
func (s stateMachine) Snapshot() ([]byte, error) { return nil, ErrNoSnapshot }

// SnapshotAt is Config.Snapshots' (raftnode.SnapshotIndexer); without
// it, ErrNoSnapshot (raftnode sends no snapshot).
func (s stateMachine) SnapshotAt(min uint64) (uint64, []byte, error) {
	if s.l.cfg.Snapshots == nil {
		return 0, nil, ErrNoSnapshot
	}
	return s.l.cfg.Snapshots.SnapshotAt(min)
}

// RestoreInBackground is true with Config.Snapshots: the install fetches
// the stream's messages (raftnode.BackgroundRestorer).
func (s stateMachine) RestoreInBackground() bool { return s.l.cfg.Snapshots != nil }

// Restore is Config.Snapshots'; without it, ErrNoSnapshot (which fences
// the replica).
func (s stateMachine) Restore(index uint64, data []byte) error {
	if s.l.cfg.Snapshots == nil {
		return ErrNoSnapshot
	}
	return s.l.cfg.Snapshots.Restore(index, data)
}

// byteMarks remembers, for the checkpoints of a Log, the index each was
// at and the bytes applied by then, oldest first, so that Checkpoint can
// find the newest index with at least RetainBytes applied after it.
type byteMarks []byteMark

type byteMark struct{ index, bytes uint64 }

// note records a checkpoint at index with bytes applied.
func (m *byteMarks) note(index, bytes uint64) {
	if n := len(*m); n > 0 && (*m)[n-1].index >= index {
		return
	}
	*m = append(*m, byteMark{index, bytes})
}

// floor returns the index of the newest mark with at least limit bytes
// applied after it (now bytes applied in all), 0 if none, and forgets
// the marks before that one.
func (m *byteMarks) floor(now, limit uint64) uint64 {
	k := -1
	for i, mk := range *m {
		if now-min(mk.bytes, now) >= limit {
			k = i
		}
	}
	if k < 0 {
		return 0
	}
	to := (*m)[k].index
	*m = append((*m)[:0], (*m)[k:]...)
	return to
}
