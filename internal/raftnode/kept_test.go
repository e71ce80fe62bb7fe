package raftnode

import (
	"errors"
	"fmt"
	"testing"
)

// tickOnly ticks the nodes given, k times, stabilizing after each: the
// others stand still (a stalled server misses its ticks).
func (c *testCluster) tickOnly(k int, nodes ...int) {
	for range k {
		for _, i := range nodes {
			c.nodes[i].n.Tick()
		}
		c.stabilize()
	}
}

// tickUntilLeaderAmong ticks the nodes in ticking until one of among
// leads group g, at most max ticks, and returns it.
func (c *testCluster) tickUntilLeaderAmong(g GroupID, max int, ticking []int, among ...int) int {
	c.t.Helper()
	for range max {
		for _, i := range among { // c.leader would name a stalled leader
			if c.status(i, g).Role == Leader {
				return i
			}
		}
		c.tickOnly(1, ticking...)
	}
	c.t.Fatalf("no leader of %d among nodes %v after %d ticks", g, among, max)
	return -1
}

// pending fails the test if p has resolved.
func pending(t *testing.T, p *Proposal, what string) {
	t.Helper()
	select {
	case <-p.Done():
		res, err := p.Result()
		t.Fatalf("%s: resolved (%v, %v), want it still waiting", what, res, err)
	default:
	}
}

// strandedProposals makes three nodes of group 1 led by node 0, whose
// appends reach node 1 but not node 2, and whose followers' answers do
// not reach it, and proposes three tagged entries on it: they are in the
// logs of nodes 0 and 1, a majority, but node 0 cannot know it, and
// nothing commits. Then node 0 is cut off from both. Node 1 is the only
// one the others can elect (node 2's log is shorter).
func strandedProposals(t *testing.T, tags map[uint64]uint64) (*testCluster, []*Proposal) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.nodes[0].sms[1].onApply = func(e Entry, _ [32]byte) {
		if e.Tag != 0 {
			tags[e.Index] = e.Tag
		}
	}
	c.net.Cut("s2", "s1")
	c.net.Partition("s1", "s3")
	var ps []*Proposal
	for i, d := range []string{"a", "b", "c"} {
		p, err := c.nodes[0].n.ProposeTagged(1, []byte(d), uint64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	c.stabilize()
	if st := c.status(0, 1); st.Commit >= st.LastIndex {
		t.Fatalf("committed %d of %d, want the entries uncommitted", st.Commit, st.LastIndex)
	}
	if st := c.status(1, 1); st.LastIndex != c.status(0, 1).LastIndex {
		t.Fatalf("node 1 holds %d entries, want the leader's %d", st.LastIndex, c.status(0, 1).LastIndex)
	}
	c.net.Partition("s1", "s2")
	return c, ps
}

// checkAnswered fails unless each proposal resolved with the result of
// the entry of its own term applied at its index on node 0 (the state
// hash there), its tag handed to the state machine with it.
func checkAnswered(t *testing.T, c *testCluster, ps []*Proposal, hashes map[uint64][32]byte, tags map[uint64]uint64) {
	t.Helper()
	for i, p := range ps {
		select {
		case <-p.Done():
		default:
			t.Fatalf("proposal %d still waits after its entry applied (applied %d)", i, c.nodes[0].sms[1].applied)
		}
		res, err := p.Result()
		if err != nil {
			t.Fatalf("proposal %d: %v, want its entry's result: the next leader committed it", i, err)
		}
		_, index := p.Position()
		if res != hashes[index] {
			t.Fatalf("proposal %d at %d: result %x, want the state hash there %x", i, index, res, hashes[index])
		}
		if tags[index] != uint64(100+i) {
			t.Fatalf("proposal %d at %d: the state machine saw tag %d, want %d", i, index, tags[index], 100+i)
		}
	}
}

// A leader deposed by a higher term (it stalled: no ticks, no messages,
// while the others elected a leader) keeps the waiters of its entries;
// the next leader, whose log holds them, commits them in its term, and
// each waiter on the old leader resolves with its entry's result when the
// entry applies there with the waiter's term (docs/cluster.md, decision
// 7): the client of a publish the next leader stored is answered.
// Before, the deposed leader answered them ErrNoReply.
func TestDeposedByHigherTermAnswersCommitted(t *testing.T) {
	tags := map[uint64]uint64{}
	c, ps := strandedProposals(t, tags)
	hashes := map[uint64][32]byte{}
	prev := c.nodes[0].sms[1].onApply
	c.nodes[0].sms[1].onApply = func(e Entry, h [32]byte) { hashes[e.Index] = h; prev(e, h) }
	oldTerm := c.status(0, 1).Term
	// Node 0 stands still (no ticks: no CheckQuorum); the others elect
	// node 1, the only one holding the entries.
	if l := c.tickUntilLeaderAmong(1, 200, []int{1, 2}, 1, 2); l != 1 {
		t.Fatalf("leader %d, want node 1 (the longest log)", l)
	}
	if st := c.status(0, 1); st.Role != Leader || st.Term != oldTerm {
		t.Fatalf("node 0 before the heal: %+v, want the stalled leader of term %d", st, oldTerm)
	}
	for i, p := range ps {
		pending(t, p, fmt.Sprintf("proposal %d before the heal", i))
	}
	c.net.HealAll()
	c.tickOnly(3, 1, 2) // heartbeats: node 0 hears the higher term, then the appends
	if st := c.status(0, 1); st.Role == Leader || st.Term == oldTerm {
		t.Fatalf("node 0 after the heal: %+v, want deposed", st)
	}
	checkAnswered(t, c, ps, hashes, tags)
	c.checkSame(1)
}

// A leader that CheckQuorum deposed (cut off from every follower) keeps
// its waiters too: once it hears from the next leader, the entries it
// proposed, committed in the next term, answer them.
func TestDeposedByCheckQuorumAnswersCommitted(t *testing.T) {
	tags := map[uint64]uint64{}
	c, ps := strandedProposals(t, tags)
	hashes := map[uint64][32]byte{}
	prev := c.nodes[0].sms[1].onApply
	c.nodes[0].sms[1].onApply = func(e Entry, h [32]byte) { hashes[e.Index] = h; prev(e, h) }
	c.tickOnly(2*c.nodes[0].n.cfg.ElectionTicks, 0) // CheckQuorum deposes node 0
	if st := c.status(0, 1); st.Role == Leader {
		t.Fatalf("node 0 still leads after two election timeouts alone: %+v", st)
	}
	if l := c.tickUntilLeaderAmong(1, 200, []int{1, 2}, 1, 2); l != 1 {
		t.Fatalf("leader %d, want node 1 (the longest log)", l)
	}
	for _, p := range ps {
		pending(t, p, "a deposed leader's proposal, its entry not applied here")
	}
	c.net.HealAll()
	c.tick(3)
	checkAnswered(t, c, ps, hashes, tags)
	c.checkSame(1)
}

// A deposed leader's entry that the next leader did not hold is replaced
// at its index by an entry of another term: the waiter resolves
// ErrNoReply when that entry applies, never with the other entry's
// result, and the state machine sees no tag for it.
func TestDeposedOverwrittenNoReply(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	tagged := map[uint64]uint64{}
	c.nodes[0].sms[1].onApply = func(e Entry, _ [32]byte) { tagged[e.Index] = e.Tag }
	c.net.Partition("s1", "s2")
	c.net.Partition("s1", "s3")
	p, err := c.nodes[0].n.ProposeTagged(1, []byte("lost"), 7)
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	oldTerm, index := p.term, p.index
	l := c.tickUntilLeaderAmong(1, 200, []int{1, 2}, 1, 2)
	q := c.propose(l, 1, "other") // the new leader's entries take the index
	if _, err := q.Result(); err != nil {
		t.Fatalf("the new leader's proposal: %v", err)
	}
	pending(t, p, "the cut-off leader's proposal")
	c.net.HealAll()
	c.tickOnly(3, 1, 2)
	if st := c.status(0, 1); st.Applied < index {
		t.Fatalf("node 0 applied %d, want at least %d", st.Applied, index)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("the overwritten proposal still waits after its index applied")
	}
	if res, err := p.Result(); !errors.Is(err, ErrNoReply) {
		t.Fatalf("overwritten proposal of term %d at %d: (%v, %v), want ErrNoReply", oldTerm, index, res, err)
	}
	if tagged[index] != 0 {
		t.Fatalf("the entry of another term at %d applied with the lost proposal's tag %d", index, tagged[index])
	}
	c.checkSame(1)
}

// A deposed leader that learns nothing of its entries (cut off for good)
// does not keep their waiters for ever: they resolve ErrNoReply
// keptElections election timeouts after the loss, not before.
func TestDeposedWaitersExpire(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.net.Partition("s1", "s2")
	c.net.Partition("s1", "s3")
	p := c.propose(0, 1, "stranded")
	n := c.nodes[0].n
	lost := 0
	for c.status(0, 1).Role == Leader {
		if lost > 3*n.cfg.ElectionTicks {
			t.Fatal("CheckQuorum never deposed the cut-off leader")
		}
		c.tickOnly(1, 0)
		lost++
	}
	c.tickOnly(int(n.keptTicks())-1, 0)
	pending(t, p, "a kept waiter before its bound")
	c.tickOnly(1, 0)
	select {
	case <-p.Done():
	default:
		t.Fatalf("a kept waiter still waits %d ticks after its leader was deposed", n.keptTicks())
	}
	if _, err := p.Result(); !errors.Is(err, ErrNoReply) {
		t.Fatalf("expired waiter: %v, want ErrNoReply", err)
	}
}
