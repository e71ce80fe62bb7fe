package jetstream

import (
	"errors"
	"sync"

	"github.com/cairnmq/cairn/internal/store"
)

// saver writes a durable consumer's state on its own goroutine, so that
// the consumer's loop never waits for the disk: the loop hands over its
// latest snapshot, and the saver writes the newest one it holds whenever
// it is free (older ones are dropped unwritten).
type saver struct {
	cs   store.ConsumerStore
	logf func(format string, args ...any)
	name string

	mu     sync.Mutex
	next   *store.ConsumerState
	closed bool
	wake   chan struct{} // capacity 1
	done   chan struct{}

	failing bool // the last write failed; owned by the saver goroutine
}

func newSaver(cs store.ConsumerStore, name string, logf func(string, ...any)) *saver {
	s := &saver{cs: cs, name: name, logf: logf, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// put hands over a snapshot to write.
func (s *saver) put(st *store.ConsumerState) {
	s.mu.Lock()
	s.next = st
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
		st, closed := s.next, s.closed
		s.next = nil
		s.mu.Unlock()
		if st != nil {
			s.write(st)
			continue
		}
		if closed {
			return
		}
		<-s.wake
	}
}

// write stores st, logging a failure once until a write succeeds again
// (a fenced store fails every write until it is reopened).
func (s *saver) write(st *store.ConsumerState) {
	err := s.cs.Update(st)
	switch {
	case err == nil:
		s.failing = false
	case errors.Is(err, store.ErrClosed):
	case !s.failing:
		s.failing = true
		s.logf("consumer %s: save state: %v", s.name, err)
	}
}

// close writes what was handed over last and stops.
func (s *saver) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-s.done
}
