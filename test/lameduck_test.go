package test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Lame duck mode (SIGUSR2, nats-server v2.15.2 lameDuckMode): the server
// stops accepting clients, sends its clients an INFO with ldm true and
// connect_urls listing only the other servers, then closes them after the
// grace period and shuts down. A nats.go client gets its lame duck
// callback, reconnects to another server of the cluster and goes on
// receiving there.
func TestLameDuckClientsMoveAway(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("lame duck mode is triggered on the in-process server")
	}
	tc := startCluster(t, 3, nil)
	n1, n2 := tc.nodes[0], tc.nodes[1]

	ldm := make(chan struct{}, 1)
	reconnected := make(chan string, 4)
	nc := n1.connect(
		nats.LameDuckModeHandler(func(*nats.Conn) { ldm <- struct{}{} }),
		nats.ReconnectHandler(func(c *nats.Conn) { reconnected <- c.ConnectedUrl() }),
		nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1), nats.DontRandomize())
	sub := subSync(t, nc, "ldm.>")
	flush(t, nc)
	raw := rawConnect(t, n1.url, defaultConnect)

	go n1.srv.LameDuck(2*time.Second, 200*time.Millisecond)

	// The raw client's next line is the lame duck INFO.
	line := raw.readLine()
	js, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	var info struct {
		LDM         bool     `json:"ldm"`
		ConnectURLs []string `json:"connect_urls"`
	}
	if !ok || json.Unmarshal([]byte(js), &info) != nil || !info.LDM {
		t.Fatalf("first line after lame duck mode: %q, want INFO with ldm true", line)
	}
	own := hostPort(n1.url)
	if len(info.ConnectURLs) != 2 || contains(info.ConnectURLs, own) {
		t.Fatalf("lame duck INFO connect_urls %v: want the two other servers, not %s", info.ConnectURLs, own)
	}
	select {
	case <-ldm:
	case <-time.After(readTimeout):
		t.Fatal("nats.go got no lame duck callback")
	}
	if c, err := net.DialTimeout("tcp", own, time.Second); err == nil {
		c.Close()
		t.Fatal("a server in lame duck mode accepted a new connection")
	}
	select {
	case u := <-reconnected:
		if hostPort(u) == own {
			t.Fatalf("reconnected to the lame duck server %s", u)
		}
	case <-time.After(clusterTimeout):
		t.Fatal("the client did not reconnect to another server")
	}
	flushInterest(t, nc, n2)
	pub := n2.connect()
	if err := pub.Publish("ldm.after", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	flush(t, pub)
	if m, err := sub.NextMsg(readTimeout); err != nil || string(m.Data) != "hi" {
		t.Fatalf("after moving away: %v, %v", m, err)
	}
	select {
	case <-n1.srv.Done():
	case <-time.After(clusterTimeout):
		t.Fatal("the lame duck server did not shut down")
	}
}
