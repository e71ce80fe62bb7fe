package server

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

func startTestServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Options{Host: "127.0.0.1", Port: RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// testConn is a raw protocol client: CONNECT with headers and
// no_responders, then lines read one at a time.
type testConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialTest(t *testing.T, s *Server) *testConn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	tc := &testConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	tc.line() // INFO
	tc.send("CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1,\"headers\":true,\"no_responders\":true}\r\nPING\r\n")
	tc.expect("PONG\r\n")
	tc.line() // async INFO
	return tc
}

func (tc *testConn) send(s string) {
	if _, err := tc.nc.Write([]byte(s)); err != nil {
		tc.t.Fatal(err)
	}
}

func (tc *testConn) line() string {
	tc.t.Helper()
	_ = tc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := tc.r.ReadString('\n')
	if err != nil {
		tc.t.Fatal(err)
	}
	return l
}

func (tc *testConn) expect(want string) {
	tc.t.Helper()
	got := ""
	for len(got) < len(want) {
		got += tc.line()
	}
	if got != want {
		tc.t.Fatalf("got %q, want %q", got, want)
	}
}

type received struct{ subject, reply, hdr, data string }

func TestInternalSubscriptionReceivesClientPublish(t *testing.T) {
	s := startTestServer(t)
	got := make(chan received, 4)
	sub, err := s.SubscribeInternal("svc.>", "", func(subj, reply string, hdr, data []byte) {
		got <- received{subj, reply, string(hdr), string(data)}
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dialTest(t, s)
	hdr := "NATS/1.0\r\nA: b\r\n\r\n"
	c.send("PUB svc.a r.1 2\r\nhi\r\n")
	c.send(fmt.Sprintf("HPUB svc.b r.2 %d %d\r\n%sxy\r\n", len(hdr), len(hdr)+2, hdr))
	c.send("PING\r\n")
	c.expect("PONG\r\n")
	want := []received{{"svc.a", "r.1", "", "hi"}, {"svc.b", "r.2", hdr, "xy"}}
	for _, w := range want {
		if g := <-got; g != w {
			t.Fatalf("handler got %+v, want %+v", g, w)
		}
	}
	sub.Unsubscribe()
	sub.Unsubscribe()
	c.send("SUB _INBOX.x 1\r\nPUB svc.a _INBOX.x 0\r\n\r\n")
	c.expect("HMSG _INBOX.x 1 37 37\r\nNATS/1.0 503\r\nNats-Subject: svc.a\r\n\r\n\r\n")
}

func TestInternalSubscriptionAnswersRequests(t *testing.T) {
	s := startTestServer(t)
	_, err := s.SubscribeInternal("echo", "q", func(_, reply string, _, data []byte) {
		s.Publish(reply, "", []byte("NATS/1.0\r\nX: 1\r\n\r\n"), append([]byte("re:"), data...))
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dialTest(t, s)
	c.send("SUB _INBOX.y 7\r\nPUB echo _INBOX.y 3\r\nabc\r\n")
	c.expect("HMSG _INBOX.y 7 18 24\r\nNATS/1.0\r\nX: 1\r\n\r\nre:abc\r\n")
}

func TestPublishReachesClientsAndReportsDelivery(t *testing.T) {
	s := startTestServer(t)
	c := dialTest(t, s)
	c.send("SUB ev.* 1\r\nPING\r\n")
	c.expect("PONG\r\n")
	if s.Publish("nobody.here", "", nil, []byte("x")) {
		t.Fatal("Publish with no subscriber reported a delivery")
	}
	if s.Publish("ev.*.bad..", "", nil, nil) {
		t.Fatal("Publish to an invalid subject reported a delivery")
	}
	if !s.Publish("ev.one", "rep", nil, []byte("hello")) {
		t.Fatal("Publish to a subscribed subject reported no delivery")
	}
	c.expect("MSG ev.one 1 rep 5\r\nhello\r\n")
}

func TestSubscribeInternalRejectsBadSubject(t *testing.T) {
	s := startTestServer(t)
	if _, err := s.SubscribeInternal("a..b", "", func(string, string, []byte, []byte) {}); err == nil || !strings.Contains(err.Error(), "invalid") {
		t.Fatalf("bad subject accepted: %v", err)
	}
}

// A client that floods PINGs and never reads its PONGs is closed once its
// pending replies pass max_pending, as nats-server closes it; the
// server's memory does not grow with it. The client is one end of a
// net.Pipe, which buffers nothing: the server's writer blocks on its first
// write, so the test does not depend on how much the kernel's socket
// buffers absorb (on a machine with large TCP buffers a socket took
// minutes of PINGs under the race detector before the server's pending
// bytes grew at all).
func TestUnreadRepliesCountAgainstMaxPending(t *testing.T) {
	s, nc := pipeClient(t, Options{MaxPending: 64 << 10, MaxPayload: 1024})
	pings := []byte(strings.Repeat("PING\r\n", 16384))
	// 64 KiB of PONGs take 11,000 PINGs; the deadline only bounds a failure.
	deadline := time.Now().Add(30 * time.Second)
	off, sent := 0, 0
	for s.SlowConsumers() == 0 && time.Now().Before(deadline) {
		_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := nc.Write(pings[off:])
		off = (off + n) % len(pings)
		sent += n
		if err != nil && !isTimeout(err) {
			break // closed by the server
		}
	}
	// closeSlowConsumer counts before it closes the connection.
	if s.SlowConsumers() == 0 {
		t.Fatal("a client that never reads its PONGs was not closed as a slow consumer")
	}
	// The pipe hands the server exactly what it reads: it must have stopped
	// within one read buffer of max_pending, not at its first keep-alive
	// PING (which would also find it over the limit, seconds later).
	if limit := 64<<10 + maxReadBuffer + len(pings); sent > limit {
		t.Fatalf("the server read %d bytes of PINGs before closing the client, want at most %d", sent, limit)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// The keep-alive waits the full ping interval until the client's CONNECT,
// so a client still in its handshake never reads a PING before its PONG;
// after the CONNECT the first PING comes within 2 s plus up to a fifth
// (nats-server v2.15.2, setPingTimer, then setFirstPingTimer).
func TestFirstPingFollowsConnect(t *testing.T) {
	s, nc := pipeClient(t, Options{PingInterval: time.Minute})
	r := bufio.NewReader(nc)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	c := onlyClient(t, s)
	if got := c.pings.delay(); got != time.Minute {
		t.Fatalf("before CONNECT the keep-alive is armed for %v, want the ping interval (1m0s)", got)
	}
	if _, err := nc.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "PONG\r\n" {
		t.Fatalf("read %q, %v; want PONG", line, err)
	}
	if got := c.pings.delay(); got < firstPingMax || got > firstPingMax+firstPingMax/5 {
		t.Fatalf("after CONNECT the keep-alive is armed for %v, want 2s to 2.4s", got)
	}
}

// onlyClient returns the server's one client connection.
func onlyClient(t *testing.T, s *Server) *client {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.clients) != 1 {
		t.Fatalf("%d clients, want 1", len(s.clients))
	}
	for _, c := range s.clients {
		return c
	}
	return nil
}

// delay returns the delay the keep-alive timer was last armed with.
func (p *pingState) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed
}

// pipeClient starts a server with opts (on 127.0.0.1, a random port) and
// connects a client to it through a net.Pipe, which buffers nothing: the
// server's writes block until the test reads. Both close with the test.
func pipeClient(t *testing.T, opts Options) (*Server, net.Conn) {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", RandomPort
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, sc := net.Pipe()
	t.Cleanup(func() { nc.Close() })
	s.addClient(sc)
	return s, nc
}
