package filestore

import (
	"sync"
	"sync/atomic"
)

// notifier is where the flusher and its callers meet. It publishes the
// flusher's progress: the written and the durable sequence, the number of
// batches done, and the fence error; waiters take the current channel and
// wait for it to be closed, and every change closes it and makes a new
// one. The other way, it carries the callers' hints to the writer: runs
// of appends in progress (held) and requests to write at once (urgent).
type notifier struct {
	mu struct {
		sync.Mutex
		written uint64 // every message through written is in its file (not yet fsynced, maybe)
		seq     uint64 // every message through seq is durable
		gen     uint64 // batches made durable
		want    uint64 // the highest batch a waitGen waited for (Config.DeferSync)
		err     error  // the fence, once set
		ch      chan struct{}
		// wch wakes the waiters of waitWritten alone, so that a write
		// does not wake the waiters for durability; nil while nobody
		// waits for a write (a stream without persist_mode async).
		wch chan struct{}
	}
	// held counts the runs of appends in progress (Store.BeginBatch);
	// while it is above 0, the writer ignores the kicks of Append.
	held atomic.Int32
	// urgent wakes the writer even while held: someone waits for a batch
	// (waitGen). Capacity 1.
	urgent chan struct{}
}

func newNotifier(seq uint64) *notifier {
	n := &notifier{urgent: make(chan struct{}, 1)}
	n.mu.seq, n.mu.written = seq, seq
	n.mu.ch = make(chan struct{})
	return n
}

// waitSeq blocks until seq is durable or the store is fenced.
func (n *notifier) waitSeq(seq uint64) error {
	return n.wait(func() bool { return n.mu.seq >= seq })
}

// waitWritten blocks until seq is written (durable or not) or the store
// is fenced.
func (n *notifier) waitWritten(seq uint64) error {
	for {
		n.mu.Lock()
		if n.mu.err != nil {
			err := n.mu.err
			n.mu.Unlock()
			return err
		}
		if n.mu.written >= seq {
			n.mu.Unlock()
			return nil
		}
		if n.mu.wch == nil {
			n.mu.wch = make(chan struct{})
		}
		ch := n.mu.wch
		n.mu.Unlock()
		<-ch
	}
}

// waitGen blocks until batch gen is durable or the store is fenced. It
// wakes the writer first, held or not: the caller may be the one holding
// it (a Delete between BeginBatch and EndBatch).
func (n *notifier) waitGen(gen uint64) error {
	n.mu.Lock()
	n.mu.want = max(n.mu.want, gen)
	n.mu.Unlock()
	select {
	case n.urgent <- struct{}{}:
	default:
	}
	return n.wait(func() bool { return n.mu.gen >= gen })
}

func (n *notifier) wait(done func() bool) error {
	for {
		n.mu.Lock()
		if n.mu.err != nil {
			err := n.mu.err
			n.mu.Unlock()
			return err
		}
		if done() {
			n.mu.Unlock()
			return nil
		}
		ch := n.mu.ch
		n.mu.Unlock()
		<-ch
	}
}

// durable returns the durable sequence.
func (n *notifier) durable() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.seq
}

// wanted returns the highest batch waited for (waitGen) and the batches
// made durable: the syncer of a store with Config.DeferSync fsyncs when
// the first is above the second.
func (n *notifier) wanted() (want, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.want, n.mu.gen
}

// writtenSeq returns the written sequence.
func (n *notifier) writtenSeq() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.written
}

// wrote publishes that every message through seq is written to its
// segment file (the writer's Write returned), not yet fsynced. It
// reports whether it woke waiters of waitWritten.
func (n *notifier) wrote(seq uint64) (woke bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if seq > n.mu.written {
		n.mu.written = seq
		woke = n.mu.wch != nil
		n.wakeWrittenLocked()
	}
	return woke
}

// advance publishes that batch gen, holding every message through seq,
// is durable (and so written).
func (n *notifier) advance(seq, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.seq = max(n.mu.seq, seq)
	n.mu.written = max(n.mu.written, seq)
	n.mu.gen = max(n.mu.gen, gen)
	n.wakeLocked()
}

// fail fences: every waiter, now and later, gets err.
func (n *notifier) fail(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.err == nil {
		n.mu.err = err
	}
	n.wakeLocked()
}

// wakeLocked wakes every waiter: durable progress is written progress
// too, and a fence ends every wait.
func (n *notifier) wakeLocked() {
	close(n.mu.ch)
	n.mu.ch = make(chan struct{})
	n.wakeWrittenLocked()
}

// wakeWrittenLocked wakes the waiters of waitWritten, if any.
func (n *notifier) wakeWrittenLocked() {
	if n.mu.wch != nil {
		close(n.mu.wch)
		n.mu.wch = nil
	}
}
