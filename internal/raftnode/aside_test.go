package raftnode

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestLargeEntryKeepsOtherLeaders: a round that carries a large entry
// and takes three election timeouts (a starved CPU, a slow disk: the
// test sleeps in it) no longer costs its server the leadership of its
// other groups. Before, one round loop ran that round for every group, no
// other group of the server sent a heartbeat while it lasted, and their
// followers elected new leaders (trial 36: one 64 MB atomic batch, 14 to
// 41 leaders of its server lost at once). Now the group with the large
// entry runs its round beside the loop (Config.AsideBytes), which goes on
// heartbeating the others.
func TestLargeEntryKeepsOtherLeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const groups = 4
		c := newTestCluster(t, 3, func(cfg *Config) {
			cfg.Workers = 2
			cfg.DisableQuiescence = true // every group heartbeats: the loop must keep serving them
		})
		for g := GroupID(1); g <= groups; g++ {
			c.addGroup(g, 0)
			c.elect(0, g)
		}
		terms := map[GroupID]uint64{}
		for g := GroupID(2); g <= groups; g++ {
			terms[g] = c.status(0, g).Term
		}
		big := bytes.Repeat([]byte{7}, 5<<20)
		var once sync.Once
		slept := make(chan struct{})
		c.nodes[0].n.slowHook = func(b int) {
			if b >= 4<<20 {
				once.Do(func() {
					time.Sleep(3 * c.nodes[0].n.ElectionTimeout()) // virtual time
					close(slept)
				})
			}
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { c.net.Run(stop) })
		for _, tn := range c.nodes {
			tn.n.Start()
		}
		defer func() {
			for _, tn := range c.nodes {
				tn.n.Close()
			}
			close(stop)
			wg.Wait()
		}()

		p, err := c.nodes[0].n.Propose(1, big)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-slept:
		case <-time.After(time.Minute):
			t.Fatal("the large entry's round never ran")
		}
		// The proposal is answered: applied, or ErrNoReply if group 1
		// changed leader meanwhile (its own followers heard nothing from
		// it during the stall, and the entry may never have left).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := p.Wait(ctx); err != nil && !errors.Is(err, ErrNoReply) {
			t.Fatalf("the large proposal: %v", err)
		}
		for g := GroupID(2); g <= groups; g++ {
			if s := c.status(0, g); s.Role != Leader || s.Term != terms[g] {
				t.Errorf("group %d: node 0 is %v in term %d, was leader in term %d", g, s.Role, s.Term, terms[g])
			}
		}
	})
}

// TestLargeEntryLeaderWaitsForWritingFollowers: a leader that sent a
// large entry keeps its leadership while its followers take almost two
// election timeouts to write it (each in a round beside its loop, deaf to
// the leader's heartbeats meanwhile), and the proposal is answered.
// Before, the leader's CheckQuorum found no follower active and it
// stepped down; its proposal went unanswered while the entry committed
// under the next leader (trial 36: 64 MB batches stored but never
// acknowledged, so that a client's retry stores them twice).
func TestLargeEntryLeaderWaitsForWritingFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCluster(t, 3, func(cfg *Config) {
			cfg.Workers = 2
			cfg.DisableQuiescence = true
		})
		c.addGroup(1, 0)
		c.elect(0, 1)
		term := c.status(0, 1).Term
		for _, tn := range c.nodes[1:] {
			tn.n.slowHook = func(b int) {
				if b >= 4<<20 {
					time.Sleep(19 * tn.n.ElectionTimeout() / 10) // virtual time
				}
			}
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { c.net.Run(stop) })
		for _, tn := range c.nodes {
			tn.n.Start()
		}
		defer func() {
			for _, tn := range c.nodes {
				tn.n.Close()
			}
			close(stop)
			wg.Wait()
		}()
		time.Sleep(350 * time.Millisecond) // the heartbeats' phase: not a multiple of the tick
		p, err := c.nodes[0].n.Propose(1, bytes.Repeat([]byte{7}, 5<<20))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("the large proposal: %v", err)
		}
		if s := c.status(0, 1); s.Role != Leader || s.Term != term {
			t.Fatalf("node 0 is %v in term %d, was leader in term %d", s.Role, s.Term, term)
		}
	})
}

// TestLargeEntryPartitionedLeaderStepsDown: the pause of a leader's ticks
// after a large append is bounded: a leader cut off from its followers
// right after sending one still steps down (CheckQuorum) within a few
// election timeouts; its proposal, kept (kept.go), gets ErrNoReply once
// the partition heals and the new leader's entries replace it.
func TestLargeEntryPartitionedLeaderStepsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stop := startedCluster(t, 3, 1)
		defer stop()
		l := waitLeader(t, c, 1)
		for _, tn := range c.nodes {
			if tn.id != c.nodes[l].id {
				c.net.Partition(c.nodes[l].id, tn.id)
			}
		}
		p, err := c.nodes[l].n.Propose(1, bytes.Repeat([]byte{7}, 5<<20))
		if err != nil {
			t.Fatal(err)
		}
		waitDeposed(t, c, l, 1, 5*c.nodes[l].n.ElectionTimeout())
		deadline := time.Now().Add(30 * time.Second)
		for c.leader(1) < 0 || c.leader(1) == l { // the others elect a leader
			if time.Now().After(deadline) {
				t.Fatal("no new leader")
			}
			time.Sleep(50 * time.Millisecond) // virtual time
		}
		c.net.HealAll()
		ctx, cancel := context.WithTimeout(context.Background(), 5*c.nodes[l].n.ElectionTimeout())
		defer cancel()
		if _, err := p.Wait(ctx); !errors.Is(err, ErrNoReply) {
			t.Fatalf("the stranded large proposal: %v", err)
		}
	})
}
