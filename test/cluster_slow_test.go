package test

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// TestClusterSlowRoute: a peer that stops reading is closed as a slow
// consumer once its route's pending bytes pass max_pending (cairn's memory
// stays bounded), and the other route and local subscribers get every
// message meanwhile (issue 14: a slow or dead route never blocks client
// traffic on the other routes).
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
	for name, c := range map[string]*collector{"n2": remote, "n1": local} {
		waitFor(t, clusterTimeout, "every message at "+name, func() bool { return c.len() >= n })
		for i, m := range c.all() {
			if !strings.HasPrefix(string(m.Data), strconv.Itoa(i)+" ") {
				t.Fatalf("%s: message %d starts %q", name, i, m.Data[:12])
			}
		}
	}
}
