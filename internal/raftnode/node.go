package raftnode

import (
	"fmt"
	"hash/crc32"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairnmq/cairn/internal/logger"
)

// Node runs this server's replicas of every Raft group over one WAL.
// Its methods are safe for concurrent use. See the package comment for
// the order of use; CONCURRENCY.md for its goroutines and locks.
type Node struct {
	cfg Config

	walMu sync.Mutex // serialises WAL access: rounds, and Open/Replay/Close
	wal   *wal
	// walErr is the WAL's failure (wal.damage) as last seen under walMu:
	// a round with nothing to write or sync reads it without the lock.
	walErr atomic.Pointer[error]
	// inc is the WAL's store incarnation (Incarnation), set by Open,
	// Replay and QuarantineWAL, read without walMu.
	inc atomic.Pointer[Incarnation]
	// replayed is set once Replay ran (rounds wait for it); replayErr is
	// its error, under walMu.
	replayed  atomic.Bool
	replayErr error

	mu struct {
		sync.RWMutex
		groups map[GroupID]*group
		list   []*group // in order of AddGroup: the order ticks queue them
		closed bool
	}
	sched scheduler
	ticks atomic.Uint64 // ticks so far; each group catches up to it when it runs
	// peersGen counts changes of the groups' peers (a group added or
	// removed, SetPeers, a peer learned from a frame): checkLiveness
	// gathers the peer servers again only when it moved.
	peersGen atomic.Uint64
	// liveGen counts liveness changes (a server found dead, reported
	// gone, or heard again), bumped before the quiet groups are woken
	// for them: a group that decided to go quiet before a change and
	// published its quiet after wakeFor looked finds the count moved and
	// wakes itself (group.catchMissedWake).
	liveGen atomic.Uint64
	alive   liveness    // peer servers' liveness (quiesce.go)
	beat    atomic.Bool // a tick asked the next round to send liveness beats

	// Goroutines of Start.
	started bool
	stop    chan struct{} // closed by Close: the loop and the ticker return
	work    chan func()   // closed by Close after the loop returned: the workers return
	loopWG  sync.WaitGroup
	asideWG sync.WaitGroup // rounds beside the loop (runAside)
	workWG  sync.WaitGroup
	roundMu sync.Mutex // one round at a time (RunRound by hand, or the loop)
	// roundEnd is when the last round ended (Config.Now) and pauses the
	// round loop's longest recent pause (under roundMu); deposed the
	// leaderships lost in the current round (deposed.go).
	roundEnd time.Time
	pauses   pauseMax
	deposed  deposals
	// lastRoundTick is the tick at which the loop's last round started,
	// loopPauses its pauses in ticks over the last minute, stretchLogged
	// and stretchLogAt the stretch last logged and the tick before which
	// no rise is logged (under roundMu); stretch the factor in thousandths
	// that group.tick and checkLiveness read (stretch.go).
	lastRoundTick               uint64
	loopPauses                  pauseWindow
	stretchLogged, stretchLogAt uint64
	stretch                     atomic.Uint64

	// slowLogged is when a slow round was last logged (Unix ns), and
	// slowSkipped how many were not logged since (roundTrace.report).
	slowLogged, slowSkipped atomic.Int64

	// isolated is set by Isolate: the node takes no frame and sends none.
	// Receive holds isoMu's read lock while it queues a frame, so that
	// Isolate, taking the write lock, knows every frame taken is queued.
	isoMu    sync.RWMutex
	isolated atomic.Bool

	// procPause is the ticker's record of the process's pauses
	// (procpause.go).
	procPause procPause

	// newWAL is set when the WAL was made at this start, by Open or
	// QuarantineWAL (NewWAL).
	newWAL atomic.Bool

	// invites are the messages received for groups not run here
	// (Invitation).
	invites invitations

	// testHook, if set, is called at the crash points of a round; a true
	// return abandons the round at once, as a crash of the process would
	// (nothing more is written, sent or applied).
	testHook func(point crashPoint) bool
	// slowHook, if set, is called in every round with the bytes of its
	// WAL items before they are written: a test makes a round with a
	// large entry slow (a starved CPU encoding and checksumming it, a
	// slow disk) by sleeping in it.
	slowHook func(bytes int)
	// yieldHook, if set, is called where a started node yields to the
	// goroutines its appends woke (yieldToSenders), instead of
	// runtime.Gosched.
	yieldHook func()
}

// crashPoint names a point in a round where tests may crash the node.
type crashPoint int

const (
	afterWrite   crashPoint = iota + 1 // the round's record is written, not fsynced, nothing sent
	afterAppends                       // the leaders' appends and heartbeats are sent, not fsynced
	afterSync                          // fsynced, nothing else sent
	afterSend                          // everything sent, nothing applied
)

// crashAt reports whether the test hook crashes the round at point p.
func (n *Node) crashAt(p crashPoint) bool {
	return n.testHook != nil && n.testHook(p)
}

// scheduler is the queue of groups with work. queued flags are guarded
// by mu.
type scheduler struct {
	mu     sync.Mutex
	queue  []*group
	queued map[*group]bool
	wake   chan struct{} // one token: the queue may be non-empty
}

func (s *scheduler) enqueue(g *group) {
	s.mu.Lock()
	if !s.queued[g] {
		s.queued[g] = true
		s.queue = append(s.queue, g)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns and clears the queue, in order.
func (s *scheduler) take() []*group {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	clear(s.queued)
	return q
}

// Open opens (or creates) the WAL in cfg.Dir and replays it. A torn tail
// is cut; damage to fsynced data does not fail Open, but Damage reports it
// and every group added is fenced. With Config.DeferReplay, Open only
// creates the WAL or reads its incarnation, and Replay replays it.
// Errors: ErrInvalid for a bad Config, and file-system errors other than
// damage.
func Open(cfg Config) (*Node, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	w, err := prepareWAL(cfg.FS, cfg.Dir, cfg.SegmentBytes, cfg.Logf, cfg.Debugf)
	if err != nil {
		return nil, err
	}
	if w.created {
		cfg.Infof("raftnode: new WAL in %s, store incarnation %s", w.dir, w.inc)
	}
	n := &Node{cfg: cfg, wal: w, loopPauses: newPauseWindow(cfg.TickInterval)}
	n.stretch.Store(1000)
	n.newWAL.Store(w.created)
	inc := w.inc
	n.inc.Store(&inc)
	if !cfg.DeferReplay {
		if err := n.Replay(); err != nil {
			return nil, err
		}
	}
	n.mu.groups = map[GroupID]*group{}
	n.sched.queued = map[*group]bool{}
	n.sched.wake = make(chan struct{}, 1)
	n.alive.heard, n.alive.heardAt, n.alive.dead = map[ServerID]uint64{}, map[ServerID]time.Time{}, map[ServerID]bool{}
	return n, nil
}

// NewWAL reports whether the node's WAL was made at this start rather
// than opened: by Open, which found none in Config.Dir (a first start, a
// wiped store), or by QuarantineWAL. Such a node recovers nothing: its
// replicas of existing groups belong to a store that is gone (fenced
// with ErrIdentity, and logged at Infof rather than Logf: the cluster
// replaces them), and new ones start empty.
func (n *Node) NewWAL() bool { return n.newWAL.Load() }

// Replay replays the WAL, once (Open does it unless Config.DeferReplay):
// it reads every segment, cuts a torn tail, and keeps each group's state
// for AddGroup. Until it has run, the node runs no round and AddGroup
// runs it first. Errors: the file system's, other than damage (which
// Damage reports); after one the WAL takes no more writes and every group
// added is fenced.
func (n *Node) Replay() error {
	n.walMu.Lock()
	defer n.walMu.Unlock()
	if n.replayed.Load() {
		return n.replayErr
	}
	n.replayErr = n.wal.load()
	inc := n.wal.inc // load reads it again when the first header was damaged
	n.inc.Store(&inc)
	if n.replayErr != nil && n.wal.damage == nil {
		n.wal.damage = fmt.Errorf("%w: WAL replay failed: %w", ErrCorrupt, n.replayErr)
	}
	n.replayed.Store(true)
	return n.replayErr
}

// Incarnation returns the store incarnation of the WAL: the value the
// cluster layer binds this server's replicas to.
func (n *Node) Incarnation() Incarnation { return *n.inc.Load() }

// ElectionTimeout is the shortest election timeout of the node's groups
// (ElectionTicks ticks of TickInterval; raft draws each group's in
// [1, 2) times it), after which a leader also abandons a leadership
// transfer that did not take.
func (n *Node) ElectionTimeout() time.Duration {
	return time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval
}

// Damage returns the damage found at Open or met by a later write or
// fsync (wrapping ErrCorrupt), or nil. While it is set, every group is
// fenced.
func (n *Node) Damage() error {
	n.walMu.Lock()
	defer n.walMu.Unlock()
	return n.wal.damage
}

// TornBytes returns how many bytes of torn tail Open cut from the WAL.
func (n *Node) TornBytes() int64 { return n.wal.torn }

// RecoveredGroups returns the groups the WAL holds a live replica of that
// AddGroup has not claimed, sorted. Their entries pin the WAL until they
// are added or removed; nothing is deleted by inference
// (docs/cluster.md, decision 12).
func (n *Node) RecoveredGroups() []GroupID {
	n.walMu.Lock()
	defer n.walMu.Unlock()
	var gs []GroupID
	for g := range n.wal.recovered {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	return gs
}

// RecoveredReplica returns the replica of group id that the WAL holds,
// live (no tombstone) and not yet claimed by AddGroup, and whether there
// is one. The cluster layer restarts such a replica even when its
// assignment no longer names this server: a replica that was leaving its
// group (a move) when the server stopped may still be a voter the group
// needs for a quorum (docs/cluster.md, "Replacing a replica"). It
// waits for the WAL's replay.
func (n *Node) RecoveredReplica(id GroupID) (ReplicaID, bool) {
	_ = n.Replay()
	n.walMu.Lock()
	defer n.walMu.Unlock()
	rec := n.wal.recovered[id]
	if rec == nil || rec.meta.replica == 0 || rec.meta.removed >= rec.meta.replica {
		return 0, false
	}
	return rec.meta.replica, true
}

// Removed reports whether this store holds a tombstone of replica r of
// group id (RemoveGroup wrote it, fsynced: AddGroup of that replica would
// answer ErrRemoved). It waits for the WAL's replay.
func (n *Node) Removed(id GroupID, r ReplicaID) bool {
	_ = n.Replay()
	n.walMu.Lock()
	defer n.walMu.Unlock()
	m := n.wal.meta[id]
	return m != nil && m.removed >= r
}

// WALStats reports the WAL's segments and the groups that keep its oldest
// segment from being deleted (a stalled group pins the WAL).
func (n *Node) WALStats() (segments int, blocking []GroupID) {
	n.walMu.Lock()
	defer n.walMu.Unlock()
	return len(n.wal.segs), n.wal.blocking()
}

// GroupConfig is the binding of one replica, as the cluster layer knows
// it (docs/cluster.md, decision 3).
type GroupConfig struct {
	ID      GroupID
	Replica ReplicaID
	// Incarnation is the store the replica was created on. If it is not
	// this WAL's, the replica is fenced: this store is not the one that
	// made its promises.
	Incarnation Incarnation
	// Peers are every replica of the group (this one included) and their
	// servers, used to address messages. For a bootstrap, the voters.
	Peers []Peer
	// Join, for a replica this store does not hold yet: start empty, to
	// be fed by the leader (a learner being added), instead of
	// bootstrapping the group with Peers as its voters.
	Join bool
	// Voters, for a bootstrap, are the group's initial voters when they
	// are not every peer (a group whose membership changed since it was
	// created: a replica bootstrapped late must start from the same
	// configuration as the others did; a voter no longer among Peers has
	// no server to address). Empty means every peer.
	Voters []ReplicaID
	// BaseHoldsState says the group's bootstrap base (index 1) stands for
	// a state the state machine cannot rebuild once lost (a memory
	// stream's group started from the messages of a stream of one
	// replica: docs/cluster.md, "Memory streams"): a replica recovered
	// from the WAL whose state machine reports Applied 0 is fenced with
	// ErrStateLost, instead of being handed the log from index 2 as an
	// empty state machine of a bootstrapped group is.
	BaseHoldsState bool
	// Fence, if not nil, adds the replica fenced with this error (the
	// cluster layer found its state machine's state damaged before the
	// group could start: docs/cluster.md, "Fencing"): it takes no
	// part in its group, its WAL record is kept, Status reports the
	// error, and RemoveGroup leaves its tombstone, so that a replacement
	// under a new replica ID can start on this store. The state machine
	// is never called.
	Fence error
	// ForceSole, for a replica the WAL holds, makes it the group's only
	// voter before it starts: conf change entries removing every other
	// replica are appended to its log and committed by force (force.go;
	// docs/cluster.md, "Forcing a new cluster"). An operator's last
	// resort when a majority of the group lost its logs: entries only
	// the others held are lost. Ignored for a replica created here.
	ForceSole bool
	// HoldPastUncommitted keeps the proposals etcd raft drops once the
	// leader holds MaxUncommittedBytes uncommitted in the group's queue,
	// to be stepped again after commits free room, instead of failing
	// them with ErrDropped (group.dropped; docs/cluster.md, "Proposals
	// past the uncommitted limit"). Streams set it (a publish burst
	// waits); a replicated consumer does not (its log reports a dropped
	// batch: consumerlog.Log.Dropped).
	HoldPastUncommitted bool
	// Label says what the group is in this node's log lines (the cluster
	// layer's "stream 'ACC > NAME'", "the meta group"); empty: the
	// group's number alone (trial 37: a line naming "group 5" and "leader
	// replica 2466943280344580348" told an operator nothing).
	Label string
}

// AddGroup starts this node's replica of a group. If the WAL holds the
// replica, it is recovered from there and the state machine (entries
// after sm.Applied() are applied again); if not, it is created (a
// bootstrap voter, or with Join an empty replica), durably before it
// sends anything. The replica is fenced, not refused, when its binding
// does not match the store (ErrIdentity), its recovered state fails a
// check (ErrCorrupt), or the WAL is damaged; Status says why.
// Errors: ErrInvalid, ErrGroupExists, ErrRemoved (the replica was removed
// from this store), ErrStopped.
func (n *Node) AddGroup(cfg GroupConfig, sm StateMachine) error {
	peers, err := checkGroupConfig(cfg)
	if err != nil {
		return err
	}
	_ = n.Replay() // its error fences the group below (the WAL's damage)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return ErrStopped
	}
	if n.mu.groups[cfg.ID] != nil {
		return ErrGroupExists
	}
	g := &group{n: n, id: cfg.ID, replica: cfg.Replica, label: cfg.Label, sm: sm, baseHoldsState: cfg.BaseHoldsState, forceSole: cfg.ForceSole, holdPast: cfg.HoldPastUncommitted, waiters: map[uint64]*Proposal{}, reads: map[uint64]*Proposal{},
		lastTick: n.ticks.Load(), leaderTick: n.ticks.Load(), announce: true}
	g.mu.peers = peers
	n.walMu.Lock()
	err = n.initGroup(g, cfg)
	n.walMu.Unlock()
	if err != nil {
		return err
	}
	n.mu.groups[cfg.ID] = g
	n.mu.list = append(n.mu.list, g)
	n.peersGen.Add(1) // after the group is listed: checkLiveness reads the count first
	n.forgetInvitation(cfg.ID)
	if g.fencedErr == nil {
		g.publish()
	}
	n.sched.enqueue(g)
	return nil
}

func checkGroupConfig(cfg GroupConfig) (map[ReplicaID]ServerID, error) {
	if cfg.ID == 0 || cfg.Replica == 0 {
		return nil, fmt.Errorf("%w: group and replica IDs must not be 0", ErrInvalid)
	}
	peers := map[ReplicaID]ServerID{}
	for _, p := range cfg.Peers {
		if p.Replica == 0 || p.Server == "" || peers[p.Replica] != "" {
			return nil, fmt.Errorf("%w: bad or repeated peer %+v", ErrInvalid, p)
		}
		peers[p.Replica] = p.Server
	}
	if peers[cfg.Replica] == "" {
		return nil, fmt.Errorf("%w: replica %d is not among the peers", ErrInvalid, cfg.Replica)
	}
	for _, v := range cfg.Voters {
		if v == 0 {
			return nil, fmt.Errorf("%w: voter 0", ErrInvalid)
		}
	}
	return peers, nil
}

// initGroup builds the group's log and RawNode from the WAL, or prepares
// its creation. Called with walMu held.
func (n *Node) initGroup(g *group, cfg GroupConfig) error {
	w := n.wal
	m := w.meta[cfg.ID]
	if m != nil && m.removed >= cfg.Replica {
		return fmt.Errorf("%w: group %d replica %d (removed up to %d)", ErrRemoved, cfg.ID, cfg.Replica, m.removed)
	}
	g.st = &storage{MemoryStorage: raft.NewMemoryStorage(), g: g}
	g.confs = []confAt{{cs: &pb.ConfState{}}}
	switch {
	case w.damage != nil:
		g.fence(w.damage)
	case cfg.Fence != nil:
		delete(w.recovered, cfg.ID)
		g.fence(cfg.Fence)
	case cfg.Incarnation != w.inc:
		g.fence(fmt.Errorf("%w: replica bound to store %s, this store is %s", ErrIdentity, cfg.Incarnation, w.inc))
	case m != nil && m.replica != 0 && m.replica != cfg.Replica:
		g.fence(fmt.Errorf("%w: this store holds replica %d of group %d, not %d", ErrIdentity, m.replica, cfg.ID, cfg.Replica))
	case w.recovered[cfg.ID] != nil:
		rec := w.recovered[cfg.ID]
		delete(w.recovered, cfg.ID)
		if rec.err != nil {
			g.fence(rec.err)
		} else {
			g.recover(rec)
		}
	default:
		g.bootstrap(cfg)
	}
	return nil
}

// recover rebuilds a group from its replayed state. raft is told the
// log's base as applied, so it hands every later committed entry back:
// membership changes are applied to raft again, and entries the state
// machine already reflects are skipped.
func (g *group) recover(rec *recovered) {
	m := rec.meta
	base := m.base
	applied := g.sm.Applied()
	if p := rec.pending; p != nil && applied >= p.index {
		// The state machine finished installing a snapshot whose item the
		// WAL lost: the log is replaced by it, as that item would have.
		// Its first round writes that item (and the hardstate), fsynced.
		base, rec.ents = *p, nil
		m.hs = &pb.HardState{Term: new(max(m.hs.GetTerm(), p.term)), Vote: new(m.hs.GetVote()), Commit: new(p.index)}
		if m.hs.GetTerm() != rec.meta.hs.GetTerm() {
			m.hs.Vote = new(uint64(0))
		}
		var it items
		it.snap(itemSnapshot, g.id, base)
		it.hardState(g.id, m.hs)
		g.create = it.b
		g.createUp = walUpdate{group: g.id, hs: m.hs, base: &base}
		g.n.cfg.Logf("raftnode: group %d: completing the install of the snapshot at %d", g.id, p.index)
	}
	if err := g.st.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: new(base.index), Term: new(base.term), ConfState: base.conf,
	}}); err != nil {
		g.fence(fmt.Errorf("%w: group %d: base: %v", ErrCorrupt, g.id, err))
		return
	}
	_ = g.st.Append(rec.ents)
	replayTo := max(m.hs.GetCommit(), base.index) // what had committed: applied before, maybe
	if g.forceSole {
		if ents, hs := g.forceToSole(base, rec.ents, m.hs); ents != nil {
			_ = g.st.Append(ents)
			m.hs = hs
			var it items
			it.entries(g.id, ents)
			it.hardState(g.id, hs)
			g.create = append(g.create, it.b...)
			g.createUp.group, g.createUp.hs = g.id, hs
			g.createUp.maxIndex = ents[len(ents)-1].GetIndex()
		}
	}
	last, _ := g.st.LastIndex()
	if applied == 0 && base.index == initialIndex && base.term == initialTerm && !g.baseHoldsState {
		g.synthetic = true // a bootstrapped group whose state machine never checkpointed
	}
	switch {
	case applied < base.index && !g.synthetic:
		g.fence(fmt.Errorf("%w: %w: group %d: state machine at %d, but the log was compacted through %d", ErrCorrupt, ErrStateLost, g.id, applied, base.index))
		return
	case applied > last:
		g.fence(fmt.Errorf("%w: group %d: state machine at %d, past the log's end %d", ErrCorrupt, g.id, applied, last))
		return
	}
	hs := &pb.HardState{Term: new(m.hs.GetTerm()), Vote: new(m.hs.GetVote()), Commit: new(max(m.hs.GetCommit(), base.index))}
	_ = g.st.SetHardState(hs)
	g.confs = []confAt{{index: base.index, cs: base.conf}}
	g.smApplied, g.rawApplied, g.appliedTerm = applied, base.index, base.term
	g.replayTo = replayTo
	// Entries past the synthetic base had committed: a leader fed this
	// replica before the restart (GroupStatus.HoldsCommitted).
	g.synced = replayTo > initialIndex
	g.newRawNode(base.index)
}

// initialIndex and initialTerm are the base of a bootstrapped group's
// log: a synthetic entry standing for the empty state, with the initial
// voters as its conf state (CockroachDB starts its ranges the same way).
// Real entries start at 2, so a replica that joins later, with an empty
// log, cannot be fed from index 1: it gets a snapshot, which carries the
// conf state the log alone would not give it.
const (
	initialIndex = 1
	initialTerm  = 1
)

// bootstrap prepares a new replica: voters = peers on the synthetic base,
// or, with Join, an empty log and conf state (the leader's snapshot will
// bring both). Its first round writes the replica, its base and its
// hardstate to the WAL, fsynced, before anything is sent.
func (g *group) bootstrap(cfg GroupConfig) {
	cs := &pb.ConfState{}
	base := snapMeta{conf: cs}
	var hs *pb.HardState
	if !cfg.Join {
		for _, p := range cfg.Peers {
			cs.Voters = append(cs.Voters, uint64(p.Replica))
		}
		if len(cfg.Voters) > 0 {
			cs.Voters = cs.Voters[:0]
			for _, v := range cfg.Voters {
				cs.Voters = append(cs.Voters, uint64(v))
			}
		}
		slices.Sort(cs.Voters)
		base.index, base.term = initialIndex, initialTerm
		hs = &pb.HardState{Term: new(uint64(initialTerm)), Vote: new(uint64(0)), Commit: new(uint64(initialIndex))}
		_ = g.st.SetHardState(hs)
		g.synthetic = g.sm.Applied() == 0
	}
	_ = g.st.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(base.index), Term: new(base.term), ConfState: cs}})
	g.confs = []confAt{{index: base.index, cs: cs}}
	var it items
	it.replica(g.id, g.replica, 0)
	it.snap(itemCompact, g.id, base)
	if hs != nil {
		it.hardState(g.id, hs)
	}
	g.create = it.b
	g.createUp = walUpdate{group: g.id, replica: g.replica, base: &base, hs: hs}
	g.smApplied, g.rawApplied, g.appliedTerm = g.sm.Applied(), base.index, base.term
	g.newRawNode(base.index)
}

func (g *group) newRawNode(applied uint64) {
	rn, err := raft.NewRawNode(g.raftConfig(applied))
	if err != nil {
		g.fence(fmt.Errorf("%w: group %d: %v", ErrCorrupt, g.id, err))
		return
	}
	g.rn = rn
}

// group returns the group, or nil.
func (n *Node) group(id GroupID) *group {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.mu.groups[id]
}

// MaxEntryBytes returns the largest entry Propose takes: the largest a
// follower can receive, in a frame of Config.MaxFrameBytes of its own
// (MaxFrameBytes less EntryOverhead; DefaultMaxEntryBytes by default).
func (n *Node) MaxEntryBytes() int { return n.cfg.MaxFrameBytes - EntryOverhead }

func (n *Node) live(id GroupID) (*group, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.mu.closed {
		return nil, ErrStopped
	}
	g := n.mu.groups[id]
	if g == nil {
		return nil, ErrUnknownGroup
	}
	return g, nil
}

// Propose queues data as a new entry of the group, for its next round.
// The Proposal resolves as its doc says. Errors (nothing proposed):
// ErrTooLarge (data is over MaxEntryBytes: no follower could receive
// it), ErrUnknownGroup, ErrStopped, ErrFenced, ErrBusy
// (MaxPendingProposals waiting). Being a follower is reported through
// the Proposal (ErrNotLeader), as leadership is known only in the round.
func (n *Node) Propose(id GroupID, data []byte) (*Proposal, error) {
	return n.ProposeTagged(id, data, 0)
}

// ProposeTagged is Propose, and when the entry applies on this node under
// the term it was proposed in, StateMachine.Apply sees tag in its
// Entry.Tag (a proposer's key: the runtime finds what waits for the
// outcome there, on the apply goroutine, before the Proposal resolves).
func (n *Node) ProposeTagged(id GroupID, data []byte, tag uint64) (*Proposal, error) {
	if len(data) > n.MaxEntryBytes() {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), n.MaxEntryBytes())
	}
	g, err := n.live(id)
	if err != nil {
		return nil, err
	}
	p := newProposal(data)
	p.tag = tag
	return p, n.queue(g, p)
}

// queue adds a proposal to the group's next round.
func (n *Node) queue(g *group, p *Proposal) (err error) {
	g.mu.Lock()
	switch {
	case g.mu.fenced != nil:
		err = ErrFenced
	case g.mu.removed:
		err = ErrUnknownGroup
	case len(g.mu.props) >= n.cfg.MaxPendingProposals:
		err = ErrBusy
	default:
		g.mu.props = append(g.mu.props, p)
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	n.sched.enqueue(g)
	return nil
}

func (n *Node) ask(id GroupID, r request) error {
	g, err := n.live(id)
	if err != nil {
		return err
	}
	g.mu.Lock()
	switch {
	case g.mu.removed:
		err = ErrUnknownGroup
	case g.mu.fenced != nil && r.kind != reqRemove:
		err = ErrFenced
	case len(g.mu.reqs) >= n.cfg.MaxPendingProposals && r.kind != reqRemove:
		err = ErrBusy
	default:
		if r.kind == reqRemove {
			g.mu.removed = true
		}
		if isTransfer(r.kind) {
			g.mu.transfersAsked++ // Brief.Transferring from now on
		}
		g.mu.reqs = append(g.mu.reqs, r)
	}
	g.mu.Unlock()
	if err == nil {
		n.sched.enqueue(g)
	}
	return err
}

// Campaign makes the replica start an election in its next round (with
// PreVote: a pre-election first). For tests and bootstrap; elections
// otherwise start on their own after the election timeout.
func (n *Node) Campaign(id GroupID) error { return n.ask(id, request{kind: reqCampaign}) }

// TransferLeader asks the leader to hand leadership to replica to (a
// step-down with a preferred successor; docs/cluster.md, decision 10).
// Ignored if this replica is not the leader. Proposals queued before it
// enter the log first; proposals made while the transfer is under way
// are dropped (ErrDropped). The proposals in the log outlive the loss of
// leadership (Proposal): they resolve as their entries apply here.
// GroupStatus.Transferee shows the transfer under way. raft abandons a
// transfer the target did not complete within an election timeout; it
// is asked again, up to three times, while the target is heard from
// (its server's beats) and this replica still leads.
func (n *Node) TransferLeader(id GroupID, to ReplicaID) error {
	return n.ask(id, request{kind: reqTransfer, to: to, retry: true})
}

// HandOver is TransferLeader without the retries: for a leader that
// gives its leadership up itself (lame duck mode, shutdown, its replica
// leaving the group) and waits for the outcome with a deadline of its
// own. raft drops every proposal while a transfer is under way, so
// asking again an abandoned hand-over would refuse publishes for up to
// three more election timeouts where the caller would rather go on
// (docs/cluster.md, "Lame duck mode and shutdown").
func (n *Node) HandOver(id GroupID, to ReplicaID) error {
	return n.ask(id, request{kind: reqTransfer, to: to})
}

// StepDown asks the leader to hand leadership to its most up-to-date
// active follower (nats-server's $JS.API.STREAM.LEADER.STEPDOWN without a
// preference), as TransferLeader does. Active: raft counts it recently
// active, or this replica heard from it within the contact window
// (ContactWindow; a leader just elected or a group that was quiet has
// heard its followers without raft counting them). Ignored if this
// replica is not the leader or has no active follower.
func (n *Node) StepDown(id GroupID) error { return n.ask(id, request{kind: reqStepDown}) }

// Compact tells the group that its state machine is durable through
// index: the WAL may drop the group's entries up to it (clamped to what
// has been applied). Followers that need them later get a snapshot.
func (n *Node) Compact(id GroupID, index uint64) error {
	return n.ask(id, request{kind: reqCompact, index: index})
}

// RemoveGroup removes the replica from this store: its next round writes
// a tombstone (fsynced), after which the WAL drops its log and the group
// is gone from the node. The channel closes then. Waiting proposals get
// ErrNoReply. The replica ID is never accepted again for the group, nor
// any lower one; the WAL's record of a lower replica of the group (one
// added fenced under a newer ID: GroupConfig.Fence) is dropped with it.
func (n *Node) RemoveGroup(id GroupID) (<-chan struct{}, error) {
	done := make(chan struct{})
	if err := n.ask(id, request{kind: reqRemove, done: done}); err != nil {
		return nil, err
	}
	return done, nil
}

// SetPeers replaces the servers of the group's replicas (after a
// membership change; the Raft membership itself changes through the log).
func (n *Node) SetPeers(id GroupID, peers []Peer) error {
	g, err := n.live(id)
	if err != nil {
		return err
	}
	m := map[ReplicaID]ServerID{}
	for _, p := range peers {
		if p.Replica == 0 || p.Server == "" {
			return fmt.Errorf("%w: bad peer %+v", ErrInvalid, p)
		}
		m[p.Replica] = p.Server
	}
	g.mu.Lock()
	g.mu.peers = m
	g.mu.Unlock()
	n.peersGen.Add(1)
	return nil
}

// Status returns the replica's view of its group as of its last round.
// Errors: ErrUnknownGroup, ErrStopped.
func (n *Node) Status(id GroupID) (GroupStatus, error) {
	g, err := n.live(id)
	if err != nil {
		return GroupStatus{}, err
	}
	g.mu.Lock()
	s := g.mu.status
	s.Group, s.Replica, s.Fenced = g.id, g.replica, g.mu.fenced
	s.HoldsCommitted = s.HoldsCommitted && s.Fenced == nil
	s.Replicas = slices.Clone(s.Replicas)
	heard := contactMarks{ticks: maps.Clone(g.mu.heard), at: maps.Clone(g.mu.heardAt)}
	peers, quiet := maps.Clone(g.mu.peers), g.mu.quiet
	s.Proposals, s.Inbox = len(g.mu.props), len(g.mu.inbox)
	g.mu.Unlock()
	n.contact(&s, heard, peers, quiet)
	if s.leadTick != 0 {
		now := n.ticks.Load()
		s.LeaderFor = time.Duration(now-min(s.leadTick, now)+1) * n.cfg.TickInterval
	}
	return s, nil
}

// Brief is the part of a group's status that Brief reads without copying
// or computing anything: for the callers that poll every group often
// (every 250 ms, every second) and need no contact information.
type Brief struct {
	Role        Role
	LeaderReady bool  // as GroupStatus.LeaderReady
	CaughtUp    bool  // as GroupStatus.CaughtUp
	Fenced      error // as GroupStatus.Fenced
	// Transferring: a leadership transfer was asked of this replica
	// (TransferLeader, HandOver, StepDown) and has not ended: from the
	// moment the request was queued until the round that took it
	// published a status in which raft has no transfer under way and
	// none is to be asked again (a step-down's retries). Proposals made
	// meanwhile may be dropped (ErrDropped); a state machine that acts
	// ahead of its log (a consumer delivering) decides nothing then
	// (docs/cluster.md, "Replicated consumers").
	Transferring bool
}

// Brief returns the cheap part of group id's status (Status has the
// rest). Errors: ErrUnknownGroup, ErrStopped.
func (n *Node) Brief(id GroupID) (Brief, error) {
	g, err := n.live(id)
	if err != nil {
		return Brief{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &g.mu.status
	return Brief{Role: s.Role, LeaderReady: s.LeaderReady, CaughtUp: s.CaughtUp, Fenced: g.mu.fenced,
		Transferring: s.Transferee != 0 || s.transferRetry || g.mu.transfersAsked > 0}, nil
}

// Groups returns the IDs of the node's groups, in the order they were added.
func (n *Node) Groups() []GroupID {
	n.mu.RLock()
	defer n.mu.RUnlock()
	ids := make([]GroupID, len(n.mu.list))
	for i, g := range n.mu.list {
		ids[i] = g.id
	}
	return ids
}

// Receive takes a frame from server from (the transport calls it). The
// messages are queued for their groups' next round; messages for unknown
// groups, other replicas (an old replica ID) or fenced replicas are
// dropped, as are messages beyond a group's MaxInbox or MaxInboxBytes and
// messages from a replica the group places on another server; a
// replica the group places nowhere is placed on from (a member that left
// the peer list but still speaks for the group, such as a leader leaving
// it: its followers must be able to answer). Once the node is isolated
// (Isolate) every frame is dropped, and nil returned. Errors:
// ErrBadFrame (nothing taken), ErrStopped.
func (n *Node) Receive(from ServerID, frame []byte) error {
	n.mu.RLock()
	closed := n.mu.closed
	n.mu.RUnlock()
	if closed {
		return ErrStopped
	}
	n.isoMu.RLock()
	defer n.isoMu.RUnlock()
	if n.isolated.Load() {
		return nil // dropped, as a stopped server's network would
	}
	at := time.Now() // when each message of the frame was heard (contact.go)
	err := decodeFrame(frame, func(id GroupID, flags byte, msg []byte) {
		g := n.group(id)
		if g == nil {
			// group 0: a liveness beat; or a group not (or no longer)
			// here, whose leader may be adding a replica of this server
			if id != 0 && flags&flagWake == 0 && len(msg) > 0 {
				n.invites.note(id, from, msg)
			}
			return
		}
		in := inMsg{flags: flags}
		if flags&flagWake == 0 {
			m := new(pb.Message)
			if proto.Unmarshal(msg, m) != nil || m.GetTo() != uint64(g.replica) {
				return
			}
			in.m = m
		}
		g.mu.Lock()
		ok := g.mu.fenced == nil && !g.mu.removed && len(g.mu.inbox) < n.cfg.MaxInbox &&
			(g.mu.inboxBytes+len(msg) <= n.cfg.MaxInboxBytes || len(g.mu.inbox) == 0) // one larger message (a snapshot) alone
		if in.m != nil && in.m.GetFrom() != 0 {
			switch s := g.mu.peers[ReplicaID(in.m.GetFrom())]; {
			case s != "" && s != from:
				ok = false // a replica of another server: misrouted or forged
			case s == "" && ok:
				// A replica no peer list named: a member leaving the group
				// (the assignment no longer has it, but it may lead until
				// it is removed). Answers go back where it spoke from.
				g.mu.peers[ReplicaID(in.m.GetFrom())] = from
				n.peersGen.Add(1)
			}
		}
		if ok {
			g.mu.inbox = append(g.mu.inbox, in)
			g.mu.inboxBytes += len(msg)
			g.mu.inboxLargest = max(g.mu.inboxLargest, len(msg))
			if in.m != nil {
				g.noteHeardLocked(ReplicaID(in.m.GetFrom()), n.ticks.Load(), at)
			}
		}
		g.mu.Unlock()
		if ok {
			n.sched.enqueue(g)
		}
	})
	if err == nil {
		n.heardFrom(from, at)
	}
	return err
}

// beatTicks is how many ticks apart the liveness beats go (docs/cluster.md,
// "Idle groups"): every other tick, so that an idle server sends and
// reads half as many frames, the largest part of its wake-ups (trial 37,
// finding 5: idle cairn servers used up to twice nats-server's CPU). A
// peer is found dead once it sent nothing for an election timeout, as
// before (silentTicks: a stalled server is not found dead sooner); a
// server that died is found at most one tick later than with a beat
// every tick (10 to 12 ticks after its death, 10 to 11 before). The
// contact window (contactTicks: 20 ticks) spans ten beats.
const beatTicks = 2

// Tick advances the node's clock by one tick: every group that is not
// quiet runs in the next round and catches up on the ticks it missed (at
// most maxCatchUpTicks, after the round's messages: group.tick); every
// beatTicks ticks the next round sends a liveness beat to every peer
// server; quiet groups with a replica on a server silent for more than
// ElectionTicks are woken. Start calls it from its ticker; tests call it
// by hand.
func (n *Node) Tick() {
	now := n.ticks.Add(1)
	n.mu.RLock()
	list := n.mu.list
	n.mu.RUnlock()
	died, revived := n.checkLiveness(now, list)
	// A peer's silence and return are routine (a restart, lame duck mode):
	// the route layer logs its server's connection at INF.
	if len(died) > 0 {
		n.cfg.Debugf("raftnode: no beat from %v for %d ticks", died, n.cfg.ElectionTicks)
		n.toldDead(died...)
		n.wakeFor(died, true, list)
	}
	if len(revived) > 0 {
		n.cfg.Debugf("raftnode: %v heard again", revived)
		n.wakeFor(revived, false, list)
	}
	if (now-1)%beatTicks == 0 { // the first tick beats
		n.beat.Store(true)
	}
	for _, g := range list {
		g.mu.Lock()
		skip := g.mu.fenced != nil || g.mu.quiet
		g.mu.Unlock()
		if !skip {
			n.sched.enqueue(g)
		}
	}
	select {
	case n.sched.wake <- struct{}{}:
	default:
	}
}

// maxCatchUpTicks is how many of the ticks a group missed its next round
// steps (group.tick): one fewer than an election timeout, so that one
// round never runs CheckQuorum twice, nor times out a follower that
// stepped its leader's message in that round.
func (n *Node) maxCatchUpTicks() uint64 {
	return uint64(max(1, n.cfg.ElectionTicks-1))
}

// RunRound runs one scheduling round over the groups queued now (package
// comment, "A scheduling round") on the calling goroutine, or on the
// worker pool once Start has run. It reports whether any group was
// queued. Tests drive a node with Tick and RunRound alone.
func (n *Node) RunRound() bool {
	n.roundMu.Lock()
	defer n.roundMu.Unlock()
	if !n.replayed.Load() {
		// Before Replay there is no group, and the WAL is not ours to
		// touch; liveness beats wait too.
		n.sched.take()
		n.beat.Store(false)
		return false
	}
	gs := n.sched.take()
	if len(gs) == 0 && !n.beat.Load() {
		return false
	}
	gs = n.setAside(gs)
	n.noteLoopRound(n.ticks.Load())
	start := n.cfg.Now()
	window := 2 * n.ElectionTimeout()
	if !n.roundEnd.IsZero() {
		n.pauses.note(start, start.Sub(n.roundEnd), window)
	}
	defer func() {
		n.roundEnd = n.cfg.Now()
		n.pauses.note(n.roundEnd, n.roundEnd.Sub(start), window)
	}()
	if n.round(gs, false) {
		return true
	}
	n.logDeposed(window)
	return true
}

// round runs the steps of a round (package comment, "A scheduling
// round") for gs. A round of the loop (aside false) carries the liveness
// beat a tick asked for. A round beside the loop (aside true, runAside)
// sends the leader's appends before it writes its record rather than
// after: they promise nothing about this server's disk (decision 4), and
// its followers get a large entry while its leader writes it. It reports
// whether a test's crash point abandoned the round.
func (n *Node) round(gs []*group, aside bool) (crashed bool) {
	tr := newRoundTrace()
	defer tr.report(n, gs, aside)
	n.each(gs, (*group).prepare)
	tr.mark(0)
	var unreachable map[ServerID]bool
	var appends, rest []frameTo
	framed := false
	if aside && n.walDamage() == nil {
		appends, rest = n.frames(gs, needSync(gs), false)
		framed = true
		tr.mark(2)
		unreachable = n.sendFrames(appends, nil)
		n.yieldToSenders(appends)
		tr.mark(3)
	}
	if n.slowHook != nil {
		b := 0
		for _, g := range gs {
			b += len(g.out.items)
		}
		n.slowHook(b)
	}
	walErr, mustSync := n.writeRound(gs)
	tr.mark(1)
	if n.crashAt(afterWrite) {
		return true
	}
	if walErr == nil {
		if !framed {
			appends, rest = n.frames(gs, mustSync, !aside)
			tr.mark(2)
			unreachable = n.sendFrames(appends, nil)
			if mustSync {
				n.yieldToSenders(appends)
			}
			tr.mark(3)
		}
		if n.crashAt(afterAppends) {
			return true
		}
		walErr = n.syncRound(mustSync)
		tr.mark(4)
	}
	if n.crashAt(afterSync) {
		return true
	}
	if walErr == nil {
		unreachable = n.sendFrames(rest, unreachable)
		tr.mark(5)
	} else {
		// Once the WAL failed the node sends nothing more, liveness beats
		// included (its peers are to find it dead); the beat is dropped,
		// not kept pending, or every later round would report work and
		// the loop would spin.
		n.beat.Store(false)
	}
	if n.crashAt(afterSend) {
		return true
	}
	n.each(gs, func(g *group) { g.finish(walErr, unreachable) })
	tr.mark(6)
	n.afterRound(gs)
	return false
}

// needSync reports whether any group of the round needs its fsync.
func needSync(gs []*group) bool {
	for _, g := range gs {
		if g.out.mustSync {
			return true
		}
	}
	return false
}

// setAside starts a round beside the loop (runAside) for each group of gs
// that would step a large entry (Config.AsideBytes), and returns the
// others, less those whose round beside the loop still runs (it queues
// them again when it ends). Only a started node sets groups aside: a node
// driven by hand runs every round on the caller's goroutine.
func (n *Node) setAside(gs []*group) []*group {
	if n.work == nil {
		return gs
	}
	return slices.DeleteFunc(gs, func(g *group) bool {
		if g.aside.Load() {
			return true
		}
		if n.cfg.AsideBytes < 0 || !g.large(n.cfg.AsideBytes) {
			return false
		}
		g.aside.Store(true)
		n.asideWG.Go(func() { n.runAside(g) })
		return true
	})
}

// runAside runs one round of group g on its own goroutine, beside the
// round loop (docs/cluster.md, "Large entries beside the round loop"):
// the same steps as a round of the loop (its record written, the
// leader's appends sent, the fsync, the other messages, then apply), so
// nothing leaves that speaks for the WAL before the fsync that covers
// g's record. g is in no other round meanwhile (setAside skips it); its
// ticks wait for its next round on the loop, which this one queues.
func (n *Node) runAside(g *group) {
	if n.round([]*group{g}, true) {
		return // a test's crash point: the group stays out of the rounds
	}
	// The ticks that passed meanwhile are not stepped: the time the round
	// took is lost to the group's clocks, as a stalled loop's is
	// (decision 10). Its followers' responses, or its leader's
	// heartbeats, were waiting for this round; stepping a second of
	// ticks before them, a leader ran CheckQuorum on nothing heard and
	// stepped down. A leader that sent a large append also steps no tick
	// for an election timeout more: its followers are writing the entry
	// in rounds of their own, deaf to its heartbeats, and CheckQuorum
	// would find none of them active (trial 36's 64 MB batches: the
	// followers' rounds took 0.5 to 1.6 s, and the leader stepped down
	// in 3 of 8 batches). Only another large append renews the pause,
	// and raft sends a follower more appends only once it acknowledged
	// enough of those in flight (MaxInflightBytes): a leader cut off
	// from its followers ticks again within an election timeout of its
	// last large append, and CheckQuorum steps it down one later. The
	// ticks pending when the round began were stepped in its prepare.
	now := n.ticks.Load()
	g.lastTick = now
	if g.largeSent && g.leader {
		g.tickFrom = now + uint64(n.cfg.ElectionTicks)
	}
	g.largeSent = false
	g.aside.Store(false)
	if n.group(g.id) == g { // not removed by this round
		n.sched.enqueue(g)
	}
}

// each runs fn for every group, on the worker pool if started.
func (n *Node) each(gs []*group, fn func(*group)) {
	if n.work == nil || len(gs) == 1 {
		for _, g := range gs {
			fn(g)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(len(gs))
	for _, g := range gs {
		n.work <- func() {
			defer wg.Done()
			fn(g)
		}
	}
	wg.Wait()
}

// recordTarget is the size past which a round's items start another
// record. A group's items stay far below MaxRecordBody: its inbox and the
// proposals it steps per round are bounded in bytes.
const recordTarget = 16 << 20

// writeRound writes every group's items, without fsync (package comment,
// step 2), and reports whether any group needs the fsync.
func (n *Node) writeRound(gs []*group) (walErr error, mustSync bool) {
	// Usually one record; more if the round's items pass recordTarget (a
	// group's items always stay in one record: they must be all or none).
	var bodies [][]byte
	var ups [][]walUpdate
	joinable := false // the last body may take more groups' items
	for _, g := range gs {
		mustSync = mustSync || g.out.mustSync
		if len(g.out.items) == 0 {
			continue
		}
		if len(g.out.items) >= largeRecord && g.out.record != nil {
			// A large entry's items, a record of their own, not copied.
			bodies, ups = append(bodies, g.out.record), append(ups, []walUpdate{g.out.up})
			joinable = false
			continue
		}
		if k := len(bodies) - 1; !joinable || len(bodies[k])+len(g.out.items) > recordTarget {
			bodies, ups = append(bodies, []byte{bodyBatch}), append(ups, nil)
			joinable = true
		}
		k := len(bodies) - 1
		bodies[k] = append(bodies[k], g.out.items...)
		ups[k] = append(ups[k], g.out.up)
	}
	// The bodies' checksums before the lock: a large entry's pass over
	// its bytes holds up no other round's write (a round beside the loop,
	// runAside, and the loop's rounds share the WAL).
	sums := make([]uint32, len(bodies))
	for k, b := range bodies {
		sums[k] = crc32.Checksum(b, castagnoli)
	}
	if len(bodies) == 0 {
		// Nothing to write: the WAL's lock is not waited for (a round
		// beside the loop may hold it, writing a large record).
		return n.walDamage(), mustSync
	}
	n.walMu.Lock()
	defer n.walMu.Unlock()
	for k := 0; k < len(bodies) && walErr == nil; k++ {
		walErr = n.wal.writeSummed(bodies[k], sums[k], ups[k])
	}
	if walErr == nil {
		walErr = n.wal.damage
	}
	n.noteDamage(walErr)
	return walErr, mustSync
}

// walDamage is the WAL's failure: read under its lock if free, else as
// the last round that held the lock saw it (nil: none).
func (n *Node) walDamage() error {
	if p := n.walErr.Load(); p != nil {
		return *p
	}
	if !n.walMu.TryLock() {
		return nil // held by a round writing: it notes a failure it meets
	}
	err := n.wal.damage
	n.walMu.Unlock()
	n.noteDamage(err)
	return err
}

// noteDamage records err, a failure of the WAL seen under its lock, for
// walDamage.
func (n *Node) noteDamage(err error) {
	if err != nil {
		n.walErr.CompareAndSwap(nil, &err)
	}
}

// syncRound fsyncs the round's records if any group needs it (package
// comment, step 4: the durability point) and deletes the segments no
// group needs any more.
func (n *Node) syncRound(mustSync bool) error {
	if !mustSync {
		// Nothing to make durable: the segments are collected only if
		// the lock is free (whoever holds it collects after its fsync).
		if !n.walMu.TryLock() {
			return n.walDamage()
		}
	} else {
		n.walMu.Lock()
	}
	defer n.walMu.Unlock()
	defer func() { n.noteDamage(n.wal.damage) }()
	var err error
	if mustSync {
		err = n.wal.sync()
	}
	if err == nil {
		n.wal.collect()
		err = n.wal.damage
	}
	return err
}

// frameTo is a frame and the server it goes to.
type frameTo struct {
	to    ServerID
	frame []byte
}

// frames builds the round's frames in two sets, in the order the groups
// and their messages came: appends, the messages that may leave before
// the round's fsync (package comment, step 3: the leaders' appends and
// heartbeats, and every message of a group whose Ready needs no fsync),
// and rest, every other message, which waits for it. Within a set a
// server's messages go in one frame, or in as many, in order, as keep
// each within Config.MaxFrameBytes (an entry of up to MaxEntryBytes then
// travels in a frame the transport carries, whatever else the round
// sends that server). Without an fsync to wait for (split false)
// everything goes in rest: one set rather than two, as nothing would be
// gained. The liveness beat a tick asked for goes with the appends when
// there are two sets: it says nothing of this node's disk.
func (n *Node) frames(gs []*group, split, beat bool) (appends, rest []frameTo) {
	sets := [2]frameSet{{max: n.cfg.MaxFrameBytes}, {max: n.cfg.MaxFrameBytes}}
	for _, g := range gs {
		for _, m := range g.out.msgs {
			if m.to == "" {
				continue
			}
			k := 1
			if split && (m.early || !g.out.mustSync) {
				k = 0
			}
			sets[k].add(m.to, m.env, m.room)
		}
	}
	if beat && n.beat.Swap(false) {
		n.alive.mu.Lock()
		peers := n.alive.peers
		n.alive.mu.Unlock()
		beat := appendEnvelope(nil, 0, flagLiveness, nil)
		k := 1
		if split {
			k = 0
		}
		for _, s := range peers {
			sets[k].add(s, beat, nil)
		}
	}
	return sets[0].frames(), sets[1].frames()
}

// frameSet gathers envelopes into frames of at most max bytes per server
// (one unless they pass it), in the order the frames were begun.
type frameSet struct {
	max      int
	open     map[ServerID]*frameBuilder // the frame each server's next envelope may join
	builders []*frameBuilder
}

func (fs *frameSet) add(s ServerID, env, room []byte) {
	fb := fs.open[s]
	if solo := room != nil && len(env) >= largeRecord; solo || fb == nil || !fb.fits(env, fs.max) {
		if fs.open == nil {
			fs.open = map[ServerID]*frameBuilder{}
		}
		fb = &frameBuilder{to: s}
		fs.open[s] = fb
		fs.builders = append(fs.builders, fb)
	}
	fb.add(env, room)
	if room != nil && len(env) >= largeRecord {
		// A large envelope (an append of a large entry) travels alone,
		// its frame built in place; what follows it starts another.
		delete(fs.open, s)
	}
}

func (fs *frameSet) frames() []frameTo {
	out := make([]frameTo, 0, len(fs.builders))
	for _, fb := range fs.builders {
		out = append(out, frameTo{to: fb.to, frame: fb.frame()})
	}
	return out
}

// sendFrames hands the frames to the transport and adds the servers whose
// frame could not be sent to unreachable, which it returns (allocated
// when needed).
func (n *Node) sendFrames(frames []frameTo, unreachable map[ServerID]bool) map[ServerID]bool {
	if n.isolated.Load() {
		return unreachable // lost, as a stopped server's would be (Isolate)
	}
	for _, f := range frames {
		if err := n.cfg.Transport.Send(f.to, f.frame); err != nil {
			if unreachable == nil {
				unreachable = map[ServerID]bool{}
			}
			unreachable[f.to] = true
		}
	}
	return unreachable
}

// yieldToSenders lets the goroutines that sent just woke run before the
// round blocks in its fsync (or, beside the loop, in its write): a
// started node's transport writes its frames on goroutines of its own
// (Transport.Send returns at once), and Go readies a woken goroutine on
// the waker's P, which a blocking system call keeps until the runtime
// takes it back (sysmon, 20 µs to 10 ms) or another thread steals the
// goroutine. On the loaded 2-core machine the leader's appends left
// 84 and 108 µs (medians of two runs) after they were queued, while its
// fsync ran, against 5 µs in rounds without one (docs/benchmarks.md, "Where a
// synchronous publish's time goes"); the followers' fsyncs, which the
// commit waits for, started that much later. Yielding here runs the
// writers first, on this thread, and the fsync after them.
func (n *Node) yieldToSenders(sent []frameTo) {
	if n.work == nil || len(sent) == 0 {
		return
	}
	if n.yieldHook != nil {
		n.yieldHook()
		return
	}
	runtime.Gosched()
}

// afterRound drops the groups whose removal the round made durable.
func (n *Node) afterRound(gs []*group) {
	for _, g := range gs {
		if g.removeDone == nil {
			continue
		}
		n.mu.Lock()
		delete(n.mu.groups, g.id)
		// Copy on write: Tick and Close read the list outside the lock,
		// and DeleteFunc would shift and clear their view in place.
		n.mu.list = slices.DeleteFunc(slices.Clone(n.mu.list), func(x *group) bool { return x == g })
		n.peersGen.Add(1)
		n.mu.Unlock()
		for _, w := range g.waiters {
			w.resolve(nil, ErrNoReply)
		}
		g.failReads(ErrNotLeader)
		for _, p := range g.readWait {
			p.resolve(nil, ErrNotLeader)
		}
		close(g.removeDone)
		g.removeDone = nil
	}
}

// Start starts the node's goroutines: the ticker (Config.Ticks or a
// time.Ticker of TickInterval), the round loop and Config.Workers workers.
func (n *Node) Start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started || n.mu.closed {
		return
	}
	n.started = true
	n.stop = make(chan struct{})
	n.work = make(chan func())
	for range n.cfg.Workers {
		n.workWG.Go(n.worker)
	}
	n.loopWG.Go(n.loop)
	n.loopWG.Go(n.ticker)
}

func (n *Node) worker() {
	for f := range n.work {
		f()
	}
}

func (n *Node) loop() {
	for {
		select {
		case <-n.stop:
			return
		case <-n.sched.wake:
		}
		for n.RunRound() {
			select {
			case <-n.stop:
				return
			default:
			}
		}
	}
}

func (n *Node) ticker() {
	ticks, real := n.cfg.Ticks, n.cfg.Ticks == nil
	if real {
		t := time.NewTicker(n.cfg.TickInterval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-n.stop:
			return
		case <-ticks:
			if real {
				n.procPause.tick(time.Now(), n.cfg.TickInterval)
			}
			n.Tick()
		}
	}
}

// Close stops the goroutines, resolves what is waiting (queued proposals
// ErrStopped, proposals in the log ErrNoReply) and closes the WAL. The
// WAL is already durable for everything sent: a round runs to its end,
// fsync included, before Close goes on.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.closed = true
	started := n.started
	n.mu.Unlock()
	if started {
		close(n.stop)
		n.loopWG.Wait()  // the loop ends after its current round
		n.asideWG.Wait() // and the rounds beside it after theirs
		close(n.work)
		n.workWG.Wait()
	}
	// The groups as the last round left them (a round removes a group
	// from the list in place, so the list is read only now, and copied).
	n.mu.Lock()
	list := slices.Clone(n.mu.list)
	n.mu.Unlock()
	n.roundMu.Lock()
	defer n.roundMu.Unlock()
	for _, g := range list {
		g.mu.Lock()
		props, reqs := g.mu.props, g.mu.reqs
		g.mu.props, g.mu.reqs = nil, nil
		g.mu.Unlock()
		failProps(props, ErrStopped)
		for _, r := range reqs {
			if r.read != nil {
				r.read.resolve(nil, ErrStopped)
			}
		}
		for _, w := range g.waiters {
			w.resolve(nil, ErrNoReply)
		}
		g.failReads(ErrStopped)
		for _, p := range g.readWait {
			p.resolve(nil, ErrStopped)
		}
	}
	n.walMu.Lock()
	defer n.walMu.Unlock()
	return n.wal.close()
}

// roundPhases are the steps of a round a slow round's line times
// (roundTrace).
var roundPhases = [...]string{"prepare", "write", "frames", "send appends", "fsync", "send the rest", "apply"}

// roundTrace times the steps of one round on the system clock. A round
// that takes more than half the election timeout is logged at Infof with
// its steps, so that a line about lost leaderships can be read beside
// the round that caused them (a large entry's encoding, its write, its
// fsync).
type roundTrace struct {
	start, last time.Time
	took        [len(roundPhases)]time.Duration
}

func newRoundTrace() roundTrace {
	now := time.Now()
	return roundTrace{start: now, last: now}
}

// mark ends step k.
func (t *roundTrace) mark(k int) {
	now := time.Now()
	t.took[k] = now.Sub(t.last)
	t.last = now
}

// slowRoundEvery is the least time between two lines about slow rounds
// (roundTrace.report); the rounds not logged in between are counted in
// the next line.
const slowRoundEvery = 10 * time.Second

// report logs the round if it was slow, at most once every
// slowRoundEvery; aside: it ran beside the loop.
func (t *roundTrace) report(n *Node, gs []*group, aside bool) {
	d := time.Since(t.start)
	if d <= n.ElectionTimeout()/2 {
		return
	}
	now := time.Now().UnixNano()
	last := n.slowLogged.Load()
	if now-last < int64(slowRoundEvery) || !n.slowLogged.CompareAndSwap(last, now) {
		n.slowSkipped.Add(1)
		return
	}
	skipped := ""
	if k := n.slowSkipped.Swap(0); k > 0 {
		skipped = fmt.Sprintf(" (and %s not logged since the last line)", logger.Count(int(k), "slow round"))
	}
	where := "the round loop's round"
	if aside {
		where = fmt.Sprintf("group %d's round beside the loop", gs[0].id)
	}
	pf, pt := n.procPause.within(t.start, t.start.Add(d), n.cfg.TickInterval)
	n.cfg.Infof("raftnode: %s", roundLine(where, len(gs), t.start, d, t.took, skipped, pf, pt))
}
