package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A mem_storage consumer of a file stream keeps its delivered and
// acknowledged state through its stream's scales from and to one replica,
// as nats-server v2.15.2's does (measured: a durable of one replica with
// 5 delivered and acknowledged, `nats stream edit --replicas 3`, then
// the next delivery is 6). Its state lives only in its runtime, which
// the stream's stop for the scale ends: the scale hands it over in
// memory (jscluster memscale.go). Before, the durable came back with
// nothing delivered and redelivered what had been acknowledged.
func TestJetStreamClusterMemStorageConsumerThroughFileScales(t *testing.T) {
	servers := jsCluster(t, 3)
	js := jsAt(t, servers[0])
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 1}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js, sent, 1, 30)
	ccfg := func(name string, replicas int) jetstream.ConsumerConfig {
		return jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MemoryStorage: true, Replicas: replicas}
	}
	one, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", ccfg("ONE", 1))
	if err != nil {
		t.Fatal(err)
	}
	follows, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", ccfg("FOLLOWS", 0))
	if err != nil {
		t.Fatal(err)
	}
	fetchAck(t, one, 5, 5)
	fetchAck(t, follows, 6, 4)
	scale := func(n int) {
		t.Helper()
		next := cfg
		next.Replicas = n
		if _, err := js.UpdateStream(tctx(t), next); err != nil {
			t.Fatalf("ORDERS to %d replicas: %v", n, err)
		}
	}
	scale(3)
	nextIs(t, one, 6)
	nextIs(t, follows, 7)
	scale(1)
	nextIs(t, one, 7)
	nextIs(t, follows, 8)
}

// nextIs fetches consumer c's next message, acknowledges it and fails
// unless it is stream sequence want (the consumer's info is retried
// while its stream's scale settles).
func nextIs(t *testing.T, c jetstream.Consumer, want uint64) {
	t.Helper()
	var got uint64
	eventually(t, fmt.Sprintf("next delivery %d", want), func() error {
		batch, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			got = md.Sequence.Stream
			if err := m.DoubleAck(tctx(t)); err != nil {
				return err
			}
		}
		if got == 0 {
			return fmt.Errorf("no message: %v", batch.Error())
		}
		return nil
	})
	if got != want {
		t.Fatalf("next delivery: stream sequence %d, want %d", got, want)
	}
}

// A replicated consumer with deliver_policy last_per_subject delivers
// the last message of each subject once, from its first leader: a
// replica elected later (here by CONSUMER.LEADER.STEPDOWN) goes on from
// the committed state, as nats-server v2.15.2's does. Before, every
// replica listed those messages when it was made and delivered them
// again on becoming leader, as new deliveries (trial 144: every KV
// watcher whose consumer moved received its keys' last values again).
func TestJetStreamClusterLastPerSubjectAfterLeaderChange(t *testing.T) {
	servers := jsCluster(t, 3)
	js := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := range 6 {
		if _, err := js.Publish(tctx(t), fmt.Sprintf("orders.k%d", i%3), nil); err != nil {
			t.Fatal(err)
		}
	}
	c, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "LAST", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, FilterSubject: "orders.>", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint64{4, 5, 6} {
		nextIs(t, c, want)
	}
	nc := connect(t, servers[1].ClientURL())
	ci, err := c.Info(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	old := ci.Cluster.Leader
	eventually(t, "consumer step-down", func() error {
		r, err := tryStepDown(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.LAST", "")
		if err != nil {
			return err
		}
		if !r.Success {
			return fmt.Errorf("step-down: %+v", r.Error)
		}
		return nil
	})
	eventually(t, "new consumer leader", func() error {
		ci, err := c.Info(tctx(t))
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || ci.Cluster.Leader == old {
			return fmt.Errorf("leader %+v (was %s)", ci.Cluster, old)
		}
		return nil
	})
	if _, err := js.Publish(tctx(t), "orders.k0", nil); err != nil {
		t.Fatal(err)
	}
	nextIs(t, c, 7)
}

// nextOf returns the stream sequence of the next message consumer name
// of stream delivers through js, asking again while a move or a change
// of leader ends (its info may show it on its new server before; a
// fetch meanwhile may end with a 409 "leadership change"). The message
// is not acknowledged.
func nextOf(t *testing.T, js jetstream.JetStream, stream, name string) uint64 {
	t.Helper()
	var seq uint64
	eventually(t, name+" next", func() error {
		c, err := js.Consumer(ctx2(t), stream, name)
		if err != nil {
			return err
		}
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			return err
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		seq = md.Sequence.Stream
		return nil
	})
	return seq
}
