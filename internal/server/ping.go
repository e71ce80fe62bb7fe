package server

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/protocol"
)

// pingState runs the server-side keep-alive of one client (docs/protocol.md
// 1.9: ping_interval, ping_max). Fields are guarded by mu; the timer
// callback runs on its own goroutine.
type pingState struct {
	mu       sync.Mutex
	timer    *time.Timer
	out      int           // PINGs sent and not yet answered
	answered bool          // a PONG has been received at least once
	armed    time.Duration // the delay the timer was last armed with
	stopped  bool
	sentAt   time.Time // when the oldest unanswered PING was sent, for the RTT
	// sent and recvd count every PING sent and PONG received, and wake
	// is closed at the next PONG: a flush (flushRoute) waits for the
	// PONG of its own PING, the peer answering PINGs in order.
	sent, recvd uint64
	wake        chan struct{}
}

// firstPingMax caps the delay of the first PING after a CONNECT, so a
// dead client is found early (nats-server v2.15.2, setFirstPingTimer:
// firstClientPingInterval).
const firstPingMax = 2 * time.Second

// start arms the keep-alive when the connection is accepted, at the full
// interval: a client still in its handshake (CONNECT, then PING, waiting
// for PONG) must not get a PING first, which nats.go reports as
// "expected 'PONG', got 'PING'" (nats-server v2.15.2, createClientEx:
// setPingTimer).
func (p *pingState) start(c *client, interval time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = interval
	p.timer = time.AfterFunc(interval, func() { p.tick(c) })
}

// connected re-arms the keep-alive after a CONNECT: the first PING comes
// within firstPingMax (or the interval, if shorter) plus up to a fifth of
// that, random, so clients that connected together are not pinged
// together (nats-server v2.15.2, processConnect: setFirstPingTimer).
func (p *pingState) connected(interval time.Duration) {
	d := min(interval, firstPingMax)
	if d >= 5 {
		d += rand.N(d / 5)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.timer == nil {
		return
	}
	p.armed = d
	p.timer.Reset(d)
}

// tick sends a PING, or closes the client with 'Stale Connection' when
// MaxPingsOut PINGs are unanswered. Like nats-server v2.15.2
// (processPingTimer), it skips the PING when the client has answered
// before and sent data within the interval. The interval and MaxPingsOut
// are read at each tick, so a reload changes them from the next one.
func (p *pingState) tick(c *client) {
	lim := c.srv.limits()
	interval := lim.PingInterval
	if c.route != nil {
		interval = min(interval, routeMaxPingInterval)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	idle := time.Since(time.Unix(0, c.lastIn.Load()))
	if !p.answered || idle >= interval {
		if p.out+1 > lim.MaxPingsOut {
			c.setReason(ReasonStaleConnection)
			c.countStale()
			c.log.Debugf("%s - cid:%d - Stale Client Connection - Closing", c.addr, c.cid)
			c.out.appendBytes(protocol.AppendErr(nil, "Stale Connection"))
			c.out.markClosing()
			return
		}
		if p.out == 0 {
			p.sentAt = time.Now()
		}
		p.out++
		p.sent++
		if !c.out.appendBytes([]byte(protocol.PingLine)) {
			c.closeSlowConsumer()
			return
		}
		c.out.signal()
	}
	p.armed = interval
	p.timer.Reset(interval)
}

// pong records a PONG and, when it answers a PING, the round trip time
// (nats-server's rtt in /connz).
func (p *pingState) pong(c *client) {
	p.mu.Lock()
	if p.out > 0 && !p.sentAt.IsZero() {
		c.rtt.Store(max(int64(time.Since(p.sentAt)), 1))
	}
	p.out = 0
	p.answered = true
	p.recvd++
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	p.mu.Unlock()
}

func (p *pingState) stop() {
	p.mu.Lock()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	p.mu.Unlock()
}
