package test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	// The peers stop offering the lame duck server to their clients.
	waitFor(t, clusterTimeout, "n2 to drop n1 from connect_urls", func() bool {
		urls := n2.connectURLs()
		return len(urls) == 2 && !contains(urls, own)
	})
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

// The Helm chart's preStop hook, `<binary> -sl=ldm=<pid file>`: the
// running server enters lame duck mode; its client is told (ldm INFO),
// closed after the grace period, and the process exits 0. Runs against
// nats-server too.
func TestSignalLameDuckExits(t *testing.T) {
	bin := serverBinary(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "server.pid")
	conf := filepath.Join(dir, "server.conf")
	text := fmt.Sprintf("listen: 127.0.0.1:-1\npid_file: %q\nlame_duck_duration: \"30s\"\nlame_duck_grace_period: \"100ms\"\n", pidFile)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, bin, nil, "-c", conf)
	ldm := make(chan struct{}, 1)
	nc, err := nats.Connect(p.clientURL(t), nats.NoReconnect(),
		nats.LameDuckModeHandler(func(*nats.Conn) { ldm <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if out, err := exec.Command(bin, "--signal", "ldm="+pidFile).CombinedOutput(); err != nil {
		t.Fatalf("--signal ldm: %v: %s", err, out)
	}
	select {
	case <-ldm:
	case <-time.After(readTimeout):
		t.Fatal("no lame duck INFO")
	}
	select {
	case <-p.exited:
	case <-time.After(clusterTimeout):
		t.Fatalf("the server did not exit after lame duck mode:\n%s", p.log.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.log.String())
	}
	if !strings.Contains(p.log.String(), "Entering lame duck mode") {
		t.Errorf("log:\n%s", p.log.String())
	}
}
