package raftnode

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// group is one replica of one Raft group on this node. The fields under
// "round" belong to whoever runs the group's part of a round (one worker
// at a time; rounds do not overlap); the fields under mu are shared with
// the API callers and the transport.
type group struct {
	label   string // GroupConfig.Label, for log lines
	n       *Node
	id      GroupID
	replica ReplicaID
	sm      StateMachine

	// round
	rn         *raft.RawNode
	st         *storage
	smApplied  uint64        // the state machine's state reflects the log through here
	rawApplied uint64        // the last index raft handed over as committed
	confs      []confAt      // conf states since the log's base, by index
	votersCS   *pb.ConfState // the conf state voters was computed from (publish)
	voters     []ReplicaID   // its voters, shared by every status published from it
	waiters    map[uint64]*Proposal
	reads      map[uint64]*Proposal // read requests by context, index not confirmed yet
	readSeq    uint64               // the last read context
	readWait   []*Proposal          // confirmed reads waiting for their index to apply
	lastTick   uint64               // the node's tick count when the group last ticked
	quiet      bool                 // quiesced: not ticking (quiesce.go)
	quietGen   uint64               // Node.liveGen when the group last decided to go quiet
	announce   bool                 // the first round wakes the other replicas (they may be quiet)
	// reannounce are the replicas whose wake envelope could not leave
	// while this replica knew no leader: the next round wakes them again.
	reannounce []ReplicaID
	synthetic  bool // the state machine has yet to apply the synthetic entry initialIndex
	// baseHoldsState: GroupConfig.BaseHoldsState (set at AddGroup).
	baseHoldsState bool
	// forceSole: GroupConfig.ForceSole (set at AddGroup; force.go).
	forceSole bool
	leader    bool // leader as of the last Ready
	handover  bool // this leader asked for a transfer in its term (roleChange: not a deposal)
	// keptSweep is the earliest deadline of the waiters kept from a lost
	// leadership, in node ticks (0: none kept; kept.go).
	keptSweep uint64
	// transferTo and transferTries: the transfer asked last (0: to the
	// best follower, a step-down) and how many more times it is asked
	// again if raft abandons it while this replica still leads
	// (retryTransfer).
	transferTo    ReplicaID
	transferTries int
	// transfersTaken counts the transfer requests this round took; its
	// publish subtracts them from mu.transfersAsked (Brief.Transferring).
	transfersTaken int
	term           uint64 // term as of the last Ready
	// appliedTerm is the term of the entry at rawApplied: once it is the
	// term this replica leads, every entry of earlier terms is applied
	// here (raft's empty entry opens each term).
	appliedTerm uint64
	// observed is what the LeaderObserver was last told (leading, in
	// observedTerm): leading only once the leader applied an entry of
	// its own term (roleChange).
	observed     bool
	observedTerm uint64
	// replayTo is the commit index the WAL recovered the group with (0
	// for a new replica); reapplied counts the entries at or below it
	// handed to the state machine since: entries applied once before the
	// restart and again after it (GroupStatus.Reapplied).
	replayTo   uint64
	reapplied  uint64
	create     []byte        // items its first round writes: the replica's creation, or a completed snapshot install
	createUp   walUpdate     // what create changes in the WAL's metadata
	out        roundOut      // this round's output, from prepare to finish
	fencedErr  error         // round-side copy of the fence
	removeDone chan struct{} // a removal written by this round
	// leaderCommit and commitFrom: the highest commit index the leader
	// told this replica, and that leader; lastLead and leaderTick: the
	// leader as of the last round, and the tick at which it last knew
	// one (contact.go).
	leaderCommit uint64
	commitFrom   uint64
	outOfSync    bool // a quiesce heartbeat said this replica lacks entries
	lastLead     uint64
	leaderTick   uint64
	everLead     bool   // a leader was known since the group was added
	leadTick     uint64 // the tick at which this replica came to lead (0: it does not)
	// transferTerm is the term of the last MsgTimeoutNow this replica
	// stepped: its leader handed it the leadership (a transfer), and it
	// campaigned for the next term at once (observeLeader's handedOver).
	transferTerm uint64
	restoring    *restoreJob // a snapshot installing in the background: the group is parked
	// synced: this replica led, or was caught up with a leader, since it
	// was added here, or the WAL recovered it knowing entries committed
	// past the bootstrap base (GroupStatus.HoldsCommitted).
	synced bool
	// held: proposals raft dropped past MaxUncommittedBytes wait in the
	// queue for a round after commits (dropped); holdPast:
	// GroupConfig.HoldPastUncommitted.
	held, holdPast bool
	// largeSent: this round sent an append of a large entry (at least
	// largeRecord bytes); tickFrom: the tick count before which the group
	// steps no tick (runAside).
	largeSent bool
	tickFrom  uint64
	// tickCarry is the part of a raft tick, in thousandths of a node tick,
	// that a stretched group has yet to step (stretch.go).
	tickCarry uint64
	// aside is set by the round loop while the group runs a round of its
	// own beside the loop (a large entry: Node.runAside); the loop's
	// rounds skip the group until that round ends.
	aside atomic.Bool

	mu struct {
		sync.Mutex
		inbox      []inMsg
		inboxBytes int
		// inboxLargest is the size of the largest message in inbox
		// (Config.AsideBytes).
		inboxLargest int
		quiet        bool // mirror of the round's quiet, for Tick and Status
		props        []*Proposal
		reqs         []request
		peers        map[ReplicaID]ServerID
		status       GroupStatus
		fenced       error
		removed      bool
		heard        map[ReplicaID]uint64    // the tick of the last message from each replica (contact.go)
		heardAt      map[ReplicaID]time.Time // and its time on the system clock
		// restoreDone and restoreErr: the background Restore of
		// restoring returned (set by its goroutine).
		restoreDone bool
		restoreErr  error
		// transfersAsked counts the transfer requests queued and not yet
		// published as taken (Brief.Transferring).
		transfersAsked int
	}
}

// restoreJob is a snapshot whose Restore runs in the background
// (BackgroundRestorer): the Ready that carried it waits, neither written
// nor advanced, until Restore returns.
type restoreJob struct {
	rd      raft.Ready
	stepped []*Proposal
	meta    snapMeta
}

// inMsg is a received message (nil for a wake envelope) and its flags.
type inMsg struct {
	m     *pb.Message
	flags byte
}

// confAt is the conf state in force from index on.
type confAt struct {
	index uint64
	cs    *pb.ConfState
}

// request is an operation asked of a group through the API, run in its
// next round.
type request struct {
	kind   int
	to     ReplicaID
	index  uint64
	forget bool      // reqWake: the leader's server was found dead
	retry  bool      // reqTransfer: asked again if raft abandons it (retryTransfer)
	read   *Proposal // reqRead
	done   chan struct{}
}

const (
	reqCampaign = iota + 1
	reqTransfer
	reqStepDown
	reqCompact
	reqRemove
	reqWake
	reqRead
	reqForceOut // ForceOut of replica to (force.go)
)

// roundOut is what prepare hands to the node and finish.
type roundOut struct {
	items []byte
	// record, if set, is items with a record body's first byte before
	// them (recordItems): large items are written as a record of their
	// own from it (writeRound).
	record   []byte
	up       walUpdate
	mustSync bool
	msgs     []outMsg
	rd       raft.Ready
	hasReady bool
	compact  uint64 // compact the in-memory log through here in finish
}

type outMsg struct {
	to       ServerID
	replica  ReplicaID
	snap     bool // a MsgSnap: report its fate
	early    bool // may leave before the round's fsync (sendsEarly)
	announce bool // a wake envelope of wakePeers: sent again if it could not leave
	env      []byte
	room     []byte // env's buffer with room for a frame (marshalEnvelope), or nil
}

// sendsEarly reports whether a message may be sent before the round's
// fsync (package comment, step 3) whatever its group wrote: a leader's
// appends, snapshots and heartbeats promise nothing about this replica's
// disk (etcd raft puts them in Ready.Messages apart from the responses
// it holds back until the Ready is persisted: raft.go, send). Vote and
// append responses are promises about what is durable here and wait,
// unless their group's Ready needs no fsync (outMsg.early, Node.frames):
// then they promise nothing this round writes.
func sendsEarly(t pb.MessageType) bool {
	return t == pb.MsgApp || t == pb.MsgSnap || t == pb.MsgHeartbeat
}

// storage is the group's raft.Storage: the log in memory (entries since
// the last compaction; the WAL holds them durably), with Snapshot taken
// from the state machine.
type storage struct {
	*raft.MemoryStorage
	g     *group
	stats logStats // its entries' sizes and times (logstats.go)
}

// Snapshot returns the state machine's state at its last applied index,
// for a follower that needs compacted entries. raft calls it from the
// group's round.
func (s *storage) Snapshot() (*pb.Snapshot, error) {
	g := s.g
	index := g.smApplied
	var data []byte
	var err error
	if si, ok := g.sm.(SnapshotIndexer); ok {
		first, _ := s.FirstIndex()
		low := max(first-1, g.confs[len(g.confs)-1].index)
		index, data, err = si.SnapshotAt(low)
		if err == nil && (index < low || index > g.smApplied) {
			err = fmt.Errorf("a snapshot at %d, outside %d..%d", index, low, g.smApplied)
		}
		if errors.Is(err, ErrSnapshotPending) {
			return nil, raft.ErrSnapshotTemporarilyUnavailable
		}
	} else {
		data, err = g.sm.Snapshot()
	}
	if err != nil {
		g.n.cfg.Logf("raftnode: group %d: snapshot: %v", g.id, err)
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	term, err := s.Term(index)
	if err != nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
		Index: new(index), Term: new(term), ConfState: g.confAt(index),
	}}, nil
}

func (g *group) confAt(index uint64) *pb.ConfState {
	cs := g.confs[0].cs
	for _, c := range g.confs {
		if c.index > index {
			break
		}
		cs = c.cs
	}
	return cs
}

// raftConfig is the raft.Config of a group (docs/cluster.md, decision 10).
func (g *group) raftConfig(applied uint64) *raft.Config {
	c := &g.n.cfg
	return &raft.Config{
		ID:                        uint64(g.replica),
		ElectionTick:              c.ElectionTicks,
		HeartbeatTick:             c.HeartbeatTicks,
		Storage:                   g.st,
		Applied:                   applied,
		MaxSizePerMsg:             c.MaxSizePerMsg,
		MaxCommittedSizePerReady:  c.MaxSizePerMsg,
		MaxUncommittedEntriesSize: c.MaxUncommittedBytes,
		MaxInflightMsgs:           c.MaxInflightMsgs,
		MaxInflightBytes:          c.MaxInflightBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{logf: c.Logf, debugf: c.Debugf, group: g.id, drops: newDropLog(g.holdPast)},
	}
}

// votersOf returns the voters of configuration cs, both halves of a
// joint one, ascending and once each.
func votersOf(cs *pb.ConfState) []ReplicaID {
	out := make([]ReplicaID, 0, len(cs.GetVoters())+len(cs.GetVotersOutgoing()))
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetVotersOutgoing()} {
		for _, id := range ids {
			out = append(out, ReplicaID(id))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fence stops the replica for good: it takes no part in its group, its
// waiters get ErrNoReply, new proposals ErrFenced (docs/cluster.md,
// decision 12). Called from the group's round, or before the group ever
// ran.
func (g *group) fence(err error) {
	if g.fencedErr != nil {
		return
	}
	g.fencedErr = err
	if errors.Is(err, ErrIdentity) && g.n.NewWAL() {
		// Routine after a wiped store (or a WAL set aside as damaged,
		// which is logged as a warning itself): trial 38 counted these
		// among 27 warnings of one wiped server.
		g.n.cfg.Infof("raftnode: group %d replica %d is not started: it belonged to this server's earlier store (this WAL is new), and the group replaces it (%v)", g.id, g.replica, err)
	} else {
		g.n.cfg.Logf("raftnode: group %d replica %d fenced: %v", g.id, g.replica, err)
	}
	for _, w := range g.waiters {
		w.resolve(nil, ErrNoReply)
	}
	g.waiters = map[uint64]*Proposal{}
	g.failReads(ErrFenced)
	for _, p := range g.readWait {
		p.resolve(nil, ErrFenced)
	}
	g.readWait = nil
	g.mu.Lock()
	g.mu.fenced = err
	g.mu.status.Fenced = err
	props := g.mu.props
	g.mu.props, g.mu.inbox = nil, nil
	g.mu.Unlock()
	for _, p := range props {
		p.resolve(nil, ErrFenced)
	}
	g.leader = false
	if g.observed {
		g.observed = false
		g.observeLeader(false, g.term)
	}
}

// contain turns a panic in the group's part of a round (raft panics on a
// broken invariant, such as a follower whose log lost what it
// acknowledged) into a fence of that replica alone, so one damaged
// replica does not take the server down (docs/cluster.md, decision 12).
func (g *group) contain() {
	if r := recover(); r != nil {
		g.out = roundOut{}
		g.fence(fmt.Errorf("%w: group %d: %v", ErrCorrupt, g.id, r))
	}
}

// prepare is the first part of a round (package comment, step 1).
func (g *group) prepare() {
	defer g.contain()
	g.out = roundOut{}
	if g.restoring != nil && !g.resumeRestore() {
		return
	}
	g.mu.Lock()
	inbox, reqs := g.mu.inbox, g.mu.reqs
	props, rest := g.mu.props, []*Proposal(nil)
	if g.mu.fenced == nil && !g.mu.removed {
		props, rest = splitProps(props, g.n.cfg.MaxRoundProposalBytes)
	}
	g.mu.inbox, g.mu.inboxBytes, g.mu.inboxLargest, g.mu.props, g.mu.reqs = nil, 0, 0, rest, nil
	if len(rest) > 0 {
		// A transfer asked after proposals waits for them to enter the
		// log: raft drops what is proposed during a transfer.
		reqs, g.mu.reqs = splitTransfers(reqs)
	}
	removed := g.mu.removed
	g.mu.Unlock()
	for _, r := range reqs {
		if isTransfer(r.kind) {
			g.transfersTaken++
		}
	}
	if len(rest) > 0 && !g.held {
		g.n.sched.enqueue(g) // the next round takes the rest (held: after commits, finish)
	}
	if removed { // fenced or not
		g.prepareRemove(props, reqs)
		return
	}
	if g.fencedErr != nil {
		failProps(props, ErrFenced)
		doneReqs(reqs)
		return
	}
	if g.create != nil {
		g.out.items = append(g.out.items, g.create...)
		g.out.up = g.createUp
		g.out.mustSync = true
		g.create = nil
	}
	if g.announce {
		g.announce = false
		g.wakePeers(nil)
	} else if len(g.reannounce) > 0 {
		g.wakePeers(g.reannounce)
	}
	g.reannounce = nil
	g.maybeWake(inbox, props, reqs)
	g.forgetFirst(reqs)
	stepped := g.propose(props)
	var quiesce *pb.Message // a quiesce heartbeat from the leader
	others := false         // messages other than quiesce heartbeats
	for _, in := range inbox {
		if in.m == nil {
			continue // a wake envelope: maybeWake did it
		}
		if in.m.GetType() == pb.MsgTimeoutNow {
			g.transferTerm = in.m.GetTerm()
		}
		_ = g.rn.Step(in.m) // errors: a stale or unknown peer's message, ignored
		g.noteCommit(in.m, in.flags)
		if in.m.GetType() == pb.MsgHeartbeat && in.flags&flagQuiesce != 0 {
			quiesce = in.m
		} else {
			others = true
		}
	}
	if g.quiet {
		g.lastTick = g.n.ticks.Load() // a quiet group lets ticks go by
	} else {
		g.tick()
	}
	for _, r := range reqs {
		g.request(r)
	}
	g.retryTransfer()
	g.publishDeposed()
	if quiesce != nil {
		g.followQuiesce(quiesce, others || len(props) > 0 || len(reqs) > 0)
	}
	g.ready(stepped)
}

// large reports whether the group's next round would step a proposal or
// a received message of at least limit bytes (Config.AsideBytes): the
// proposals it takes are those splitProps gives it.
func (g *group) large(limit int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.inboxLargest >= limit {
		return true
	}
	if g.mu.fenced != nil || g.mu.removed {
		return false
	}
	now, _ := splitProps(g.mu.props, g.n.cfg.MaxRoundProposalBytes)
	for _, p := range now {
		if len(p.data) >= limit {
			return true
		}
	}
	return false
}

// publishDeposed publishes, in the round that deposed this leader
// (CheckQuorum, a higher term heard: a transferee's campaign), that it
// no longer leads, before the round writes and syncs the WAL; the rest
// of the status waits for the round's end (publish). A state machine
// that acts ahead of its log (a replicated consumer delivering, which
// looks at Brief before each of its rounds) would otherwise go on
// deciding while the node's fsync runs, and raft refuses in the next
// round what it proposed meanwhile (ErrNotLeader): on a loaded machine a
// consumer delivered 1,255 messages its group never recorded, delivered
// again as first deliveries (docs/cluster.md, "Replicated consumers",
// "Handing the leadership over").
//
// What it publishes is a deposed replica's view, whole: its role
// (GroupStatus.Role, Brief.Role), not LeaderReady nor Current, the term
// raft is in now and the leader it knows in it (none after a vote or
// CheckQuorum), no transfer and no leader's view of the replicas. A
// status that said follower but kept the term it led and named itself
// leader read, to the cluster layer's HandOver, as a step-down with no
// election: a rolling restart of an idle cluster counted half the
// groups it handed over "lost without a successor" (docs/cluster.md,
// "Lame duck mode and shutdown").
func (g *group) publishDeposed() {
	bs := g.rn.BasicStatus()
	if bs.RaftState == raft.StateLeader {
		return
	}
	g.mu.Lock()
	if s := &g.mu.status; s.Role == Leader {
		s.Role, s.LeaderReady, s.Current = roleOf(bs.RaftState), false, false
		s.Term, s.Leader, s.LeaderServer = bs.GetTerm(), ReplicaID(bs.Lead), g.mu.peers[ReplicaID(bs.Lead)]
		s.Transferee, s.transferRetry, s.Replicas = 0, false, nil
	}
	g.mu.Unlock()
}

// splitTransfers returns the requests other than leadership transfers,
// and the transfers.
func splitTransfers(reqs []request) (now, later []request) {
	for _, r := range reqs {
		if isTransfer(r.kind) {
			later = append(later, r)
		} else {
			now = append(now, r)
		}
	}
	return now, later
}

// isTransfer reports whether a request of kind asks for a leadership
// transfer.
func isTransfer(kind int) bool { return kind == reqTransfer || kind == reqStepDown }

// splitProps returns the proposals of one round (at least one, and at
// most limit bytes of data if more) and the rest.
func splitProps(props []*Proposal, limit int) (now, rest []*Proposal) {
	size := 0
	for i, p := range props {
		size += len(p.data)
		if i > 0 && size > limit {
			return props[:i:i], props[i:]
		}
	}
	return props, nil
}

func failProps(props []*Proposal, err error) {
	for _, p := range props {
		p.resolve(nil, err)
	}
}

func doneReqs(reqs []request) {
	for _, r := range reqs {
		if r.read != nil {
			r.read.resolve(nil, ErrFenced)
		}
		if r.done != nil {
			close(r.done)
		}
	}
}

// propose steps the queued proposals as one batch (one append message
// per follower), before anything else of the round, so their indexes
// follow the log's last index: at the start of a round raft holds no
// unstable entries (the previous Ready was persisted and advanced), so
// the log ends at the storage's last index.
func (g *group) propose(props []*Proposal) []*Proposal {
	if len(props) == 0 {
		return nil
	}
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		failProps(props, ErrNotLeader)
		return nil
	}
	var plain, confs []*Proposal
	for _, p := range props {
		if p.conf != nil {
			confs = append(confs, p)
		} else {
			plain = append(plain, p)
		}
	}
	last, _ := g.st.LastIndex()
	var stepped []*Proposal
	if len(plain) > 0 {
		ents := make([]*pb.Entry, len(plain))
		for i, p := range plain {
			ents[i] = &pb.Entry{Data: p.data}
		}
		m := &pb.Message{Type: pb.MsgProp.Enum(), From: new(uint64(g.replica)), Entries: ents}
		if err := g.rn.Step(m); err != nil {
			g.dropped(plain, bs)
		} else {
			for i, p := range plain {
				p.term, p.index = bs.GetTerm(), last+1+uint64(i)
				if w := g.waiters[p.index]; w != nil {
					w.resolve(nil, ErrNoReply) // kept from a lost leadership, and the entry is gone
				}
				g.waiters[p.index] = p
			}
			last += uint64(len(plain))
			stepped = plain
		}
	}
	return append(stepped, g.proposeConfs(confs, bs.GetTerm(), last)...)
}

// dropped handles proposals raft dropped. During a leadership transfer,
// or in a group without GroupConfig.HoldPastUncommitted, they fail
// (ErrDropped: raft takes none until a transfer ends). Otherwise the
// leader holds more than MaxUncommittedBytes uncommitted (etcd raft's
// MaxUncommittedEntriesSize): they go back to the front of the group's
// queue, still counted by MaxPendingProposals, and are stepped again in
// a later round, once commits free room (finish schedules the round
// after one that applied entries): a burst larger than the limit waits
// instead of being refused (docs/cluster.md, "Proposals past the
// uncommitted limit").
func (g *group) dropped(plain []*Proposal, bs raft.BasicStatus) {
	if bs.LeadTransferee != 0 || !g.holdPast {
		failProps(plain, ErrDropped)
		return
	}
	g.held = true
	g.mu.Lock()
	g.mu.props = append(plain[:len(plain):len(plain)], g.mu.props...)
	g.mu.Unlock()
}

// tick steps the ticks that passed since the group's last round, after
// the round's messages, at most maxCatchUpTicks of them. A round loop that
// stalled (a long fsync, a starved CPU) does not count what it missed as
// silence of the peers whose messages wait in the inbox: with every tick
// caught up, a follower that just heard its leader would campaign, and a
// leader would run CheckQuorum twice in one round and step down on
// responses it had not stepped yet (trial 34 saw meta leaders lost 8 to
// 10 times a minute under write bursts). etcd-server's ticker drops the
// ticks its loop misses too (time.Ticker keeps one). A group that has a
// leader steps them stretched by the loop's recent pauses (stretch.go).
func (g *group) tick() {
	now := g.n.ticks.Load()
	if now < g.tickFrom {
		g.lastTick = now // a leader's grace after a large append (runAside)
		return
	}
	k := now - g.lastTick
	g.lastTick = now
	if g.rn.BasicStatus().Lead != raft.None { // a leaderless group elects at the configured pace
		k = stretchTicks(k, g.n.Stretch(), &g.tickCarry)
	}
	k = min(k, g.n.maxCatchUpTicks())
	for range k {
		g.rn.Tick()
	}
}

func (g *group) request(r request) {
	switch r.kind {
	case reqCampaign:
		_ = g.rn.Campaign()
	case reqTransfer:
		if g.rn.BasicStatus().RaftState == raft.StateLeader && r.to != g.replica {
			g.handover = true
			g.rn.TransferLeader(uint64(r.to))
			g.transferTo, g.transferTries = r.to, 0
			if r.retry {
				g.transferTries = transferRetries
			}
		}
	case reqStepDown:
		if to := g.bestFollower(); to != 0 {
			g.handover = true
			g.rn.TransferLeader(to)
			g.transferTo, g.transferTries = 0, transferRetries
		}
	case reqCompact:
		g.prepareCompact(r.index)
	case reqRead:
		g.startRead(r.read)
	case reqForceOut:
		g.forceOut(r.to)
	case reqWake: // a forget is done first (forgetFirst)
	}
	if r.done != nil {
		close(r.done)
	}
}

// forgetFirst does the forgets among reqs (a wake for a leader whose
// server was found dead or reported gone) before the round steps its
// inbox: a pre-vote from a replica that forgot the same leader a moment
// earlier must find this one no longer in that leader's lease, or it is
// refused and both wait a whole election timeout more. A follower
// forgets its leader (so PreVote is granted at once) and takes an
// election timeout's worth of ticks, so that it campaigns within the
// randomised remainder.
func (g *group) forgetFirst(reqs []request) {
	for _, r := range reqs {
		if r.kind == reqWake && r.forget && g.rn.BasicStatus().RaftState == raft.StateFollower {
			_ = g.rn.ForgetLeader()
			for range g.n.cfg.ElectionTicks {
				g.rn.Tick()
			}
			return
		}
	}
}

// transferRetries is how many times a leadership transfer raft abandoned
// is asked again.
const transferRetries = 3

// retryTransfer asks again for the leadership transfer of the last
// TransferLeader or StepDown (not HandOver) when raft abandoned it (it gives one an
// election timeout: a successor on a loaded server, or one that had to
// catch up first, can miss it) and this replica still leads, at most
// transferRetries times: nats-server's leader steps down whatever
// happens, and `nats stream cluster step-down` waits five seconds for a
// new leader. A successor cut off is not asked again.
func (g *group) retryTransfer() {
	if g.transferTries == 0 {
		return
	}
	bs := g.rn.BasicStatus()
	switch {
	case bs.RaftState != raft.StateLeader:
		g.transferTries = 0 // done, or deposed
	case bs.LeadTransferee == 0:
		g.transferTries--
		to := uint64(g.transferTo)
		if to == 0 {
			to = g.bestFollower()
		}
		// A successor not heard from lately (its server's beats come
		// every beatTicks ticks) is not asked again: the transfer would only hold
		// proposals for another election timeout.
		if to != 0 && g.heardWithin(uint64(max(g.n.cfg.ElectionTicks/2, 1)))[ReplicaID(to)] {
			g.handover = true
			g.rn.TransferLeader(to)
		}
	}
}

// bestFollower is an active voter with the longest log, other than this
// replica, chosen at random among those equally long (0 if none, or if
// this replica is not the leader). Active is
// raft's RecentActive, or heard from within the contact window (contact.go):
// a group that was quiet gave raft no ticks and its followers no reason
// to answer, and raft's CheckQuorum may have cleared RecentActive just
// before it went quiet, so an idle stream's step-down found no follower.
func (g *group) bestFollower() uint64 {
	if g.rn.BasicStatus().RaftState != raft.StateLeader {
		return 0
	}
	heard := g.heardWithin(g.n.contactTicks())
	var best []uint64
	var match uint64
	g.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		active := pr.RecentActive || heard[ReplicaID(id)]
		if id == uint64(g.replica) || typ != raft.ProgressTypePeer || !active {
			return
		}
		switch {
		case len(best) == 0 || pr.Match > match:
			best, match = []uint64{id}, pr.Match
		case pr.Match == match:
			best = append(best, id)
		}
	})
	if len(best) == 0 {
		return 0
	}
	// Among those equally up to date, any: nats-server picks a random
	// current peer, and repeated step-downs spread the leadership.
	return best[rand.IntN(len(best))]
}

// prepareCompact writes a compact item for index (clamped to what raft has
// applied) and has finish drop the entries from memory.
func (g *group) prepareCompact(index uint64) {
	index = min(index, g.rawApplied, g.smApplied)
	first, _ := g.st.FirstIndex()
	if index < first {
		return
	}
	term, err := g.st.Term(index)
	if err != nil {
		return
	}
	m := snapMeta{index: index, term: term, conf: g.confAt(index)}
	var it items
	it.snap(itemCompact, g.id, m)
	g.out.items = append(g.out.items, it.b...)
	g.out.up.group = g.id
	g.out.up.base = &m
	g.out.mustSync = true // segments are deleted only on durable compactions
	g.out.compact = index
}

func (g *group) prepareRemove(props []*Proposal, reqs []request) {
	failProps(props, ErrNotLeader)
	for _, r := range reqs {
		if r.read != nil {
			r.read.resolve(nil, ErrNotLeader)
		}
		if r.kind == reqRemove {
			g.removeDone = r.done
			continue
		}
		if r.done != nil {
			close(r.done)
		}
	}
	var it items
	it.replica(g.id, g.replica, replicaRemoved)
	g.out.items = it.b
	g.out.up = walUpdate{group: g.id, removed: g.replica}
	g.out.mustSync = true
}

// ready takes the group's Ready and encodes its WAL items and messages.
func (g *group) ready(stepped []*Proposal) {
	if !g.rn.HasReady() {
		return
	}
	rd := g.rn.Ready()
	g.out.rd, g.out.hasReady = rd, true
	g.readStates(rd.ReadStates)
	g.relocateProposals(rd, stepped)
	g.checkProposals(rd, stepped)
	dropData(stepped)
	it := recordItems()
	if !raft.IsEmptySnap(rd.Snapshot) {
		if bg, ok := g.sm.(BackgroundRestorer); ok && bg.RestoreInBackground() {
			g.out.rd, g.out.hasReady = raft.Ready{}, false
			g.startRestore(rd, stepped)
			return
		}
		if !g.restore(rd.Snapshot, &it) {
			return
		}
	}
	g.readyRest(rd, stepped, &it)
}

// readyRest encodes the Ready's hard state, entries and messages after
// its snapshot (if any) was installed, with it holding the snapshot's item.
func (g *group) readyRest(rd raft.Ready, stepped []*Proposal, it *items) {
	if !raft.IsEmptyHardState(rd.HardState) {
		it.hardState(g.id, rd.HardState)
		g.out.up.hs = rd.HardState
	}
	if len(rd.Entries) > 0 {
		it.entries(g.id, rd.Entries)
		g.out.up.maxIndex = rd.Entries[len(rd.Entries)-1].GetIndex()
	}
	if len(it.b) > 1 { // more than recordItems' first byte
		if len(g.out.items) == 0 {
			// not copied: a large entry's bytes are copied once, into it
			g.out.record, g.out.items = it.b, it.b[1:]
		} else {
			g.out.items = append(g.out.items, it.b[1:]...)
		}
		g.out.up.group = g.id
	}
	g.out.mustSync = g.out.mustSync || rd.MustSync
	var flags byte
	var inSync map[ReplicaID]bool
	if g.leaderQuiesces(rd, stepped) {
		g.quiet, flags = true, flagQuiesce
		inSync = g.inSync() // contact.go
	}
	g.encodeMessages(rd.Messages, flags, inSync)
}

// relocateProposals gives the proposals stepped this round the indexes
// raft gave them. propose numbers them from the storage's last index,
// but raft may already hold an entry the storage does not: a leader that
// applied a joint configuration with auto-leave appends the entry
// leaving it by itself while the previous round's Ready is advanced
// (etcd raft appliedTo). Nothing else appends to a leader's log within a
// round after propose (proposals are not forwarded to it, and a new term
// ends the check), so the stepped proposals are the Ready's last
// entries; they move up by the entries raft appended first, and their
// waiters with them (a waiter kept at the new index from a lost
// leadership ends with ErrNoReply, as in propose). checkProposals then verifies
// them.
func (g *group) relocateProposals(rd raft.Ready, stepped []*Proposal) {
	n := uint64(len(stepped))
	if n == 0 || uint64(len(rd.Entries)) < n {
		return
	}
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader || bs.GetTerm() != stepped[0].term {
		return
	}
	first := rd.Entries[uint64(len(rd.Entries))-n].GetIndex()
	if first <= stepped[0].index {
		return
	}
	shift := first - stepped[0].index
	for i := len(stepped) - 1; i >= 0; i-- { // from the top: no waiter overwrites one not yet moved
		p := stepped[i]
		if g.waiters[p.index] == p {
			delete(g.waiters, p.index)
		}
		p.index += shift
		if w := g.waiters[p.index]; w != nil && w != p {
			w.resolve(nil, ErrNoReply)
		}
		g.waiters[p.index] = p
	}
}

// checkProposals verifies, while this replica is still the leader of the
// term the proposals were made in, that they sit in the log where
// propose said. A mismatch is a bug that would answer clients for the
// wrong entry: panic.
func (g *group) checkProposals(rd raft.Ready, stepped []*Proposal) {
	if len(stepped) == 0 || len(rd.Entries) == 0 {
		return
	}
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader || bs.GetTerm() != stepped[0].term {
		return
	}
	first := rd.Entries[0].GetIndex()
	for _, p := range stepped {
		i := p.index - first
		if p.index < first || i >= uint64(len(rd.Entries)) || rd.Entries[i].GetTerm() != p.term ||
			(p.conf == nil && !bytes.Equal(rd.Entries[i].GetData(), p.data)) {
			panic(fmt.Sprintf("raftnode: group %d: proposal at %d/%d is not in the Ready", g.id, p.term, p.index))
		}
	}
}

// dropData forgets the data of proposals raft took into its log (once
// checkProposals compared it): raft keeps its own copy of every entry it
// appends (etcd raft's appendEntry clones it), so a waiter that kept the
// data too held every proposal in flight twice until it applied, 64 MiB
// more for a stream taking a burst (streamlog's pending bound;
// docs/memory.md, "Memory after bursts").
func dropData(stepped []*Proposal) {
	for _, p := range stepped {
		p.data = nil
	}
}

// restore installs a received snapshot into the state machine (durable
// when Restore returns) and adds its snapshot item. False if it fenced
// the group.
func (g *group) restore(snap *pb.Snapshot, it *items) bool {
	md := snap.GetMetadata()
	m := snapMeta{index: md.GetIndex(), term: md.GetTerm(), conf: pb.EnsureConfState(md.GetConfState())}
	g.n.walMu.Lock()
	err := g.n.wal.snapBegin(g.id, m)
	g.n.walMu.Unlock()
	if err == nil {
		err = g.sm.Restore(md.GetIndex(), snap.GetData())
	}
	if err != nil {
		g.fence(fmt.Errorf("install of snapshot at %d: %w", md.GetIndex(), err))
		g.out = roundOut{}
		return false
	}
	it.snap(itemSnapshot, g.id, m)
	g.out.up.base = &m
	g.out.mustSync = true
	return true
}

// startRestore begins the background install of the Ready's snapshot
// (BackgroundRestorer): the snapbegin item is written and fsynced, the
// state machine's Restore starts on a goroutine, and the group is parked
// with its Ready until Restore returns (resumeRestore).
func (g *group) startRestore(rd raft.Ready, stepped []*Proposal) {
	md := rd.Snapshot.GetMetadata()
	m := snapMeta{index: md.GetIndex(), term: md.GetTerm(), conf: pb.EnsureConfState(md.GetConfState())}
	g.n.walMu.Lock()
	err := g.n.wal.snapBegin(g.id, m)
	g.n.walMu.Unlock()
	if err != nil {
		g.fence(fmt.Errorf("install of snapshot at %d: %w", m.index, err))
		g.out = roundOut{}
		return
	}
	g.restoring = &restoreJob{rd: rd, stepped: stepped, meta: m}
	g.mu.Lock()
	g.mu.restoreDone, g.mu.restoreErr = false, nil
	g.mu.Unlock()
	index, data := m.index, rd.Snapshot.GetData()
	g.n.cfg.Infof("raftnode: group %d replica %d: installing the snapshot at %d in the background", g.id, g.replica, index)
	go func() {
		err := g.sm.Restore(index, data)
		g.mu.Lock()
		g.mu.restoreDone, g.mu.restoreErr = true, err
		g.mu.Unlock()
		g.n.sched.enqueue(g)
	}()
}

// resumeRestore is the start of a parked group's round: false while its
// background Restore runs (the round does nothing, and lets the ticks go
// by). Once Restore returned: on success, the parked Ready is written,
// sent and advanced as any other (the snapshot item with it), and the
// round ends there (false: the inbox waits for the next round); with
// ErrRestoreRetry, the snapshot is abandoned and raft rebuilt from the
// durable log, and the round goes on (true); any other error fences.
func (g *group) resumeRestore() bool {
	g.mu.Lock()
	done, err, removed := g.mu.restoreDone, g.mu.restoreErr, g.mu.removed
	g.mu.Unlock()
	job := g.restoring
	switch {
	case removed || g.fencedErr != nil:
		g.restoring = nil
		return true
	case !done:
		g.lastTick = g.n.ticks.Load()
		return false
	}
	g.restoring = nil
	switch {
	case err == nil:
		it := recordItems()
		it.snap(itemSnapshot, g.id, job.meta)
		g.out.up.base = &job.meta
		g.out.mustSync = true
		g.out.rd, g.out.hasReady = job.rd, true
		g.readyRest(job.rd, job.stepped, &it)
		g.lastTick = g.n.ticks.Load()
		g.n.sched.enqueue(g) // what arrived meanwhile
		return false
	case errors.Is(err, ErrRestoreRetry):
		g.n.cfg.Logf("raftnode: group %d replica %d: the snapshot at %d was not installed (%v); going on from the log", g.id, g.replica, job.meta.index, err)
		var it items
		it.snap(itemSnapAbort, g.id, job.meta)
		g.out.items = it.b
		g.out.up.group = g.id
		g.out.mustSync = true
		g.lastTick = g.n.ticks.Load()
		g.newRawNode(g.rawApplied) // raft as the WAL has it: the snapshot never happened
		return g.rn != nil && g.fencedErr == nil
	default:
		g.fence(fmt.Errorf("install of snapshot at %d: %w", job.meta.index, err))
		g.out = roundOut{}
		return false
	}
}

// encodeMessages turns the Ready's messages into envelopes for their
// servers. A message to a replica of no known server is dropped, and the
// replica reported unreachable in finish.
//
// inSync are the replicas whose quiesce heartbeat (flags has
// flagQuiesce) also gets flagInSync (contact.go).
func (g *group) encodeMessages(msgs []*pb.Message, flags byte, inSync map[ReplicaID]bool) {
	if len(msgs) == 0 {
		return
	}
	g.mu.Lock()
	peers := g.mu.peers
	g.mu.Unlock()
	for _, m := range msgs {
		to := ReplicaID(m.GetTo())
		f := flags
		if inSync[to] {
			f |= flagInSync
		}
		env, room, err := marshalEnvelope(g.id, f, m)
		if err != nil {
			panic(fmt.Sprintf("raftnode: marshal %v: %v", m.GetType(), err))
		}
		om := outMsg{to: peers[to], replica: to, snap: m.GetType() == pb.MsgSnap, early: sendsEarly(m.GetType()), env: env, room: room}
		if m.GetType() == pb.MsgApp && len(env) >= largeRecord {
			g.largeSent = true
		}
		g.out.msgs = append(g.out.msgs, om)
	}
}

// finish is the last part of a round (package comment, step 4), after the
// WAL write (walErr: it failed, nothing is durable) and the sends
// (unreachable: servers whose frame could not be sent).
func (g *group) finish(walErr error, unreachable map[ServerID]bool) {
	defer g.contain()
	out := g.out
	g.out = roundOut{}
	if g.removeDone != nil || g.fencedErr != nil {
		return
	}
	if walErr != nil {
		g.fence(walErr)
		return
	}
	if g.synthetic {
		g.applySynthetic()
		if g.fencedErr != nil {
			return
		}
	}
	if out.hasReady {
		g.persisted(out.rd)
		g.apply(out.rd.CommittedEntries)
		if g.fencedErr != nil {
			return
		}
		g.roleChange(out.rd)
	}
	g.expireKept()
	g.serveReads()
	if out.compact != 0 {
		g.compact(out.compact)
	}
	for _, m := range out.msgs {
		switch {
		case m.announce && (m.to == "" || unreachable[m.to]):
			if g.rn.BasicStatus().Lead == 0 { // a restart before the routes are up
				g.reannounce = append(g.reannounce, m.replica)
			}
		case m.to == "" || unreachable[m.to]:
			g.rn.ReportUnreachable(uint64(m.replica))
			if m.snap {
				g.rn.ReportSnapshot(uint64(m.replica), raft.SnapshotFailure)
			}
		case m.snap:
			g.rn.ReportSnapshot(uint64(m.replica), raft.SnapshotFinish)
		}
	}
	if out.hasReady {
		g.rn.Advance(out.rd)
	}
	g.publish()
	retry := g.held && len(out.rd.CommittedEntries) > 0 // room freed for the held proposals
	if retry || g.restoring == nil && g.rn.HasReady() {
		g.held = false
		g.n.sched.enqueue(g)
	}
}

// persisted records in the in-memory log what the round made durable.
func (g *group) persisted(rd raft.Ready) {
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := g.st.ApplySnapshot(rd.Snapshot); err != nil {
			panic(fmt.Sprintf("raftnode: group %d: apply snapshot: %v", g.id, err))
		}
		md := rd.Snapshot.GetMetadata()
		g.confs = []confAt{{index: md.GetIndex(), cs: pb.EnsureConfState(md.GetConfState())}}
		g.smApplied = md.GetIndex()
		g.rawApplied = md.GetIndex()
		g.appliedTerm = md.GetTerm()
		for i, w := range g.waiters { // kept from a lost leadership: their entries never apply here
			if i <= md.GetIndex() {
				w.resolve(nil, ErrNoReply)
				delete(g.waiters, i)
			}
		}
	}
	if err := g.st.Append(rd.Entries); err != nil {
		panic(fmt.Sprintf("raftnode: group %d: append: %v", g.id, err))
	}
	g.dropReplaced(rd.Entries)
	if !raft.IsEmptyHardState(rd.HardState) {
		_ = g.st.SetHardState(rd.HardState)
	}
}

// apply hands committed entries to the state machine, applies membership
// changes to raft, and resolves the waiters of the applied entries.
// Entries the state machine already reflects (replayed after a restart)
// are not applied again, but their membership changes are.
func (g *group) apply(ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	batch := make([]Entry, 0, len(ents))
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal {
			g.applyConfChange(e)
		}
		if e.GetIndex() <= g.smApplied {
			continue
		}
		var data []byte
		if e.GetType() == pb.EntryNormal {
			data = e.GetData()
		}
		en := Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: data}
		if w := g.waiters[en.Index]; w != nil && w.term == en.Term && w.conf == nil {
			en.Tag = w.tag
		}
		if en.Index <= g.replayTo {
			g.reapplied++
		}
		batch = append(batch, en)
	}
	g.rawApplied = ents[len(ents)-1].GetIndex()
	g.appliedTerm = ents[len(ents)-1].GetTerm()
	if len(batch) == 0 {
		return
	}
	if err := g.sm.Apply(batch); err != nil {
		g.fence(fmt.Errorf("apply of entries %d..%d: %w", batch[0].Index, batch[len(batch)-1].Index, err))
		return
	}
	g.smApplied = batch[len(batch)-1].Index
	if len(g.waiters) == 0 {
		return
	}
	first := batch[0].Index
	for _, e := range ents {
		w := g.waiters[e.GetIndex()]
		if w == nil || e.GetIndex() < first {
			continue
		}
		delete(g.waiters, e.GetIndex())
		switch {
		case w.term != e.GetTerm():
			w.resolve(nil, ErrNoReply) // another entry took its place
		case w.conf != nil && e.GetType() != pb.EntryConfChangeV2:
			w.resolve(nil, ErrDropped) // raft replaced the change by an empty entry
		default:
			w.resolve(batch[e.GetIndex()-first].Result, nil)
		}
	}
}

// applySynthetic hands the state machine the synthetic entry of a
// bootstrapped group's base (no data), so that its applied index follows
// the log from the start.
func (g *group) applySynthetic() {
	g.synthetic = false
	if err := g.sm.Apply([]Entry{{Index: initialIndex, Term: initialTerm}}); err != nil {
		g.fence(fmt.Errorf("apply of the initial entry: %w", err))
		return
	}
	g.smApplied = initialIndex
}

func (g *group) applyConfChange(e *pb.Entry) {
	var cc pb.ConfChangeI
	if e.GetType() == pb.EntryConfChange {
		var c pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			panic(fmt.Sprintf("raftnode: group %d: conf change at %d: %v", g.id, e.GetIndex(), err))
		}
		cc = &c
	} else {
		var c pb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			panic(fmt.Sprintf("raftnode: group %d: conf change at %d: %v", g.id, e.GetIndex(), err))
		}
		cc = &c
	}
	cs := g.rn.ApplyConfChange(cc)
	g.confs = append(g.confs, confAt{index: e.GetIndex(), cs: cs})
}

// roleChange keeps the waiters when this replica stops being the leader
// of the term they were proposed in (docs/cluster.md, decision 7; kept.go):
// what had applied was answered above; the rest may or may not commit
// later. A leader that handed its leadership over (handover) knows they
// will (raft let the transferee campaign only once its log held every
// entry of this one); a deposed one does not, and logs the deposal. Either
// way each waiter resolves when the entry at its index applies here
// (apply: its result if the entry is of its term, else ErrNoReply), or
// when the group is removed, the node closes, a snapshot passes it or
// keptElections election timeouts pass (ErrNoReply). It tells the
// LeaderObserver that this replica leads only once it has applied an
// entry of its own term (leaderReady), so that a replica that comes to
// lead while it still has earlier entries to apply (a restart replaying
// its log) never serves from a state behind its log.
func (g *group) roleChange(rd raft.Ready) {
	bs := g.rn.BasicStatus()
	leader := bs.RaftState == raft.StateLeader
	if g.leader && (!leader || bs.GetTerm() != g.term) {
		if !g.handover {
			cs := g.confs[len(g.confs)-1].cs
			voter := slices.Contains(cs.GetVoters(), uint64(g.replica)) || slices.Contains(cs.GetVotersOutgoing(), uint64(g.replica))
			g.n.deposed.add(deposal{group: g.id, label: g.label, from: g.term, to: bs.GetTerm(), leader: ReplicaID(bs.Lead), server: g.serverOf(ReplicaID(bs.Lead)), removed: !voter})
		}
		g.keepWaiters()
		g.handover = false
	}
	if leader != g.leader || bs.GetTerm() != g.term {
		g.failReads(ErrNotLeader)
		g.n.cfg.Debugf("raftnode: group %d replica %d: term %d, %v, leader %d", g.id, g.replica, bs.GetTerm(), bs.RaftState, bs.Lead)
	}
	g.leader, g.term = leader, bs.GetTerm()
	ready := g.leaderReady()
	if ready != g.observed || ready && g.observedTerm != g.term {
		g.observed, g.observedTerm = ready, g.term
		g.observeLeader(ready, g.term)
	}
}

// leaderReady reports whether this replica leads (as of the last Ready)
// and has applied an entry of its own term, hence every entry of earlier
// terms.
func (g *group) leaderReady() bool { return g.leader && g.appliedTerm == g.term }

// observeLeader tells the state machine, if it is a LeaderObserver, that
// this replica now leads term (leader) or no longer leads, and, if it is
// a SuccessionObserver, whether it leads term because its predecessor
// handed the leadership over (it campaigned for term on the
// predecessor's MsgTimeoutNow, sent at term-1).
func (g *group) observeLeader(leader bool, term uint64) {
	if o, ok := g.sm.(SuccessionObserver); ok && leader {
		o.Succeeded(term, g.transferTerm != 0 && g.transferTerm+1 == term)
	}
	if o, ok := g.sm.(LeaderObserver); ok {
		o.LeaderChanged(leader, term)
	}
}

// compact drops entries through index from the in-memory log, after the
// compact item is durable.
func (g *group) compact(index uint64) {
	if err := g.st.Compact(index); err != nil {
		return // already compacted further (ErrCompacted)
	}
	i := 0
	for i+1 < len(g.confs) && g.confs[i+1].index <= index {
		i++
	}
	g.confs = g.confs[i:]
}

// publishRaftz fills the parts of s only /raftz reads: the vote, the
// last entry's term, the log's bytes and times, whether a leader was
// ever known, and since which tick this replica leads.
func (g *group) publishRaftz(s *GroupStatus, bs raft.BasicStatus, last uint64) {
	s.Vote = ReplicaID(bs.GetVote())
	if t, err := g.st.Term(last); err == nil {
		s.LastTerm = t
	}
	s.LogBytes, s.FirstTime, s.LastTime = g.st.logSpan(s.FirstIndex, last)
	g.everLead = g.everLead || bs.Lead != 0
	s.EverHadLeader = g.everLead
	switch {
	case bs.RaftState != raft.StateLeader:
		g.leadTick = 0
	case g.leadTick == 0:
		g.leadTick = max(g.n.ticks.Load(), 1)
	}
	s.leadTick = g.leadTick
}

// publish copies the group's state for Status.
func (g *group) publish() {
	bs := g.rn.BasicStatus()
	if g.handover && bs.RaftState == raft.StateLeader && bs.LeadTransferee == 0 {
		g.handover = false // the transfer was refused or timed out: still the leader
	}
	first, _ := g.st.FirstIndex()
	last, _ := g.st.LastIndex()
	cs := g.confs[len(g.confs)-1].cs
	s := GroupStatus{
		Group: g.id, Replica: g.replica, Role: roleOf(bs.RaftState), Term: bs.GetTerm(),
		Leader: ReplicaID(bs.Lead), Commit: bs.GetCommit(), Applied: g.smApplied,
		FirstIndex: first, LastIndex: last, Quiesced: g.quiet, Transferee: ReplicaID(bs.LeadTransferee),
		transferRetry: bs.RaftState == raft.StateLeader && g.transferTries > 0,
		Joint:         len(cs.GetVotersOutgoing()) > 0,
		LeaderReady:   g.leaderReady() && g.fencedErr == nil, Reapplied: g.reapplied, ReplayTo: g.replayTo,
	}
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext()} {
		s.Member = s.Member || slices.Contains(ids, uint64(g.replica))
	}
	if g.votersCS != cs {
		g.votersCS, g.voters = cs, votersOf(cs)
	}
	s.Voters = g.voters
	if bs.RaftState == raft.StateLeader {
		g.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
			s.Replicas = append(s.Replicas, ReplicaStatus{
				Replica: ReplicaID(id), Match: pr.Match, Active: pr.RecentActive || id == uint64(g.replica),
				Learner: typ == raft.ProgressTypeLearner,
				Joining: s.Joint && !slices.Contains(cs.GetVotersOutgoing(), id),
			})
		})
		slices.SortFunc(s.Replicas, func(a, b ReplicaStatus) int { return cmp.Compare(a.Replica, b.Replica) })
	}
	g.publishContact(&s, bs)
	g.synced = g.synced || s.CaughtUp || bs.RaftState == raft.StateLeader
	s.HoldsCommitted = g.synced && g.fencedErr == nil && slices.Contains(s.Voters, g.replica)
	g.publishRaftz(&s, bs, last)
	g.mu.Lock()
	g.mu.transfersAsked -= g.transfersTaken
	g.transfersTaken = 0
	s.LeaderServer = g.mu.peers[s.Leader]
	s.VoteServer = g.mu.peers[s.Vote]
	for i := range s.Replicas {
		s.Replicas[i].Server = g.mu.peers[s.Replicas[i].Replica]
	}
	g.mu.status = s
	g.mu.quiet = g.quiet
	g.mu.Unlock()
	g.catchMissedWake(s)
}
