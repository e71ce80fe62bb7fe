package test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A stream of two replicas whose leader's replica is peer-removed, its
// server stopped before the move is carried out and started again: the
// group's voters are still the two old replicas (the new one is at most a
// learner), so the leaving replica is needed for any election. The
// restarted server starts its leaving replica again from its store (the
// assignment no longer names it, its raft configuration does), the group
// elects a leader, the move completes onto the spare server, and every
// acknowledged message is served. Before, the restarted server started
// no replica and the stream stayed without a leader
// (docs/clustering.md, "Replacing a replica").
func TestJetStreamClusterMoveLeaderRestarts(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 2})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 100)
	placed := waitReplicas(t, js0, 2)
	// A durable of two replicas, on the same servers, 10 messages
	// acknowledged.
	var cons jetstream.Consumer
	eventually(t, "create C", func() error {
		var err error
		cons, err = js0.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx2(t)); err != nil {
			t.Fatal(err)
		}
	}
	leader := leaderIndex(servers, placed[0])
	follower := leaderIndex(servers, placed[1])
	spare := 3 - leader - follower
	nc := connect(t, servers[follower].ClientURL())
	r := stepDownRequest(t, nc, "$JS.API.STREAM.PEER.REMOVE.ORDERS", fmt.Sprintf(`{"peer":%q}`, placed[0]))
	if !r.Success {
		t.Fatalf("peer-remove %s: %+v", placed[0], r.Error)
	}
	servers[leader].Shutdown()
	servers[leader] = restartServer(t, opts[leader])

	js := jsAt(t, servers[follower])
	eventually(t, "ORDERS moved to the spare server", func() error {
		ci := streamCluster(t, js)
		if ci == nil || ci.Leader == "" {
			return fmt.Errorf("no leader: %+v", ci)
		}
		names := []string{ci.Leader}
		for _, p := range ci.Replicas {
			if !p.Current || p.Pending {
				return fmt.Errorf("replica %+v", p)
			}
			names = append(names, p.Name)
		}
		slices.Sort(names)
		want := []string{servers[follower].Name(), servers[spare].Name()}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			return fmt.Errorf("on %v, want %v", names, want)
		}
		return nil
	})
	publishRange(t, js, sent, 101, 110)
	checkAll(t, js, sent)
	eventually(t, "C led on the new servers, its acks kept", func() error {
		ci, err := consumerInfoVia(t, js, "ORDERS", "C")
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || ci.Cluster.Leader == servers[leader].Name() {
			return fmt.Errorf("cluster %+v", ci.Cluster)
		}
		for _, p := range ci.Cluster.Replicas {
			if p.Name == servers[leader].Name() || !p.Current {
				return fmt.Errorf("replica %+v", p)
			}
		}
		if ci.AckFloor.Stream != 10 || ci.NumPending != 100 {
			return fmt.Errorf("ack floor %d, pending %d", ci.AckFloor.Stream, ci.NumPending)
		}
		return nil
	})
}
