package streamlog

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
)

// Propose waits while the proposals awaiting their outcome would hold
// more than Config.MaxPendingBytes, and goes on once they resolve: a
// leader cut off from its followers takes three proposals of 300 KiB
// under a 1 MiB bound, holds the fourth until CheckQuorum deposes it
// (the three fail: room again), and never holds more. Before, only the
// count of proposals (4,096) was bounded, and a burst of 1 MiB groups
// held gigabytes on a replicated stream's leader.
func TestProposeWaitsPastPendingBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, func(cfg *Config) { cfg.MaxPendingBytes = 1 << 20 })
		defer c.run()()
		l := c.waitLeader(-1)
		for _, r := range c.reps {
			if r != c.reps[l] {
				c.net.Partition(c.reps[l].id, r.id)
			}
		}
		op := func() stream.Op {
			return &stream.Publish{Entries: []stream.Entry{{Subject: "orders.x", Data: make([]byte, 300<<10), Time: 1}}}
		}
		for k := range 3 {
			if err := c.reps[l].log.Propose(op(), uint64(k+1)); err != nil {
				t.Fatalf("proposal %d: %v", k+1, err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- c.reps[l].log.Propose(op(), 4) }()
		select {
		case err := <-done:
			t.Fatalf("the fourth proposal, past 1 MiB pending, returned at once (%v)", err)
		case <-time.After(300 * time.Millisecond): // virtual; less than an election timeout
		}
		select {
		case <-done: // proposed or refused: the three resolved when the leader was deposed
		case <-time.After(30 * time.Second):
			t.Fatal("the fourth proposal still waits after the leader lost its quorum")
		}
	})
}
