package transport_test

import (
	"bufio"
	. "github.com/cairnmq/cairn/internal/cluster/transport"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/server"
)

var _ Host = (*server.Server)(nil)

// member is one server of a test cluster and its transport.
type member struct {
	name string
	srv  *server.Server
	tr   *Transport
}

// cred is the cluster credentials of a test server ("" for none).
type cred struct{ user, pass string }

// startMember starts a server named name in cluster "C" on loopback, with
// the cluster credentials c and routes to the given URLs, and its
// transport (constructed before Start, as HandleClusterConns requires)
// with cfg; a nil cfg starts no transport.
func startMember(t testing.TB, name string, c cred, cfg *Config, routes ...string) *member {
	t.Helper()
	return startMemberWith(t, name, func(o *server.ClusterOptions) { o.Username, o.Password = c.user, c.pass }, cfg, routes...)
}

// startMemberWith is startMember with mod setting the cluster options.
func startMemberWith(t testing.TB, name string, mod func(o *server.ClusterOptions), cfg *Config, routes ...string) *member {
	t.Helper()
	o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: name}
	o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: server.RandomPort, Name: "C"}
	mod(&o.Cluster)
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil {
			t.Fatal(err)
		}
		o.Cluster.Routes = append(o.Cluster.Routes, u)
	}
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, srv: srv}
	if cfg != nil {
		if cfg.Logf == nil {
			cfg.Logf = func(f string, a ...any) { t.Logf(name+": "+f, a...) }
		}
		m.tr = New(srv, *cfg)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.stop)
	return m
}

// stop closes the transport, then shuts the server down.
func (m *member) stop() {
	if m.tr != nil {
		m.tr.Close()
	}
	m.srv.Shutdown()
}

// routeURL returns the member's cluster URL with credentials c.
func (m *member) routeURL(c cred) string {
	u := m.srv.ClusterURL()
	if c.user == "" {
		return u
	}
	return strings.Replace(u, "nats://", "nats://"+c.user+":"+c.pass+"@", 1)
}

// waitFor polls cond until it holds or 20 s pass (a deadline, not a sleep
// standing for an event: CI machines are loaded).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRoutes waits until every member has a route to every other.
func waitRoutes(t *testing.T, ms ...*member) {
	t.Helper()
	waitFor(t, "the route mesh", func() bool {
		for _, m := range ms {
			if m.srv.NumRoutes() != len(ms)-1 {
				return false
			}
		}
		return true
	})
}

// recorder is a raftnode.Receiver that keeps every frame.
type recorder struct {
	mu     sync.Mutex
	frames []string
	from   []raftnode.ServerID
	err    error // returned by Receive
}

func (r *recorder) Receive(from raftnode.ServerID, frame []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, string(frame))
	r.from = append(r.from, from)
	return r.err
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.frames...)
}

// rawConn dials m's cluster port and reads its INFO: a peer speaking the
// transport's wire format by hand.
func rawConn(t *testing.T, m *member) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", m.srv.ClusterAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(nc)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	return nc, r
}

// sayHello sends h and returns the answer line.
func sayHello(t *testing.T, nc net.Conn, r *bufio.Reader, h *Hello) string {
	t.Helper()
	if _, err := nc.Write(AppendHello(nil, h)); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("answer to the hello: %v", err)
	}
	return line
}

// closedByPeer reports whether the peer closed nc (a read ends in EOF or
// a reset) within the connection's deadline.
func closedByPeer(r *bufio.Reader) bool {
	_, err := r.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}
