package faults

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// Heal lets every held direction through again.
func (n *Net) Heal() {
	n.mu.Lock()
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

// pump copies src to dst, holding the bytes while from → to is held.
func (p *proxy) pump(src, dst net.Conn, from, to string, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	buf := make([]byte, 32<<10)
	for {
		p.net.wait(from, to, p)
		k, err := src.Read(buf)
		if k > 0 {
			p.net.wait(from, to, p)
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

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
