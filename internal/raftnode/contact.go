package raftnode

import (
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Contact (docs/monitoring.md, "Replicas and the meta group"): what a
// replica knows of the other replicas of its group and of its own
// standing, for the reports nats-server's operators' tools read (the
// PeerInfo of a ClusterInfo, /healthz). It is bookkeeping on the side
// of the rounds: nothing here changes what a group does.
//
//   - Every message a replica receives from another replica of its group
//     is noted, in ticks of the node (Receive). While the group is quiet
//     (quiesce.go) its replicas exchange nothing, and a beat of a
//     replica's server stands for the replica: the group went quiet with
//     every replica caught up, and it wakes when that server falls
//     silent.
//   - A follower notes the highest commit index its leader sent it in an
//     append, a snapshot or a quiesce heartbeat marked in sync
//     (noteCommit), at the round that steps the message; at the end of
//     that round it is caught up when its state machine has applied
//     through that index and no quiesce heartbeat since told it it
//     lacks some (one without the in-sync mark). A follower that lacks entries the leader
//     committed (after a restart, a partition, or while the leader sends
//     it a snapshot) is not caught up until it has applied them; one that
//     has had no append from its leader since it started is not caught up
//     either, until one comes or the group goes quiet again with it in
//     sync. What it noted is forgotten whenever its leader changes, or it
//     loses its leader.
//   - A replica is current (nats-server v2.15.2 raft.go isCurrent): it
//     leads its group; or it is a follower that knows its leader, heard
//     from it within ContactWindow, and was caught up at the end of its
//     last round. nats-server allows its followers two heartbeat
//     intervals (2 s) without a word from the leader; cairn's window is
//     two election timeouts (2 s with the default 100 ms tick).

// PeerContact is what a replica knows of another replica of its group.
type PeerContact struct {
	Replica ReplicaID
	Server  ServerID
	// Heard: this replica heard from it since this replica was added
	// here; Ago is how long ago it last did (a message of the group, or
	// a beat of its server while the group is quiet), counted in the
	// node's ticks, the one under way included (so at least one tick);
	// 0 when not Heard. Every decision of the node and of the cluster
	// layer reads Ago (ContactWindow is in ticks too).
	Heard bool
	Ago   time.Duration
	// Last is when that message or beat was received, on the system
	// clock (with its monotonic reading), for the reports of how long
	// ago (a replica's "active", /raftz "last_seen"); zero when not
	// Heard, or when heard only by a server's first appearance (a grace
	// period, no frame).
	Last time.Time
}

// Since returns how long before now this replica last heard from it: by
// the system clock when Last is known (nanoseconds, as nats-server's
// replica "active"), else Ago; 0 when not Heard.
func (p PeerContact) Since(now time.Time) time.Duration {
	switch {
	case !p.Heard:
		return 0
	case p.Last.IsZero():
		return p.Ago
	}
	return max(now.Sub(p.Last), 0)
}

// contactMarks are a group's record of the last message from each
// replica: its tick, and its time on the system clock (PeerContact).
type contactMarks struct {
	ticks map[ReplicaID]uint64
	at    map[ReplicaID]time.Time
}

// contactTicks is the contact window in ticks: two election timeouts.
func (n *Node) contactTicks() uint64 { return 2 * uint64(n.cfg.ElectionTicks) }

// ContactWindow is how long a follower may go without a word from its
// leader and still be current, and how long a leader may go without a
// word from a replica and still count it current (package comment,
// "Contact"): two election timeouts.
func (n *Node) ContactWindow() time.Duration {
	return time.Duration(n.contactTicks()) * n.cfg.TickInterval
}

// heardWithin returns the other replicas this one heard from in the
// last ticks ticks: a message of the group, or a beat of its server.
func (g *group) heardWithin(ticks uint64) map[ReplicaID]bool {
	now := g.n.ticks.Load()
	g.mu.Lock()
	heard := maps.Clone(g.mu.heard)
	peers := maps.Clone(g.mu.peers)
	g.mu.Unlock()
	g.n.alive.mu.Lock()
	beats := maps.Clone(g.n.alive.heard)
	g.n.alive.mu.Unlock()
	out := map[ReplicaID]bool{}
	for r, srv := range peers {
		t, ok := heard[r]
		if b, beat := beats[srv]; beat && (!ok || b > t) {
			t, ok = b, true
		}
		out[r] = ok && now-min(t, now) <= ticks
	}
	return out
}

// noteHeardLocked records, under g.mu, a message from replica r
// (Receive), received at tick and at.
func (g *group) noteHeardLocked(r ReplicaID, tick uint64, at time.Time) {
	if g.mu.heard == nil {
		g.mu.heard, g.mu.heardAt = map[ReplicaID]uint64{}, map[ReplicaID]time.Time{}
	}
	g.mu.heard[r], g.mu.heardAt[r] = tick, at
}

// noteCommit records, in the round that steps m (with its envelope's
// flags), the commit index a leader's message tells this replica: an
// append's or a snapshot's, which is the leader's commit index (raft
// sends a new commit index in appends), or a quiesce heartbeat's marked
// in sync (flagInSync: the leader knows this replica holds its whole
// log). A heartbeat carries the smaller of the commit index and what the
// leader knows the follower holds, so without that mark it says nothing
// of what the follower lacks; a quiesce heartbeat without the mark says
// the follower lacks entries (outOfSync, until an append or a snapshot
// brings the leader's commit again).
func (g *group) noteCommit(m *pb.Message, flags byte) {
	var c uint64
	switch m.GetType() {
	case pb.MsgApp:
		c = m.GetCommit()
	case pb.MsgHeartbeat:
		switch flags & (flagQuiesce | flagInSync) {
		case flagQuiesce | flagInSync:
			c = m.GetCommit()
		case flagQuiesce:
			// The leader goes quiet without this replica in sync: it
			// lacks entries, however many, until the leader sends them.
			g.outOfSync = true
		}
	case pb.MsgSnap:
		c = m.GetSnapshot().GetMetadata().GetIndex()
	}
	if c == 0 {
		return
	}
	if m.GetFrom() != g.commitFrom {
		g.leaderCommit, g.commitFrom = 0, m.GetFrom()
	}
	g.leaderCommit, g.outOfSync = max(g.leaderCommit, c), false
}

// publishContact fills the round-side parts of s (publish, at the end of
// a round): the leader's commit as this replica knows it, whether it was
// caught up, and since when it knows a leader.
func (g *group) publishContact(s *GroupStatus, bs raft.BasicStatus) {
	now := g.n.ticks.Load()
	if bs.Lead != 0 || g.lastLead != 0 {
		// It knows a leader, or has just lost it (a quiet group runs no
		// rounds while it knows one).
		g.leaderTick = now
	}
	g.lastLead = bs.Lead
	if bs.Lead != g.commitFrom {
		// What another leader said (or one this replica lost contact
		// with and found again) is no news of the current one's commit.
		g.leaderCommit, g.commitFrom, g.outOfSync = 0, bs.Lead, false
	}
	s.LeaderCommit = g.leaderCommit
	if bs.RaftState == raft.StateLeader {
		s.LeaderCommit = bs.GetCommit()
	}
	s.CaughtUp = bs.Lead != 0 && !g.outOfSync && g.smApplied >= s.LeaderCommit && s.LeaderCommit > 0
	s.leaderTick = g.leaderTick
}

// contact fills the time-dependent parts of s at Status: every other
// replica's contact, whether this replica is current, and how long it
// has known no leader. heard is the group's record of messages, peers
// its replicas, quiet whether it is quiet.
func (n *Node) contact(s *GroupStatus, heard contactMarks, peers map[ReplicaID]ServerID, quiet bool) {
	now := n.ticks.Load()
	var beats map[ServerID]uint64
	var beatsAt map[ServerID]time.Time
	if quiet {
		n.alive.mu.Lock()
		beats, beatsAt = maps.Clone(n.alive.heard), maps.Clone(n.alive.heardAt)
		n.alive.mu.Unlock()
	}
	// The ticks since t, and the one under way: an upper bound of the
	// time since then, never 0.
	ago := func(t uint64) time.Duration {
		return time.Duration(now-min(t, now)+1) * n.cfg.TickInterval
	}
	var leaderAgo time.Duration
	leaderHeard := false
	for _, r := range slices.Sorted(maps.Keys(peers)) {
		if r == s.Replica {
			continue
		}
		t, ok := heard.ticks[r]
		last := heard.at[r]
		if b, beat := beats[peers[r]]; beat && (!ok || b > t) {
			t, ok = b, true
		}
		if at := beatsAt[peers[r]]; at.After(last) {
			last = at // a quiet group: the server's beat stands for the replica
		}
		pc := PeerContact{Replica: r, Server: peers[r], Heard: ok}
		if ok {
			pc.Ago, pc.Last = ago(t), last
		}
		if r == s.Leader {
			leaderHeard, leaderAgo = ok, pc.Ago
		}
		s.Peers = append(s.Peers, pc)
	}
	window := time.Duration(n.contactTicks()) * n.cfg.TickInterval
	for i := range s.Replicas {
		rs := &s.Replicas[i]
		for _, pc := range s.Peers {
			if pc.Replica == rs.Replica && pc.Heard && pc.Ago <= window {
				rs.Active = true
			}
		}
	}
	switch {
	case s.Fenced != nil || s.Commit == 0:
	case s.Role == Leader:
		s.Current = true
	case s.Leader != 0 && s.Leader != s.Replica:
		s.Current = leaderHeard && leaderAgo <= window && s.CaughtUp
	}
	if s.Leader == 0 {
		s.Leaderless = ago(s.leaderTick) - n.cfg.TickInterval
	}
}

// inSync returns, on a leader going quiet, the replicas whose log
// matches its own (their quiesce heartbeat gets flagInSync).
func (g *group) inSync() map[ReplicaID]bool {
	last, _ := g.st.LastIndex()
	out := map[ReplicaID]bool{}
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pr.Match == last {
			out[ReplicaID(id)] = true
		}
	})
	return out
}
