package raftnode

import (
	"context"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Proposal is the waiter of one proposed entry (docs/cluster.md,
// decision 7). It resolves once, from the node's worker: with the entry's
// Entry.Result when the entry that applies at its index carries the term it
// was proposed in, or with an error:
//
//   - ErrNotLeader, ErrDropped, ErrFenced: the entry never entered the
//     log; nothing will apply.
//   - ErrNoReply: it entered the log, and this replica cannot tell
//     whether it committed: another entry took its place at its index, a
//     snapshot passed the index, the group was removed or fenced, the
//     node stopped, or its leader lost the leadership and learnt nothing
//     of the index for keptElections election timeouts (kept.go). It may
//     still commit under another leader; a client must be told nothing.
//
// A leader that loses its leadership, by a transfer it asked for
// (Node.TransferLeader, Node.StepDown, Node.HandOver) or deposed (a
// higher term heard, CheckQuorum), keeps its proposals: they resolve
// when the entry at their index applies here, with the result when it is
// theirs (same term: the same entry, committed under the next leader).
type Proposal struct {
	data        []byte           // until raft took the entry into its log (dropData)
	conf        *pb.ConfChangeV2 // a membership change, instead of data
	tag         uint64           // handed to Apply with the entry (Entry.Tag)
	done        chan struct{}
	term, index uint64 // set when the entry enters the log
	// keptUntil is the node tick at which the waiter resolves ErrNoReply
	// once its leader lost the leadership (0 while it leads; kept.go).
	keptUntil uint64
	result    any
	err       error
}

func newProposal(data []byte) *Proposal {
	return &Proposal{data: data, done: make(chan struct{})}
}

// resolve completes the proposal; only the first call has an effect.
func (p *Proposal) resolve(result any, err error) {
	select {
	case <-p.done:
		return
	default:
	}
	p.result, p.err = result, err
	close(p.done)
}

// Done is closed when the proposal has resolved.
func (p *Proposal) Done() <-chan struct{} { return p.done }

// Result returns the outcome; valid once Done is closed (before, it
// returns nil, nil).
func (p *Proposal) Result() (any, error) {
	select {
	case <-p.done:
		return p.result, p.err
	default:
		return nil, nil
	}
}

// Position returns the term and index the entry was given in the log;
// zeros until it entered the log (valid once Done is closed).
func (p *Proposal) Position() (term, index uint64) {
	select {
	case <-p.done:
		return p.term, p.index
	default:
		return 0, 0
	}
}

// Wait blocks until the proposal resolves or ctx ends (then it returns
// ctx.Err(), and the proposal may still resolve later).
func (p *Proposal) Wait(ctx context.Context) (any, error) {
	select {
	case <-p.done:
		return p.result, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
