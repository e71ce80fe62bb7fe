package test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestClusterKill9: three server processes started the way the README's
// "Run a cluster" section starts them; clients publish and subscribe on
// all three while one server is killed with SIGKILL and started again.
// Subscribers on the live servers lose nothing published on the live
// servers and see it in order; the killed server's client reconnects to
// another server and its subscription works again; the restarted server
// rejoins the mesh (issue 14).
//
// With CAIRN_TEST_TARGET=nats-server the same flags start nats-server.
func TestClusterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	bin := clusterBinary(t)
	kc := newKillCluster(t, bin, 3)
	n1, n2, n3 := kc.procs[0], kc.procs[1], kc.procs[2]

	connect := func(u string, opts ...nats.Option) *nats.Conn {
		nc, err := nats.Connect(u, append([]nats.Option{nats.Timeout(readTimeout)}, opts...)...)
		if err != nil {
			t.Fatalf("connect %s: %v", u, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	subA := connect(n1.url)
	subB := connect(n3.url)
	gotA := subscribeCollect(t, subA, "k.data", "")
	gotB := subscribeCollect(t, subB, "k.data", "")
	reconnected := make(chan string, 8)
	cli := connect(n2.url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ReconnectHandler(func(c *nats.Conn) { reconnected <- c.ConnectedUrl() }))
	gotC := subscribeCollect(t, cli, "k.c", "")
	pub1, pub3 := connect(n1.url), connect(n3.url)
	for _, sub := range []*nats.Conn{subA, subB, cli} {
		flushInterestConn(t, sub, pub1)
		flushInterestConn(t, sub, pub3)
	}

	// Two publishers on the live servers, paced at about 1000 messages a
	// second each, until stopped.
	var stop atomic.Bool
	var wg sync.WaitGroup
	sent := make([]atomic.Int64, 2)
	for p, nc := range []*nats.Conn{pub1, pub3} {
		wg.Add(1)
		go func(p int, nc *nats.Conn) {
			defer wg.Done()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for i := 0; !stop.Load(); i++ {
				if err := nc.Publish("k.data", []byte(fmt.Sprintf("p%d-%d", p, i))); err != nil {
					t.Errorf("publisher %d: %v", p, err)
					return
				}
				sent[p].Store(int64(i + 1))
				<-tick.C
			}
		}(p, nc)
	}
	waitFor(t, clusterTimeout, "traffic before the kill", func() bool { return gotA.len() > 300 && gotB.len() > 300 })

	n2.kill()
	select {
	case u := <-reconnected:
		if u == n2.url {
			t.Fatalf("reconnected to the killed server")
		}
	case <-time.After(clusterTimeout):
		t.Fatal("the killed server's client did not reconnect elsewhere")
	}
	n2.start()
	kc.waitMesh()
	waitFor(t, clusterTimeout, "the reconnected client's subscription to work again", func() bool {
		_ = pub1.Publish("k.c", nil)
		_ = pub1.Flush()
		return gotC.len() > 0
	})
	before := gotA.len()
	waitFor(t, clusterTimeout, "traffic after the restart", func() bool { return gotA.len() > before+300 })
	stop.Store(true)
	wg.Wait()
	pub1.Flush()
	pub3.Flush()
	fence(t, pub1, subA, subB)
	fence(t, pub3, subA, subB)

	for name, c := range map[string]*collector{"subscriber on n1": gotA, "subscriber on n3": gotB} {
		next := []int64{0, 0}
		for _, m := range c.all() {
			var p int
			var i int64
			if _, err := fmt.Sscanf(string(m.Data), "p%d-%d", &p, &i); err != nil || p < 0 || p > 1 {
				t.Fatalf("%s: message %q", name, m.Data)
			}
			if i != next[p] {
				t.Fatalf("%s: from publisher %d got message %d, want %d (lost or out of order)", name, p, i, next[p])
			}
			next[p]++
		}
		for p := range next {
			if next[p] != sent[p].Load() {
				t.Fatalf("%s: got %d of publisher %d's %d messages", name, next[p], p, sent[p].Load())
			}
		}
	}
}

// clusterBinary returns the server binary under test: cairn built from
// this tree, or nats-server.
func clusterBinary(t *testing.T) string {
	if targetIsNatsServer() {
		return natsServerBinary(t)
	}
	return buildCairn(t)
}

// killCluster is a cluster of server processes, each started with
// explicit routes to all (itself included), as the README does.
type killCluster struct {
	t     *testing.T
	procs []*serverProc
}

// serverProc is one server process of a killCluster.
type serverProc struct {
	t       *testing.T
	bin     string
	args    []string
	url     string
	log     *syncBuffer
	cmd     *exec.Cmd
	exited  chan struct{}
	running bool
}

func newKillCluster(t *testing.T, bin string, n int) *killCluster {
	t.Helper()
	return newKillClusterArgs(t, bin, n, nil)
}

// newKillClusterArgs is newKillCluster with extra(i) appended to server
// i's arguments (when extra is not nil).
func newKillClusterArgs(t *testing.T, bin string, n int, extra func(i int) []string) *killCluster {
	t.Helper()
	kc := &killCluster{t: t}
	clientPorts := make([]int, n)
	routes := make([]string, n)
	for i := range routes {
		clientPorts[i] = freePort(t)
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	for i := 0; i < n; i++ {
		p := &serverProc{t: t, bin: bin, url: "nats://127.0.0.1:" + strconv.Itoa(clientPorts[i])}
		p.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(clientPorts[i]), "-n", "n" + strconv.Itoa(i+1),
			"--cluster", routes[i], "--cluster_name", "KILL", "--routes", strings.Join(routes, ",")}
		if extra != nil {
			p.args = append(p.args, extra(i)...)
		}
		kc.procs = append(kc.procs, p)
		t.Cleanup(p.kill)
		p.start()
	}
	kc.waitMesh()
	return kc
}

// start starts the process and waits until it accepts clients.
func (p *serverProc) start() {
	p.t.Helper()
	p.log = &syncBuffer{}
	p.exited = make(chan struct{})
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.bin, err)
	}
	exited := p.exited
	go func() { _ = p.cmd.Wait(); close(exited) }()
	p.running = true
	waitFor(p.t, startTimeout, "the server at "+p.url, func() bool {
		select {
		case <-exited:
			p.t.Fatalf("server exited at start:\n%s", p.log.String())
		default:
		}
		return waitAccepting(p.url, 50*time.Millisecond)
	})
}

// kill sends SIGKILL and waits until the process is gone.
func (p *serverProc) kill() {
	if !p.running {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.running = false
}

// waitMesh waits until every running server lists every running server's
// client URL in connect_urls.
func (kc *killCluster) waitMesh() {
	kc.t.Helper()
	var want []string
	for _, p := range kc.procs {
		if p.running {
			want = append(want, hostPort(p.url))
		}
	}
	for _, p := range kc.procs {
		if !p.running {
			continue
		}
		var last any
		deadline := time.Now().Add(clusterTimeout)
		for !listsAll(p.url, want, &last) {
			if time.Now().After(deadline) {
				kc.t.Fatalf("timed out after %v waiting for %s to list every server %v (connect_urls %v)\n%s",
					clusterTimeout, p.url, want, last, kc.logs())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// listsAll reports whether the server at u lists exactly want in its
// INFO's connect_urls, and keeps what it listed in last.
func listsAll(u string, want []string, last *any) bool {
	info, err := fetchInfo(u)
	if err != nil {
		*last = err
		return false
	}
	list, _ := info["connect_urls"].([]any)
	*last = list
	if len(list) != len(want) {
		return false
	}
	for _, v := range list {
		if s, _ := v.(string); !contains(want, s) {
			return false
		}
	}
	return true
}

// logs returns every process's output, for a failure's message.
func (kc *killCluster) logs() string {
	var b strings.Builder
	for _, p := range kc.procs {
		if p.log != nil {
			fmt.Fprintf(&b, "--- %s %v:\n%s\n", p.url, p.args, p.log.String())
		}
	}
	return b.String()
}
