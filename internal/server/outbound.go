package server

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Outbound buffering, in the manner of nats-server v2.15.2 (client.go
// outbound): pending bytes live in a list of chunks taken from a pool, so
// a burst never reallocates one large buffer and written chunks are
// reused at once; the writer sends up to maxWriteBatch bytes per vectored
// write; a producer that pushes a receiver past stallThreshold is slowed
// for a few milliseconds instead of letting the receiver's memory grow.
const (
	chunkSize     = 64 << 10 // bytes per pooled chunk
	maxWriteBatch = 1 << 20  // bytes handed to one writev
	stallMin      = 2 * time.Millisecond
	stallMax      = 5 * time.Millisecond
	stallBudget   = 10 * time.Millisecond // most a producer is stalled per read batch
	// maxStallAt caps the stall threshold: beyond a few MiB of pending
	// bytes more buffering adds memory, not throughput (cairn's choice;
	// nats-server stalls only at three quarters of max_pending).
	maxStallAt = 8 << 20
)

var chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}

func getChunk(n int) []byte {
	if n > chunkSize {
		return make([]byte, 0, n)
	}
	return chunkPool.Get().(*[chunkSize]byte)[:0]
}

func putChunk(b []byte) {
	if cap(b) == chunkSize {
		chunkPool.Put((*[chunkSize]byte)(b[:chunkSize]))
	}
}

// outbound is a client's queue of bytes waiting to be written to its
// socket. Readers of any connection append to it; the client's writeLoop
// drains it. All fields but the atomics are guarded by mu; the atomics
// are written under mu and read without it by the monitoring endpoints
// (stats.go), so a scrape takes no lock of the delivery path.
type outbound struct {
	mu      sync.Mutex
	chunks  [][]byte     // pending bytes in order; only the last chunk is appended to
	pending atomic.Int64 // bytes queued and not yet written (including the batch being written)
	// msgs and bytes count the messages delivered to this connection and
	// their header and payload bytes (nats-server's out_msgs, out_bytes).
	msgs  atomic.Int64
	bytes atomic.Int64
	limit int64 // Options.MaxPending: above it the client is a slow consumer
	// route: the connection is a route, which passing limit does not
	// close: its client publishers wait instead (waitStalled), and only
	// its write deadline closes it (nats-server v2.15.2 closes only
	// CLIENT connections on max_pending, client.go queueOutbound).
	route   bool
	stallAt int64         // three quarters of limit, at most maxStallAt: producers are slowed above it
	stall   chan struct{} // non-nil while pending > stallAt; closed when the writer catches up
	closing bool          // flush what is pending, then close the socket
	closed  bool          // drop everything; the connection is gone
	wake    chan struct{} // capacity 1: tells the writer there is work
}

func newOutbound(limit int64) *outbound {
	return &outbound{limit: limit, stallAt: stallThreshold(limit), wake: make(chan struct{}, 1)}
}

func stallThreshold(limit int64) int64 { return min(limit/4*3, maxStallAt) }

// setLimit changes the pending bytes above which the client is a slow
// consumer (a reload of max_pending); it applies from the next append.
func (o *outbound) setLimit(limit int64) {
	o.mu.Lock()
	o.limit, o.stallAt = limit, stallThreshold(limit)
	o.mu.Unlock()
}

// maxPending returns the limit in force.
func (o *outbound) maxPending() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.limit
}

// tailLocked returns the last chunk with room for n more bytes, starting a
// new chunk when needed. The caller appends at most n bytes and passes the
// result to commitLocked. The caller holds mu.
func (o *outbound) tailLocked(n int) []byte {
	if k := len(o.chunks); k > 0 {
		if last := o.chunks[k-1]; cap(last)-len(last) >= n {
			return last
		}
	}
	o.chunks = append(o.chunks, getChunk(n))
	return o.chunks[len(o.chunks)-1]
}

// commitLocked stores the appended tail and counts its new bytes. It
// reports false when the pending bytes exceed the limit (a slow
// consumer), never for a route. The caller holds mu.
func (o *outbound) commitLocked(tail []byte) bool {
	k := len(o.chunks) - 1
	pending := o.pending.Add(int64(len(tail) - len(o.chunks[k])))
	o.chunks[k] = tail
	if pending > o.stallAt && o.stall == nil {
		o.stall = make(chan struct{})
	}
	return pending <= o.limit || o.route
}

// appendBytes queues b (control lines such as INFO, PONG, +OK, -ERR). It
// reports false when the pending bytes now exceed the limit: a client that
// sends PINGs and never reads its PONGs is a slow consumer too.
func (o *outbound) appendBytes(b []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.acceptingLocked() {
		return true
	}
	return o.commitLocked(append(o.tailLocked(len(b)), b...))
}

// acceptingLocked reports whether appends still matter. The caller holds mu.
func (o *outbound) acceptingLocked() bool { return !o.closed && !o.closing }

// countLocked counts one message of n header and payload bytes delivered
// to this connection. The caller holds mu.
func (o *outbound) countLocked(n int) {
	o.msgs.Add(1)
	o.bytes.Add(int64(n))
}

// signal wakes the writer without blocking.
func (o *outbound) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take moves up to maxWriteBatch bytes of whole chunks into batch. more
// reports that chunks remain; closing that the writer must close the
// socket once batch is written; closed that the connection is gone.
func (o *outbound) take(batch [][]byte) (out [][]byte, more, closing, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return batch[:0], false, false, true
	}
	n, size := 0, 0
	for n < len(o.chunks) && size < maxWriteBatch {
		size += len(o.chunks[n])
		n++
	}
	out = append(batch[:0], o.chunks[:n]...)
	rest := copy(o.chunks, o.chunks[n:])
	clear(o.chunks[rest:])
	o.chunks = o.chunks[:rest]
	return out, rest > 0, o.closing && rest == 0, false
}

// written accounts for a batch that reached the socket and recycles its
// chunks; it releases stalled producers once the receiver has caught up.
func (o *outbound) written(batch [][]byte, n int64) {
	o.mu.Lock()
	pending := o.pending.Add(-n)
	if o.stall != nil && pending <= o.stallAt {
		close(o.stall)
		o.stall = nil
	}
	o.mu.Unlock()
	for i, b := range batch {
		putChunk(b)
		batch[i] = nil
	}
}

// requeue puts back what a write that timed out after n of batch's bytes
// left unwritten, ahead of the pending chunks, and recycles the chunks
// written whole: a route's write deadline closes it only when nothing at
// all was written (nats-server v2.15.2 handleWriteTimeout, route's
// WriteTimeoutPolicyRetry).
func (o *outbound) requeue(batch [][]byte, n int64) {
	whole := 0 // chunks of batch written whole
	for skip := n; whole < len(batch) && skip >= int64(len(batch[whole])); whole++ {
		skip -= int64(len(batch[whole]))
	}
	o.mu.Lock()
	if pending := o.pending.Add(-n); o.stall != nil && pending <= o.stallAt {
		close(o.stall)
		o.stall = nil
	}
	if !o.closed && whole < len(batch) {
		rest := make([][]byte, 0, len(batch)-whole+len(o.chunks))
		off := n
		for _, b := range batch[:whole] {
			off -= int64(len(b))
		}
		rest = append(rest, batch[whole][off:]) // a chunk's tail: never pooled again
		rest = append(rest, batch[whole+1:]...)
		o.chunks = append(rest, o.chunks...)
	}
	o.mu.Unlock()
	for i, b := range batch {
		if i < whole {
			putChunk(b)
		}
		batch[i] = nil
	}
}

// markClosing asks the writer to flush and close.
func (o *outbound) markClosing() {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	o.signal()
}

// markClosed drops pending bytes and releases stalled producers; nothing
// more will be written.
func (o *outbound) markClosed() {
	o.mu.Lock()
	o.closed = true
	o.chunks = nil
	if o.stall != nil {
		close(o.stall)
		o.stall = nil
	}
	o.mu.Unlock()
	o.signal()
}

// writeBatch writes batch with one vectored write (net.Buffers uses
// writev on TCP connections) and returns the bytes written.
func writeBatch(nc net.Conn, batch [][]byte, iov *net.Buffers) (int64, error) {
	*iov = append((*iov)[:0], batch...)
	return iov.WriteTo(nc)
}

// stallState returns the stall channel (nil when not backed up) and
// whether the receiver is at its limit.
func (o *outbound) stallState() (chan struct{}, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stall, o.pending.Load() >= o.limit
}
