package faults

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Net is the loopback network between the servers of a Cluster: one
// byte-forwarding TCP proxy in front of each server's cluster port, which
// every server advertises and lists in its routes instead of the real
// port, so that every route and Raft connection passes a proxy. Net holds
// the bytes of chosen directions (from one server to another): a held
// direction is not read, so TCP buffers fill and the sender's writes
// stall, as in a network partition where packets are dropped and
// retransmitted; Heal lets the held bytes through in order. Nothing is
// dropped, so the protocols' framing survives a heal.
//
// The dialing server of an accepted connection is found from the
// operating system's socket table (Linux /proc): the process holding the
// other end of the connection. A connection whose dialer is not found is
// counted in Unknown and never held.
type Net struct {
	mu      sync.Mutex
	cond    *sync.Cond
	held    map[[2]string]bool // (from, to) server names
	owners  func() map[int]string
	proxies []*proxy
	unknown int
	sh      Shape // the network now
	base    Shape // the network Heal restores
	resets  int
}

// Shape is a bad network applied to every direction between servers
// (Net.Shape): each proxied read is delivered Delay plus a random part of
// Jitter after it was read, in order; with probability StallProb a read
// waits StallMin to StallMax more first (a lost packet retransmitted);
// each connection is reset (both sockets closed) after a random time of
// mean ResetMean once bytes flow; and each direction of each connection
// carries at most Rate bytes a second. The zero Shape is a good network.
type Shape struct {
	Delay, Jitter      time.Duration
	StallProb          float64
	StallMin, StallMax time.Duration
	ResetMean          time.Duration
	Rate               int
}

func newNet(owners func() map[int]string) *Net {
	n := &Net{held: map[[2]string]bool{}, owners: owners}
	n.cond = sync.NewCond(&n.mu)
	return n
}

// Hold stops the bytes going from server from to server to.
func (n *Net) Hold(from, to string) {
	n.mu.Lock()
	n.held[[2]string{from, to}] = true
	n.mu.Unlock()
}

// SetBase makes the network between servers bad as sh says for good:
// Heal restores it rather than a good network.
func (n *Net) SetBase(sh Shape) {
	n.mu.Lock()
	n.sh, n.base = sh, sh
	n.mu.Unlock()
}

// Shape makes the network between servers bad as sh says, until Heal.
func (n *Net) Shape(sh Shape) {
	n.mu.Lock()
	n.sh = sh
	n.mu.Unlock()
}

func (n *Net) shape() Shape {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sh
}

// Resets returns how many connections a Shape's ResetMean has reset.
func (n *Net) Resets() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.resets
}

// Heal lets every held direction through again and makes the network
// as good as SetBase left it.
func (n *Net) Heal() {
	n.mu.Lock()
	n.sh = n.base
	n.held = map[[2]string]bool{}
	n.cond.Broadcast()
	n.mu.Unlock()
}

// Unknown returns how many accepted connections had no known dialer.
func (n *Net) Unknown() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unknown
}

// wait blocks while the direction from → to is held or the proxy closed.
func (n *Net) wait(from, to string, p *proxy) {
	n.mu.Lock()
	for n.held[[2]string{from, to}] && !p.closed {
		n.cond.Wait()
	}
	n.mu.Unlock()
}

// proxy forwards connections accepted on ln to target, the cluster port
// of the server named name.
type proxy struct {
	net    *Net
	name   string
	target string // under net.mu
	ln     net.Listener
	closed bool // under net.mu
	conns  map[net.Conn]bool
}

func (n *Net) addProxy(name, target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{net: n, name: name, target: target, ln: ln, conns: map[net.Conn]bool{}}
	n.mu.Lock()
	n.proxies = append(n.proxies, p)
	n.mu.Unlock()
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// setTarget sets the address the proxy forwards to.
func (p *proxy) setTarget(addr string) {
	p.net.mu.Lock()
	p.target = addr
	p.net.mu.Unlock()
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(c net.Conn) {
	dialer := p.dialer(c)
	p.net.mu.Lock()
	target := p.target
	p.net.mu.Unlock()
	t, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	n := p.net
	n.mu.Lock()
	if p.closed {
		n.mu.Unlock()
		c.Close()
		t.Close()
		return
	}
	p.conns[c], p.conns[t] = true, true
	n.mu.Unlock()
	done := make(chan struct{}, 2)
	go p.pump(c, t, dialer, p.name, done)
	go p.pump(t, c, p.name, dialer, done)
	<-done
	c.Close()
	t.Close()
	<-done
	n.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, t)
	n.mu.Unlock()
}

// chunk is a read of a pump, with when it was read.
type chunk struct {
	b  []byte
	at time.Time
}

// pump copies src to dst, holding the bytes while from → to is held and
// shaping them as the Net's Shape says. A reader stamps each read and
// queues it (at most pumpQueue reads); the writer delivers them in order,
// each no sooner than its read time plus the delay, so that a delay is
// latency, not a cap on throughput.
func (p *proxy) pump(src, dst net.Conn, from, to string, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	q := make(chan chunk, pumpQueue)
	go func() {
		defer close(q)
		for {
			p.net.wait(from, to, p)
			buf := make([]byte, 32<<10)
			k, err := src.Read(buf)
			if k > 0 {
				q <- chunk{buf[:k], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	var due, nextReset time.Time
	for ch := range q {
		sh := p.net.shape()
		d := sh.Delay
		if sh.Jitter > 0 {
			d += rand.N(sh.Jitter)
		}
		if t := ch.at.Add(d); t.After(due) {
			due = t
		}
		time.Sleep(time.Until(due))
		if sh.StallProb > 0 && rand.Float64() < sh.StallProb {
			time.Sleep(sh.StallMin + rand.N(sh.StallMax-sh.StallMin+1))
		}
		if sh.ResetMean > 0 {
			now := time.Now()
			if nextReset.IsZero() {
				nextReset = now.Add(time.Duration(rand.ExpFloat64() * float64(sh.ResetMean)))
			} else if now.After(nextReset) {
				p.net.mu.Lock()
				p.net.resets++
				p.net.mu.Unlock()
				src.Close()
				dst.Close()
				for range q { // the reader ends on the closed socket
				}
				return
			}
		} else {
			nextReset = time.Time{}
		}
		p.net.wait(from, to, p)
		if _, err := dst.Write(ch.b); err != nil {
			src.Close()
			for range q {
			}
			return
		}
		if sh.Rate > 0 {
			time.Sleep(time.Duration(float64(len(ch.b)) / float64(sh.Rate) * float64(time.Second)))
		}
	}
}

// pumpQueue is how many reads a pump holds between its reader and writer.
const pumpQueue = 16

// close stops the proxy and closes its connections.
func (p *proxy) close() {
	n := p.net
	n.mu.Lock()
	p.closed = true
	n.cond.Broadcast()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}

// dialer names the server process that holds the other end of c, or "?".
func (p *proxy) dialer(c net.Conn) string {
	remote, ok := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if ok && ok2 {
		if inode := socketInode(remote.Port, local.Port); inode != "" {
			for pid, name := range p.net.owners() {
				if holdsSocket(pid, inode) {
					return name
				}
			}
		}
	}
	p.net.mu.Lock()
	p.net.unknown++
	p.net.mu.Unlock()
	return "?"
}

// socketInode finds in /proc/net/tcp the inode of the IPv4 loopback
// socket whose local port is lport and remote port rport.
func socketInode(lport, rport int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := fmt.Sprintf("0100007F:%04X 0100007F:%04X", lport, rport)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1]+" "+fields[2] == want {
			return fields[9]
		}
	}
	return ""
}

// holdsSocket reports whether process pid has the socket inode open.
func holdsSocket(pid int, inode string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil && err != io.EOF {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, name := range names {
		if l, err := os.Readlink(filepath.Join(dir, name)); err == nil && l == want {
			return true
		}
	}
	return false
}
