package consumerrun

import (
	"errors"
	"sync"

	"github.com/cairnmq/cairn/internal/store"
)

// saver writes a persisted consumer's state on its own goroutine, so that
// the consumer's loop never waits for the disk: the loop hands over its
// latest snapshot, and the saver writes the newest one it holds whenever
// it is free (older ones are dropped unwritten, and the confirmations
// waiting for them wait for the newer one, which holds all they need).
type saver struct {
	cs     store.ConsumerStore
	logf   func(format string, args ...any)
	name   string
	stored func(st *store.ConsumerState, gen uint64, waits []confirm) // after each successful write

	mu     sync.Mutex
	next   *store.ConsumerState
	gen    uint64    // the ack journal generation read before next was taken
	waits  []confirm // confirmations released once next is stored
	closed bool
	wake   chan struct{} // capacity 1
	done   chan struct{}

	failing bool // the last write failed; owned by the saver goroutine
}

// newSaver starts a saver; stored is called on its goroutine after each
// snapshot is written, with the journal generation and confirmations put
// with it.
func newSaver(cs store.ConsumerStore, name string, logf func(string, ...any),
	stored func(*store.ConsumerState, uint64, []confirm)) *saver {
	s := &saver{cs: cs, name: name, logf: logf, stored: stored, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// put hands over a snapshot to write, taken after reading the ack
// journal's generation gen, with the confirmations to send once it is
// stored.
func (s *saver) put(st *store.ConsumerState, gen uint64, waits []confirm) {
	s.mu.Lock()
	s.next, s.gen = st, gen
	s.waits = append(s.waits, waits...)
	s.mu.Unlock()
	s.signal()
}

func (s *saver) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *saver) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		st, gen, waits, closed := s.next, s.gen, s.waits, s.closed
		s.next, s.waits = nil, nil
		s.mu.Unlock()
		if st != nil {
			if s.write(st) {
				s.stored(st, gen, waits)
			}
			continue
		}
		if closed {
			return
		}
		<-s.wake
	}
}

// write stores st and reports whether it did, logging a failure once
// until a write succeeds again (a fenced store fails every write until it
// is reopened).
func (s *saver) write(st *store.ConsumerState) bool {
	err := s.cs.Update(st)
	switch {
	case err == nil:
		s.failing = false
		return true
	case errors.Is(err, store.ErrClosed):
	case !s.failing:
		s.failing = true
		s.logf("consumer %s: save state: %v", s.name, err)
	}
	return false
}

// discard stops without writing what was handed over and not yet
// written (the consumer is being deleted); its confirmations are dropped.
// A write under way finishes first.
func (s *saver) discard() {
	s.mu.Lock()
	s.closed = true
	s.next, s.waits = nil, nil
	s.mu.Unlock()
	s.signal()
	<-s.done
}

// close writes what was handed over last and stops.
func (s *saver) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-s.done
}
