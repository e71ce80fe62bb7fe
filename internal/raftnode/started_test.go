package raftnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/vfs"
)

var _ = synctest.Wait

// startedCluster runs n nodes with their goroutines (Start), a real
// ticker and the network's delivery goroutine, inside a synctest bubble so
// time is virtual.
func startedCluster(t *testing.T, n, groups int) (*testCluster, func()) {
	c := newTestCluster(t, n, func(cfg *Config) { cfg.Workers = 2 })
	for g := 1; g <= groups; g++ {
		c.addGroup(GroupID(g), 0)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.net.Run(stop) })
	for _, tn := range c.nodes {
		tn.n.Start()
	}
	var once sync.Once
	return c, func() {
		once.Do(func() {
			for _, tn := range c.nodes {
				if tn.n != nil {
					tn.n.Close()
				}
			}
			close(stop)
			wg.Wait()
		})
	}
}

// waitLeader waits (in virtual time) for group g to have a leader and
// returns its node index.
func waitLeader(t *testing.T, c *testCluster, g GroupID) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if l := c.leader(g); l >= 0 {
			return l
		}
		time.Sleep(50 * time.Millisecond) // virtual time: the bubble's clock
	}
	t.Fatalf("group %d: no leader", g)
	return -1
}

// Elections happen on their own (100 ms ticks, 1 s election timeout), and
// concurrent proposals from many goroutines to many groups all apply,
// identically everywhere, through the worker pool.
func TestStartedConcurrentProposals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stop := startedCluster(t, 3, 4)
		defer stop()
		var wg sync.WaitGroup
		errs := make(chan error, 400)
		for g := GroupID(1); g <= 4; g++ {
			l := waitLeader(t, c, g)
			for k := range 100 {
				wg.Go(func() {
					p, err := c.nodes[l].n.Propose(g, fmt.Appendf(nil, "%d-%d", g, k))
					if err == nil {
						_, err = p.Wait(context.Background())
					}
					errs <- err
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		// Every node applies what the leader had applied, and then the
		// same as the others: an election meanwhile (they happen on their
		// own) adds its empty entry everywhere, so the index to reach is
		// the one they all report, not the leader's at one moment.
		var wants []uint64
		for g := GroupID(1); g <= 4; g++ {
			want, _ := c.nodes[c.leader(g)].n.Status(g)
			deadline := time.Now().Add(10 * time.Second)
			for {
				var applied []uint64
				for _, tn := range c.nodes {
					st, _ := tn.n.Status(g)
					applied = append(applied, st.Applied)
				}
				if slices.Min(applied) >= want.Applied && slices.Min(applied) == slices.Max(applied) {
					wants = append(wants, applied[0])
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("group %d applied %v, the leader %d", g, applied, want.Applied)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		stop() // the nodes' goroutines are done: their state machines can be read
		for g := GroupID(1); g <= 4; g++ {
			c.checkSame(g)
			if got := c.nodes[0].sms[g].applied; got != wants[g-1] {
				t.Fatalf("group %d applied %d, want %d", g, got, wants[g-1])
			}
		}
	})
}

// A leader cut off from both followers (both ways) stops leading within
// the election timeout (CheckQuorum); the others elect a leader and take
// writes; its pending proposal, kept (kept.go), gets ErrNoReply once the
// partition heals and the new leader's entries replace it.
func TestStartedPartitionedLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stop := startedCluster(t, 3, 1)
		defer stop()
		l := waitLeader(t, c, 1)
		for _, tn := range c.nodes {
			if tn.id != c.nodes[l].id {
				c.net.Partition(c.nodes[l].id, tn.id)
			}
		}
		stranded, err := c.nodes[l].n.Propose(1, []byte("stranded"))
		if err != nil {
			t.Fatal(err)
		}
		waitDeposed(t, c, l, 1, 5*time.Second)
		var nl int
		deadline := time.Now().Add(10 * time.Second)
		for nl = c.leader(1); nl < 0 || nl == l; nl = c.leader(1) {
			if time.Now().After(deadline) {
				t.Fatal("no new leader")
			}
			time.Sleep(50 * time.Millisecond)
		}
		p, err := c.nodes[nl].n.Propose(1, []byte("after"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-stranded.Done():
			t.Fatal("the stranded proposal resolved before its replica learnt what its index holds")
		default:
		}
		c.net.HealAll()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := stranded.Wait(ctx); !errors.Is(err, ErrNoReply) {
			t.Fatalf("stranded proposal: %v", err)
		}
	})
}

// waitDeposed waits (in virtual time, at most d) until node i no longer
// leads group g.
func waitDeposed(t *testing.T, c *testCluster, i int, g GroupID, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for c.status(i, g).Role == Leader {
		if time.Now().After(deadline) {
			t.Fatalf("node %d still leads group %d after %v", i, g, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A one-way cut (the leader hears the followers, they do not hear it)
// gets a new leader too: PreVote and CheckQuorum do not keep a leader
// whose heartbeats are lost.
func TestStartedOneWayCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stop := startedCluster(t, 3, 1)
		defer stop()
		l := waitLeader(t, c, 1)
		for _, tn := range c.nodes {
			if tn.id != c.nodes[l].id {
				c.net.Cut(c.nodes[l].id, tn.id)
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			st, _ := c.nodes[(l+1)%3].n.Status(1)
			if st.Role == Leader || (st.Leader != 0 && st.LeaderServer != c.nodes[l].id) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("followers kept a leader they cannot hear")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// Close resolves what waits and a reopened node recovers (WAL only; the
// crash FS keeps what was fsynced).
func TestStartedCloseReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stop := startedCluster(t, 1, 1)
		l := waitLeader(t, c, 1)
		for k := range 10 {
			p, err := c.nodes[l].n.Propose(1, []byte{byte(k)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		stop()
		want := *c.nodes[0].sms[1]
		c.nodes[0].fs = c.nodes[0].fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
		c.open(0)
		c.addReplica(0, 1, 0)
		var at [32]byte // the state hash once the recovered node reapplies want.applied
		c.nodes[0].sms[1].onApply = func(e Entry, h [32]byte) {
			if e.Index == want.applied {
				at = h
			}
		}
		c.nodes[0].n.Start()
		deadline := time.Now().Add(10 * time.Second)
		for st, _ := c.nodes[0].n.Status(1); st.Applied < want.applied; st, _ = c.nodes[0].n.Status(1) {
			if time.Now().After(deadline) {
				t.Fatalf("applied %d after reopen, want %d", st.Applied, want.applied)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.nodes[0].n.Close()
		if at != want.hash {
			t.Fatal("state differs after reopen")
		}
	})
}

// Groups removed while the node ticks and closes: the tick and Close read
// the group list outside the node's lock, so a removal must not change
// the list they hold (it is copied on write); under the race detector a
// removal in place is reported, and Close could meet a cleared entry.
func TestStartedRemoveGroupsWhileClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stop := startedCluster(t, 3, 8)
		defer stop()
		waitLeader(t, c, 1)
		for g := 1; g <= 8; g++ {
			for _, tn := range c.nodes {
				if _, err := tn.n.RemoveGroup(GroupID(g)); err != nil {
					t.Fatal(err)
				}
			}
			c.nodes[0].n.Tick()
		}
		stop()
	})
}
