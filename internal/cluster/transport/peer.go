package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/route"
)

// peer is the outbound side towards one server: its queue and its writer
// goroutine (run), which dials, writes and dials again.
type peer struct {
	t    *Transport
	name raftnode.ServerID
	wake chan struct{} // a token: frames were queued
	kick chan struct{} // a token: the address changed or went away; dial now, or tell Config.Gone

	mu struct {
		sync.Mutex
		addr   string   // where the peer listens; "" while no route names it
		id     string   // the server_id of its last route: a new one is a new process
		conn   net.Conn // the connection being dialed or written, for Close
		up     bool     // conn is past its handshake
		down   bool     // the last dial failed and no connection is up
		lost   bool     // a connection that was up ended, and Config.Gone was not told since
		q      [][]byte // frames waiting for the writer
		qBytes int
		beat   bool // q holds a liveness-only frame
		// rehello: Transport.Rehello asked for a new connection; the
		// writer ends the one it has at its next wake.
		rehello bool
	}
}

// errRehello ends a connection that Transport.Rehello asked to replace.
var errRehello = errors.New("transport: dialing again with a new hello")

// rehello makes the writer end its connection and dial again (Rehello).
func (p *peer) rehello() {
	p.mu.Lock()
	p.mu.rehello = true
	p.mu.Unlock()
	signal(p.wake)
}

// takeRehello reports, once, whether rehello was asked.
func (p *peer) takeRehello() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.mu.rehello
	p.mu.rehello = false
	return r
}

func newPeer(t *Transport, name raftnode.ServerID) *peer {
	return &peer{t: t, name: name, wake: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
}

// signal puts a token in ch unless one is there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// enqueue queues frame for the writer (Transport.Send).
func (p *peer) enqueue(frame []byte) error {
	beat := raftnode.BeatOnly(frame)
	p.mu.Lock()
	switch {
	case p.mu.addr == "" && !p.mu.up:
		p.mu.Unlock()
		return ErrUnknownPeer
	case p.mu.down:
		p.mu.Unlock()
		return ErrUnreachable
	case beat && p.mu.beat:
		p.mu.Unlock()
		return nil // a beat still waiting says the same
	case p.mu.qBytes > 0 && p.mu.qBytes+len(frame) > p.t.cfg.MaxQueueBytes:
		p.mu.Unlock()
		return ErrQueueFull
	}
	p.mu.q = append(p.mu.q, frame)
	p.mu.qBytes += len(frame)
	p.mu.beat = p.mu.beat || beat
	p.mu.Unlock()
	signal(p.wake)
	return nil
}

// setRoute records where the peer listens and its server_id, from its
// route ("" for both once no route names it). A new address clears the
// failed state and makes the writer dial at once. A new server_id is a
// new process under the peer's name: a connection still up goes to the
// one before, which is gone (its host may have died without a reset), so
// it is closed and the writer dials the new one.
func (p *peer) setRoute(addr, id string) {
	p.mu.Lock()
	moved := addr != "" && addr != p.mu.addr
	restarted := id != "" && p.mu.id != "" && id != p.mu.id
	p.mu.addr = addr
	if id != "" {
		p.mu.id = id
	}
	if moved || restarted {
		p.mu.down = false
	}
	if restarted && p.mu.conn != nil {
		_ = p.mu.conn.Close()
	}
	unrouted := addr == "" && !p.mu.up
	p.mu.Unlock()
	if moved || restarted || unrouted {
		signal(p.kick) // unrouted: the writer tells Config.Gone (gone), holding no lock
	}
}

// gone tells Config.Gone, once per lost connection, that the peer's
// process is evidently gone: the connection that was up ended and the
// peer's cluster port refused the redial, or no route names the peer any
// more. Either alone is no evidence: a connection ends on a network
// fault too, and a route can drop while the Raft connection is up.
func (p *peer) gone() {
	p.mu.Lock()
	fire := p.mu.lost
	p.mu.lost = false
	p.mu.Unlock()
	if fire && p.t.cfg.Gone != nil {
		p.t.cfg.Gone(p.name)
	}
}

// take hands the queued frames to the writer, swapping in spare.
func (p *peer) take(spare [][]byte) [][]byte {
	p.mu.Lock()
	q := p.mu.q
	p.mu.q, p.mu.qBytes, p.mu.beat = spare[:0], 0, false
	p.mu.Unlock()
	return q
}

// closeConn closes the connection being dialed or written (Close).
func (p *peer) closeConn() {
	p.mu.Lock()
	if p.mu.conn != nil {
		_ = p.mu.conn.Close()
	}
	p.mu.Unlock()
}

// setConn records nc as the peer's connection; false (nc closed) once the
// transport is closing, so Close never misses a connection.
func (p *peer) setConn(nc net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.t.closing() {
		_ = nc.Close()
		return false
	}
	p.mu.conn = nc
	return true
}

// setState records the outcome of a dial (up) or the end of a connection;
// a failed dial drops what was queued.
func (p *peer) setState(up, failed bool) {
	p.mu.Lock()
	p.mu.up, p.mu.down = up, failed
	if up {
		p.mu.lost = false
	} else {
		p.mu.conn = nil
	}
	if failed {
		clear(p.mu.q)
		p.mu.q, p.mu.qBytes, p.mu.beat = p.mu.q[:0], 0, false
	}
	p.mu.Unlock()
}

// run is the writer: while the transport is open, it dials the peer's
// current address, writes its frames until the connection breaks, and
// dials again, with a backoff after failed dials (package comment).
func (p *peer) run() {
	defer p.t.wg.Done()
	var backoff time.Duration
	failures := 0
	for !p.t.closing() {
		p.mu.Lock()
		addr := p.mu.addr
		p.mu.Unlock()
		if addr == "" {
			p.setState(false, false)
			p.gone()
			p.waitKick(0)
			continue
		}
		bw, err := p.connect(addr)
		if err != nil {
			failures++
			if p.t.closing() {
				return
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				p.gone()
			}
			switch {
			case failures == 1 && isRefusal(err, refusePeer):
				// Its route from this server is not registered there yet
				// (servers starting together): routine, not a stranger.
				p.t.cfg.Infof("transport: %s at %s does not know this server yet (its route from here is not registered there yet; dialing again)", p.name, addr)
			case failures == 1:
				p.t.cfg.Infof("transport: cannot reach %s at %s (attempt %d): %v", p.name, addr, failures, err)
			case failures%errorReportEvery == 0:
				p.t.cfg.Logf("transport: cannot reach %s at %s (attempt %d): %v", p.name, addr, failures, err)
			}
			p.setState(false, true)
			backoff = max(minBackoff, min(2*backoff, maxBackoff))
			if p.waitKick(backoff/2 + rand.N(backoff/2+1)) {
				backoff = 0
			}
			continue
		}
		failures, backoff = 0, 0
		p.setState(true, false)
		p.t.cfg.Infof("transport: connected to %s at %s", p.name, addr)
		err = p.pump(bw)
		p.closeConn()
		p.t.lost(p.name)
		again := errors.Is(err, errRehello)
		p.mu.Lock()
		p.mu.lost = !again
		p.mu.Unlock()
		p.setState(false, false)
		if !p.t.closing() && !again {
			p.t.cfg.Infof("transport: connection to %s lost: %v", p.name, err)
		}
	}
}

// waitKick waits for d (0: no limit), a kick or Close; it reports whether
// a kick came.
func (p *peer) waitKick(d time.Duration) bool {
	var timeout <-chan time.Time
	if d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-p.kick:
		return true
	case <-timeout:
	case <-p.t.quit:
	}
	return false
}

// connect dials addr and runs the dialer's side of the handshake (package
// comment, "Wire format"), with TLS first when the cluster port has it.
// It returns the connection's buffered writer.
func (p *peer) connect(addr string) (*connWriter, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	nc, err := d.DialContext(p.t.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if !p.setConn(nc) {
		return nil, ErrClosed
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	// p.mu.conn keeps the TCP connection: closing it ends a TLS one too,
	// without waiting to send TLS's close_notify.
	if nc, err = p.t.host.SecureClusterConn(nc, addr); err != nil {
		return nil, err
	}
	if err := p.handshake(nc); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return &connWriter{nc: nc, bw: bufio.NewWriterSize(nc, 64<<10)}, nil
}

// handshake reads the acceptor's INFO, checks it is the peer dialed, sends
// the hello and reads the answer.
func (p *peer) handshake(nc net.Conn) error {
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	r := bufio.NewReaderSize(nc, 4096)
	line, err := readLine(r, maxLine)
	if err != nil {
		return err
	}
	op, arg := splitLine(line)
	if !bytes.EqualFold(op, []byte("INFO")) {
		return fmt.Errorf("transport: expected INFO, got %q", op)
	}
	in, err := route.ParseInfo(arg)
	if err != nil {
		return err
	}
	if in.Name != string(p.name) {
		return fmt.Errorf("transport: the server there is %q, not %q", in.Name, p.name)
	}
	h := &hello{V: Version, Name: string(p.t.self), Cluster: p.t.host.ClusterName(), Inc: p.t.inc.Load().String(), Tags: p.t.cfg.Tags, Level: FeatureLevel}
	if p.t.cfg.Known != nil {
		for n, inc := range p.t.cfg.Known() {
			if h.Known == nil {
				h.Known = map[string]string{}
			}
			h.Known[string(n)] = inc.String()
		}
	}
	if p.t.cfg.Meta != nil {
		h.Meta = p.t.cfg.Meta()
	}
	if p.t.cfg.Members != nil {
		h.Members = p.t.cfg.Members()
	}
	if in.AuthRequired {
		h.User, h.Pass = p.t.host.ClusterCredentials()
	}
	if _, err := nc.Write(appendHello(nil, h)); err != nil {
		return err
	}
	if line, err = readLine(r, maxLine); err != nil {
		return err
	}
	if op, arg = splitLine(line); !bytes.Equal(op, []byte("+OK")) {
		return &refusedError{op: string(op), arg: string(arg)}
	}
	return nc.SetDeadline(time.Time{})
}

// refusedError is the acceptor's -ERR answer to this server's hello
// (package comment, "Admission").
type refusedError struct{ op, arg string }

func (e *refusedError) Error() string { return "transport: refused: " + e.op + " " + e.arg }

// isRefusal reports whether err is the acceptor's refusal with text why.
func isRefusal(err error, why string) bool {
	var r *refusedError
	return errors.As(err, &r) && strings.Trim(r.arg, "'") == why
}

// connWriter is a connection past its handshake and its buffered writer.
type connWriter struct {
	nc net.Conn
	bw *bufio.Writer
}

// pump writes queued frames to cw until the connection fails or the
// transport closes: it takes the whole queue, writes it, takes again, and
// flushes when the queue is empty, so frames queued together leave
// together.
func (p *peer) pump(cw *connWriter) error {
	var q [][]byte
	var hdr [frameHeader]byte
	for {
		q = p.take(q)
		if len(q) == 0 {
			if cw.bw.Buffered() > 0 {
				_ = cw.nc.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
				if err := cw.bw.Flush(); err != nil {
					return err
				}
				continue
			}
			select {
			case <-p.wake:
				if p.takeRehello() {
					return errRehello
				}
				continue
			case <-p.t.quit:
				return ErrClosed
			}
		}
		_ = cw.nc.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
		for i, f := range q {
			_, _ = cw.bw.Write(appendFrameHeader(hdr[:0], len(f)))
			if _, err := cw.bw.Write(f); err != nil {
				clear(q)
				return err
			}
			q[i] = nil
		}
	}
}
