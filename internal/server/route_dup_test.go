package server

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/route"
)

// fakePeer plays a cluster server named "fake" with server_id id, towards
// the server s: it is the end of a route s dialed (d) and dials s itself
// (e), so that s holds two connections to one peer, as when two servers
// dial each other at once.
type fakePeer struct {
	t    *testing.T
	id   string
	port int      // the port fake's INFO gives: its listener's
	d    net.Conn // the route s dialed
	e    net.Conn // the route fake dialed
}

func (p *fakePeer) info() []byte {
	return route.AppendInfo(nil, &route.Info{ID: p.id, Name: "fake", Host: "127.0.0.1", Port: p.port, Headers: true, Cluster: "C"})
}

// dialIn dials s's cluster port and sends CONNECT and INFO, after s's INFO.
func (p *fakePeer) dialIn(s *Server) {
	p.t.Helper()
	e, err := net.Dial("tcp", s.ClusterAddr().String())
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { e.Close() })
	p.e = e
	_ = e.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(e).ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		p.t.Fatalf("first line %q, %v", line, err)
	}
	b := route.AppendConnect(nil, &route.Connect{Echo: true, Headers: true, Name: p.id, Cluster: "C"})
	if _, err := e.Write(append(b, p.info()...)); err != nil {
		p.t.Fatal(err)
	}
}

// startFakePeer starts s (named "a", logging to the returned writer) with
// an explicit route to a listener played by fake, and accepts s's dial.
func startFakePeer(t *testing.T, id string) (*fakePeer, *Server, *syncWriter) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := &fakePeer{t: t, id: id, port: ln.Addr().(*net.TCPAddr).Port}
	s, out := startLoggedClusterServer(t, "a", "", "", "nats://"+ln.Addr().String())
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	if p.d, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.d.Close() })
	return p, s, out
}

// When two servers dial each other at once, each holds two connections to
// the other and both keep the one dialed by the server with the smaller
// server_id. The other one closes on both servers with nats-server
// v2.15.2's reason, Duplicate Route (route.go processRouteInfo:
// closeConnection(DuplicateRoute)), whether it is refused as it registers
// or replaces the one registered first; never as a Parse Error (no byte
// was refused) or a Read Error. Here s ("a") first registers the route
// fake dialed, then reads fake's INFO on the route s dialed.
func TestRouteDuplicateClosesAsDuplicateRoute(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string // fake's server_id: below or above every generated one ("N...")
		kept string // "dialed": the route s dialed is kept; "accepted": fake's
	}{
		{"peer with the smaller id", "AFAKE", "accepted"},
		{"peer with the larger id", "ZFAKE", "dialed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s, out := startFakePeer(t, tc.id)
			p.dialIn(s)
			waitCond(t, "the route fake dialed to register", func() bool { return s.NumRoutes() == 1 })
			if _, err := p.d.Write(p.info()); err != nil {
				t.Fatal(err)
			}
			// s logs each route with the peer's address: fake's listener
			// for the route s dialed.
			dialed, accepted := p.d.LocalAddr().String(), p.e.LocalAddr().String()
			closed, kept := dialed, accepted
			if tc.kept == "dialed" {
				closed, kept = accepted, dialed
			}
			waitCond(t, "the duplicate to close", func() bool {
				return strings.Contains(out.String(), "Router connection closed")
			})
			wantConnLines(t, "the duplicate", out.String(), closed,
				"[INF] Route connection created",
				"[INF] Router connection closed: Duplicate Route - Remote: fake")
			wantConnLines(t, "the route kept", out.String(), kept,
				"[INF] Route connection created")
			if n := s.NumRoutes(); n != 1 {
				t.Fatalf("%d routes", n)
			}
		})
	}
}

// A peer whose CONNECT names another cluster gets nats-server v2.15.2's
// -ERR and its route closes with the reason Cluster Name Conflict, the
// rejection logged once (route.go processRouteConnect).
func TestRouteClusterNameConflictReason(t *testing.T) {
	out := &syncWriter{}
	o := clusterTestOptions(t, "a", "ONE")
	o.Logger = logger.New(out, false, false)
	s := startServer(t, o)
	nc, err := net.Dial("tcp", s.ClusterAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(nc)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := nc.Write(route.AppendConnect(nil, &route.Connect{Name: "NOTHER", Cluster: "TWO"})); err != nil {
		t.Fatal(err)
	}
	want := `-ERR 'Rejecting connection, cluster name "TWO" does not match "ONE"'` + "\r\n"
	if line, err := r.ReadString('\n'); err != nil || line != want {
		t.Fatalf("got %q, %v; want %q", line, err, want)
	}
	waitCond(t, "the close", func() bool { return strings.Contains(out.String(), "Router connection closed") })
	wantConnLines(t, "the server", out.String(), nc.LocalAddr().String(),
		"[INF] Route connection created",
		`[ERR] Rejecting connection, cluster name "TWO" does not match "ONE"`,
		"[INF] Router connection closed: Cluster Name Conflict")
}
