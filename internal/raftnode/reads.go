package raftnode

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Linearizable reads (docs/cluster.md, decision 11) and membership
// changes (docs/cluster.md, decision 9).

// ReadIndex asks for a linearizable read of the group: the Proposal
// resolves (result nil) once this replica's state machine reflects every
// entry committed before the call, as confirmed by the leader with a
// heartbeat round (raft's ReadOnlySafe; a new leader answers only after
// an entry of its term commits). Serve the read from the state machine
// then. It works on followers too (the leader confirms the index). Errors
// through the Proposal: ErrNotLeader when no leader is known, or
// leadership changes before the index is confirmed (nothing happened;
// retry). Errors of the call: ErrUnknownGroup, ErrStopped, ErrFenced.
func (n *Node) ReadIndex(id GroupID) (*Proposal, error) {
	p := newProposal(nil)
	if err := n.ask(id, request{kind: reqRead, read: p}); err != nil {
		return nil, err
	}
	return p, nil
}

// ChangeKind is a kind of membership change.
type ChangeKind int

// The membership changes (raft's ConfChangeType).
const (
	// AddLearner adds a replica that receives the log but does not vote:
	// every new replica starts as one and is promoted once caught up.
	AddLearner ChangeKind = iota + 1
	// AddVoter adds a voter, or promotes a learner.
	AddVoter
	// RemoveReplica removes a voter or learner. A removed leader steps down.
	RemoveReplica
)

// Change is one membership change of a group.
type Change struct {
	Kind    ChangeKind
	Replica ReplicaID
}

// ChangeMembership proposes one membership change made of changes (one
// is the simple protocol; several, e.g. add the new replica and remove the
// old, go through joint consensus and leave it automatically). The
// Proposal resolves once the change has applied here, or with ErrDropped
// if raft refused it (another change in flight), or as any proposal.
// Before adding a replica, SetPeers must name its server. Errors of the
// call: ErrInvalid, and those of Propose.
func (n *Node) ChangeMembership(id GroupID, changes []Change) (*Proposal, error) {
	cc := &pb.ConfChangeV2{}
	for _, c := range changes {
		var t pb.ConfChangeType
		switch c.Kind {
		case AddLearner:
			t = pb.ConfChangeAddLearnerNode
		case AddVoter:
			t = pb.ConfChangeAddNode
		case RemoveReplica:
			t = pb.ConfChangeRemoveNode
		default:
			return nil, fmt.Errorf("%w: change kind %d", ErrInvalid, c.Kind)
		}
		if c.Replica == 0 {
			return nil, fmt.Errorf("%w: replica 0", ErrInvalid)
		}
		cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: t.Enum(), NodeId: new(uint64(c.Replica))})
	}
	if len(cc.Changes) == 0 {
		return nil, fmt.Errorf("%w: no change", ErrInvalid)
	}
	g, err := n.live(id)
	if err != nil {
		return nil, err
	}
	p := newProposal(nil)
	p.conf = cc
	return p, n.queue(g, p)
}

// proposeConfs steps the membership changes, one entry each, after the
// batch of ordinary proposals; last is the log's last index before them.
func (g *group) proposeConfs(confs []*Proposal, term, last uint64) []*Proposal {
	var stepped []*Proposal
	for _, p := range confs {
		if err := g.rn.ProposeConfChange(p.conf); err != nil {
			p.resolve(nil, ErrDropped)
			continue
		}
		last++
		p.term, p.index = term, last
		g.waiters[last] = p
		stepped = append(stepped, p)
	}
	return stepped
}

// startRead asks raft for a read index, keyed by a counter.
func (g *group) startRead(p *Proposal) {
	bs := g.rn.BasicStatus()
	if bs.Lead == 0 {
		p.resolve(nil, ErrNotLeader)
		return
	}
	g.readSeq++
	ctx := binary.LittleEndian.AppendUint64(nil, g.readSeq)
	g.reads[g.readSeq] = p
	g.rn.ReadIndex(ctx)
}

// readStates records the read indexes the Ready confirms.
func (g *group) readStates(rss []raft.ReadState) {
	for _, rs := range rss {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		k := binary.LittleEndian.Uint64(rs.RequestCtx)
		if p := g.reads[k]; p != nil {
			delete(g.reads, k)
			p.index = rs.Index
			g.readWait = append(g.readWait, p)
		}
	}
}

// serveReads resolves the confirmed reads the state machine has reached.
func (g *group) serveReads() {
	kept := g.readWait[:0]
	for _, p := range g.readWait {
		if p.index <= g.smApplied {
			p.resolve(nil, nil)
		} else {
			kept = append(kept, p)
		}
	}
	g.readWait = kept
}

// failReads fails the reads whose index is not confirmed yet (their
// request may be lost with the leadership).
func (g *group) failReads(err error) {
	for k, p := range g.reads {
		p.resolve(nil, err)
		delete(g.reads, k)
	}
}
