package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Replica-count changes sent back to back, each right after the
// previous one's answer, as `nats stream edit --replicas` twice in a
// row sends them: 3 -> 1 -> 3 -> 1 -> 3 on three servers. nats-server
// v2.15.2 takes each; cairn's scale to 3 right after a scale-down to one
// replica waits for that scale-down to settle rather than answering
// 10008 (docs/cluster.md, "Settling"). Each update is sent once and
// must succeed; then the durable alone 3 -> 1 -> 3 by consumer update
// (its settle waited for likewise). The stream ends with three current
// replicas and every acknowledged message, the durable with three
// replicas and its delivered and acknowledged state.
func TestJetStreamClusterScaleBackToBack(t *testing.T) {
	serialTest(t) // each update must be answered within the CLI's 5 s
	servers := jsCluster(t, 3)
	js, err := jetstream.New(connect(t, servers[1].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js, sent, 1, 20)
	cons, before := fetchAckFour(t, js)
	for i, n := range []int{1, 3, 1, 3} {
		cfg.Replicas = n
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // the nats CLI's timeout
		start := time.Now()
		si, err := js.UpdateStream(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatalf("update %d (to %d replicas), after %v: %v", i+1, n, time.Since(start), err)
		}
		if r := si.CachedInfo().Config.Replicas; r != n {
			t.Fatalf("update %d answered %d replicas, want %d", i+1, r, n)
		}
		publishAcked(t, js, sent, 100+i)
	}
	// The durable alone, by consumer update: 3 -> 1 -> 3, each sent once.
	ccfg := cons.CachedInfo().Config
	for i, n := range []int{1, 3} {
		ccfg.Replicas = n
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		_, err := js.UpdateConsumer(ctx, "ORDERS", ccfg)
		cancel()
		if err != nil {
			t.Fatalf("consumer update %d (to %d replicas), after %v: %v", i+1, n, time.Since(start), err)
		}
	}
	waitReplicas(t, js, 3)
	checkAll(t, js, sent)
	if after := consumerState(t, js); after != before {
		t.Fatalf("consumer after the scales: %+v, before %+v", after, before)
	}
	eventually(t, "consumer on three replicas", func() error {
		c, err := js.Consumer(tctx(t), "ORDERS", "WORK")
		if err != nil {
			return err
		}
		if ci := c.CachedInfo().Cluster; ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return fmt.Errorf("consumer cluster %+v", ci)
		}
		return nil
	})
}

// A memory stream of one replica with a durable consumer that has
// delivered ten messages and had four acknowledged scales to three
// replicas, as nats-server v2.15.2 scales it: the durable follows with
// its delivered and acknowledged state (it lived only in its runtime,
// which the scale-up stops: docs/cluster.md, "Memory streams"). With
// the original server then stopped, the two new replicas serve every
// message and the durable's state. (An ephemeral consumer, which stays
// at one replica: TestJetStreamClusterMemoryScaleUpFromOne.)
func TestJetStreamClusterMemoryScaleUpConsumers(t *testing.T) {
	servers := jsCluster(t, 3)
	js, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: jetstream.MemoryStorage}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js, sent, 1, 20)
	_, before := fetchAckFour(t, js)
	cfg.Replicas = 3
	s, err := js.UpdateStream(tctx(t), cfg)
	if err != nil {
		t.Fatalf("1 -> 3: %v", err)
	}
	home := leaderIndex(servers, s.CachedInfo().Cluster.Leader)
	waitReplicas(t, js, 3)
	waitConsumerReplicas(t, js)
	if after := consumerState(t, js); after != before {
		t.Fatalf("consumer after the scale-up: %+v, before %+v", after, before)
	}
	// The original server stops: the new replicas hold it all.
	servers[home].Shutdown()
	jsO, err := jetstream.New(connect(t, servers[(home+1)%3].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, jsO, sent)
	if after := consumerState(t, jsO); after != before {
		t.Fatalf("consumer without the original server: %+v, before %+v", after, before)
	}
}

// fetchAckFour creates durable WORK on ORDERS (explicit acks, an hour's
// ack wait), fetches ten messages, acknowledges the first four, and
// returns its handle (with the info of its create) and its state.
func fetchAckFour(t *testing.T, js jetstream.JetStream) (jetstream.Consumer, ackState) {
	t.Helper()
	cons, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if got++; got <= 4 {
			if err := m.DoubleAck(tctx(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != 10 {
		t.Fatalf("fetched %d", got)
	}
	st := consumerState(t, js)
	if st.AckFloor != 4 || st.Delivered != 10 || st.AckPending != 6 {
		t.Fatalf("consumer state %+v", st)
	}
	return cons, st
}

// waitConsumerReplicas waits until durable WORK of ORDERS has a leader
// and two other replicas, current and not being added.
func waitConsumerReplicas(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	eventually(t, "consumer on three current replicas", func() error {
		c, err := js.Consumer(tctx(t), "ORDERS", "WORK")
		if err != nil {
			return err
		}
		ci := c.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return fmt.Errorf("consumer cluster %+v", ci)
		}
		for _, p := range ci.Replicas {
			if !p.Current || p.Pending || p.Offline {
				return fmt.Errorf("consumer replica %+v", p)
			}
		}
		return nil
	})
}

// A replicated memory stream scaled down to one replica, as nats-server
// v2.15.2 scales it: the replica kept hands its memory store to the
// stream of one replica (docs/cluster.md, "Memory streams"). 3 -> 1
// -> 3 -> 1, each update sent once right after the previous answer: the
// stream's info is a stream of one replica's (the leader, no group),
// every acknowledged message at its sequence, a deleted one still
// deleted, the duplicate window kept. The first scale-down takes a
// durable with it, which keeps its state (in memory).
func TestJetStreamClusterMemoryScaleDownToOne(t *testing.T) {
	serialTest(t) // each update must be answered within the CLI's 5 s
	servers := jsCluster(t, 3)
	js, err := jetstream.New(connect(t, servers[2].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: jetstream.MemoryStorage, Duplicates: time.Hour}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js, sent, 1, 20)
	// Retried: a 10008 (the stream's leader changing just after the
	// create) may come whether or not the delete took effect.
	eventually(t, "delete message 5", func() error {
		s, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		if err = s.DeleteMsg(tctx(t), 5); err != nil {
			if _, gerr := s.GetMsg(tctx(t), 5); errors.Is(gerr, jetstream.ErrMsgNotFound) {
				return nil // deleted by an earlier try
			}
		}
		return err
	})
	delete(sent, 5)
	// A durable (three replicas, as its stream) with 8 delivered and 5
	// of them acknowledged scales down with its stream and keeps its
	// state, in memory, as nats-server v2.15.2's (measured: the durable
	// on one server with the same delivered, ack floor and pending).
	c, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fetchAck(t, c, 8, 5)
	before, err := c.Info(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	one := cfg
	one.Replicas = 1
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = js.UpdateStream(ctx, one)
	cancel()
	if err != nil {
		t.Fatalf("3 -> 1 with a consumer: %v", err)
	}
	waitOneReplicaState(t, c, before)
	// It goes on where it was: the next fetch is a first delivery of the
	// message after the last delivered.
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		if md.NumDelivered != 1 || md.Sequence.Stream <= before.Delivered.Stream {
			t.Fatalf("after the scale-down: stream sequence %d, delivery %d; last delivered before %d", md.Sequence.Stream, md.NumDelivered, before.Delivered.Stream)
		}
	}
	if err := js.DeleteConsumer(tctx(t), "ORDERS", c.CachedInfo().Name); err != nil {
		t.Fatal(err)
	}
	publishAcked(t, js, sent, 99)
	for i, n := range []int{3, 1} {
		cfg.Replicas = n
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		_, err := js.UpdateStream(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatalf("update %d (to %d replicas), after %v: %v", i+1, n, time.Since(start), err)
		}
		publishAcked(t, js, sent, 100+i)
	}
	eventually(t, "a stream of one replica", func() error {
		s, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		if ci := si.Cluster; si.Config.Replicas != 1 || ci == nil || ci.Leader == "" || ci.RaftGroup != "" || len(ci.Replicas) != 0 {
			return fmt.Errorf("replicas %d, cluster %+v", si.Config.Replicas, si.Cluster)
		}
		if si.State.NumDeleted != 1 {
			return fmt.Errorf("state %+v", si.State)
		}
		return nil
	})
	checkAll(t, js, sent)
	// The duplicate window came along: message 1 again is a duplicate.
	ack, err := js.PublishMsg(tctx(t), orderMsg(1))
	if err != nil || !ack.Duplicate {
		t.Fatalf("message 1 published again: %+v, %v", ack, err)
	}
}

// fetchAck fetches n messages from c and double-acks the first acked.
func fetchAck(t *testing.T, c jetstream.Consumer, n, acked int) {
	t.Helper()
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		if got <= acked {
			if err := m.DoubleAck(tctx(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != n {
		t.Fatalf("fetched %d of %d", got, n)
	}
}
