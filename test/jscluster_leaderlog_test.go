package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Leadership changes are logged in nats-server v2.15.2's words
// (jetstream_cluster.go processLeaderChange, processStreamLeaderChange,
// processConsumerLeaderChange), which operators alert on: the meta
// leader on every server ("Self is new JetStream cluster metadata
// leader", "JetStream cluster new metadata leader: <server>/<cluster>"),
// and each new stream and consumer leader on its server.
func TestJetStreamClusterLeaderLogs(t *testing.T) {
	logs := make([]*syncBuffer, 3)
	servers, _ := jsClusterMod(t, 3, func(i int, o *server.Options) {
		logs[i] = &syncBuffer{}
		o.Logger = logger.New(logs[i], false, false)
	})
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	eventually(t, "create worker", func() error {
		_, err := js[0].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	eventually(t, "the leadership logs", func() error {
		self, others, streams, consumers := 0, 0, 0, 0
		for _, l := range logs {
			s := l.String()
			if strings.Contains(s, "[INF] Self is new JetStream cluster metadata leader") {
				self++
			} else if strings.Contains(s, "[INF] JetStream cluster new metadata leader: n") && strings.Contains(s, "/"+clusterName+"\n") {
				others++
			}
			if strings.Contains(s, "[INF] JetStream cluster new stream leader for '$G > ORDERS'") {
				streams++
			}
			if strings.Contains(s, "[INF] JetStream cluster new consumer leader for '$G > ORDERS > worker'") {
				consumers++
			}
		}
		if self < 1 || self+others < 3 || streams < 1 || consumers < 1 {
			return fmt.Errorf("meta leader on %d servers, seen by %d others; stream leader on %d, consumer leader on %d", self, others, streams, consumers)
		}
		return nil
	})
}
