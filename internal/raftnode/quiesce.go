package raftnode

import (
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Quiescence (docs/cluster.md, "Idle groups"; CockroachDB's quiesced
// ranges, TiKV's hibernate regions): an idle group stops ticking, so it
// sends and costs nothing; one liveness beat per peer server every
// beatTicks ticks (coalesced over every group) replaces the groups' heartbeats as the
// failure detector.
//
//   - A leader goes quiet on a heartbeat tick when nothing is in flight:
//     no proposal or waiter, every entry committed and applied, every
//     replica's log matching its own (but replicas on servers known dead),
//     a majority of its voters on servers not known dead (else it keeps
//     ticking, and CheckQuorum deposes it), no transfer. Its heartbeats of that
//     tick carry flagQuiesce, and it stops ticking.
//   - A follower that gets such a heartbeat from its leader goes quiet
//     too if its log ends at the leader's commit index; otherwise it asks
//     the leader to wake (a wake envelope) and keeps ticking.
//   - A quiet group wakes on a proposal, a request, any message but a
//     leader's heartbeat responses or a quiesce heartbeat, a wake
//     envelope, or when a server holding one of its replicas misses
//     an election timeout of beats (silentTicks), or is heard again after that. It resumes ticking without the missed
//     ticks (it has just heard from someone), except after a lost leader
//     server: then it forgets the leader (so PreVote is granted at once)
//     and takes an election timeout's worth of ticks, so an election
//     follows within the randomised remainder.
//   - A follower woken by anything but its leader's message sends the
//     leader a wake envelope, so the leader resumes heartbeats instead of
//     letting the follower's election timer run out.

// liveness tracks when each peer server was last heard from, in ticks
// (and, for the reports, on the system clock: heardAt).
type liveness struct {
	mu      sync.Mutex
	heard   map[ServerID]uint64
	heardAt map[ServerID]time.Time
	dead    map[ServerID]bool
	peers   []ServerID // the servers of every group's replicas but this one, as of the last tick
	// gen is Node.peersGen when peers was computed: the groups' peers
	// are gathered again only after a change (a group added or removed,
	// a peer list set or learned), not on every tick.
	gen uint64
}

// heardFrom records a frame from server from, received at at.
func (n *Node) heardFrom(from ServerID, at time.Time) {
	n.alive.mu.Lock()
	n.alive.heard[from] = n.ticks.Load()
	n.alive.heardAt[from] = at
	n.alive.mu.Unlock()
}

// checkLiveness updates the peer list and returns the servers that have
// just been found dead (not heard from for more than silentTicks) and
// those heard from again after that.
func (n *Node) checkLiveness(now uint64, list []*group) (died, revived []ServerID) {
	gen := n.peersGen.Load()
	n.alive.mu.Lock()
	fresh := n.alive.gen == gen && n.alive.peers != nil
	n.alive.mu.Unlock()
	var peers []ServerID
	if !fresh {
		// The list as of now, read after gen: a change counted after gen
		// was read is gathered again at the next tick, and one counted
		// before is in this list (a change is counted once it is visible).
		n.mu.RLock()
		list = n.mu.list
		n.mu.RUnlock()
		peers = n.gatherPeers(list)
	}
	n.alive.mu.Lock()
	defer n.alive.mu.Unlock()
	if !fresh {
		n.alive.peers, n.alive.gen = peers, gen
	}
	limit := n.silentTicks()
	for _, s := range n.alive.peers {
		h, ok := n.alive.heard[s]
		if !ok {
			n.alive.heard[s] = now // a new peer gets a grace period
			continue
		}
		silent := now-h > limit
		switch {
		case silent && !n.alive.dead[s]:
			died = append(died, s)
		case !silent && n.alive.dead[s]:
			revived = append(revived, s)
		}
		n.alive.dead[s] = silent
	}
	if len(died)+len(revived) > 0 {
		n.liveGen.Add(1) // before wakeFor looks at the quiet groups
	}
	return died, revived
}

// gatherPeers returns the servers of every group's replicas but this
// one, sorted.
func (n *Node) gatherPeers(list []*group) []ServerID {
	set := map[ServerID]bool{}
	for _, g := range list {
		g.mu.Lock()
		for _, s := range g.mu.peers {
			if s != n.cfg.Server {
				set[s] = true
			}
		}
		g.mu.Unlock()
	}
	peers := make([]ServerID, 0, len(set))
	for s := range set {
		peers = append(peers, s)
	}
	slices.Sort(peers)
	return peers
}

// silentTicks is how many ticks a peer server may go unheard before it
// is found dead: ElectionTicks after the beat that would have followed
// its last one (beatTicks apart), so that a server is found dead once it
// sent nothing for an election timeout, however far apart its beats go
// (a stalled server is not found dead sooner for beating less often).
// The election timeout is stretched by the round loop's recent pauses
// (stretch.go), as the groups' are.
func (n *Node) silentTicks() uint64 {
	return uint64(n.cfg.ElectionTicks)*n.Stretch()/1000 + beatTicks - 1
}

// isDead reports whether server s is known dead (no beat for more than
// silentTicks).
func (n *Node) isDead(s ServerID) bool {
	n.alive.mu.Lock()
	defer n.alive.mu.Unlock()
	return n.alive.dead[s]
}

// wakeFor wakes the quiet groups with a replica on a server found dead
// (a quiet follower whose leader was there forgets it), or back (a quiet
// leader that let it lag catches it up).
func (n *Node) wakeFor(servers []ServerID, died bool, list []*group) {
	for _, g := range list {
		g.mu.Lock()
		hit, forget := false, false
		if g.mu.quiet {
			for _, s := range servers {
				for _, ps := range g.mu.peers {
					hit = hit || ps == s
				}
				forget = forget || (died && g.mu.status.LeaderServer == s)
			}
			if hit {
				g.mu.reqs = append(g.mu.reqs, request{kind: reqWake, forget: forget})
				g.mu.quiet = false
			}
		}
		g.mu.Unlock()
		if hit {
			n.sched.enqueue(g)
		}
	}
}

// catchMissedWake wakes a group that published its quiet (s) after a
// liveness change it did not see when it decided to go quiet: wakeFor,
// run between the decision and the publication, found the group busy and
// passed it by, and no later change would wake it (a leader quiesced with
// a peer alive, the peer found dead meanwhile: the leader never ticked
// again, so CheckQuorum never deposed it and its server went on naming
// itself meta leader with every other server down). The count is read
// after the quiet is published, so either wakeFor sees the quiet or this
// sees the count moved. A follower whose leader's server is dead now
// forgets it, as wakeFor would have made it.
func (g *group) catchMissedWake(s GroupStatus) {
	if !g.quiet || g.n.liveGen.Load() == g.quietGen {
		return
	}
	forget := s.Role == Follower && g.n.isDead(s.LeaderServer)
	g.mu.Lock()
	g.mu.reqs = append(g.mu.reqs, request{kind: reqWake, forget: forget})
	g.mu.quiet = false
	g.mu.Unlock()
	g.quietGen = g.n.liveGen.Load() // one wake per missed change
	g.n.sched.enqueue(g)
}

// keepsQuiet reports whether a message lets a quiet group stay quiet: a
// heartbeat response to a quiet leader, or a quiesce heartbeat from the
// leader to a quiet follower.
func (g *group) keepsQuiet(in inMsg, bs raft.BasicStatus) bool {
	if in.m == nil {
		return false // a wake envelope
	}
	switch bs.RaftState {
	case raft.StateLeader:
		return in.m.GetType() == pb.MsgHeartbeatResp && in.m.GetTerm() == bs.GetTerm()
	case raft.StateFollower:
		return in.m.GetType() == pb.MsgHeartbeat && in.flags&flagQuiesce != 0 &&
			in.m.GetFrom() == bs.Lead && in.m.GetTerm() == bs.GetTerm()
	}
	return false
}

// maybeWake wakes a quiet group unless everything it got this round lets
// it stay quiet.
func (g *group) maybeWake(inbox []inMsg, props []*Proposal, reqs []request) {
	if !g.quiet {
		return
	}
	bs := g.rn.BasicStatus()
	wake := len(props) > 0 || len(reqs) > 0
	fromLeader := false
	for _, in := range inbox {
		if !g.keepsQuiet(in, bs) {
			wake = true
			fromLeader = fromLeader || (in.m != nil && in.m.GetFrom() == bs.Lead)
		}
	}
	if !wake {
		return
	}
	g.quiet = false
	g.lastTick = g.n.ticks.Load()
	g.mu.Lock()
	g.mu.quiet = false
	g.mu.Unlock()
	if bs.RaftState == raft.StateFollower && !fromLeader {
		g.wakeLeader(bs.Lead)
	}
}

// wakeLeader sends the leader a wake envelope.
func (g *group) wakeLeader(lead uint64) {
	if lead == 0 {
		return
	}
	g.mu.Lock()
	to := g.mu.peers[ReplicaID(lead)]
	g.mu.Unlock()
	if to != "" {
		g.out.msgs = append(g.out.msgs, outMsg{to: to, replica: ReplicaID(lead), env: appendEnvelope(nil, g.id, flagWake, nil)})
	}
}

// wakePeers sends every other replica (only those of only, when not nil)
// a wake envelope: a replica that (re)starts does not know who leads, and
// a quiet leader would not tell it. An envelope that cannot leave (the
// peer's server not reachable yet: a restarted server whose routes are
// not up) is sent again to that replica by the next round while this one
// knows no leader (finish), rather than leave it to learn its leader from
// an election timeout later.
//
// A replica of the group's configuration that no peer list places (a
// member leaving the group that the assignment no longer names: the
// kept replica of a scale-down to one restarted before it removed the
// others) is woken on every server this node knows: otherwise a quiet
// follower there would stay in the lease of a leader that restarted
// before it was found dead, and this replica, unable to send it a vote
// request, would campaign alone for ever. A server holding no replica
// of the group drops the envelope.
func (g *group) wakePeers(only []ReplicaID) {
	servers := g.n.knownServers()
	g.mu.Lock()
	defer g.mu.Unlock()
	wake := func(to ServerID, r ReplicaID) {
		g.out.msgs = append(g.out.msgs, outMsg{to: to, replica: r, announce: true, env: appendEnvelope(nil, g.id, flagWake, nil)})
	}
	placed := map[ServerID]bool{}
	for _, r := range slices.Sorted(maps.Keys(g.mu.peers)) {
		placed[g.mu.peers[r]] = true
		if r != g.replica && (only == nil || slices.Contains(only, r)) {
			wake(g.mu.peers[r], r)
		}
	}
	for _, r := range g.unplaced() {
		if only != nil && !slices.Contains(only, r) {
			continue
		}
		sent := false
		for _, s := range servers {
			if !placed[s] {
				wake(s, r)
				sent = true
			}
		}
		if !sent {
			wake("", r) // none known yet: the next round tries again (finish)
		}
	}
}

// unplaced returns the replicas of the group's latest configuration
// (both halves of a joint one, learners included) other than this one
// that the peer list does not place, in order (g.mu held).
func (g *group) unplaced() []ReplicaID {
	if len(g.confs) == 0 {
		return nil
	}
	cs := g.confs[len(g.confs)-1].cs
	var out []ReplicaID
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext()} {
		for _, id := range ids {
			r := ReplicaID(id)
			if _, ok := g.mu.peers[r]; !ok && r != g.replica && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return out
}

// knownServers returns the peer servers of every group here as of the
// last tick (sorted; not this server).
func (n *Node) knownServers() []ServerID {
	n.alive.mu.Lock()
	defer n.alive.mu.Unlock()
	return slices.Clone(n.alive.peers)
}

// followQuiesce handles a quiesce heartbeat the follower just stepped: it
// goes quiet if its log ends at the leader's commit index, or asks the
// leader to stay awake.
func (g *group) followQuiesce(m *pb.Message, others bool) {
	g.quietGen = g.n.liveGen.Load()
	bs := g.rn.BasicStatus()
	last, _ := g.st.LastIndex()
	if !others && bs.RaftState == raft.StateFollower && bs.Lead == m.GetFrom() && bs.GetTerm() == m.GetTerm() &&
		bs.GetCommit() == m.GetCommit() && last == m.GetCommit() && !g.n.cfg.DisableQuiescence {
		g.quiet = true
		return
	}
	g.wakeLeader(m.GetFrom())
}

// leaderQuiesces decides, on a Ready made only of heartbeats, whether the
// leader goes quiet with them.
func (g *group) leaderQuiesces(rd raft.Ready, stepped []*Proposal) bool {
	g.quietGen = g.n.liveGen.Load() // before isDead is read
	if g.n.cfg.DisableQuiescence || len(stepped) > 0 || len(g.waiters) > 0 || len(g.reads) > 0 || len(g.readWait) > 0 || len(rd.Entries) > 0 ||
		len(rd.CommittedEntries) > 0 || !raft.IsEmptySnap(rd.Snapshot) || len(rd.Messages) == 0 {
		return false
	}
	bs := g.rn.BasicStatus()
	last, _ := g.st.LastIndex()
	if bs.RaftState != raft.StateLeader || bs.LeadTransferee != 0 || g.transferTries > 0 || bs.GetCommit() != last || g.rawApplied != last {
		return false
	}
	for _, m := range rd.Messages {
		if m.GetType() != pb.MsgHeartbeat {
			return false
		}
	}
	g.mu.Lock()
	peers := g.mu.peers
	g.mu.Unlock()
	ok, others := true, 0
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id != uint64(g.replica) {
			others++
			// A replica on a dead server is not waited for: it is
			// caught up when its server is heard again (wakeFor).
			ok = ok && (pr.Match == last || g.n.isDead(peers[ReplicaID(id)]))
		}
	})
	return ok && others == len(rd.Messages) && g.quorumAlive(peers)
}

// quorumAlive reports whether a majority of the group's voters (of each
// half of a joint configuration) is this replica or on servers not known
// dead. A leader without one must not go quiet: quiet, it would never
// tick, so raft's CheckQuorum would never depose it, and a leader cut
// off from its group would go on answering as one (the others elect a
// new leader meanwhile).
func (g *group) quorumAlive(peers map[ReplicaID]ServerID) bool {
	cs := g.confs[len(g.confs)-1].cs
	majority := func(ids []uint64) bool {
		n := 0
		for _, id := range ids {
			if id == uint64(g.replica) || !g.n.isDead(peers[ReplicaID(id)]) {
				n++
			}
		}
		return len(ids) == 0 || n > len(ids)/2
	}
	return majority(cs.GetVoters()) && majority(cs.GetVotersOutgoing())
}

// toldDead tells Config.PeerDead of servers just found dead.
func (n *Node) toldDead(servers ...ServerID) {
	if n.cfg.PeerDead == nil {
		return
	}
	for _, s := range servers {
		n.cfg.PeerDead(s)
	}
}

// PeerUnreachable tells the node that server s is gone (its transport's
// evidence: the Raft connection to it ended and its cluster port refused
// the redial, or no route names it any more). s counts as dead at once,
// as it would after ElectionTicks without a beat, and every replica here
// whose leader is on s forgets that leader and campaigns within the
// randomised part of its election timeout (reqWake), as a quiet follower
// does when its leader's server falls silent: a SIGKILLed leader is
// replaced about half an election timeout after its death instead of one
// to two timeouts after its last heartbeat (docs/cluster.md,
// "The process-level fault suite"). A follower that forgot a leader still alive relearns it
// from its next heartbeat, and the other followers, still in its lease,
// refuse the forgetful one's pre-votes. Config.PeerDead is told. The
// next frame from s revives it (checkLiveness). An unknown server, or
// one known dead, changes nothing.
func (n *Node) PeerUnreachable(s ServerID) {
	now := n.ticks.Load()
	n.alive.mu.Lock()
	fresh := s != n.cfg.Server && slices.Contains(n.alive.peers, s) && !n.alive.dead[s]
	if fresh {
		n.alive.dead[s] = true
		n.alive.heard[s] = now - min(now, n.silentTicks()+1)
		n.liveGen.Add(1)
	}
	n.alive.mu.Unlock()
	if !fresh {
		return
	}
	n.cfg.Debugf("raftnode: %s is gone (its transport says)", s)
	n.toldDead(s)
	n.mu.RLock()
	list := n.mu.list
	n.mu.RUnlock()
	for _, g := range list { // the busy followers first: wakeFor makes the quiet ones busy
		g.mu.Lock()
		hit := !g.mu.quiet && g.mu.fenced == nil && g.mu.status.Role == Follower && g.mu.status.LeaderServer == s
		if hit {
			g.mu.reqs = append(g.mu.reqs, request{kind: reqWake, forget: true})
		}
		g.mu.Unlock()
		if hit {
			n.sched.enqueue(g)
		}
	}
	n.wakeFor([]ServerID{s}, true, list)
	select {
	case n.sched.wake <- struct{}{}:
	default:
	}
}
