package test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A JetStream cluster configured as nats-server allows, each server
// routed to one seed server only, forms more than one meta group in
// cairn (the voters are the servers the routes name: README "Run a
// cluster"); the servers say so at [WRN] instead of leaving JetStream
// split in silence (an operator trial found every stream add answering
// 10008 and no log line saying why).
func TestJetStreamClusterSeedRoutesWarn(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("nats-server grows its meta group as servers appear")
	}
	logs := make([]*syncBuffer, 3)
	startCluster(t, 3, func(i int, o *server.Options) {
		o.JetStream = true
		logs[i] = logTo(o)
	})
	waitLog(t, logs[0], "[WRN]", "server n2 is routed here but is not in this server's meta group [n1]")
	waitLog(t, logs[0], "[WRN]", "server n3 is routed here but is not in this server's meta group [n1]")
	waitLog(t, logs[1], "[WRN]", "server n3 is routed here but is not in this server's meta group [n1 n2]")
}

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
