package server

import (
	"bufio"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/logger"
)

// startClusterServer starts a server with a cluster listener on a free
// loopback port, routing to routes.
func startClusterServer(t *testing.T, name, cluster string, routes ...string) *Server {
	t.Helper()
	return startServer(t, clusterTestOptions(t, name, cluster, routes...))
}

// clusterTestOptions are the options of startClusterServer.
func clusterTestOptions(t *testing.T, name, cluster string, routes ...string) Options {
	t.Helper()
	o := Options{ServerName: name}
	o.Cluster = ClusterOptions{Host: "127.0.0.1", Port: RandomPort, Name: cluster}
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil {
			t.Fatal(err)
		}
		o.Cluster.Routes = append(o.Cluster.Routes, u)
	}
	return o
}

// waitCond polls cond until it holds or 10 s pass.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClusterConnHandoff: a cluster-port connection whose first line is a
// registered operation goes to its handler with every byte read so far,
// after the route INFO (docs/routes.md, "The cluster port": the Raft
// transport shares the cluster port).
func TestClusterConnHandoff(t *testing.T) {
	o := Options{Host: "127.0.0.1", Port: RandomPort}
	o.Cluster = ClusterOptions{Host: "127.0.0.1", Port: RandomPort, Name: "C"}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	s.HandleClusterConns("raft", func(nc net.Conn, buffered []byte) {
		defer nc.Close()
		_, _ = nc.Write([]byte("OK\r\n"))
		got <- string(buffered)
	})
	s.HandleClusterConns("CONNECT", func(net.Conn, []byte) { t.Error("CONNECT was handed off") })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	nc, err := net.Dial("tcp", s.ClusterAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := nc.Write([]byte("RAFT {\"v\":1}\r\nmore")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "OK\r\n" {
		t.Fatalf("handler reply %q, %v", line, err)
	}
	if b := <-got; !strings.HasPrefix(b, "RAFT {\"v\":1}\r\n") {
		t.Fatalf("handler got %q", b)
	}
	if s.NumRoutes() != 0 {
		t.Fatalf("%d routes", s.NumRoutes())
	}
}

// TestClusterDynamicName: servers started without a cluster name agree on
// one (the largest of their generated names) and form a mesh, as
// nats-server does.
func TestClusterDynamicName(t *testing.T) {
	a := startClusterServer(t, "a", "")
	b := startClusterServer(t, "b", "", a.ClusterURL())
	c := startClusterServer(t, "c", "", a.ClusterURL())
	servers := []*Server{a, b, c}
	waitCond(t, "a mesh under one name", func() bool {
		for _, s := range servers {
			if s.NumRoutes() != 2 || s.ClusterName() != a.ClusterName() {
				return false
			}
		}
		return true
	})
	for _, s := range servers {
		if s.ClusterName() < b.ClusterName() || s.ClusterName() < c.ClusterName() {
			t.Fatalf("names %q %q %q", a.ClusterName(), b.ClusterName(), c.ClusterName())
		}
	}
}

// TestClusterNameConflict: servers with different configured names never
// form a route.
func TestClusterNameConflict(t *testing.T) {
	a := startClusterServer(t, "a", "ONE")
	b := startClusterServer(t, "b", "TWO", a.ClusterURL())
	c := startClusterServer(t, "c", "ONE", a.ClusterURL())
	waitCond(t, "c to join a", func() bool { return c.NumRoutes() == 1 && a.NumRoutes() == 1 })
	if b.NumRoutes() != 0 || a.NumRoutes() != 1 {
		t.Fatalf("b has %d routes, a has %d", b.NumRoutes(), a.NumRoutes())
	}
}

// TestClusterRouteToSelf: a server that lists its own cluster URL among
// its routes (the usual way to give every server the same list) drops it,
// as nats-server v2.15.2 does: quietly, with the reason Duplicate Route.
func TestClusterRouteToSelf(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	out := &syncWriter{}
	o := Options{Host: "127.0.0.1", Port: RandomPort, Logger: logger.New(out, false, false)}
	u, _ := url.Parse("nats://127.0.0.1:" + strconv.Itoa(port))
	o.Cluster = ClusterOptions{Host: "127.0.0.1", Port: port, Name: "C", Routes: []*url.URL{u}}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Skipf("port %d taken meanwhile: %v", port, err)
	}
	defer s.Shutdown()
	other := startClusterServer(t, "other", "C", s.ClusterURL())
	waitCond(t, "the route to the other server", func() bool { return s.NumRoutes() == 1 && other.NumRoutes() == 1 })
	waitCond(t, "the route to self to be gone", func() bool {
		s.cl.mu.Lock()
		defer s.cl.mu.Unlock()
		return len(s.cl.conns) == 1
	})
	wantConnLines(t, "the server", out.String(), "Router connection closed",
		"[INF] Route connection created",
		"[INF] Router connection closed: Duplicate Route")
}

// TestClusterOptionsValidate checks nats-server's refusals.
func TestClusterOptionsValidate(t *testing.T) {
	u, _ := url.Parse("nats://127.0.0.1:6222")
	cases := []struct {
		name string
		o    ClusterOptions
		want string
	}{
		{"routes without cluster", ClusterOptions{Routes: []*url.URL{u}}, "solicited routes require cluster capabilities, e.g. --cluster"},
		{"name with space", ClusterOptions{Port: 6222, Name: "a b"}, "cluster name cannot contain spaces or new lines"},
		{"bad advertise", ClusterOptions{Port: 6222, Advertise: "h:p"}, "cluster advertise"},
	}
	for _, tc := range cases {
		o := Options{Cluster: tc.o}
		err := o.Validate()
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	o := Options{Cluster: ClusterOptions{Port: 6222}}
	if err := o.Validate(); err != nil || o.Cluster.Host != DefaultHost {
		t.Fatalf("defaults: %v, host %q", err, o.Cluster.Host)
	}
	// A negative connect_retries means 0, as in nats-server v2.15.2.
	o = Options{Cluster: ClusterOptions{Port: 6222, ConnectRetries: -3}}
	if err := o.Validate(); err != nil {
		t.Fatalf("negative connect_retries: %v", err)
	}
}

// TestClusterRouteAuth: a cluster port with credentials (--cluster
// nats://user:pass@host:port) takes routes whose URL carries them and
// refuses the others with 'Authorization Violation'.
func TestClusterRouteAuth(t *testing.T) {
	o := Options{Host: "127.0.0.1", Port: RandomPort, ServerName: "a"}
	o.Cluster = ClusterOptions{Host: "127.0.0.1", Port: RandomPort, Name: "C", Username: "ruser", Password: "s3cret"}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	port := strconv.Itoa(a.ClusterAddr().Port)
	bad := startClusterServer(t, "bad", "C", "nats://ruser:wrong@127.0.0.1:"+port)
	good := startClusterServer(t, "good", "C", "nats://ruser:s3cret@127.0.0.1:"+port)
	waitCond(t, "the route with credentials", func() bool { return good.NumRoutes() == 1 && a.NumRoutes() == 1 })
	for _, p := range a.ClusterPeers() {
		if p.Name != "good" {
			t.Fatalf("a routes to %q", p.Name)
		}
	}
	// The soliciting side counts its route from the INFO it receives,
	// before its CONNECT is refused (as nats-server's does): on a loaded
	// machine the check can come in between. The refusal then ends it.
	waitCond(t, "the route with bad credentials closed", func() bool { return bad.NumRoutes() == 0 })

	nc, err := net.Dial("tcp", a.ClusterAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if line, _ := r.ReadString('\n'); !strings.Contains(line, `"auth_required":true`) {
		t.Fatalf("route INFO %q lacks auth_required", line)
	}
	_, _ = nc.Write([]byte(`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"NX","cluster":"C"}` + "\r\n"))
	if line, _ := r.ReadString('\n'); line != "-ERR 'Authorization Violation'\r\n" {
		t.Fatalf("got %q", line)
	}
}

// TestClusterPeers: ClusterPeers lists each routed server by name and
// server_id with the address its cluster listener is reached at, and
// NotifyClusterPeers callbacks run when a route registers and when it
// goes (docs/routes.md, "The cluster port": the Raft transport dials
// peers there). ClusterAuthOK holds other cluster-port connections to the
// route rule.
func TestClusterPeers(t *testing.T) {
	o := Options{Host: "127.0.0.1", Port: RandomPort, ServerName: "a"}
	o.Cluster = ClusterOptions{Host: "127.0.0.1", Port: RandomPort, Name: "C", Username: "u", Password: "p"}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan []string, 16)
	a.NotifyClusterPeers(func() {
		var names []string
		for _, p := range a.ClusterPeers() {
			names = append(names, p.Name)
		}
		changes <- names
	})
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b := startClusterServer(t, "b", "C", "nats://u:p@"+a.ClusterAddr().String())
	waitCond(t, "the route", func() bool { return a.NumRoutes() == 1 })
	if got := <-changes; len(got) != 1 || got[0] != "b" {
		t.Fatalf("peers after the route registered: %v", got)
	}
	ps := a.ClusterPeers()
	if len(ps) != 1 || ps[0].Name != "b" || ps[0].ID != b.ID() || ps[0].Addr != b.ClusterAddr().String() {
		t.Fatalf("peers %+v, want b at %s", ps, b.ClusterAddr())
	}
	if !a.ClusterAuthOK("u", "p") || a.ClusterAuthOK("u", "x") || a.ClusterAuthOK("", "") {
		t.Fatal("ClusterAuthOK does not apply the route rule")
	}
	if u, p := a.ClusterCredentials(); u != "u" || p != "p" {
		t.Fatalf("credentials %q %q", u, p)
	}
	b.Shutdown()
	waitCond(t, "the route to go", func() bool { return a.NumRoutes() == 0 })
	select {
	case got := <-changes:
		if len(got) != 0 {
			t.Fatalf("peers after the route went: %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no callback when the route went")
	}
}

// TestStatsRemotes: /varz remotes counts the servers with a route up, as
// nats-server v2.15.2's numRemotes, not the configured route URLs (a
// route to a server that is down is not a remote).
func TestStatsRemotes(t *testing.T) {
	a := startClusterServer(t, "a", "C")
	defer a.Shutdown()
	addr := a.ClusterAddr().String()
	b := startClusterServer(t, "b", "C", "nats://"+addr, "nats://127.0.0.1:1")
	defer b.Shutdown()
	waitCond(t, "the route", func() bool { return b.Stats().Remotes == 1 && a.Stats().Remotes == 1 })
	b.Shutdown()
	waitCond(t, "the route gone", func() bool { return a.Stats().Remotes == 0 })
}
