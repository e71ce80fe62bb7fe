package raftnode

import (
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Forcing a group to one voter (docs/cluster.md, "Fencing", "Forcing
// a new cluster"), as etcd's --force-new-cluster does to its member
// (etcd server, restartAsStandaloneNode: https://etcd.io/docs/v3.5/op-guide/recovery/):
// an operator's last resort when a majority of a group's voters lost
// their logs for good, so the group can never elect a leader again.
//
// A replica recovered from the WAL with GroupConfig.ForceSole gets, after
// the last entry of its log, membership changes written as ordinary conf
// change entries (raft's own means, applied by raft like any other):
// leave a joint configuration if the log ends in one, then remove every
// other voter and learner, one at a time (raft's simple protocol). The
// entries take the replica's current term, and the commit index is moved
// to the last of them: every entry the log holds is treated as committed,
// those the replica had not yet learned were committed included (they
// were appended by a leader of the group; a client that got no answer
// for them retries, and a stream's message ID deduplicates). They and
// the hard state are written, fsynced, by the group's first round,
// before it sends anything. raft then applies them on the replica's
// first rounds; the replica, sole voter, elects itself and leads. The
// other replicas' entries that this one never received are lost: an
// entry acknowledged by a majority that did not include this replica.
//
// Nothing is forced (ErrForce in the log, the replica recovered as it
// is) when the replica is not a voter of the configuration its log ends
// with, or that configuration cannot be rebuilt from the log; a replica
// already alone needs nothing and gets nothing.

// ErrForce is logged when a group cannot be forced to one voter: the
// replica is not a voter of its log's last configuration, or that
// configuration does not rebuild.
var ErrForce = fmt.Errorf("raftnode: cannot force the group to one voter")

// lastConf rebuilds the configuration a log ends with: the base's conf
// state, then every conf change entry of ents in order, as raft applies
// them (raft.applyConfChange). Errors: a conf change that does not decode
// or does not apply.
func lastConf(base *pb.ConfState, ents []*pb.Entry) (tracker.Config, error) {
	chg := confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: 1}
	cfg, trk, err := confchange.Restore(chg, base)
	if err != nil {
		return cfg, err
	}
	for _, e := range ents {
		if e.GetType() == pb.EntryNormal {
			continue
		}
		cc, err := decodeConf(e)
		if err != nil {
			return cfg, err
		}
		chg.Tracker.Config, chg.Tracker.Progress = cfg, trk
		switch autoLeave, joint := cc.EnterJoint(); {
		case cc.LeaveJoint():
			cfg, trk, err = chg.LeaveJoint()
		case joint:
			cfg, trk, err = chg.EnterJoint(autoLeave, cc.GetChanges()...)
		default:
			cfg, trk, err = chg.Simple(cc.GetChanges()...)
		}
		if err != nil {
			return cfg, fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
		}
	}
	return cfg, nil
}

// decodeConf decodes a conf change entry as a ConfChangeV2.
func decodeConf(e *pb.Entry) (*pb.ConfChangeV2, error) {
	if e.GetType() == pb.EntryConfChange {
		var c pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			return nil, fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
		}
		return c.AsV2(), nil
	}
	var c pb.ConfChangeV2
	if err := proto.Unmarshal(e.GetData(), &c); err != nil {
		return nil, fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
	}
	return &c, nil
}

// soleChanges returns the conf changes that leave self the only voter of
// cfg and no learner: a leave of the joint configuration if cfg is one,
// then one removal per other replica, in ID order; none if self already
// is alone. Errors: self is not a voter of cfg's incoming configuration
// (ErrForce).
func soleChanges(cfg tracker.Config, self ReplicaID) ([]*pb.ConfChangeV2, []ReplicaID, error) {
	in := cfg.Voters[0]
	if _, ok := in[uint64(self)]; !ok {
		return nil, nil, fmt.Errorf("%w: replica %d is not a voter of its log's last configuration %s", ErrForce, self, cfg)
	}
	others := map[uint64]struct{}{}
	for _, set := range []map[uint64]struct{}{in, cfg.Learners, cfg.LearnersNext} {
		maps.Copy(others, set)
	}
	delete(others, uint64(self))
	var ccs []*pb.ConfChangeV2
	if len(cfg.Voters[1]) > 0 {
		ccs = append(ccs, &pb.ConfChangeV2{}) // leave the joint configuration
	}
	var removed []ReplicaID
	for _, id := range slices.Sorted(maps.Keys(others)) {
		ccs = append(ccs, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(id)}}})
		removed = append(removed, ReplicaID(id))
	}
	if len(removed) == 0 {
		ccs = nil // alone already (a joint configuration of one is left by raft)
	}
	return ccs, removed, nil
}

// forceToSole appends to the recovered log (base, ents, hard state hs) the
// conf change entries that leave this replica the group's only voter,
// and returns the entries and the hard state to write (commit at the
// last of them); nil entries when nothing is forced (alone already, or
// ErrForce, logged).
func (g *group) forceToSole(base snapMeta, ents []*pb.Entry, hs *pb.HardState) ([]*pb.Entry, *pb.HardState) {
	cfg, err := lastConf(base.conf, ents)
	if err != nil {
		g.n.cfg.Logf("raftnode: group %d: %v: %v; the replica starts as it is", g.id, ErrForce, err)
		return nil, hs
	}
	ccs, removed, err := soleChanges(cfg, g.replica)
	if err != nil {
		g.n.cfg.Logf("raftnode: group %d: %v; the replica starts as it is", g.id, err)
		return nil, hs
	}
	if len(ccs) == 0 {
		g.n.cfg.Infof("raftnode: group %d: replica %d is the group's only voter already: nothing forced", g.id, g.replica)
		return nil, hs
	}
	last, lastTerm := base.index, base.term
	if n := len(ents); n > 0 {
		last, lastTerm = ents[n-1].GetIndex(), ents[n-1].GetTerm()
	}
	held := last
	term := max(hs.GetTerm(), lastTerm)
	var out []*pb.Entry
	for _, cc := range ccs {
		data, err := proto.Marshal(cc)
		if err != nil {
			g.n.cfg.Logf("raftnode: group %d: %v: %v", g.id, ErrForce, err)
			return nil, hs
		}
		last++
		out = append(out, &pb.Entry{Term: new(term), Index: new(last), Type: pb.EntryConfChangeV2.Enum(), Data: data})
	}
	vote := hs.GetVote()
	if term != hs.GetTerm() {
		vote = 0
	}
	g.n.cfg.Logf("raftnode: group %d: FORCED: replica %d becomes the group's only voter (configuration was %s; removed %x, entries %d..%d); its log's entries after its commit index %d, up to %d, are committed by force; entries of the removed replicas that it lacks are lost",
		g.id, g.replica, cfg, removed, held+1, last, hs.GetCommit(), held)
	return out, &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(last)}
}

// Forcing out a lost voter of a group of two, at run time (ForceOut).
//
// A group of two voters commits an entry only once both hold it, so
// each holds every committed entry. When one of them is gone for good
// (its server removed from the cluster, or its replica from the group's
// assignment, while it was down) the other can never be elected again:
// it needs the lost one's vote. It is made the group's only voter here,
// as a ForceSole restart would make it, without a restart: the removal
// of the lost replica is appended to its log as an ordinary conf change
// entry, in a term no leader can have had (its current term plus one: a
// leader of the group needs this replica's vote, and it never voted in
// that term), every entry of the log is committed (the uncommitted tail
// included, as ForceSole does: a leader of the group appended it), and
// the replica's raft is made again from its log, as a restart makes it,
// so that raft applies the removal like any other. Nothing committed is
// lost, unlike a forced majority loss.
//
// The force is refused (logged; the replica goes on as it was) unless,
// in the round that takes it: this replica knows no leader; the
// configuration raft has applied has exactly this replica and gone as
// voters, not joint (learners change no quorum); no membership change follows it
// in the log but additions of learners and removals of gone
// (quorumKept: another one not yet applied could change which replicas
// must hold a commit); and no snapshot is installing.

// ForceOut asks the group's next round to make this replica its only
// voter, removing gone, the other voter of a group of two that is lost
// for good (the cluster layer decides that: docs/cluster.md, "A stream
// of two replicas"). It returns once the request is queued; the
// outcome shows in the group's status (Voters), and a refusal in the
// log. Errors: ErrUnknownGroup, ErrFenced, ErrBusy, ErrStopped, as for
// every request.
func (n *Node) ForceOut(id GroupID, gone ReplicaID) error {
	return n.ask(id, request{kind: reqForceOut, to: gone})
}

// forceOut carries out a ForceOut of gone in the group's round (before
// its Ready is taken): see above.
func (g *group) forceOut(gone ReplicaID) {
	if err := g.canForceOut(gone); err != nil {
		g.n.cfg.Logf("raftnode: group %d: replica %d not forced out: %v", g.id, gone, err)
		return
	}
	first, _ := g.st.FirstIndex()
	last, _ := g.st.LastIndex()
	ents, err := g.st.Entries(first, last+1, noLimit)
	if err != nil && first <= last {
		g.n.cfg.Logf("raftnode: group %d: replica %d not forced out: %v", g.id, gone, err)
		return
	}
	baseTerm, err := g.st.Term(first - 1)
	if err != nil {
		g.n.cfg.Logf("raftnode: group %d: replica %d not forced out: %v", g.id, gone, err)
		return
	}
	base := snapMeta{index: first - 1, term: baseTerm, conf: g.confAt(first - 1)}
	term := g.rn.BasicStatus().GetTerm() + 1
	data, err := proto.Marshal(&pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(uint64(gone))}}})
	if err != nil {
		g.n.cfg.Logf("raftnode: group %d: replica %d not forced out: %v", g.id, gone, err)
		return
	}
	forced := []*pb.Entry{{Term: new(term), Index: new(last + 1), Type: pb.EntryConfChangeV2.Enum(), Data: data}}
	hs := &pb.HardState{Term: new(term), Vote: new(uint64(0)), Commit: new(last + 1)}
	ms := raft.NewMemoryStorage()
	if err := ms.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(base.index), Term: new(base.term), ConfState: base.conf}}); err != nil {
		g.n.cfg.Logf("raftnode: group %d: replica %d not forced out: %v", g.id, gone, err)
		return
	}
	_ = ms.Append(ents)
	_ = ms.Append(forced)
	_ = ms.SetHardState(hs)
	g.st.MemoryStorage = ms
	g.confs = []confAt{{index: base.index, cs: base.conf}}
	g.rawApplied, g.appliedTerm = base.index, base.term
	g.newRawNode(base.index)
	var it items
	it.entries(g.id, forced)
	it.hardState(g.id, hs)
	g.out.items = append(g.out.items, it.b...)
	g.out.up.group, g.out.up.hs, g.out.up.maxIndex = g.id, hs, last+1
	g.out.mustSync = true
	g.quiet = false
	g.n.cfg.Logf("raftnode: group %d: FORCED: replica %d becomes the group's only voter, replica %d (lost for good) removed at %d in term %d; entries up to %d committed by force",
		g.id, g.replica, gone, last+1, term, last)
}

// canForceOut checks, in the group's round, that gone may be forced out
// (see above); the error says why not.
func (g *group) canForceOut(gone ReplicaID) error {
	if g.restoring != nil {
		return fmt.Errorf("a snapshot is installing")
	}
	if bs := g.rn.BasicStatus(); bs.RaftState == raft.StateLeader || bs.Lead != 0 {
		return fmt.Errorf("the group has a leader (replica %d)", bs.Lead)
	}
	cfg := g.rn.Status().Config
	in := cfg.Voters[0]
	_, self := in[uint64(g.replica)]
	_, other := in[uint64(gone)]
	if gone == g.replica || len(in) != 2 || !self || !other || len(cfg.Voters[1]) > 0 {
		return fmt.Errorf("the configuration %s is not replicas %d and %d alone", cfg, g.replica, gone)
	}
	last, _ := g.st.LastIndex()
	if g.rawApplied < last {
		ents, err := g.st.Entries(g.rawApplied+1, last+1, noLimit)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.GetType() != pb.EntryNormal && !quorumKept(e, gone) {
				return fmt.Errorf("a membership change at %d is not applied yet", e.GetIndex())
			}
		}
	}
	return nil
}

// quorumKept reports whether conf change entry e only adds learners or
// removes gone (not joint): committed or not, it leaves this replica's
// vote needed for every commit, so the two voters still hold every
// committed entry after it (the leader adding a new replica as a
// learner appends one just before it loses its quorum; one shrinking
// the group to itself, a scale-down to one replica, appends the removal
// of the other, which then never commits). It is applied before the
// removal that forces, like any entry of the log (a second removal of
// gone changes nothing).
func quorumKept(e *pb.Entry, gone ReplicaID) bool {
	cc, err := decodeConf(e)
	if err != nil || len(cc.GetChanges()) == 0 {
		return false
	}
	if _, joint := cc.EnterJoint(); joint || cc.LeaveJoint() {
		return false
	}
	for _, ch := range cc.GetChanges() {
		switch {
		case ch.GetType() == pb.ConfChangeAddLearnerNode:
		case ch.GetType() == pb.ConfChangeRemoveNode && ch.GetNodeId() == uint64(gone):
		default:
			return false
		}
	}
	return true
}

// noLimit is the size limit of a MemoryStorage.Entries call that wants
// every entry of the range.
const noLimit = ^uint64(0)
