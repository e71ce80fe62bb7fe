package test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A cluster whose servers all name each other warns of no stranger.
func TestJetStreamClusterNoStrangerWarning(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("cairn's warning")
	}
	logs := make([]*syncBuffer, 3)
	servers, _ := jsClusterMod(t, 3, func(i int, o *server.Options) {
		logs[i] = logTo(o)
	})
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i, l := range logs {
		if strings.Contains(l.String(), "is routed here but is not in this server's meta group") {
			t.Fatalf("n%d warned of a stranger in a cluster whose servers all name each other:\n%s", i+1, l.String())
		}
	}
}

// A seed-route configuration, as nats-server allows it (n1 names no
// route, n2 and n3 name n1 only): the servers form one meta group of
// three (n1, the first by name, starts it and adds the others), which
// places an R3 stream; no server warns of a stranger.
func TestJetStreamClusterSeedRoutesOneMetaGroup(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("cairn's meta group, read through its server")
	}
	logs := make([]*syncBuffer, 3)
	tc := startCluster(t, 3, func(i int, o *server.Options) {
		o.JetStream = true
		o.RaftTick = 20_000_000 // 20 ms
		logs[i] = logTo(o)
	})
	servers := []*server.Server{tc.nodes[0].srv, tc.nodes[1].srv, tc.nodes[2].srv}
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[2].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	streamServers(t, js[1], "ORDERS", 3)
	clusterPublish(t, js[1], "orders.1", 1)
	for i, l := range logs {
		if strings.Contains(l.String(), "is routed here but is not in this server's meta group") {
			t.Fatalf("n%d warned of a stranger:\n%s", i+1, l.String())
		}
	}
}

// Each server names only the next one (n1 names n2, n2 n3, n3 n1): the
// servers still form one meta group of three, which places and serves an
// R3 stream.
func TestJetStreamClusterChainRoutesOneMetaGroup(t *testing.T) {
	logs := make([]*syncBuffer, 3)
	servers, _ := jsClusterMod(t, 3, func(i int, o *server.Options) {
		next := (i + 1) % len(o.Cluster.Routes)
		o.Cluster.Routes = o.Cluster.Routes[next : next+1]
		logs[i] = logTo(o)
	})
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range logs {
				t.Logf("n%d:\n%s", i+1, l.String())
			}
		}
	})
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	streamServers(t, js[2], "ORDERS", 3)
	clusterPublish(t, js[2], "orders.1", 1)
	for i, l := range logs {
		if strings.Contains(l.String(), "is routed here but is not in this server's meta group") {
			t.Fatalf("n%d warned of a stranger:\n%s", i+1, l.String())
		}
	}
}
