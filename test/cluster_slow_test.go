package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// TestClusterSlowRoute: a peer that stops reading is closed by the write
// deadline once a write makes no progress (nats-server v2.15.2
// handleWriteTimeout; passing max_pending holds the publisher, it does not
// close a route), and the other route and local subscribers then get every
// message (issue 14: a dead route never blocks client traffic on the other
// routes for longer than the write deadline).
//
// Only for cairn: the stalled peer is a hand-written route speaking the
// unpooled protocol.
func TestClusterSlowRoute(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("the stalled peer speaks cairn's unpooled route protocol")
	}
	tc := startCluster(t, 2, func(i int, o *server.Options) {
		if i == 0 {
			o.MaxPending = 4 << 20
			o.WriteDeadline = time.Second
		}
	})
	n1, n2 := tc.nodes[0], tc.nodes[1]

	// The stalled peer: handshake and interest, then it never reads again.
	nc, err := net.Dial("tcp", hostPort(n1.routeURL))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.(*net.TCPConn).SetReadBuffer(4096)
	_ = nc.SetReadDeadline(time.Now().Add(readTimeout))
	if line, err := bufio.NewReader(nc).ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("route INFO: %q, %v", line, err)
	}
	deadPort := freePort(t)
	fmt.Fprintf(nc, "CONNECT {\"echo\":true,\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"headers\":true,\"name\":\"NSTALLED\",\"cluster\":%q}\r\n", clusterName)
	fmt.Fprintf(nc, "INFO {\"server_id\":\"NSTALLED\",\"server_name\":\"stalled\",\"version\":\"2.10.0\",\"proto\":2,\"go\":\"go\",\"host\":\"127.0.0.1\",\"port\":%d,\"headers\":true,\"max_payload\":1048576,\"cluster\":%q}\r\n", deadPort, clusterName)
	fmt.Fprintf(nc, "RS+ $G slow.>\r\n")
	waitFor(t, clusterTimeout, "n1 to register the stalled peer", func() bool { return n1.srv.NumRoutes() == 2 })

	l1 := n1.connect()
	local := subscribeCollect(t, l1, "slow.>", "")
	flushInterest(t, l1, n1)
	s2 := n2.connect()
	remote := subscribeCollect(t, s2, "slow.>", "")
	flushInterest(t, s2, n1)

	// 20 MB: far more than the socket buffers and max_pending hold. The
	// test keeps the healthy path within a chunk of the publisher, so
	// that only the stalled peer's route can fall behind however slow
	// the machine is.
	pub := n1.connect()
	payload := []byte(strings.Repeat("x", 4096))
	const n, chunk = 5000, 100
	for i := 0; i < n; i++ {
		copy(payload, strconv.Itoa(i)+" ")
		if err := pub.Publish("slow.data", payload); err != nil {
			t.Fatal(err)
		}
		if (i+1)%chunk == 0 {
			pub.Flush()
			waitFor(t, clusterTimeout, "n2 to keep up", func() bool { return remote.len() >= i+1-chunk })
		}
	}
	pub.Flush()
	waitFor(t, clusterTimeout, "the stalled peer to be closed", func() bool { return n1.srv.NumRoutes() == 1 })
	if sc := n1.srv.SlowConsumers(); sc != 1 {
		t.Errorf("%d slow consumers, want 1 (the stalled peer's route)", sc)
	}
	if sr := n1.srv.Stats().SlowRoutes; sr != 1 {
		t.Errorf("%d slow routes, want 1", sr)
	}
	for name, c := range map[string]*collector{"n2": remote, "n1": local} {
		waitFor(t, clusterTimeout, "every message at "+name, func() bool { return c.len() >= n })
		for i, m := range c.all() {
			if !strings.HasPrefix(string(m.Data), strconv.Itoa(i)+" ") {
				t.Fatalf("%s: message %d starts %q", name, i, m.Data[:12])
			}
		}
	}
}

// stalledRoutePeer registers a hand-written route peer with n that has
// interest in subj and reads nothing until the test reads nc, whose
// receive buffer is rbuf bytes.
func stalledRoutePeer(t *testing.T, n *clusterNode, subj string, rbuf int) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", hostPort(n.routeURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.(*net.TCPConn).SetReadBuffer(rbuf)
	br := bufio.NewReaderSize(nc, 64<<10)
	_ = nc.SetReadDeadline(time.Now().Add(readTimeout))
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("route INFO: %q, %v", line, err)
	}
	_ = nc.SetReadDeadline(time.Time{})
	fmt.Fprintf(nc, "CONNECT {\"echo\":true,\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"headers\":true,\"name\":\"NSTALLED\",\"cluster\":%q}\r\n", clusterName)
	fmt.Fprintf(nc, "INFO {\"server_id\":\"NSTALLED\",\"server_name\":\"stalled\",\"version\":\"2.10.0\",\"proto\":2,\"go\":\"go\",\"host\":\"127.0.0.1\",\"port\":%d,\"headers\":true,\"max_payload\":1048576,\"cluster\":%q}\r\n", freePort(t), clusterName)
	fmt.Fprintf(nc, "RS+ $G %s\r\n", subj)
	return nc, br
}

// TestClusterSlowRouteNotClosedAtMaxPending: a route whose peer reads
// late is not closed when its pending bytes pass max_pending, as
// nats-server v2.15.2 closes only client connections for that
// (client.go queueOutbound, c.kind == CLIENT). The publisher is held
// instead, so the route's pending bytes stay within max_pending and one
// read batch, and the peer gets every message in order once it reads.
//
// Only for cairn: the late peer is a hand-written route speaking the
// unpooled protocol.
func TestClusterSlowRouteNotClosedAtMaxPending(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("the late peer speaks cairn's unpooled route protocol")
	}
	const maxPending = 1 << 20
	tc := startCluster(t, 1, func(i int, o *server.Options) { o.MaxPending = maxPending })
	n1 := tc.nodes[0]
	nc, br := stalledRoutePeer(t, n1, "late.>", 64<<10)
	waitFor(t, clusterTimeout, "n1 to register the late peer", func() bool { return n1.srv.NumRoutes() == 1 })

	// 16,000 messages of 1 KiB, about 16 MiB: more than max_pending and
	// the socket buffers (at most 4 MiB on Linux by default) hold.
	const n = 16000
	pub := n1.connect()
	payload := []byte(strings.Repeat("x", 1024))
	published := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			copy(payload, strconv.Itoa(i)+" ")
			if err := pub.Publish("late.data", payload); err != nil {
				published <- err
				return
			}
		}
		published <- pub.Flush()
	}()
	var peak int64
	pending := func() int64 {
		for _, r := range n1.srv.Routes(false) {
			peak = max(peak, r.Pending)
			return r.Pending
		}
		return -1 // closed
	}
	waitFor(t, clusterTimeout, "the route's pending bytes to pass max_pending", func() bool {
		return pending() > maxPending || n1.srv.NumRoutes() == 0
	})
	if n1.srv.NumRoutes() != 1 {
		t.Fatalf("the route was closed when its pending bytes passed max_pending (%d slow consumers)", n1.srv.SlowConsumers())
	}

	// The peer reads now, and answers PINGs.
	got := 0
	_ = nc.SetReadDeadline(time.Now().Add(clusterTimeout))
	for got < n {
		pending()
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d messages: %v (pending %d)", got, err, pending())
		}
		switch {
		case strings.HasPrefix(line, "PING"):
			fmt.Fprint(nc, "PONG\r\n")
		case strings.HasPrefix(line, "RMSG "):
			f := strings.Fields(line)
			size, _ := strconv.Atoi(f[len(f)-1])
			body := make([]byte, size+2)
			if _, err := io.ReadFull(br, body); err != nil {
				t.Fatalf("message %d: %v (pending %d)", got, err, pending())
			}
			if !strings.HasPrefix(string(body), strconv.Itoa(got)+" ") {
				t.Fatalf("message %d starts %q", got, body[:12])
			}
			got++
		}
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if n1.srv.NumRoutes() != 1 || n1.srv.SlowConsumers() != 0 {
		t.Errorf("routes %d, slow consumers %d; want the route kept and no slow consumer", n1.srv.NumRoutes(), n1.srv.SlowConsumers())
	}
	// max_pending, plus one read batch of the publisher (64 KiB) with
	// its framing.
	if bound := int64(maxPending + 128<<10); peak > bound {
		t.Errorf("the route's pending bytes peaked at %d, want at most %d", peak, bound)
	}
}
