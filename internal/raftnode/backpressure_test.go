package raftnode

import (
	"bytes"
	"errors"
	"testing"
)

// A leader whose followers have not acknowledged MaxUncommittedBytes of
// entries keeps the proposals raft drops past that limit and steps them
// again once commits free room, instead of failing them with ErrDropped:
// a burst of publishes larger than the limit waits rather than being
// refused (trial 34: a 100 MB object put into an R3 bucket got 503s past
// the 64 MiB limit, where nats-server takes the burst).
func TestBurstPastUncommittedLimitWaits(t *testing.T) {
	c, ps := heldBurst(t) // the leader alone: 16 KiB uncommitted, the rest held
	for i, p := range ps {
		select {
		case <-p.Done():
			_, err := p.Result()
			t.Fatalf("proposal %d resolved (%v) while nothing could commit", i, err)
		default:
		}
	}
	c.net.HealAll()
	for range 50 {
		c.tick(1)
		if allDone(ps) {
			break
		}
	}
	for i, p := range ps {
		if !allDone(ps[i : i+1]) {
			t.Fatalf("proposal %d still waiting after the followers came back", i)
		}
		if _, err := p.Result(); err != nil {
			t.Fatalf("proposal %d: %v, want applied", i, err)
		}
	}
	c.checkSame(1)
}

func allDone(ps []*Proposal) bool {
	for _, p := range ps {
		select {
		case <-p.Done():
		default:
			return false
		}
	}
	return true
}

// Proposals held past the uncommitted limit by a leader that loses its
// quorum fail once CheckQuorum deposes it: none waits for a commit that
// cannot come from this replica, so the stream answers them (503) and its
// clients retry on the new leader. Those in its log are kept (kept.go):
// they resolve when their indexes apply here, ErrNoReply for the entries
// the new leader replaced, never success.
func TestHeldProposalsFailWhenLeaderLosesQuorum(t *testing.T) {
	c, ps := heldBurst(t)
	var held, logged []*Proposal
	for _, p := range ps {
		if p.data != nil { // raft took the others into its log (dropData)
			held = append(held, p)
		} else {
			logged = append(logged, p)
		}
	}
	if len(held) == 0 || len(logged) == 0 {
		t.Fatalf("%d held and %d in the log, want both", len(held), len(logged))
	}
	for range 4 * 10 { // CheckQuorum deposes the leader within two election timeouts
		if allDone(held) {
			break
		}
		c.tick(1)
	}
	for i, p := range held {
		if !allDone(held[i : i+1]) {
			t.Fatalf("held proposal %d still waits on a leader that lost its quorum (role %v)", i, c.status(0, 1).Role)
		}
		if _, err := p.Result(); err == nil {
			t.Fatalf("held proposal %d applied on a leader cut off from its followers", i)
		}
	}
	c.tickUntilLeader(1, 1000, 1, 2)
	c.net.HealAll()
	c.tick(3)
	for i, p := range logged {
		if !allDone(logged[i : i+1]) {
			t.Fatalf("proposal %d in the log still waits after the new leader's entries applied", i)
		}
		if _, err := p.Result(); !errors.Is(err, ErrNoReply) {
			t.Fatalf("proposal %d replaced by the new leader: %v, want ErrNoReply", i, err)
		}
	}
}

// heldBurst makes a 3-node cluster whose group 1 holds proposals past a
// 16 KiB uncommitted limit, its leader (node 0) cut off from the others,
// and proposes 40 of 1 KiB on it, stabilized: 16 KiB uncommitted, the
// rest held.
func heldBurst(t *testing.T) (*testCluster, []*Proposal) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxUncommittedBytes = 16 << 10 })
	for i, tn := range c.nodes {
		tn.sms[1] = newHashSM(tn.fs, "sm", 1)
		gc := GroupConfig{ID: 1, Replica: ReplicaID(i + 1), Incarnation: tn.n.Incarnation(), Peers: c.peers(0), HoldPastUncommitted: true}
		if err := tn.n.AddGroup(gc, tn.sms[1]); err != nil {
			t.Fatal(err)
		}
	}
	c.elect(0, 1)
	for _, s := range []ServerID{"s2", "s3"} {
		c.net.Partition("s1", s)
	}
	var ps []*Proposal
	for i := range 40 {
		p, err := c.nodes[0].n.Propose(1, bytes.Repeat([]byte{byte('a' + i%26)}, 1<<10))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	c.stabilize()
	return c, ps
}

// A proposal raft took into its log no longer holds its data: raft keeps
// its own copy of the entry, so a waiter that kept the data too held
// every proposal in flight twice until it applied (a leader taking a
// burst held both copies of streamlog's 64 MiB in flight). Proposals
// held past the uncommitted limit keep theirs: they are stepped again.
func TestSteppedProposalDropsData(t *testing.T) {
	_, ps := heldBurst(t) // nothing commits: every proposal still waits
	entered, held := 0, 0
	for i, p := range ps {
		if p.index == 0 { // held past the limit, not in the log
			held++
			if len(p.data) != 1<<10 {
				t.Fatalf("held proposal %d lost its data (%d bytes): it has to be stepped again", i, len(p.data))
			}
			continue
		}
		entered++
		if p.data != nil {
			t.Fatalf("proposal %d at index %d still holds its %d bytes after raft took the entry", i, p.index, len(p.data))
		}
	}
	if entered == 0 || held == 0 {
		t.Fatalf("%d proposals in the log and %d held, want some of each", entered, held)
	}
}
