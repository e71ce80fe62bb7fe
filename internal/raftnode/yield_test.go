package raftnode

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// writerTransport is a Transport that writes its frames on a goroutine of
// its own, as the cluster's does (internal/cluster/transport: Send
// queues, a writer per peer writes): Send queues the frame and wakes the
// writer, which hands it to the inner Transport. taken counts the frames
// the writer took.
type writerTransport struct {
	inner Transport
	wake  chan struct{}
	mu    sync.Mutex
	q     []frameTo
	sent  atomic.Int64
	taken atomic.Int64
}

func newWriterTransport(inner Transport) *writerTransport {
	return &writerTransport{inner: inner, wake: make(chan struct{}, 1)}
}

func (w *writerTransport) Send(to ServerID, frame []byte) error {
	w.mu.Lock()
	w.q = append(w.q, frameTo{to: to, frame: frame})
	w.mu.Unlock()
	w.sent.Add(1)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

// run writes until stop is closed.
func (w *writerTransport) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-w.wake:
		}
		w.mu.Lock()
		q := w.q
		w.q = nil
		w.mu.Unlock()
		for _, f := range q {
			w.taken.Add(1)
			_ = w.inner.Send(f.to, f.frame)
		}
	}
}

// A started leader's appends leave before its round's fsync: the round
// yields to the transport's writers between the send and the fsync
// (yieldToSenders). With one P, a writer the send woke could otherwise
// run only once the fsync blocked the loop's thread and the runtime took
// its P back: on the loaded 2-core machine the appends left 84 and
// 108 µs (medians of two runs) after they were queued, and the followers' fsyncs, which the
// commit waits for, started that much later (docs/benchmarks.md, "Where
// a synchronous publish's time goes"). The test's hook runs after the
// appends are sent and before the fsync (afterAppends).
func TestAppendsLeaveBeforeTheFsync(t *testing.T) {
	var wt *writerTransport
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == serverName(0) {
			wt = newWriterTransport(cfg.Transport)
			cfg.Transport = wt
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { wt.run(stop) })
	defer wg.Wait()
	defer close(stop)
	c.addGroup(1, 0)
	// The election by hand: the writer hands s1's frames to the network
	// on its own goroutine, so step until the cluster settles.
	if err := c.nodes[0].n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); c.leader(1) != 0; {
		if time.Now().After(deadline) {
			t.Fatal("node 0 not elected in 10 s")
		}
		if !c.step() {
			time.Sleep(time.Millisecond)
		}
	}
	n := c.nodes[0].n
	// The followers answer from now on (a follower in probe takes one
	// append at a time until it answers).
	wg.Go(func() { c.net.Run(stop) })
	for _, tn := range c.nodes[1:] {
		tn.n.Start()
		defer tn.n.Close()
	}

	type seen struct{ sent, taken int64 }
	var mu sync.Mutex
	var rounds []seen // rounds that sent appends before their fsync
	var last int64    // frames sent before the round
	n.testHook = func(p crashPoint) bool {
		if p == afterAppends {
			if s := wt.sent.Load(); s > last {
				mu.Lock()
				rounds = append(rounds, seen{s, wt.taken.Load()})
				mu.Unlock()
			}
		}
		if p == afterSend {
			last = wt.sent.Load()
		}
		return false
	}
	// One P: whatever the send woke runs only when the loop lets it.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	n.Start()
	defer n.Close()

	const proposals = 5
	for i := range proposals {
		if _, err := n.Propose(1, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			k := len(rounds)
			mu.Unlock()
			if k > i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("proposal %d: no round sent appends before its fsync in 10 s", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, r := range rounds {
		if r.taken != r.sent {
			t.Errorf("round %d with appends: %d of %d frames taken by the writer before the fsync", i, r.taken, r.sent)
		}
	}
}
