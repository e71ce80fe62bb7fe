package raftnode

import pb "go.etcd.io/raft/v3/raftpb"

// Waiters kept by a replica that no longer leads (docs/cluster.md,
// decision 7). A leader that loses its leadership, by a transfer of its
// own or deposed (a higher term heard, CheckQuorum, removed from the
// voters), keeps the waiters of the entries it proposed: each resolves
// when the entry at its index applies here, with the entry's result when
// the entry is of the waiter's term (raft's log matching: the same index
// and term hold the same entry, the one this replica proposed, now
// committed), with ErrNoReply when another term's entry took its place
// (applied there, or appended over it: dropReplaced), a snapshot passed
// its index, the group was removed or fenced, or the node closed
// (group.apply, persisted, propose, afterRound, Close).
// Before, a deposed leader answered every waiter ErrNoReply at once, and
// its clients got no answer for entries the next leader often committed
// (trial 37: hundreds of publishes stored and unanswered; a retry
// without Nats-Msg-Id stored them twice).
//
// A replica that never learns what became of the index (cut off from the
// others, its group's new leader unable to reach it) would keep the
// waiter for ever: a kept waiter resolves ErrNoReply once keptElections
// election timeouts of the node's ticks have passed since its leader
// lost the leadership (expireKept). The waiters are few: the stream's
// proposer bounds those awaiting their outcome (streamlog's maxPending,
// 4,096, and 64 MiB), and raftnode's MaxPendingProposals the queue.

// keptElections is how many election timeouts a replica keeps the
// waiters of the term it led after losing the leadership (10 s with the
// default tick and election timeout): no proposer waits longer (the meta
// leader's API requests 10 s, jscluster proposeTimeout; nats.go's
// publish 5 s by default), and the next leader commits what it holds
// within about two election timeouts of the loss (its election, then
// its first entry), which the old leader applies once it hears from it.
const keptElections = 10

// keptTicks returns keptElections election timeouts in the node's ticks.
func (n *Node) keptTicks() uint64 { return uint64(keptElections * n.cfg.ElectionTicks) }

// keepWaiters marks the waiters of the leadership just lost as kept: each
// resolves ErrNoReply at the latest keptTicks from now (expireKept).
// Waiters kept from an earlier loss keep their deadline.
func (g *group) keepWaiters() {
	until := g.n.ticks.Load() + g.n.keptTicks()
	for _, w := range g.waiters {
		if w.keptUntil == 0 {
			w.keptUntil = until
		}
	}
	if len(g.waiters) > 0 && (g.keptSweep == 0 || until < g.keptSweep) {
		g.keptSweep = until
	}
}

// expireKept resolves ErrNoReply the kept waiters whose deadline passed:
// the replica cannot tell what became of their entries. It runs at the
// end of each round, after the round's entries applied. A group with
// waiters has a round every tick: a leader does not go quiet while it
// holds any, and a follower only once its whole log is committed
// (followQuiesce), when the entry at each kept waiter's index is
// committed (dropReplaced resolved those past its log) and applies.
func (g *group) expireKept() {
	if g.keptSweep == 0 {
		return
	}
	now := g.n.ticks.Load()
	if now < g.keptSweep {
		return
	}
	next := uint64(0)
	for i, w := range g.waiters {
		switch {
		case w.keptUntil == 0:
		case w.keptUntil <= now:
			w.resolve(nil, ErrNoReply)
			delete(g.waiters, i)
		case next == 0 || w.keptUntil < next:
			next = w.keptUntil
		}
	}
	g.keptSweep = next
}

// dropReplaced resolves ErrNoReply the kept waiters whose entries the
// round's append replaced: raft truncates a follower's log from the first
// entry of an append that conflicts with it, so a waiter at an index the
// append holds with another term, or past its last entry, no longer has
// its entry here. The entry may still exist elsewhere (and even commit,
// should a replica holding it be elected), so the waiter is not told it
// failed: no answer. Waiters not kept (this replica leads their term)
// are never past a leader's own append. ents are the Ready's entries,
// after storage.Append.
func (g *group) dropReplaced(ents []*pb.Entry) {
	if g.keptSweep == 0 || len(ents) == 0 {
		return
	}
	first, last := ents[0].GetIndex(), ents[len(ents)-1].GetIndex()
	for i, w := range g.waiters {
		if w.keptUntil == 0 || i < first {
			continue
		}
		if i > last || ents[i-first].GetTerm() != w.term {
			w.resolve(nil, ErrNoReply)
			delete(g.waiters, i)
		}
	}
}
