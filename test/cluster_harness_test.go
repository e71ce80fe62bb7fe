package test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/cairnmq/cairn/internal/server"
)

// A cluster of servers on loopback for tests: cairn servers in-process, or
// nats-server processes with CAIRN_TEST_TARGET=nats-server (the tests then
// check themselves against the reference). The JetStream cluster tests of
// the next issues start their servers here too: per-node options come from
// a function of the node's index, and a node restarts on its ports and
// store directory.
//
// Topology: node 0 has no routes and every other node routes to node 0
// only, so the full mesh needs gossip. Waiting is on conditions with
// deadlines (clusterTimeout), never on sleeps.

// clusterTimeout bounds every wait for the cluster to settle; nothing
// waits that long when the servers behave.
const clusterTimeout = 20 * time.Second

// clusterName is the cluster name of test clusters.
const clusterName = "TEST"

// testCluster is a running cluster of len(nodes) servers.
type testCluster struct {
	t     *testing.T
	nodes []*clusterNode
}

// clusterNode is one server of a testCluster.
type clusterNode struct {
	tc       *testCluster
	idx      int
	opts     server.Options // the options it runs with; ports fixed after the first start
	url      string         // client URL
	routeURL string         // cluster URL, what peers route to
	srv      *server.Server // cairn in-process; nil for nats-server or when stopped
	stopFn   func()
	running  bool
}

// startCluster starts n servers named n1...nN in cluster "TEST" and waits
// for the full mesh. mod, when not nil, adjusts node i's options first.
func startCluster(t *testing.T, n int, mod func(i int, o *server.Options)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t}
	for i := 0; i < n; i++ {
		o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: "n" + strconv.Itoa(i+1)}
		o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: server.RandomPort, Name: clusterName}
		if i > 0 {
			u, err := url.Parse(tc.nodes[0].routeURL)
			if err != nil {
				t.Fatal(err)
			}
			o.Cluster.Routes = []*url.URL{u}
		}
		if mod != nil {
			mod(i, &o)
		}
		if o.JetStream && o.StoreDir == "" {
			o.StoreDir = t.TempDir()
		}
		node := &clusterNode{tc: tc, idx: i, opts: o}
		tc.nodes = append(tc.nodes, node)
		node.start()
	}
	t.Cleanup(tc.stopAll)
	tc.waitMesh()
	return tc
}

// start starts the node with its options; after the first start it keeps
// its client and cluster ports.
func (nd *clusterNode) start() {
	t := nd.tc.t
	t.Helper()
	if targetIsNatsServer() {
		ports, stop := startNatsServerPorts(t, nd.opts)
		nd.url, nd.routeURL, nd.stopFn = ports.Nats[0], ports.Cluster[0], stop
	} else {
		s, err := server.New(nd.opts)
		if err != nil {
			t.Fatalf("server.New: %v", err)
		}
		if err := s.Start(); err != nil {
			t.Fatalf("server.Start: %v", err)
		}
		var once sync.Once
		nd.srv, nd.url, nd.routeURL = s, s.ClientURL(), s.ClusterURL()
		nd.stopFn = func() { once.Do(s.Shutdown) }
	}
	nd.running = true
	nd.opts.Port = portOf(t, nd.url)
	nd.opts.Cluster.Port = portOf(t, nd.routeURL)
}

// stop shuts the node down cleanly (SIGTERM for nats-server).
func (nd *clusterNode) stop() {
	if nd.running {
		nd.stopFn()
		nd.running, nd.srv = false, nil
	}
}

// restart stops the node if it runs and starts it again on the same ports
// (and store directory).
func (nd *clusterNode) restart() {
	nd.tc.t.Helper()
	nd.stop()
	nd.start()
}

func (tc *testCluster) stopAll() {
	for _, nd := range tc.nodes {
		nd.stop()
	}
}

// running returns the nodes that run.
func (tc *testCluster) running() []*clusterNode {
	var out []*clusterNode
	for _, nd := range tc.nodes {
		if nd.running {
			out = append(out, nd)
		}
	}
	return out
}

// waitMesh waits until every running node's INFO lists the client URLs of
// every running node (connect_urls is gossiped over the routes, so this
// holds once each node has a route to each other).
func (tc *testCluster) waitMesh() {
	tc.t.Helper()
	nodes := tc.running()
	if len(nodes) < 2 {
		return // a lone server lists no connect_urls
	}
	want := make([]string, len(nodes))
	for i, nd := range nodes {
		want[i] = hostPort(nd.url)
	}
	for _, nd := range nodes {
		waitFor(tc.t, clusterTimeout, fmt.Sprintf("%s to list %v in connect_urls", nd.name(), want), func() bool {
			got := nd.connectURLs()
			if len(got) != len(want) {
				return false
			}
			for _, w := range want {
				if !contains(got, w) {
					return false
				}
			}
			return true
		})
	}
}

// name returns the node's server name.
func (nd *clusterNode) name() string { return nd.opts.ServerName }

// connectURLs returns connect_urls of the INFO the node sends a new
// client, or nil when it cannot be reached.
func (nd *clusterNode) connectURLs() []string {
	info, err := fetchInfo(nd.url)
	if err != nil {
		return nil
	}
	var out []string
	if list, ok := info["connect_urls"].([]any); ok {
		for _, v := range list {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// connect connects a nats.go client to the node, closed at cleanup.
func (nd *clusterNode) connect(opts ...nats.Option) *nats.Conn {
	t := nd.tc.t
	t.Helper()
	nc, err := nats.Connect(nd.url, append([]nats.Option{nats.Name(nd.name()), nats.Timeout(readTimeout)}, opts...)...)
	if err != nil {
		t.Fatalf("connect to %s: %v", nd.name(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// flushInterest waits until every subscription sub made before the call
// is known on each of the given nodes: sub subscribes a probe responder
// after them, and a client of each node requests the probe until it
// answers. The probe's interest crosses the same route after the earlier
// subscriptions', so it arriving proves theirs did (nats-server #1142: a
// server says nothing when interest reached the other servers).
func flushInterest(t *testing.T, sub *nats.Conn, nodes ...*clusterNode) {
	t.Helper()
	probe := "_PROBE." + nuid.Next()
	ps, err := sub.Subscribe(probe, func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		t.Fatalf("probe subscribe: %v", err)
	}
	defer ps.Unsubscribe()
	if err := sub.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for _, nd := range nodes {
		nc := nd.connect()
		waitFor(t, clusterTimeout, "interest to reach "+nd.name(), func() bool {
			_, err := nc.Request(probe, nil, time.Second)
			return err == nil
		})
		nc.Close()
	}
}

// waitNoInterest waits until a request for subj from nd finds no
// responder anywhere in the cluster (503), that is, until the removal of
// every subscription to subj reached nd.
func waitNoInterest(t *testing.T, nd *clusterNode, subj string) {
	t.Helper()
	nc := nd.connect()
	defer nc.Close()
	waitFor(t, clusterTimeout, "interest in "+subj+" to leave "+nd.name(), func() bool {
		_, err := nc.Request(subj, nil, time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
}

// portOf returns the port of a URL.
func portOf(t testing.TB, u string) int {
	t.Helper()
	hp := hostPort(u)
	p, err := strconv.Atoi(hp[strings.LastIndexByte(hp, ':')+1:])
	if err != nil {
		t.Fatalf("port of %q: %v", u, err)
	}
	return p
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// fetchInfo dials u and returns the JSON of the INFO the server sends
// first.
func fetchInfo(u string) (map[string]any, error) {
	c, err := net.DialTimeout("tcp", hostPort(u), time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(readTimeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return nil, err
	}
	js, ok := strings.CutPrefix(strings.TrimRight(line, " \r\n"), "INFO ")
	if !ok {
		return nil, fmt.Errorf("not an INFO line: %q", line)
	}
	var m map[string]any
	return m, json.Unmarshal([]byte(js), &m)
}
