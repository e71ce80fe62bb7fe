package monitor

import (
	"net/http"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// RaftzStatus is /raftz: account name → group name → the group as this
// server's replica sees it (nats-server v2.15.2 monitor.go RaftzStatus).
type RaftzStatus map[string]map[string]RaftzGroup

// RaftzGroup is one Raft group of /raftz, with nats-server v2.15.2's keys
// (RaftzGroup); docs/monitoring.md, "/raftz", says what each holds in
// cairn. Peer IDs are the 8-character IDs of /jsz meta_cluster.peer.
// system_account is true and traffic_account the system account's name,
// as nats-server reports a group whose Raft traffic is not in a user
// account (no account NRG): cairn's is in none.
type RaftzGroup struct {
	ID            string                    `json:"id"`
	State         string                    `json:"state"`
	Size          int                       `json:"size"`
	QuorumNeeded  int                       `json:"quorum_needed"`
	Observer      bool                      `json:"observer,omitempty"`
	Paused        bool                      `json:"paused,omitempty"`
	Overrun       bool                      `json:"overrun,omitempty"`
	OverrunCount  uint64                    `json:"overrun_count,omitempty"`
	Committed     uint64                    `json:"committed"`
	Applied       uint64                    `json:"applied"`
	CatchingUp    bool                      `json:"catching_up,omitempty"`
	Leader        string                    `json:"leader,omitempty"`
	LeaderSince   *time.Time                `json:"leader_since,omitempty"`
	EverHadLeader bool                      `json:"ever_had_leader"`
	Term          uint64                    `json:"term"`
	Vote          string                    `json:"voted_for,omitempty"`
	PTerm         uint64                    `json:"pterm"`
	PIndex        uint64                    `json:"pindex"`
	SystemAcc     bool                      `json:"system_account"`
	TrafficAcc    string                    `json:"traffic_account"`
	IPQPropLen    int                       `json:"ipq_proposal_len"`
	IPQEntryLen   int                       `json:"ipq_entry_len"`
	IPQRespLen    int                       `json:"ipq_resp_len"`
	IPQApplyLen   int                       `json:"ipq_apply_len"`
	WAL           RaftzWAL                  `json:"wal"`
	WALError      string                    `json:"wal_error,omitempty"`
	Peers         map[string]RaftzGroupPeer `json:"peers"`
}

// RaftzWAL is a group's log as nats-server's StreamState shows its WAL:
// the entries held (messages, first_seq..last_seq: first_seq is last_seq
// plus one once every entry was compacted away, as nats-server's), the
// bytes they take in the server's WAL (their data and 13 bytes each),
// and when the first and the last were appended on this server (for
// entries its WAL replayed at the start, the start): first_ts is the
// zero time when none is held, last_ts then the last compacted away's
// (raftnode GroupStatus.LogBytes).
type RaftzWAL struct {
	Msgs      uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	FirstTime time.Time `json:"first_ts"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_ts"`
	Consumers int       `json:"consumer_count"`
}

// RaftzGroupPeer is another replica of a group (nats-server
// RaftzGroupPeer): its server's name, the last index the leader knows it
// holds (on the leader), and how long ago this replica heard from it.
type RaftzGroupPeer struct {
	Name                string `json:"name"`
	Known               bool   `json:"known"`
	LastReplicatedIndex uint64 `json:"last_replicated_index,omitempty"`
	LastSeen            string `json:"last_seen,omitempty"`
}

// handleRaftz serves /raftz?acc=&group= as nats-server v2.15.2
// HandleRaftz: 404 "No Raft nodes registered" without JetStream
// clustering, 404 "No Raft nodes returned, check supplied filters" when
// there is no system account to default acc to.
func (m *Monitor) handleRaftz(w http.ResponseWriter, r *http.Request) {
	rz, ok := m.raftz(r.URL.Query().Get("acc"), r.URL.Query().Get("group"))
	switch {
	case !ok:
		writeText(w, http.StatusNotFound, "No Raft nodes registered")
	case rz == nil:
		writeText(w, http.StatusNotFound, "No Raft nodes returned, check supplied filters")
	default:
		writeJSON(w, http.StatusOK, rz)
	}
}

// raftz returns the Raft groups of account acc ("" the system account,
// whose group is the meta group), only group when not "": nil when
// there is no system account to default to; false without JetStream
// clustering.
func (m *Monitor) raftz(acc, group string) (*RaftzStatus, bool) {
	groups, ok := m.srv.JetStreamRaftGroups(acc, group)
	if !ok {
		return nil, false
	}
	if acc == "" && m.srv.SystemAccount() == "" {
		return nil, true
	}
	rz := RaftzStatus{}
	now := time.Now().UTC()
	sys := m.srv.SystemAccount()
	for _, g := range groups {
		if rz[g.Account] == nil {
			rz[g.Account] = map[string]RaftzGroup{}
		}
		rg := raftzGroup(g, now)
		rg.SystemAcc, rg.TrafficAcc = true, sys
		rz[g.Account][g.Name] = rg
	}
	return &rz, true
}

// raftzGroup converts a group's status to nats-server's shape. size and
// quorum_needed count the voters of the configuration the replica
// applied, and peers lists its other members (a learner among them, on
// the leader): a replica removed from the group (SERVER.REMOVE, a move)
// is no longer counted, though the node still knows its server until
// the next change, as nats-server's size drops with the peer's removal.
func raftzGroup(g jscluster.RaftGroup, now time.Time) RaftzGroup {
	st := g.Status
	size := len(st.Peers) + 1
	members := map[raftnode.ReplicaID]bool{}
	if len(st.Voters) > 0 {
		size = len(st.Voters)
		for _, v := range st.Voters {
			members[v] = true
		}
		for _, r := range st.Replicas {
			members[r.Replica] = true
		}
	}
	rg := RaftzGroup{
		ID: g.ID, State: raftzState(st), Size: size, QuorumNeeded: size/2 + 1,
		Committed: st.Commit, Applied: st.Applied, EverHadLeader: st.EverHadLeader,
		CatchingUp: st.Role != raftnode.Leader && st.Leader != 0 && !st.CaughtUp,
		Term:       st.Term, PTerm: st.LastTerm, PIndex: st.LastIndex,
		IPQPropLen: st.Proposals, IPQEntryLen: st.Inbox, IPQApplyLen: int(st.Commit - min(st.Applied, st.Commit)),
		Peers: map[string]RaftzGroupPeer{},
	}
	if st.LeaderServer != "" {
		rg.Leader = jscluster.PeerID(st.LeaderServer)
	}
	if st.VoteServer != "" {
		rg.Vote = jscluster.PeerID(st.VoteServer)
	}
	if st.Role == raftnode.Leader && st.LeaderFor > 0 {
		since := now.Add(-st.LeaderFor)
		rg.LeaderSince = &since
	}
	if st.Fenced != nil {
		rg.WALError = st.Fenced.Error()
	}
	rg.WAL = raftzWAL(st)
	match := map[raftnode.ServerID]uint64{}
	for _, r := range st.Replicas {
		match[r.Server] = r.Match
	}
	for _, p := range st.Peers {
		if len(members) > 0 && !members[p.Replica] {
			continue // removed from the group
		}
		peer := RaftzGroupPeer{Name: string(p.Server), Known: true, LastReplicatedIndex: match[p.Server]}
		if p.Heard {
			peer.LastSeen = p.Since(now).String()
		}
		rg.Peers[jscluster.PeerID(p.Server)] = peer
	}
	return rg
}

// raftzWAL is a group's log as this replica holds it: nothing before
// the group's first entry.
func raftzWAL(st raftnode.GroupStatus) RaftzWAL {
	if st.LastIndex == 0 {
		return RaftzWAL{}
	}
	w := RaftzWAL{FirstSeq: st.FirstIndex, LastSeq: st.LastIndex, Bytes: st.LogBytes, FirstTime: st.FirstTime, LastTime: st.LastTime}
	if st.LastIndex >= st.FirstIndex {
		w.Msgs = st.LastIndex - st.FirstIndex + 1
	}
	return w
}

// raftzState is nats-server's RaftState text: LEADER, FOLLOWER,
// CANDIDATE (a pre-candidate too: raft's PreVote probe), CLOSED for a
// fenced replica, which takes no part in its group.
func raftzState(st raftnode.GroupStatus) string {
	switch {
	case st.Fenced != nil:
		return "CLOSED"
	case st.Role == raftnode.Leader:
		return "LEADER"
	case st.Role == raftnode.Candidate, st.Role == raftnode.PreCandidate:
		return "CANDIDATE"
	}
	return "FOLLOWER"
}
