package server

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// twoServers starts a and b, b routing to a, and waits for the route.
func twoServers(t *testing.T) (a, b *Server) {
	t.Helper()
	a = startClusterServer(t, "a", "C")
	b = startClusterServer(t, "b", "C", "nats://"+a.ClusterAddr().String())
	waitCond(t, "the route", func() bool { return a.NumRoutes() == 1 && b.NumRoutes() == 1 })
	return a, b
}

// A withdrawn subscription shared with the cluster leaves the peers'
// interest (once the routes are flushed, docs/cluster.md "Lame duck
// mode and shutdown") but still receives messages; its later removal
// withdraws nothing twice: another shared subscription to the subject
// stays announced.
func TestWithdrawSharedSubscription(t *testing.T) {
	a, b := twoServers(t)
	tr := jsTransport{s: a, acc: a.gacc, shared: true}
	var got atomic.Int32
	s1, err := tr.Subscribe("orders.>", "", func(string, string, []byte, []byte) { got.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	waitCond(t, "b to learn a's interest", func() bool { return b.HasInterest("orders.x") })
	s1.(*InternalSub).Withdraw()
	if !a.FlushRoutes(10 * time.Second) {
		t.Fatal("the route did not answer the flush")
	}
	if b.HasInterest("orders.x") {
		t.Fatal("b still routes orders.x to a after the withdrawal and a flush")
	}
	if !a.Publish("orders.x", "", nil, nil) || got.Load() != 1 {
		t.Fatalf("the withdrawn subscription got %d messages, want 1", got.Load())
	}
	s2, err := tr.Subscribe("orders.>", "", func(string, string, []byte, []byte) {})
	if err != nil {
		t.Fatal(err)
	}
	waitCond(t, "b to learn the second subscription", func() bool { return b.HasInterest("orders.x") })
	s1.Unsubscribe()
	a.FlushRoutes(10 * time.Second)
	if !b.HasInterest("orders.x") {
		t.Fatal("removing a withdrawn subscription withdrew another's interest")
	}
	s2.Unsubscribe()
	waitCond(t, "b to drop a's interest", func() bool { return !b.HasInterest("orders.x") })
}

// A peer's route INFO with ldm true marks it in lame duck mode in
// ClusterPeers, which a clustered JetStream counts offline.
func TestClusterPeersLameDuck(t *testing.T) {
	a, b := twoServers(t)
	if ps := a.ClusterPeers(); len(ps) != 1 || ps[0].LameDuck {
		t.Fatalf("peers %+v before lame duck mode", ps)
	}
	b.sendLameDuckToRoutes()
	waitCond(t, "b in lame duck mode in a's peers", func() bool {
		ps := a.ClusterPeers()
		return len(ps) == 1 && ps[0].LameDuck
	})
}

// A server shutting down sends its clients no INFO: the routes closing
// would shrink connect_urls to this server alone, and nats.go would drop
// the other servers from its reconnect pool and never reconnect
// (nats-server v2.15.2 sendAsyncInfoToClients sends nothing once
// shutting down). The client's PING after the update is answered by a
// PONG with no INFO before it.
func TestNoAsyncInfoWhenShuttingDown(t *testing.T) {
	a, _ := twoServers(t)
	nc, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	readLine := func() string {
		t.Helper()
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	readLine() // INFO
	if _, err := nc.Write([]byte("CONNECT {\"protocol\":1,\"verbose\":false}\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	for line := readLine(); !strings.Contains(line, `"connect_info":true`); line = readLine() {
	} // PONG, then the INFO of a registered client
	waitCond(t, "async INFO on", func() bool {
		c := a.clientList()
		return len(c) == 1 && c[0].asyncInfo.Load()
	})
	a.mu.Lock()
	a.shuttingDown = true
	a.mu.Unlock()
	a.sendAsyncInfo()
	a.mu.Lock()
	a.shuttingDown = false // for the test's Shutdown
	a.mu.Unlock()
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line := readLine(); !strings.HasPrefix(line, "PONG") {
		t.Fatalf("after an update while shutting down: %q, want PONG", line)
	}
}
