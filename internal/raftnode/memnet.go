package raftnode

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Receiver takes frames from a network: *Node is one.
type Receiver interface {
	Receive(from ServerID, frame []byte) error
}

// MemNetwork is an in-memory network between Nodes, for tests. Frames wait
// in flight until delivered: by hand (Deliver, DeliverAll: a
// single-goroutine test chooses the order, drops and duplicates), or by
// the goroutine Run. Faults, per directed link: cut (one way; Partition
// cuts both ways), drop with a probability, delay. A cut also drops the
// frames already in flight on that link when they are delivered. Sends
// never fail: like a real network, a lost frame is silent. A frame holding
// only a liveness beat is not queued behind another such frame on the same
// link (a transport should not queue redundant beats either).
type MemNetwork struct {
	mu       sync.Mutex
	rand     *rand.Rand
	now      func() time.Time
	nodes    map[ServerID]Receiver
	inflight []memFrame
	cut      map[link]bool
	drop     map[link]float64
	delay    map[link]time.Duration
	wake     chan struct{}
}

type link struct{ from, to ServerID }

type memFrame struct {
	from, to ServerID
	frame    []byte
	due      time.Time
}

// NewMemNetwork returns an empty network whose random choices (drops)
// come from seed and whose delays are measured by now (time.Now if nil).
func NewMemNetwork(seed uint64, now func() time.Time) *MemNetwork {
	if now == nil {
		now = time.Now
	}
	return &MemNetwork{
		rand: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: now,
		nodes: map[ServerID]Receiver{}, cut: map[link]bool{}, drop: map[link]float64{},
		delay: map[link]time.Duration{}, wake: make(chan struct{}, 1),
	}
}

// Attach makes r the receiver of frames sent to id (replacing any
// earlier one: a restarted node).
func (m *MemNetwork) Attach(id ServerID, r Receiver) {
	m.mu.Lock()
	m.nodes[id] = r
	m.mu.Unlock()
}

// Detach removes id's receiver: frames to it are lost (a crashed server).
func (m *MemNetwork) Detach(id ServerID) {
	m.mu.Lock()
	delete(m.nodes, id)
	m.mu.Unlock()
}

// Transport returns the Transport of server self.
func (m *MemNetwork) Transport(self ServerID) Transport { return memTransport{m: m, self: self} }

type memTransport struct {
	m    *MemNetwork
	self ServerID
}

// Send queues a copy of frame for to (never fails; see MemNetwork).
func (t memTransport) Send(to ServerID, frame []byte) error {
	t.m.send(t.self, to, frame)
	return nil
}

func (m *MemNetwork) send(from, to ServerID, frame []byte) {
	m.mu.Lock()
	l := link{from, to}
	if m.cut[l] || (m.drop[l] > 0 && m.rand.Float64() < m.drop[l]) {
		m.mu.Unlock()
		return
	}
	if beatOnly(frame) && slices.ContainsFunc(m.inflight, func(f memFrame) bool {
		return f.from == from && f.to == to && beatOnly(f.frame)
	}) {
		m.mu.Unlock()
		return // a beat already on its way says the same
	}
	m.inflight = append(m.inflight, memFrame{from: from, to: to, frame: slices.Clone(frame), due: m.now().Add(m.delay[l])})
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Cut drops every frame from from to to, until Heal.
func (m *MemNetwork) Cut(from, to ServerID) {
	m.mu.Lock()
	m.cut[link{from, to}] = true
	m.mu.Unlock()
}

// Partition cuts both directions between a and b.
func (m *MemNetwork) Partition(a, b ServerID) {
	m.Cut(a, b)
	m.Cut(b, a)
}

// Heal removes the cut from from to to.
func (m *MemNetwork) Heal(from, to ServerID) {
	m.mu.Lock()
	delete(m.cut, link{from, to})
	m.mu.Unlock()
}

// HealAll removes every cut, drop rate and delay.
func (m *MemNetwork) HealAll() {
	m.mu.Lock()
	clear(m.cut)
	clear(m.drop)
	clear(m.delay)
	m.mu.Unlock()
}

// SetDrop makes frames from from to to be lost with probability p.
func (m *MemNetwork) SetDrop(from, to ServerID, p float64) {
	m.mu.Lock()
	m.drop[link{from, to}] = p
	m.mu.Unlock()
}

// SetDelay holds frames from from to to for d before they are due.
func (m *MemNetwork) SetDelay(from, to ServerID, d time.Duration) {
	m.mu.Lock()
	m.delay[link{from, to}] = d
	m.mu.Unlock()
}

// InFlight returns the number of frames in flight.
func (m *MemNetwork) InFlight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.inflight)
}

// Deliver delivers the i-th frame in flight (0 is the oldest), due or
// not, unless its link is cut now or its receiver is gone. It reports
// whether a frame was handed to a receiver.
func (m *MemNetwork) Deliver(i int) bool {
	m.mu.Lock()
	if i < 0 || i >= len(m.inflight) {
		m.mu.Unlock()
		return false
	}
	f := m.inflight[i]
	m.inflight = slices.Delete(m.inflight, i, i+1)
	r := m.nodes[f.to]
	ok := r != nil && !m.cut[link{f.from, f.to}]
	m.mu.Unlock()
	if ok {
		_ = r.Receive(f.from, f.frame)
	}
	return ok
}

// Drop loses the i-th frame in flight.
func (m *MemNetwork) Drop(i int) {
	m.mu.Lock()
	if i >= 0 && i < len(m.inflight) {
		m.inflight = slices.Delete(m.inflight, i, i+1)
	}
	m.mu.Unlock()
}

// Duplicate puts a copy of the i-th frame in flight at the end.
func (m *MemNetwork) Duplicate(i int) {
	m.mu.Lock()
	if i >= 0 && i < len(m.inflight) {
		f := m.inflight[i]
		f.frame = slices.Clone(f.frame)
		m.inflight = append(m.inflight, f)
	}
	m.mu.Unlock()
}

// DeliverAll delivers, oldest first, every frame in flight that is due
// now, including frames sent by the receivers meanwhile if they are due.
// It returns how many frames it took.
func (m *MemNetwork) DeliverAll() int {
	n := 0
	for {
		i := m.nextDue()
		if i < 0 {
			return n
		}
		m.Deliver(i)
		n++
	}
}

// nextDue returns the index of the oldest due frame, or -1.
func (m *MemNetwork) nextDue() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for i, f := range m.inflight {
		if !f.due.After(now) {
			return i
		}
	}
	return -1
}

// Run delivers frames as they fall due until stop is closed (the
// goroutine of an asynchronous test; it works under testing/synctest).
func (m *MemNetwork) Run(stop <-chan struct{}) {
	for {
		m.DeliverAll()
		wait := m.untilNextDue()
		var t *time.Timer
		var timer <-chan time.Time
		if wait >= 0 {
			t = time.NewTimer(wait)
			timer = t.C
		}
		select {
		case <-stop:
			if t != nil {
				t.Stop()
			}
			return
		case <-m.wake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// untilNextDue returns how long until the earliest frame in flight is due
// (-1: none in flight).
func (m *MemNetwork) untilNextDue() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.inflight) == 0 {
		return -1
	}
	now := m.now()
	d := time.Duration(1<<63 - 1)
	for _, f := range m.inflight {
		d = min(d, max(0, f.due.Sub(now)))
	}
	return d
}
