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
