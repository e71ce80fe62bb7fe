package raftnode

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
)

// Role is a replica's part in its group.
type Role int

// The roles, as raft's StateType (PreCandidate: probing with PreVote).
const (
	Follower Role = iota
	Candidate
	Leader
	PreCandidate
)

// String returns the role in lower case ("leader", "follower", ...).
func (r Role) String() string {
	switch r {
	case Follower:
		return "follower"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	case PreCandidate:
		return "precandidate"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

func roleOf(s raft.StateType) Role {
	switch s {
	case raft.StateCandidate:
		return Candidate
	case raft.StateLeader:
		return Leader
	case raft.StatePreCandidate:
		return PreCandidate
	}
	return Follower
}

// GroupStatus is a replica's view of its group as of its last round
// (the material of nats-server's ClusterInfo: leader, replicas, lag).
type GroupStatus struct {
	Group   GroupID
	Replica ReplicaID
	Role    Role
	Term    uint64
	// Leader is the leader this replica knows of (0: none), on LeaderServer.
	Leader       ReplicaID
	LeaderServer ServerID
	// Commit is the highest index known committed; Applied the index the
	// state machine reflects; FirstIndex..LastIndex the log held (FirstIndex
	// is LastIndex+1 when it holds no entry).
	Commit, Applied       uint64
	FirstIndex, LastIndex uint64
	// Quiesced: the group is idle and not ticking.
	Quiesced bool
	// LeaderReady: this replica leads and has applied an entry of its own
	// term, so its state machine holds every entry committed before its
	// term (a replica that just came to lead may still be applying them;
	// LeaderObserver is told only once this holds).
	LeaderReady bool
	// ReplayTo is the commit index the WAL recovered this replica with
	// (0 for a replica created since the node opened): the entries up to
	// it had committed before the restart. Reapplied counts those handed
	// to the state machine since, because its checkpoint
	// (StateMachine.Applied) was behind ReplayTo: the work a restart does
	// again. A replica that checkpointed at its last applied entry before
	// a clean stop reapplies none (docs/cluster.md, "Restarts").
	ReplayTo, Reapplied uint64
	// Transferee is the replica this leader is handing its leadership
	// to (Node.TransferLeader, Node.StepDown), 0 when no transfer is
	// under way: raft abandons one after an election timeout.
	Transferee ReplicaID
	// transferRetry: raft abandoned this leader's step-down transfer and
	// it may be asked again (Brief.Transferring).
	transferRetry bool
	// Joint: the configuration this replica applied last is a joint one
	// (a membership change under way, raft's C_old,new).
	Joint bool
	// Voters are the voters of the configuration this replica applied
	// last, both halves of a joint one, by replica ID, ascending; shared
	// between statuses: read only.
	Voters []ReplicaID
	// Member: this replica is in the configuration it applied last (a
	// voter of either half, or a learner); false once it applied its own
	// removal.
	Member bool
	// Fenced, if not nil, is why the replica takes no part in its group
	// (wraps ErrIdentity or ErrCorrupt, or is an Apply/Restore error).
	Fenced error
	// Replicas is the leader's view of every replica (empty on followers).
	Replicas []ReplicaStatus

	// The replica's contact with the others and its standing (contact.go,
	// "Contact"):
	//
	// Peers are the group's other replicas, by replica ID, with how long
	// ago this replica last heard from each.
	Peers []PeerContact
	// LeaderCommit is the highest commit index the leader told this
	// replica (on the leader, its commit index); CaughtUp: this replica
	// knows a leader and had applied through LeaderCommit at the end of
	// its last round.
	LeaderCommit uint64
	CaughtUp     bool
	// Current is nats-server's "current" of a Raft node: the leader, or
	// a follower caught up that heard from its leader within
	// Node.ContactWindow; never a fenced replica or one of a group with
	// nothing committed.
	Current bool
	// HoldsCommitted: this replica is a voter of the configuration it
	// applied last (either half of a joint one) and has held what its
	// group committed at some point since it was added here: it led, or
	// was CaughtUp with a leader, or the WAL recovered it knowing
	// entries committed past the bootstrap base (a leader fed it before
	// the restart). A replica that joined empty and is not promoted yet
	// (a learner), or a voter bootstrapped late that no leader fed yet,
	// does not: its state may lack what the group committed, so it must
	// not answer for the group (the cluster layer's leaderless answers,
	// docs/cluster.md "Who answers"). Sticky: a replica that falls
	// behind afterwards (partitioned, its leader lost) keeps it, as a
	// nats-server replica of a leaderless group answers with what it
	// holds. Never on a fenced replica.
	HoldsCommitted bool
	// Leaderless is how long this replica has known no leader (since it
	// last knew one, or since it was added); 0 while it knows one.
	Leaderless time.Duration
	leaderTick uint64 // the node's tick when the replica last knew a leader

	// The material of nats-server's /raftz (docs/monitoring.md,
	// "/raftz"):
	//
	// Vote is the replica this one voted for in Term (0: none), on
	// VoteServer; LastTerm the term of the entry at LastIndex (0 when
	// unknown).
	Vote       ReplicaID
	VoteServer ServerID
	LastTerm   uint64
	// LogBytes is what the entries FirstIndex..LastIndex take in the
	// WAL (their data and 13 bytes each); FirstTime and LastTime are
	// when the first and the last of them were appended here (for
	// entries the WAL replayed, when the node opened): with none held,
	// FirstTime is zero and LastTime the last compacted one's (zero if
	// none was appended since the node opened; logstats.go).
	LogBytes            uint64
	FirstTime, LastTime time.Time
	// EverHadLeader: this replica has known a leader since it was
	// added here.
	EverHadLeader bool
	// LeaderFor is how long this replica has led (an upper bound, in
	// ticks of the node's clock); 0 unless Role is Leader.
	LeaderFor time.Duration
	leadTick  uint64 // the node's tick when the replica came to lead
	// Proposals and Inbox are the proposals waiting for the group's next
	// round and the messages from other replicas waiting for it.
	Proposals, Inbox int
}

// ReplicaStatus is the leader's view of one replica of its group.
type ReplicaStatus struct {
	Replica ReplicaID
	Server  ServerID
	// Match is the highest index known to be in the replica's log.
	Match uint64
	// Active: raft counts it recently active (heard from within the
	// last election timeout), or, at Node.Status, this replica heard from
	// it within the contact window (a message of the group, or a beat of
	// its server while the group is quiet: PeerContact). raft's
	// CheckQuorum clears its count every election timeout, and a group
	// that was quiet gave its followers no reason to answer: a leader
	// woken just before asked its successor (lame duck mode) found none
	// (docs/cluster.md, "Lame duck mode and shutdown"), as an idle
	// stream's step-down did (bestFollower).
	Active  bool
	Learner bool
	// Joining: a voter of the joint configuration's incoming half only
	// (being promoted in place of another; Joint).
	Joining bool
}

// raftLogger sends raft's notable log lines to Config.Logf; debug lines
// are dropped; Fatal and Panic panic (raft calls them on a broken
// invariant: the replica must stop). Its line about a proposal dropped
// past MaxUncommittedBytes is routine in a group that holds such
// proposals (GroupConfig.HoldPastUncommitted: they wait, group.dropped)
// and not logged; in another (drops not nil) the proposal fails, and
// the line is logged at most once every dropLogEvery, with how many
// were not since.
type raftLogger struct {
	logf   func(string, ...any)
	debugf func(string, ...any) // nil: dropped
	group  GroupID
	drops  *dropLog
}

// quorumStepDown is in raft's line about a leader that CheckQuorum made a
// follower ("%x stepped down to follower since quorum is not active"):
// raftnode logs that deposal itself at [INF] with its reason
// (logDeposed), so raft's line is debug only; trial 36 saw 14 of them at
// [WRN] from one server stopped with its peers.
const quorumStepDown = "since quorum is not active"

// unpromotable is in raft's line about a campaign a replica cannot make
// ("%x is unpromotable and can not campaign"): a learner, or a voter
// whose snapshot is still being installed, asked to campaign (a
// campaign asked of a group's replica on a server being caught up after
// its store was wiped). raft ignores the campaign, which is harmless: the
// line is debug only (trial 38 saw them at [WRN] among a wiped server's
// 27 warnings).
const unpromotable = "is unpromotable and can not campaign"

// uncommittedDrop is in raft's line about a proposal dropped past
// MaxUncommittedEntriesSize ("%x appending new entries to log would
// exceed uncommitted entry size limit; dropping proposal").
const uncommittedDrop = "uncommitted entry size limit"

// dropLogEvery is the least time between two logged lines about
// proposals a group dropped past its uncommitted limit.
const dropLogEvery = time.Minute

// dropLog rate-limits the lines of one group's dropped proposals. raft
// logs from the group's rounds, which do not overlap but may run on
// different goroutines: mu orders them.
type dropLog struct {
	now   func() time.Time
	mu    sync.Mutex
	last  time.Time // when a line was last logged (zero: never)
	muted int       // lines not logged since
}

// newDropLog returns the rate limit of a group's dropped proposals, nil
// for a group that holds them (holdPast) rather than fail them.
func newDropLog(holdPast bool) *dropLog {
	if holdPast {
		return nil
	}
	return &dropLog{now: time.Now}
}

// allow reports whether a drop's line is logged now, and how many were
// not since the last one logged.
func (d *dropLog) allow() (bool, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if !d.last.IsZero() && now.Sub(d.last) < dropLogEvery {
		d.muted++
		return false, 0
	}
	muted := d.muted
	d.last, d.muted = now, 0
	return true, muted
}

func (l raftLogger) Debug(...any)          {}
func (l raftLogger) Debugf(string, ...any) {}
func (l raftLogger) Info(v ...any)         {}
func (l raftLogger) Infof(string, ...any)  {}
func (l raftLogger) Warning(v ...any)      { l.logf("raft group %d: %s", l.group, fmt.Sprint(v...)) }
func (l raftLogger) Warningf(f string, v ...any) {
	if strings.Contains(f, quorumStepDown) || strings.Contains(f, unpromotable) {
		if l.debugf != nil {
			l.debugf("raft group %d: %s", l.group, fmt.Sprintf(f, v...))
		}
		return
	}
	if !strings.Contains(f, uncommittedDrop) {
		l.logf("raft group %d: %s", l.group, fmt.Sprintf(f, v...))
		return
	}
	if l.drops == nil {
		return // the proposals wait for room (group.dropped): routine under a burst
	}
	ok, muted := l.drops.allow()
	if !ok {
		return
	}
	more := ""
	if muted > 0 {
		more = fmt.Sprintf(", %d more since the last", muted)
	}
	l.logf("raft group %d: %s (the proposal fails; logged at most every %v%s)", l.group, fmt.Sprintf(f, v...), dropLogEvery, more)
}
func (l raftLogger) Error(v ...any) { l.logf("raft group %d: %s", l.group, fmt.Sprint(v...)) }
func (l raftLogger) Errorf(f string, v ...any) {
	l.logf("raft group %d: %s", l.group, fmt.Sprintf(f, v...))
}
func (l raftLogger) Fatal(v ...any)            { panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
func (l raftLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
