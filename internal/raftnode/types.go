package raftnode

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cairnmq/cairn/internal/vfs"
)

// GroupID names a Raft group on every server that holds one of its
// replicas. The cluster layer allocates it (the meta group, one per stream
// or consumer group); 0 is not a valid group.
type GroupID uint64

// ReplicaID is a replica's Raft ID within its group. IDs are allocated by
// the cluster layer from a per-group counter and never reused
// (docs/cluster.md, decision 3): a replica removed and added again on
// the same server is a new replica. 0 is not a valid replica.
type ReplicaID uint64

// ServerID names a server to the Transport (cairn's server name).
type ServerID string

// Incarnation identifies one store: random bytes drawn when the WAL was
// created and kept in every segment header. A replica is bound to the
// incarnation of the store that created it; a wiped or replaced store has
// another, so it can never vote as its old self (docs/cluster.md, decision 3).
type Incarnation [16]byte

// String returns the incarnation as 32 hexadecimal digits.
func (i Incarnation) String() string { return hex.EncodeToString(i[:]) }

// Peer is one replica of a group and the server that holds it.
type Peer struct {
	Replica ReplicaID
	Server  ServerID
}

// Entry is one committed log entry handed to StateMachine.Apply. Data is
// what was proposed; it is nil for the entries raft makes itself (a new
// leader's empty entry, membership changes), which the state machine
// treats as no-ops but counts as applied. Data is the log's own copy of
// the entry (raft's clone of the proposal on the leader, the decoded
// message on a follower, a buffer of the replayed WAL record's entries of
// the group after a restart), which nothing writes: Apply must not modify
// it, and may keep it, or slices of it, after it returns, which keeps that
// memory (a replayed record's entries all together) as long as it is kept.
type Entry struct {
	Index uint64
	Term  uint64
	Data  []byte
	// Tag is the tag given to ProposeTagged, on the node that proposed
	// this entry and only for the exact entry it proposed (this index,
	// under the term it was proposed in, while its Proposal waits: also
	// once the node lost the leadership, kept.go; docs/cluster.md,
	// decision 7); 0 everywhere else. It is the
	// proposer's key of the engine's Applier (docs/engine.md) and is not
	// in the log.
	Tag uint64
	// Result is set by Apply, if it likes, and handed to the Proposal
	// of this entry on the server that proposed it (the outcome a client
	// is told: a stream sequence, an error). Replicas ignore it.
	Result any
}

// StateMachine is a group's replicated state. Its methods are called by
// one goroutine at a time for a given group (never concurrently with
// each other), by whichever worker runs the group; different groups'
// state machines run concurrently.
type StateMachine interface {
	// Apply applies committed entries, in index order, each exactly once
	// since the last durable checkpoint. It must be a pure function of the
	// state and the entries: no clock, randomness, map order or local
	// configuration (docs/cluster.md, decision 6), so replicas at equal
	// index hold equal state. It need not make anything durable: the WAL
	// holds the entries until Compact. An error fences the group (the
	// replica stops and is reported, docs/cluster.md decision 12); it is
	// for damage, not for outcomes such as a rejected publish, which go in
	// Entry.Result.
	Apply(entries []Entry) error
	// Applied returns the index through which the state machine's durable
	// state reflects the log, as of AddGroup: entries after it are applied
	// again. 0 for a new replica (a bootstrapped group's state machine is
	// then handed an empty entry at index 1, its log's synthetic base).
	Applied() uint64
	// Snapshot returns the state as of the last applied entry, for a
	// follower that needs entries the WAL has dropped. Called rarely.
	Snapshot() ([]byte, error)
	// Restore replaces the state with a snapshot taken at index (from
	// another replica's Snapshot) and makes it durable before returning.
	// An error fences the group.
	Restore(index uint64, data []byte) error
}

// SnapshotIndexer is implemented by a StateMachine whose snapshot is not
// taken at its last applied index but at an index of its own choosing, a
// moment it captured (a stream's manifest: docs/cluster.md, "Stream
// snapshots"). When raft needs a snapshot for a follower, raftnode calls
// SnapshotAt(min) in place of Snapshot: min is the lowest index the
// snapshot may have (the log's compaction point, and the last membership
// change, so that the snapshot's conf state names every replica). It
// returns the index and data of a capture at or above min and at or below
// the last index handed to Apply, or ErrSnapshotPending while it prepares
// one: raft then sends nothing and asks again at its next chance (its
// next heartbeat response from that follower). Called on the group's
// worker; it must not block.
type SnapshotIndexer interface {
	SnapshotAt(min uint64) (index uint64, data []byte, err error)
}

// BackgroundRestorer is implemented by a StateMachine whose Restore takes
// long (it fetches the data a snapshot names from another replica:
// docs/cluster.md decision 8). When RestoreInBackground is true,
// raftnode calls Restore on a goroutine of its own and parks the group
// until it returns: the group runs no round, so it sends nothing (no
// vote, no append response: it promises nothing it does not hold yet),
// applies nothing and does not tick; other groups go on. Restore still
// makes the snapshot durable before returning. An error wrapping
// ErrRestoreRetry abandons the snapshot instead of fencing the replica:
// the replica goes on from its log as it was before (raft is rebuilt from
// the durable log, the snapshot item is never written), and the leader
// sends another snapshot when it next finds the follower behind its
// compaction point.
type BackgroundRestorer interface {
	RestoreInBackground() bool
}

// LeaderObserver is implemented by a StateMachine that acts on its
// replica's leadership (a stream subscribes to its subjects only where it
// leads, docs/cluster.md decision 14). LeaderChanged is called on the
// worker that runs the group, after that round's committed entries were
// applied and never concurrently with Apply: leader true once the
// replica leads term and has applied an entry of that term (so every
// entry committed before it: GroupStatus.LeaderReady), false when it no
// longer leads (it stepped down, a higher term deposed it, or it was
// fenced) after being told it led. A replica elected while it still has
// entries of earlier terms to apply (a restart replaying its log) is told
// only once it has applied them. It must not block.
type LeaderObserver interface {
	LeaderChanged(leader bool, term uint64)
}

// SuccessionObserver is implemented by a StateMachine that acts on how
// its replica came to lead. Succeeded is called just before
// LeaderChanged(true, term), on the same worker, with handedOver true
// when the replica leads term because its predecessor handed it the
// leadership (a transfer: TransferLeader, HandOver, StepDown; raft's
// MsgTimeoutNow, after which the transferee campaigns for the next term
// at once) and false when it won an election after its predecessor went
// silent (killed, partitioned, paused past the election timeout) or
// stepped down without naming it. A predecessor that handed over is
// alive and ends what waited on it itself; one that went silent may not
// (consumerrun: the pull requests that waited on a killed consumer
// leader). It must not block.
type SuccessionObserver interface {
	Succeeded(term uint64, handedOver bool)
}

// Transport carries frames between servers. Send must not block on the
// network: it queues, or fails at once (the frame is lost and the groups
// with messages in it are told the peer is unreachable). Frames may be
// lost, delayed, reordered or duplicated; Raft copes.
type Transport interface {
	Send(to ServerID, frame []byte) error
}

// Config configures a Node. Zero values are replaced by the defaults
// named on each field.
type Config struct {
	// FS and Dir are where the WAL lives. Required.
	FS  vfs.FS
	Dir string
	// Server is this server's name, as the Transport knows it. Required.
	Server ServerID
	// Transport sends this node's frames. Required (tests may pass a
	// MemNetwork's Transport).
	Transport Transport
	// MaxFrameBytes is the largest frame the Transport carries (default
	// DefaultMaxFrameBytes, the cluster transport's transport.MaxFrameBytes;
	// at least 4 KiB). A round's messages for one server go in as many
	// frames as keep each within it, and it bounds an entry
	// (MaxEntryBytes: Propose refuses a larger one with ErrTooLarge) and
	// MaxSizePerMsg (at most a quarter of it). Tests shrink it.
	MaxFrameBytes int

	// TickInterval is the period of the one ticker (default 100 ms,
	// docs/cluster.md decision 10). Ignored when Ticks is set or when
	// the node is driven by hand (Tick, RunRound).
	TickInterval time.Duration
	// Ticks, if set, replaces the ticker: each value received is one
	// tick (an injected clock).
	Ticks <-chan time.Time
	// HeartbeatTicks and ElectionTicks are raft's heartbeat and election
	// timeouts in ticks (defaults 1 and 10, docs/cluster.md decision
	// 10). raft randomises the election timeout in [ElectionTicks,
	// 2*ElectionTicks).
	HeartbeatTicks int
	ElectionTicks  int
	// Workers is the size of the worker pool of Start (default 2).
	Workers int
	// SegmentBytes is the size past which the WAL starts a new segment
	// (default 64 MiB).
	SegmentBytes int64
	// MaxSizePerMsg bounds the bytes of entries in one append message,
	// and of committed entries handed to one Apply (default 1 MiB, at
	// most MaxFrameBytes/4: an append of many small entries adds at most
	// 6 bytes of framing to each entry of at least 4 bytes, so it stays
	// within 2.5 times this plus EntryOverhead, one frame; a single
	// larger entry goes alone, up to MaxEntryBytes).
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds the append messages in flight to one
	// follower (default 256).
	MaxInflightMsgs int
	// MaxInflightBytes bounds the bytes of entries in append messages in
	// flight to one follower (etcd raft's MaxInflightBytes; default 8 MiB,
	// at least MaxSizePerMsg).
	MaxInflightBytes uint64
	// MaxUncommittedBytes bounds the bytes a leader holds uncommitted;
	// proposals beyond it fail with ErrDropped (default 64 MiB).
	MaxUncommittedBytes uint64
	// MaxPendingProposals bounds the proposals waiting for a group's next
	// round; beyond it Propose fails with ErrBusy (default 4096).
	MaxPendingProposals int
	// DisableQuiescence keeps idle groups ticking and heartbeating (for
	// tests and comparisons; quiescence is on by default, quiesce.go).
	DisableQuiescence bool
	// MaxInbox bounds the received messages waiting for a group's next
	// round; beyond it messages are dropped (default 4096).
	MaxInbox int
	// MaxInboxBytes bounds the bytes of those messages (default 64 MiB); a
	// larger message (a snapshot) is taken only into an empty inbox.
	MaxInboxBytes int
	// MaxRoundProposalBytes bounds the bytes of proposals a group steps in
	// one round; the rest wait for the next (default 4 MiB, at most a
	// quarter of MaxUncommittedBytes, so raft never drops a whole
	// oversized batch).
	MaxRoundProposalBytes int
	// AsideBytes: a group of a started node whose next round would step
	// a proposal, or a received message, of at least this many bytes (a
	// large entry) runs that round on a goroutine of its own beside the
	// round loop, which goes on serving the other groups meanwhile (their
	// heartbeats, answers and ticks); docs/cluster.md, "Large entries
	// beside the round loop". Default 4 MiB (four times MaxSizePerMsg's
	// default: only an entry of that size makes such a message); negative:
	// every round runs on the loop.
	AsideBytes int
	// DeferReplay makes Open return without replaying the WAL (it only
	// creates it, or reads its incarnation from its first segment): the
	// caller runs Replay, on a goroutine of its own, so that a long WAL
	// does not hold up the server's start (docs/cluster.md,
	// "Restarts").
	DeferReplay bool
	// PeerDead, if set, is told each time a peer server is found dead:
	// no beat from it for an election timeout, or PeerUnreachable
	// (the catch-up service stops waiting for its answers:
	// docs/cluster.md, "Stream snapshots"). It runs on the ticker's
	// or the caller's goroutine and must not block.
	PeerDead func(ServerID)
	// Logf, if set, receives the node's notable events (recovery,
	// fences, damage): the cluster layer logs them as warnings. Infof,
	// if set, receives the normal events an operator may want to see (a
	// new WAL created: every first start makes one); unset, they go to
	// Debugf. Debugf, if set, receives the routine ones (every change of
	// a replica's role or term, WAL segments started: a busy cluster has
	// thousands). None may block.
	Logf, Infof, Debugf func(format string, args ...any)
	// Now is the wall clock of the round loop's pauses that a line about
	// lost leaderships reports (deposed.go; default time.Now). Tests set
	// it; nothing else reads it.
	Now func() time.Time
}

// Errors. None reaches a client as such: the cluster layer maps them
// (ErrNotLeader to the JetStream "no leader"/forwarding path, ErrBusy and
// ErrDropped to back-pressure, ErrNoReply to silence so the client's
// timeout and retry happen, docs/cluster.md decision 7).
var (
	// ErrNotLeader: the proposal never entered the log (this replica is
	// not the leader). Safe to retry elsewhere.
	ErrNotLeader = errors.New("raftnode: not the leader")
	// ErrNoReply: the proposal entered the log, but this replica cannot
	// tell whether it committed (another entry applied at its index, a
	// snapshot passed it, the node stopped, or its lost leadership left
	// it unknown for ten election timeouts: Proposal); it may still
	// commit. Say nothing to the client.
	ErrNoReply = errors.New("raftnode: no reply (leadership lost)")
	// ErrBusy: too many proposals waiting; nothing was proposed.
	ErrBusy = errors.New("raftnode: too many pending proposals")
	// ErrDropped: raft dropped the proposal (leadership transfer in
	// progress or too many uncommitted bytes); nothing was proposed.
	ErrDropped = errors.New("raftnode: proposal dropped")
	// ErrFenced: the replica is fenced (identity mismatch, damage); it
	// takes no part in its group. Errors from Status say why.
	ErrFenced = errors.New("raftnode: replica fenced")
	// ErrUnknownGroup: no such group on this node.
	ErrUnknownGroup = errors.New("raftnode: unknown group")
	// ErrGroupExists: AddGroup of a group already added.
	ErrGroupExists = errors.New("raftnode: group already added")
	// ErrRemoved: the replica was removed from this store; replica IDs are
	// never reused.
	ErrRemoved = errors.New("raftnode: replica removed")
	// ErrStopped: the node is closed.
	ErrStopped = errors.New("raftnode: node stopped")
	// ErrCorrupt marks damage found in the WAL or a group's recovered
	// state (wrapped with where).
	ErrCorrupt = errors.New("raftnode: corrupt")
	// ErrIdentity marks a replica whose binding (incarnation, replica ID)
	// does not match this store.
	ErrIdentity = errors.New("raftnode: replica identity mismatch")
	// ErrStateLost marks (with ErrCorrupt) a replica whose state machine
	// reports an applied index below its log's compaction point when its
	// group is added after a restart: it lost what the compacted entries
	// held (a memory stream's replica that was caught up by a snapshot,
	// docs/cluster.md "Memory streams"). The replica is fenced; its
	// log and votes are intact, but it must be replaced.
	ErrStateLost = errors.New("raftnode: state machine behind the compacted log")
	// ErrTooLarge: the entry is larger than MaxEntryBytes, so no frame
	// could carry it to a follower; nothing was proposed. The stream
	// layer refuses such a publish before it proposes
	// (docs/cluster.md, "Entries larger than a frame").
	ErrTooLarge = errors.New("raftnode: entry larger than a frame carries")
	// ErrBadFrame: a received frame failed its checksum or did not parse.
	ErrBadFrame = errors.New("raftnode: bad frame")
	// ErrInvalid: a malformed argument (zero IDs, empty peer list).
	ErrInvalid = errors.New("raftnode: invalid argument")
	// ErrSnapshotPending is returned by SnapshotIndexer.SnapshotAt while
	// the state machine prepares a capture: no snapshot is sent yet.
	ErrSnapshotPending = errors.New("raftnode: snapshot not ready yet")
	// ErrRestoreRetry, wrapped in an error of Restore, abandons the
	// snapshot without fencing the replica (BackgroundRestorer): its state
	// is as before the call, and another snapshot may be installed later.
	ErrRestoreRetry = errors.New("raftnode: snapshot not installed, retry later")
)

func (c *Config) fill() error {
	if c.FS == nil || c.Dir == "" || c.Server == "" || c.Transport == nil {
		return errors.Join(ErrInvalid, errors.New("raftnode: Config needs FS, Dir, Server and Transport"))
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.HeartbeatTicks, 1)
	def(&c.ElectionTicks, 10)
	def(&c.Workers, 2)
	def(&c.MaxInflightMsgs, 256)
	def(&c.MaxPendingProposals, 4096)
	def(&c.MaxInbox, 4096)
	if c.ElectionTicks <= c.HeartbeatTicks {
		return errors.Join(ErrInvalid, errors.New("raftnode: ElectionTicks must exceed HeartbeatTicks"))
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 64 << 20
	}
	def(&c.MaxFrameBytes, DefaultMaxFrameBytes)
	if c.MaxFrameBytes < minFrameBytes {
		return errors.Join(ErrInvalid, fmt.Errorf("raftnode: MaxFrameBytes %d is below %d", c.MaxFrameBytes, minFrameBytes))
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	c.MaxSizePerMsg = min(c.MaxSizePerMsg, uint64(c.MaxFrameBytes/4))
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = 64 << 20
	}
	def(&c.MaxInboxBytes, 64<<20)
	def(&c.MaxRoundProposalBytes, min(4<<20, int(c.MaxUncommittedBytes/4)))
	if c.AsideBytes == 0 {
		c.AsideBytes = 4 << 20
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = max(8<<20, c.MaxSizePerMsg)
	}
	if c.Debugf == nil {
		c.Debugf = func(string, ...any) {}
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Infof == nil {
		c.Infof = c.Debugf
	}
	return nil
}
