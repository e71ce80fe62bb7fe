package jscluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Replacing a replica (docs/cluster.md, "Replacing a replica"):
//
//  1. The meta group's assignment is the replica set a stream's group
//     must have. The meta leader changes it: a replica bound to a store
//     incarnation its server no longer has (the server's disk was wiped
//     or replaced; raftnode fences that replica) is replaced by a new
//     replica ID on the same server (replaceStale, meta.MoveReplica).
//  2. Every server applies the change: the server of the new replica
//     starts it empty (raftnode GroupConfig.Join), the others learn its
//     server (keepReplica), the old replica's server stops it.
//  3. The server whose replica leads the stream carries the change out in
//     the group, one membership change at a time (reconcileMembership):
//     the new replica is added as a learner (raftnode ChangeMembership),
//     which the leader catches up by a stream snapshot (a manifest, the
//     messages fetched out of band: internal/cluster/streamckpt); once its
//     log is within promoteLag of the commit, one joint change promotes it
//     and removes the replica it replaces. A leader that is itself to be
//     removed hands its leadership to a replica that stays first.
//
// A learner never votes and never counts toward a commit, so until it is
// promoted the group's quorum is its voters'; after, it holds everything
// committed, durably (its install wrote the snapshot's messages and
// checkpoint before it acknowledged anything).

// promoteLag is how far behind the leader's commit index a learner may
// be and still be promoted (the reference's "absolute bound" in place of
// etcd's 90 %).
const promoteLag = 64

// staleRetry is how long the meta leader waits before proposing the
// replacement of the same replica again (an earlier proposal may still
// be in flight; a repeated one changes nothing).
const staleRetry = 5 * time.Second

// replaceStale, on the meta leader, proposes a meta.MoveReplica to the
// same server for every replica of a replicated stream whose server's
// incarnation in the catalogue is not the one the replica is bound to,
// and a meta.MoveConsumer for every such replica of a replicated
// consumer once its stream's replica there was replaced.
func (c *Cluster) replaceStale() {
	if !c.metaLeader() {
		return
	}
	var ops []meta.Op
	c.meta.View(func(st *meta.State) {
		for _, sv := range st.Servers() {
			if sv.Removed {
				continue
			}
			ss, cs := st.Assigned(sv.Name)
			for _, sa := range ss {
				r, _ := meta.On(sa.Replicas, sv.Name)
				if len(sa.Replicas) > 1 && r.Incarnation != sv.Incarnation {
					ops = append(ops, &meta.MoveReplica{Account: sa.Account, Stream: sa.Name, Replica: r.ID, To: sv.Name})
				}
			}
			// A replicated consumer's replica there, once the stream's
			// replica there is the store's (consumerscale.go).
			for _, ca := range cs {
				r, _ := meta.On(ca.Replicas, sv.Name)
				sa, _ := st.Stream(ca.Account, ca.Stream)
				sr, _ := meta.On(sa.Replicas, sv.Name)
				if len(ca.Replicas) > 1 && r.Incarnation != sv.Incarnation && (len(sa.Replicas) == 1 || sr.Incarnation == sv.Incarnation) {
					ops = append(ops, &meta.MoveConsumer{Account: ca.Account, Stream: ca.Stream, Name: ca.Name, Replica: r.ID, To: sv.Name})
				}
			}
		}
	})
	now := time.Now()
	for _, op := range ops {
		key, what := staleOf(op)
		if !c.staleAsked.due(key, now, staleRetry) {
			continue
		}
		if _, err := c.meta.Propose(op); err != nil {
			return
		}
		c.cfg.Infof("JetStream cluster: replacing %s (its store changed)", what)
	}
}

// staleOf returns replaceStale's memory key of a MoveReplica or a
// MoveConsumer, and what it replaces, for the log.
func staleOf(op meta.Op) (staleKey, string) {
	switch o := op.(type) {
	case *meta.MoveReplica:
		return staleKey{k: streamKey{o.Account, o.Stream}, id: o.Replica},
			fmt.Sprintf("replica %d of stream '%s > %s' on %s", o.Replica, o.Account, o.Stream, o.To)
	case *meta.MoveConsumer:
		return staleKey{k: streamKey{o.Account, o.Stream}, consumer: o.Name, id: o.Replica},
			fmt.Sprintf("replica %d of consumer '%s > %s > %s' on %s", o.Replica, o.Account, o.Stream, o.Name, o.To)
	}
	return staleKey{}, ""
}

// fileStream reports whether stream sa stores on disk (groupConfig: the
// group of a memory stream scaled up from one replica has a base that
// holds state).
func fileStream(sa meta.StreamAssignment) bool {
	var cfg struct {
		Storage stream.StorageType `json:"storage"`
	}
	return json.Unmarshal(sa.Config, &cfg) == nil && cfg.Storage == stream.FileStorage
}

// staleKey names one replica of a stream, or of one of its consumers,
// for a retryMemo.
type staleKey struct {
	k        streamKey
	consumer string
	id       raftnode.ReplicaID
}

// reconcileMemberships runs reconcileMembership for every replicated
// stream this server leads.
func (c *Cluster) reconcileMemberships() {
	c.mu.Lock()
	var keys []streamKey
	for k, r := range c.replicas {
		if r.log != nil && r.leads.Load() {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		if r := c.replicaOf(k); r != nil {
			c.reconcileMembership(k, r)
		}
	}
}

// reconcileMembership makes the group of stream k, which this server's
// replica r leads, one membership change closer to its assignment (step
// 3 above), unless a change is still in flight.
func (c *Cluster) reconcileMembership(k streamKey, r *replica) {
	if h := c.cfg.Hooks; h != nil && h.HoldMembership != nil && h.HoldMembership(k.account, k.name) {
		return
	}
	label := "stream '" + k.account + " > " + k.name + "'"
	c.stepMembership(r.sa.Group, r.sa.Replicas, &r.changing, label, nil)
}

// stepMembership makes group, which this server's replica leads, one
// membership change closer to the replicas want (a stream's or a
// consumer's assignment), unless the change *changing is still in
// flight; label names the group's stream or consumer in the log; via,
// when not nil, asks a leadership transfer (handOver).
func (c *Cluster) stepMembership(group raftnode.GroupID, want []meta.Replica, changing **raftnode.Proposal, label string, via func(func() error) error) {
	if p := *changing; p != nil {
		select {
		case <-p.Done():
			*changing = nil
			if _, err := p.Result(); err != nil {
				c.cfg.Logf("jscluster: %s: membership change: %v", label, err)
			}
		default:
			return
		}
	}
	st, err := c.node.Status(group)
	if err != nil || st.Role != raftnode.Leader || st.Fenced != nil {
		return
	}
	if c.selfRemoved() && c.otherVoter(st) {
		// SERVER.REMOVE named this server: it leads nothing
		// (nats-server v2.15.2 disables JetStream on it); the replica
		// that takes over carries out the move or drop of this one. A
		// group with no other voter (a consumer of one replica moving
		// off this server, singles.go) is carried on from here.
		others := map[raftnode.ReplicaID]bool{}
		for _, rs := range st.Replicas {
			others[rs.Replica] = rs.Replica != st.Replica
		}
		c.handOver(group, label, st, others, via)
		return
	}
	live := heardLive(st, c.node.ContactWindow())
	changes, wanted := nextMembership(live, want)
	if changes == nil {
		return
	}
	for _, ch := range changes {
		if ch.Kind == raftnode.RemoveReplica && ch.Replica == st.Replica {
			c.handOver(group, label, live, wanted, via)
			return
		}
	}
	if err := c.node.SetPeers(group, statusPeers(st, want)); err != nil {
		return
	}
	p, err := c.node.ChangeMembership(group, changes)
	if err != nil {
		c.cfg.Logf("jscluster: %s: membership change %v: %v", label, changes, err)
		return
	}
	*changing = p
	c.cfg.Infof("JetStream cluster: %s group %d: membership change %v", label, group, describe(changes))
}

// otherVoter reports whether the group whose leader's status is st has
// a voter other than this replica (a learner cannot take a leadership).
func (c *Cluster) otherVoter(st raftnode.GroupStatus) bool {
	return slices.ContainsFunc(st.Replicas, func(rs raftnode.ReplicaStatus) bool {
		return rs.Replica != st.Replica && !rs.Learner
	})
}

// selfRemoved reports whether the catalogue marks this server removed
// (SERVER.REMOVE), or, when it has none of this name, this server's
// store under another name (storeRemoved), or another server answered
// so (removedAnswered: removed while down, removedown.go).
func (c *Cluster) selfRemoved() bool {
	if c.removedAnswered.Load() {
		return true
	}
	removed := false
	c.meta.View(func(st *meta.State) {
		sv, ok := st.Server(c.name)
		removed = ok && sv.Removed || !ok && storeRemoved(st, c.node.Incarnation())
	})
	return removed
}

// heardLive returns a copy of the leader's status st whose replicas are
// Active when the leader heard from them within window (st.Peers: a
// message of the group, or a beat of its server while the group is
// quiet), its own replica always: what nextMembership and
// keepsLiveQuorum count as live. raft's RecentActive, which Active
// otherwise includes, is cleared only by CheckQuorum's pass every
// election timeout of a group that ticks, so in a group that went quiet
// it stays true for a replica whose server has since stopped (a stream
// of three whose follower's server stopped still counted it active 20
// s later): the guard would have let the removal of the live voter go.
func heardLive(st raftnode.GroupStatus, window time.Duration) raftnode.GroupStatus {
	heard := map[raftnode.ReplicaID]bool{st.Replica: true}
	for _, p := range st.Peers {
		heard[p.Replica] = p.Heard && p.Ago <= window
	}
	st.Replicas = slices.Clone(st.Replicas)
	for i := range st.Replicas {
		st.Replicas[i].Active = heard[st.Replicas[i].Replica]
	}
	return st
}

// nextMembership returns the next membership change of a group whose
// leader's status is st toward the replicas want (none: nothing to
// change), and the replica IDs of want; a replica is live when Active
// in st (stepMembership passes heardLive's status). New replicas are
// added as learners one at a time and promoted once within promoteLag
// of the commit, each promotion removing a replica that leaves; a
// learner that leaves is removed; a voter that leaves (one that is down
// first, the leader's own last: leavingVoters) is removed once no
// learner is pending and, for a scale-down to one replica, once the
// replica that stays holds every committed entry (keptCaughtUp). No
// change removes a live voter when the voters left would not hold a
// live majority (keepsLiveQuorum): the removal waits, and a promotion
// it would have gone with goes alone.
func nextMembership(st raftnode.GroupStatus, want []meta.Replica) ([]raftnode.Change, map[raftnode.ReplicaID]bool) {
	wanted := map[raftnode.ReplicaID]bool{}
	for _, x := range want {
		wanted[x.ID] = true
	}
	have := map[raftnode.ReplicaID]raftnode.ReplicaStatus{}
	for _, rs := range st.Replicas {
		have[rs.Replica] = rs
	}
	var changes []raftnode.Change
	var extraLearners []raftnode.ReplicaID
	for _, rs := range st.Replicas {
		if !wanted[rs.Replica] && rs.Learner {
			extraLearners = append(extraLearners, rs.Replica)
		}
	}
	extraVoters := leavingVoters(st, wanted)
	for _, x := range want {
		if _, ok := have[x.ID]; !ok {
			changes = []raftnode.Change{{Kind: raftnode.AddLearner, Replica: x.ID}}
			break
		}
	}
	if changes == nil && len(extraLearners) > 0 {
		changes = []raftnode.Change{{Kind: raftnode.RemoveReplica, Replica: extraLearners[0]}}
	}
	learning := false
	if changes == nil {
		for _, x := range want {
			rs := have[x.ID]
			if !rs.Learner {
				continue
			}
			learning = true
			if !rs.Active || rs.Match+promoteLag < st.Commit {
				continue
			}
			changes = []raftnode.Change{{Kind: raftnode.AddVoter, Replica: x.ID}}
			// A promotion removes a voter that leaves; the leader's own
			// replica (handOver) only once a wanted voter can take the
			// leadership: a learner cannot until promoted (a consumer
			// scaled up and at once down to one replica on a server
			// whose replica was still a learner stalled for good).
			// The removal only while the voters left keep a live
			// majority; the promotion goes alone otherwise (it adds a
			// live voter: the quorum it needs is live too).
			if len(extraVoters) > 0 && (extraVoters[0] != st.Replica || wantedVoter(st, wanted)) {
				joint := append(slices.Clone(changes), raftnode.Change{Kind: raftnode.RemoveReplica, Replica: extraVoters[0]})
				if keepsLiveQuorum(st, joint) {
					changes = joint
				}
			}
			break
		}
	}
	if changes == nil && !learning && len(extraVoters) > 0 && (len(want) > 1 || keptCaughtUp(st, wanted)) {
		remove := []raftnode.Change{{Kind: raftnode.RemoveReplica, Replica: extraVoters[0]}}
		if keepsLiveQuorum(st, remove) {
			changes = remove
		}
	}
	return changes, wanted
}

// leavingVoters returns the voters of the group whose leader's status
// is st that are not among want, in the order they are removed: those
// that are down first (their removal takes no live vote), the leader's
// own replica last (handOver), the others in replica order.
func leavingVoters(st raftnode.GroupStatus, want map[raftnode.ReplicaID]bool) []raftnode.ReplicaID {
	active := map[raftnode.ReplicaID]bool{}
	var out []raftnode.ReplicaID
	for _, rs := range st.Replicas {
		active[rs.Replica] = rs.Active
		if !want[rs.Replica] && !rs.Learner {
			out = append(out, rs.Replica)
		}
	}
	slices.SortStableFunc(out, func(a, b raftnode.ReplicaID) int {
		if c := cmpBool(a == st.Replica, b == st.Replica); c != 0 {
			return c
		}
		return cmpBool(active[a], active[b])
	})
	return out
}

// keepsLiveQuorum reports whether the group whose leader's status is st
// still has a live quorum once the membership change changes is made.
// A change that removes no live voter always does: removing a learner,
// or a voter that is down, takes no live vote away (and a group whose
// leader leads holds a live majority already). One that removes a live
// voter (Active in st, which stepMembership takes from heardLive; the
// leader's own replica always counts as live) does only when the voters after the whole change, a learner it
// promotes counted and the replicas it removes not, hold a majority of
// live ones. Without it a scale-down whose assignment keeps a server
// that is down (kept by an operator's move, or one that went down after
// the meta leader chose: keep.go ranks offline servers last) removed
// the live voter that leaves: a stream of three scaled to two kept its
// leader and a down voter, and could commit nothing until that server
// came back. Refused, the removal waits (stepMembership asks again each
// housekeeping tick) and the group commits with its voters meanwhile.
// As nats-server v2.15.2's stream and consumer leaders check before
// they propose a peer's removal (jetstream_cluster.go canRemovePeer,
// called from runStreamMigration and runConsumerMigration: "waiting for
// quorum to remove peer"), which counts the remaining peers that are
// current and heard from lately; this counts those heard from
// (docs/cluster.md, "Replacing a replica").
func keepsLiveQuorum(st raftnode.GroupStatus, changes []raftnode.Change) bool {
	active := map[raftnode.ReplicaID]bool{st.Replica: true}
	voters := map[raftnode.ReplicaID]bool{}
	for _, rs := range st.Replicas {
		active[rs.Replica] = active[rs.Replica] || rs.Active
		if !rs.Learner {
			voters[rs.Replica] = true
		}
	}
	removesLive := false
	for _, ch := range changes {
		switch ch.Kind {
		case raftnode.AddVoter:
			voters[ch.Replica] = true
		case raftnode.RemoveReplica:
			removesLive = removesLive || voters[ch.Replica] && active[ch.Replica]
			delete(voters, ch.Replica)
		}
	}
	if !removesLive {
		return true
	}
	live := 0
	for r := range voters {
		if active[r] {
			live++
		}
	}
	return live >= len(voters)/2+1
}

// wantedVoter reports whether a replica of want other than the
// leader's (status st) is a voter.
func wantedVoter(st raftnode.GroupStatus, want map[raftnode.ReplicaID]bool) bool {
	return slices.ContainsFunc(st.Replicas, func(rs raftnode.ReplicaStatus) bool {
		return want[rs.Replica] && !rs.Learner && rs.Replica != st.Replica
	})
}

// keptCaughtUp reports whether every replica of want in the leader's
// status st holds, fsynced, every entry committed: a scale-down to one
// replica removes a replica only then, so that the replica that stays
// never depends on one that goes, whose server deletes its files once
// it applied its removal (docs/cluster.md, "Scaling down to one
// replica").
func keptCaughtUp(st raftnode.GroupStatus, want map[raftnode.ReplicaID]bool) bool {
	for _, rs := range st.Replicas {
		if want[rs.Replica] && (rs.Learner || rs.Match < st.Commit || (rs.Replica != st.Replica && !rs.Active)) {
			return false
		}
	}
	return true
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// retireAfter is how long a leaving replica that knows no leader waits
// before it stops (its group removed it without it learning so: a
// removed follower is sent nothing more).
const retireAfter = 10 * time.Second

// retireReplicas stops this server's replicas that left their stream's
// assignment (a scale-down, a peer removal; every replica of a server
// that learned it was removed while down: removedown.go) once their group no longer
// has them: they applied their removal, are fenced, or have known no
// leader for retireAfter while another voter was heard (votersHeard)
// or the stream is led elsewhere (ledElsewhere; not for a scale-down to
// one replica, whose
// settle removes them: scaledown.go); but not while a replica of one of
// the stream's consumers here is leaving its group (consumersLeaving).
func (c *Cluster) retireReplicas() {
	removed := c.removedAnswered.Load() // every replica left (removedown.go)
	c.mu.Lock()
	var keys []streamKey
	for k, r := range c.replicas {
		if r.log != nil && (r.mine() == 0 || removed) {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		r := c.replicaOf(k)
		if r == nil {
			continue
		}
		st, err := c.node.Status(r.sa.Group)
		retire := err != nil || st.Fenced != nil || !st.Member
		// Scaled down to one replica, a leaving replica may hold
		// acknowledged entries the kept one lacks (it was down): it
		// waits for its removal, or for the settle, however long it
		// knows no leader (scaledown.go).
		if !retire && st.Leader == 0 && len(r.sa.Replicas) > 1 {
			if r.leaderless.IsZero() {
				r.leaderless = time.Now()
			}
			retire = time.Since(r.leaderless) >= retireAfter && (c.votersHeard(st) || c.ledElsewhere(streamInfoSubject(k)))
		} else {
			r.leaderless = time.Time{}
		}
		if retire && c.consumersLeaving(k) {
			continue // held for its consumers' replicas (consumersLeaving)
		}
		if retire {
			c.cfg.Infof("JetStream cluster: stream '%s > %s': this server's replica left the group", k.account, k.name)
			c.mu.Lock()
			acc := c.accounts[k.account]
			c.mu.Unlock()
			if acc != nil && c.replicaOf(k) == r {
				c.stopReplica(acc, k, r)
			}
		}
	}
}

// votersHeard reports whether this replica (status st) heard within the
// contact window from another voter of the configuration it applied
// last. A replica that left its assignment and knows no leader retires
// only then: its group's other voters are up and lead without it (it
// was removed while it was down, and nobody talks to it); when they are
// all silent it may be the group's only live copy (a replica of a
// stream of two, evacuated while the other is down: a trial saw its
// files deleted, 500 acknowledged messages left on the stopped server
// alone), and it stays until a leader removes it.
func (c *Cluster) votersHeard(st raftnode.GroupStatus) bool {
	window := c.node.ContactWindow()
	for _, p := range st.Peers {
		if p.Replica != st.Replica && p.Heard && p.Ago <= window && slices.Contains(st.Voters, p.Replica) {
			return true
		}
	}
	return false
}

// handOver transfers the leadership of group (label: its stream or
// consumer), which must lose this server's replica, to the most
// up-to-date active voter that stays, asked through via when not nil (a
// replicated consumer's: consumerlog.Log.HandOver, so that what it
// delivered is queued ahead of the transfer).
func (c *Cluster) handOver(group raftnode.GroupID, label string, st raftnode.GroupStatus, want map[raftnode.ReplicaID]bool, via func(func() error) error) {
	var to raftnode.ReplicaStatus
	for _, rs := range st.Replicas {
		if rs.Replica != st.Replica && want[rs.Replica] && !rs.Learner && rs.Active && rs.Match >= to.Match {
			to = rs
		}
	}
	if to.Replica == 0 {
		return
	}
	if err := through(via, func() error { return c.node.HandOver(group, to.Replica) }); err == nil {
		c.cfg.Infof("JetStream cluster: %s group %d: leadership handed to %s, this replica leaves the group", label, group, to.Server)
	}
}

// statusPeers returns the peers of the group as its leader knows them
// (st: every replica in its configuration, with its server) and as the
// assignment names them.
func statusPeers(st raftnode.GroupStatus, rs []meta.Replica) []raftnode.Peer {
	ps := meta.Peers(rs)
	for _, x := range st.Replicas {
		if x.Server != "" && !slices.ContainsFunc(ps, func(p raftnode.Peer) bool { return p.Replica == x.Replica }) {
			ps = append(ps, raftnode.Peer{Replica: x.Replica, Server: x.Server})
		}
	}
	return ps
}

// describe names membership changes for the log.
func describe(changes []raftnode.Change) []string {
	var out []string
	for _, ch := range changes {
		switch ch.Kind {
		case raftnode.AddLearner:
			out = append(out, "add learner "+strconv.FormatUint(uint64(ch.Replica), 10))
		case raftnode.AddVoter:
			out = append(out, "promote "+strconv.FormatUint(uint64(ch.Replica), 10))
		case raftnode.RemoveReplica:
			out = append(out, "remove "+strconv.FormatUint(uint64(ch.Replica), 10))
		}
	}
	return out
}

// The meta group's own members (docs/cluster.md, "Replacing a
// replica"): each server's meta replica ID derives from its store's
// incarnation (metaReplica). A server whose store was wiped or replaced
// comes back with another incarnation, so another ID: it joins empty
// (joinOrBootstrap) and the catalogue learns its new incarnation
// (catalogue: AddServer). The meta leader then adds its new replica as a
// learner, and once it caught up (the meta snapshot), promotes it while
// removing its old one, in one joint change: the old replica, which
// voted with a log the server no longer has, never votes again.

// reconcileMeta, on the meta leader, makes the meta group one membership
// change closer to the catalogue: every server not removed has the
// replica of its catalogued incarnation as a voter, and no other.
func (c *Cluster) reconcileMeta() {
	c.mu.Lock()
	byInc := c.metaByInc
	c.mu.Unlock()
	if !byInc || !c.metaLeader() {
		return
	}
	if p := c.metaChanging; p != nil {
		select {
		case <-p.Done():
			c.metaChanging = nil
			if _, err := p.Result(); err != nil {
				c.cfg.Logf("jscluster: meta group membership change: %v", err)
			}
		default:
			return
		}
	}
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil || st.Role != raftnode.Leader || st.Fenced != nil {
		return
	}
	want := map[raftnode.ServerID]raftnode.ReplicaID{}
	c.meta.View(func(ms *meta.State) {
		for _, sv := range ms.Servers() {
			if !sv.Removed {
				want[sv.Name] = metaReplica(sv.Incarnation)
			}
		}
	})
	if len(want) == 0 {
		return
	}
	have := map[raftnode.ReplicaID]raftnode.ReplicaStatus{}
	for _, rs := range st.Replicas {
		have[rs.Replica] = rs
	}
	c.syncMetaPeers()
	var changes []raftnode.Change
	for _, n := range slices.Sorted(maps.Keys(want)) {
		if _, ok := have[want[n]]; !ok {
			changes = []raftnode.Change{{Kind: raftnode.AddLearner, Replica: want[n]}}
			break
		}
	}
	if changes == nil {
		for _, rs := range st.Replicas {
			if !rs.Learner || want[rs.Server] != rs.Replica || !rs.Active || rs.Match+promoteLag < st.Commit {
				continue
			}
			changes = []raftnode.Change{{Kind: raftnode.AddVoter, Replica: rs.Replica}}
			for _, o := range st.Replicas {
				if o.Server == rs.Server && o.Replica != rs.Replica {
					changes = append(changes, raftnode.Change{Kind: raftnode.RemoveReplica, Replica: o.Replica})
				}
			}
			break
		}
	}
	if changes == nil {
		rs, ok := c.removedReplica(st)
		if !ok || c.movesPending(rs.Server) {
			return
		}
		if rs.Replica == st.Replica {
			c.handOverMeta(st)
			return
		}
		changes = []raftnode.Change{{Kind: raftnode.RemoveReplica, Replica: rs.Replica}}
	}
	p, err := c.node.ChangeMembership(meta.MetaGroup, changes)
	if err != nil {
		c.cfg.Logf("jscluster: meta group membership change %v: %v", describe(changes), err)
		return
	}
	c.metaChanging = p
	c.cfg.Infof("JetStream cluster: meta group membership change %v", describe(changes))
}

// consumersLeaving reports whether this server, whose replica of
// stream k leaves, runs a replica of a replicated consumer of the
// stream that left the consumer's assignment (or, while the stream's
// move is recorded, has yet to leave it) and is still a member of its
// group (not fenced): a stream move, or a peer removal, moves the
// consumer's replicas with the stream's (moveConsumers), and the
// consumer's replica here stops with the stream's. Stopped before the consumer's group removed it, it
// would take a vote the group may need: with every replica of a
// consumer moving (a stream of two replicas moved to two other servers)
// the group would lose its quorum before its new replicas caught up. So
// the stream's replica waits for them; they retire as retireConsumers
// says. One still assigned here during a move is one whose move back
// has not been proposed yet: a cancelled move's consumers go back once
// their move here is through (cancelmove.go consumersBack). Outside a
// move, one still assigned here stays (a removed server's, when no
// server could take it: "Removing a server").
func (c *Cluster) consumersLeaving(k streamKey) bool {
	sa, _, _, _ := c.assignment(k)
	moving := sa.Moving()
	c.mu.Lock()
	var crs []*creplica
	for ck, cr := range c.creplicas {
		if ck.account == k.account && ck.stream == k.name && cr.log != nil && (moving || cr.mine(c.name) == 0) {
			crs = append(crs, cr)
		}
	}
	c.mu.Unlock()
	for _, cr := range crs {
		if c.consumerMember(cr) {
			return true
		}
	}
	return false
}
