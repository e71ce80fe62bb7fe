package streamrun

import "sync"

// queue is a bounded FIFO handed from many producers to one consumer
// goroutine: producers push without blocking (a full queue refuses), the
// consumer takes everything queued at once. A second lane, committed
// (pushCommitted), is taken before the items and can be taken alone
// (takeCommitted): a replicated stream's committed operations, which must
// not wait behind the publishes queued before them (trial 140).
type queue[T any] struct {
	mu        sync.Mutex
	items     []T
	committed []T // pushCommitted's lane, in push order, taken first
	limit     int // most items queued; 0 = unbounded
	bytes     int // the sizes pushSized was given for the items queued
	byteLimit int // most bytes queued; 0 = unbounded
	closed    bool
	wake      chan struct{} // capacity 1
	room      chan struct{} // capacity 1: take took items (crowded's waiters)
}

func newQueue[T any](limit int) *queue[T] {
	return &queue[T]{limit: limit, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// pushResult is what pushSized made of an item.
type pushResult int

const (
	pushed        pushResult = iota
	pushedCrowded            // pushed, and the queue is now crowded (crowded)
	pushClosed               // the queue is closed
	fullMsgs                 // limit items queued
	fullBytes                // byteLimit bytes queued with the item
)

// ok reports whether the item was pushed.
func (r pushResult) ok() bool { return r == pushed || r == pushedCrowded }

// push appends v; it reports false when the queue is full or closed.
func (q *queue[T]) push(v T) bool { return q.pushSized(v, 0).ok() }

// pushSized appends v, of n bytes, unless the queue is closed or full:
// limit items, or byteLimit bytes with v (an item larger than byteLimit
// never fits, as in nats-server v2.15.2's ipQueue). It says which, and
// whether the queue is crowded once v is in, under the one lock.
func (q *queue[T]) pushSized(v T, n int) pushResult {
	q.mu.Lock()
	res := pushed
	switch {
	case q.closed:
		res = pushClosed
	case q.limit > 0 && len(q.items) >= q.limit:
		res = fullMsgs
	case q.byteLimit > 0 && q.bytes+n > q.byteLimit:
		res = fullBytes
	}
	if res != pushed {
		q.mu.Unlock()
		return res
	}
	q.items = append(q.items, v)
	q.bytes += n
	if q.crowdedLocked() {
		res = pushedCrowded
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return res
}

// take waits until items are queued and moves them all into dst[:0],
// the committed lane's first. It returns ok false once the queue is
// closed and empty.
func (q *queue[T]) take(dst []T) (items []T, ok bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 || len(q.committed) > 0 {
			items = drain(&q.items, drain(&q.committed, dst[:0]))
			q.bytes = 0
			q.mu.Unlock()
			select {
			case q.room <- struct{}{}:
			default:
			}
			return items, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return dst[:0], false
		}
		<-q.wake
	}
}

// close stops further pushes; take drains what is left, then reports done.
func (q *queue[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pushOp appends v even when the queue is full (operations from the API
// and timers are few and must not be refused); it reports false only
// when the queue is closed.
func (q *queue[T]) pushOp(v T) bool { return q.pushAlways(&q.items, v) }

// pushCommitted appends v to the committed lane, even when the queue is
// full; it reports false only when the queue is closed.
func (q *queue[T]) pushCommitted(v T) bool { return q.pushAlways(&q.committed, v) }

// pushAlways appends v to lane (q.items or q.committed) whatever the
// limits, and wakes the consumer; false when the queue is closed.
func (q *queue[T]) pushAlways(lane *[]T, v T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	*lane = append(*lane, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// takeCommitted moves what the committed lane holds into dst[:0],
// without waiting (none: dst[:0]).
func (q *queue[T]) takeCommitted(dst []T) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	return drain(&q.committed, dst[:0])
}

// drain appends lane's items to dst and empties lane, keeping its
// capacity (q.mu held).
func drain[T any](lane *[]T, dst []T) []T {
	dst = append(dst, *lane...)
	clear(*lane)
	*lane = (*lane)[:0]
	return dst
}

// crowded reports whether the queue holds more than half of its limit of
// items or of bytes.
func (q *queue[T]) crowded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.crowdedLocked()
}

func (q *queue[T]) crowdedLocked() bool {
	return q.limit > 0 && 2*len(q.items) > q.limit || q.byteLimit > 0 && 2*q.bytes > q.byteLimit
}
