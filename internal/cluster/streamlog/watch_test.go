package streamlog

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// fakeOutcome is a proposal resolved by the test.
type fakeOutcome struct {
	done chan struct{}
	err  error
}

func (o *fakeOutcome) Done() <-chan struct{} { return o.done }
func (o *fakeOutcome) Result() (any, error)  { return nil, o.err }

// forgets records the keys a Log's watcher forgets.
type forgets struct {
	mu   sync.Mutex
	keys map[uint64]error
}

func (f *forgets) Forget(key uint64, err error) {
	f.mu.Lock()
	f.keys[key] = err
	f.mu.Unlock()
}

func (f *forgets) get(key uint64) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, ok := f.keys[key]
	return err, ok
}

// A proposal raft refused after Propose returned is forgotten (its
// publish answered 503) while an older proposal, kept by a replica that
// lost the leadership, still waits for its entry: before, the watcher
// took them in order and the 503 waited up to ten election timeouts.
func TestWatchForgetsRefusedBehindKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &forgets{keys: map[uint64]error{}}
		l := &Log{pending: make(chan pendingProposal, maxPending), done: make(chan struct{})}
		l.gate.cond.L = &l.gate.mu
		go l.watchWith(f)
		defer close(l.done)
		kept := &fakeOutcome{done: make(chan struct{})}
		refused := &fakeOutcome{done: make(chan struct{}), err: raftnode.ErrDropped}
		close(refused.done)
		l.pending <- pendingProposal{key: 1, p: kept}
		l.pending <- pendingProposal{key: 2, p: refused}
		time.Sleep(time.Second)
		synctest.Wait()
		err, ok := f.get(2)
		if !ok || !errors.Is(err, streamrun.ErrUnproposed) {
			t.Fatalf("the refused proposal behind a kept one: forgotten %v with %v, want at once with ErrUnproposed", ok, err)
		}
		if _, ok := f.get(1); ok {
			t.Fatal("the kept proposal was forgotten before it resolved")
		}
		kept.err = raftnode.ErrNoReply
		close(kept.done)
		synctest.Wait()
		if err, ok := f.get(1); !ok || !errors.Is(err, raftnode.ErrNoReply) {
			t.Fatalf("the kept proposal: forgotten %v with %v, want ErrNoReply", ok, err)
		}
	})
}

// countedOutcome counts the looks at whether it resolved.
type countedOutcome struct {
	fakeOutcome
	looks *int
}

func (o *countedOutcome) Done() <-chan struct{} { *o.looks++; return o.done }

// Proposals resolving in index order, one at a time, cost the watcher a
// few looks each: before, each resolution of the oldest made it look at
// every proposal waiting (up to maxPending each time: half a million
// looks for these 1,000).
func TestWatchSettlesInOrderCheaply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Log{pending: make(chan pendingProposal, maxPending), done: make(chan struct{})}
		l.gate.cond.L = &l.gate.mu
		looks := 0
		const n = 1000
		ps := make([]*countedOutcome, n)
		for i := range ps {
			ps[i] = &countedOutcome{fakeOutcome: fakeOutcome{done: make(chan struct{})}, looks: &looks}
			l.pending <- pendingProposal{key: uint64(i + 1), p: ps[i]}
		}
		go l.watchWith(nil)
		defer close(l.done)
		synctest.Wait()
		for _, p := range ps {
			close(p.done)
			synctest.Wait()
		}
		if looks > 5*n {
			t.Errorf("%d looks at %d proposals resolved in order; want at most %d", looks, n, 5*n)
		}
	})
}
