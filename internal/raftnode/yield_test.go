package raftnode

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countTransport counts the frames sent through it.
type countTransport struct {
	inner Transport
	sent  atomic.Int64
}

func (c *countTransport) Send(to ServerID, frame []byte) error {
	c.sent.Add(1)
	return c.inner.Send(to, frame)
}

// A started leader yields between handing its appends to the transport
// and its fsync (yieldToSenders), so that the transport's writers, which
// the sends woke, write them before the fsync holds the loop's thread:
// Go readies a woken goroutine on the waker's P, which a blocking fsync
// keeps until the runtime takes it back. On the loaded 2-core machine
// the appends left 84 and 108 µs (medians of two runs) after they were
// queued without the yield, 3 µs with it, and the followers' fsyncs,
// which the commit waits for, started that much later (docs/benchmarks.md,
// "Where a synchronous publish's time goes"). The test checks the order
// (every frame of the round sent, then the yield, then the fsync: its
// hook runs after the appends and before the fsync), not Go's scheduler.
func TestAppendsLeaveBeforeTheFsync(t *testing.T) {
	var ct *countTransport
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == serverName(0) {
			ct = &countTransport{inner: cfg.Transport}
			cfg.Transport = ct
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a") // the followers' progress replicates
	n := c.nodes[0].n
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() { c.net.Run(stop) })

	type seen struct{ sent, yielded int64 }
	var mu sync.Mutex
	var rounds []seen       // rounds that sent frames before their fsync
	var last, yielded int64 // frames sent before the round; at the last yield
	n.yieldHook = func() { yielded = ct.sent.Load() }
	n.testHook = func(p crashPoint) bool {
		switch p {
		case afterAppends:
			if s := ct.sent.Load(); s > last {
				mu.Lock()
				rounds = append(rounds, seen{s, yielded})
				mu.Unlock()
			}
		case afterSend:
			last = ct.sent.Load()
		}
		return false
	}
	for _, tn := range c.nodes {
		tn.n.Start()
		defer tn.n.Close()
	}

	// Each proposal commits before the next: the round that steps it
	// sends its append before its fsync.
	const want = 5
	for i := 0; ; i++ {
		mu.Lock()
		k := len(rounds)
		mu.Unlock()
		if k >= want {
			break
		}
		if i == 50 {
			t.Fatalf("%d of 50 proposals stepped in rounds that sent appends before their fsync, want %d", k, want)
		}
		p, err := n.Propose(1, []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = p.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, r := range rounds {
		if r.yielded != r.sent {
			t.Errorf("round %d with appends: the fsync came after %d frames sent, the last yield after %d", i, r.sent, r.yielded)
		}
	}
}
