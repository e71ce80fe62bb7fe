package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// consumerInfoRounds is how many publish-then-info rounds
// TestJetStreamClusterConsumerInfoCountsAckedPublish makes.
const consumerInfoRounds = 100

// A consumer's leader on a server whose replica of the stream follows
// answers CONSUMER.INFO once that replica has applied, and counts
// durable, what the stream's group committed (docs/cluster.md,
// "Consumers in a cluster"): an info asked right after a publish's
// PubAck counts the publish in num_pending, as the clients (and the Node
// tests) expect. Without the read, 212 and 234 of 300 rounds were one
// short on a loaded 2-core machine; with the read but a barrier through
// the apply queue alone (the follower's fsync still to come), 183 of 300.
func TestJetStreamClusterConsumerInfoCountsAckedPublish(t *testing.T) {
	servers := jsCluster(t, 3)
	ncs, js := clusterClients(t, servers)
	eventually(t, "create RYW", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "RYW", Subjects: []string{"ryw.>"}, Replicas: 3})
		return err
	})
	eventually(t, "create D", func() error {
		_, err := js[0].CreateOrUpdateConsumer(ctx2(t), "RYW", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	sl := streamLeader(t, servers, js[0], "RYW")
	// Step the consumer down until its leader is another server than the
	// stream's (each step-down picks a random other replica).
	eventually(t, "the consumer's leader off the stream's", func() error {
		ci, err := consumerInfoVia(t, js[sl], "RYW", "D")
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" {
			return fmt.Errorf("cluster %+v", ci.Cluster)
		}
		if cl := leaderIndex(servers, ci.Cluster.Leader); cl >= 0 && cl != sl {
			return nil
		}
		if _, err := tryStepDown(ncs[sl], "$JS.API.CONSUMER.LEADER.STEPDOWN.RYW.D", ""); err != nil {
			return err
		}
		return fmt.Errorf("the consumer's leader %s leads the stream", ci.Cluster.Leader)
	})
	cons, err := js[sl].Consumer(ctx2(t), "RYW", "D")
	if err != nil {
		t.Fatal(err)
	}
	short := 0
	var first string
	start := time.Now()
	for i := uint64(1); i <= consumerInfoRounds; i++ {
		if _, err := js[sl].Publish(ctx2(t), "ryw.x", []byte("x")); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		ci, err := cons.Info(ctx2(t))
		if err != nil {
			t.Fatalf("info after publish %d: %v", i, err)
		}
		if ci.NumPending != i {
			if short == 0 {
				first = fmt.Sprintf("after publish %d: num_pending %d (consumer leader %s, stream leader %s)", i, ci.NumPending, ci.Cluster.Leader, servers[sl].Name())
			}
			short++
		}
	}
	t.Logf("%d rounds in %v", consumerInfoRounds, time.Since(start)) // the read's cost
	if short > 0 {
		t.Fatalf("%d of %d infos did not count the publish acknowledged before them; first %s", short, consumerInfoRounds, first)
	}
	if ci, err := cons.Info(ctx2(t)); err != nil || leaderIndex(servers, ci.Cluster.Leader) == sl {
		t.Fatalf("the consumer's leader moved to the stream's meanwhile (the test's premise): %+v, %v", ci.Cluster, err)
	}
	if now := streamLeader(t, servers, js[sl], "RYW"); now != sl {
		t.Fatalf("the stream's leader moved from %s to %s meanwhile (the test's premise)", servers[sl].Name(), servers[now].Name())
	}
}
