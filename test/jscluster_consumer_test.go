package test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A durable consumer of a stream with three replicas is replicated
// (docs/clustering.md, "Replicated consumers"): its info names its own
// group and leader; what was acknowledged through its leader stays
// acknowledged after that leader's server stops, and the other two
// servers deliver the rest, exactly the unacknowledged messages, to a
// client connected to one of them.
func TestJetStreamClusterReplicatedConsumer(t *testing.T) {
	servers := jsCluster(t, 3)
	nc := make([]*nats.Conn, 3)
	js := make([]jetstream.JetStream, 3)
	for i, s := range servers {
		nc[i] = connect(t, s.ClientURL())
		var err error
		if js[i], err = jetstream.New(nc[i]); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= 20; i++ {
		subj := fmt.Sprintf("orders.%d", i)
		eventually(t, "publish "+subj, func() error {
			_, err := js[1].Publish(tctx(t), subj, []byte("order"), jetstream.WithMsgID(subj))
			return err
		})
	}
	var cons jetstream.Consumer
	eventually(t, "create consumer", func() error {
		var err error
		cons, err = js[2].CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		return err
	})
	var ci *jetstream.ConsumerInfo
	eventually(t, "consumer info", func() error {
		var err error
		if ci, err = cons.Info(tctx(t)); err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || !strings.HasPrefix(ci.Cluster.RaftGroup, "C-R3F-") || len(ci.Cluster.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", ci.Cluster)
		}
		return nil
	})
	// fetchAck fetches up to n messages and double-acks each, returning
	// the stream sequences acknowledged.
	fetchAck := func(c jetstream.Consumer, n int) ([]uint64, error) {
		batch, err := c.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		var seqs []uint64
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return seqs, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = m.DoubleAck(ctx)
			cancel()
			if err != nil {
				return seqs, fmt.Errorf("ack of %d: %w", md.Sequence.Stream, err)
			}
			seqs = append(seqs, md.Sequence.Stream)
		}
		return seqs, nil
	}
	first, err := fetchAck(cons, 10)
	if err != nil || len(first) != 10 || first[0] != 1 || first[9] != 10 {
		t.Fatalf("first fetch: %v (%v)", first, err)
	}
	// CONSUMER.LEADER.STEPDOWN hands the leadership to another replica,
	// which delivers from what committed: nothing acknowledged again.
	old := ci.Cluster.Leader
	eventually(t, "consumer step-down", func() error {
		msg, err := nc[1].Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.worker", nil, 2*time.Second)
		if err != nil {
			return err
		}
		if !strings.Contains(string(msg.Data), `"success":true`) {
			t.Fatalf("step-down: %s", msg.Data)
		}
		return nil
	})
	eventually(t, "new consumer leader", func() error {
		var err error
		if ci, err = cons.Info(tctx(t)); err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || ci.Cluster.Leader == old {
			return fmt.Errorf("leader %+v (was %s)", ci.Cluster, old)
		}
		return nil
	})
	leader := leaderIndex(servers, ci.Cluster.Leader)
	servers[leader].Shutdown()
	other := (leader + 1) % 3
	// Requests get no answer while the groups elect: short timeouts. The
	// ten acknowledged messages are never delivered again; the other ten
	// are (an ack whose confirmation was lost in the failover is not
	// delivered again either, so the ack floor tells the rest).
	got := map[uint64]bool{}
	eventually(t, "fetch after the consumer's leader stopped", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := js[other].Consumer(ctx, "ORDERS", "worker")
		if err != nil {
			return err
		}
		seqs, err := fetchAck(c, 10)
		for _, seq := range seqs {
			if seq <= 10 {
				t.Fatalf("acknowledged message %d delivered again after the failover", seq)
			}
			got[seq] = true
		}
		if err != nil {
			return err
		}
		if ci, err := c.Info(ctx); err != nil || ci.NumPending+uint64(ci.NumAckPending) > 0 {
			return fmt.Errorf("fetched %d of 11..20 (%v)", len(got), err)
		}
		return nil
	})
	eventually(t, "ack floor after failover", func() error {
		c, err := js[other].Consumer(tctx(t), "ORDERS", "worker")
		if err != nil {
			return err
		}
		ci, err := c.Info(tctx(t))
		if err != nil {
			return err
		}
		if ci.AckFloor.Stream != 20 || ci.NumAckPending != 0 || ci.Cluster.Leader == servers[leader].Name() {
			return fmt.Errorf("ack floor %+v, %d pending, leader %s", ci.AckFloor, ci.NumAckPending, ci.Cluster.Leader)
		}
		return nil
	})
	eventually(t, "delete consumer", func() error { return js[other].DeleteConsumer(tctx(t), "ORDERS", "worker") })
	eventually(t, "info after delete", func() error {
		if _, err := js[other].Consumer(tctx(t), "ORDERS", "worker"); err == nil {
			return fmt.Errorf("the consumer is still there")
		}
		return nil
	})
}

// A replicated consumer's replicas checkpoint their committed state
// (after 1,024 log entries) and compact their group; after every server
// of the cluster restarts, each replica starts from its checkpoint and
// the entries after it, and the consumer delivers only what was not
// acknowledged.
func TestJetStreamClusterConsumerCheckpointRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	const total, acked = 700, 650
	for i := 1; i <= total; i++ {
		eventually(t, "publish", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := js0.Publish(ctx, fmt.Sprintf("orders.%d", i), nil, jetstream.WithMsgID(fmt.Sprint(i)))
			return err
		})
	}
	var cons jetstream.Consumer
	eventually(t, "create consumer", func() error {
		var err error
		cons, err = js0.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		return err
	})
	for n := 0; n < acked; {
		batch, err := cons.Fetch(min(50, acked-n), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(tctx(t)); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	// Every replica checkpointed (more than 1,024 entries: the start,
	// 650 deliveries and 650 acks).
	eventually(t, "checkpoints", func() error {
		for _, o := range opts {
			files, _ := filepath.Glob(filepath.Join(o.StoreDir, "jetstream", "$SYS", "_js_", "consumers", "*", "meta.json"))
			if len(files) != 1 {
				return fmt.Errorf("%s: checkpoint files %v", o.ServerName, files)
			}
		}
		return nil
	})
	for _, s := range servers {
		s.Shutdown()
	}
	for i := range servers {
		servers[i] = restartServer(t, opts[i])
	}
	js1, err := jetstream.New(connect(t, servers[1].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	eventually(t, "fetch after the restart", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := js1.Consumer(ctx, "ORDERS", "worker")
		if err != nil {
			return err
		}
		batch, err := c.Fetch(total-acked, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			if md.Sequence.Stream <= acked {
				t.Fatalf("acknowledged message %d delivered again after the restart", md.Sequence.Stream)
			}
			got[md.Sequence.Stream] = true
			_ = m.Ack()
		}
		if len(got) < total-acked {
			return fmt.Errorf("fetched %d of %d", len(got), total-acked)
		}
		return nil
	})
}

// A work-queue stream with three replicas and a replicated durable
// consumer: what the consumer acknowledged leaves the stream (the ack
// committed in the consumer's group reaches the stream's leader, which
// removes the message through the stream's group).
func TestJetStreamClusterWorkQueueConsumer(t *testing.T) {
	servers := jsCluster(t, 3)
	js0, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	js2, err := jetstream.New(connect(t, servers[2].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create JOBS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}, Replicas: 3, Retention: jetstream.WorkQueuePolicy})
		return err
	})
	for i := 1; i <= 20; i++ {
		eventually(t, "publish", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := js0.Publish(ctx, fmt.Sprintf("jobs.%d", i), nil, jetstream.WithMsgID(fmt.Sprint(i)))
			return err
		})
	}
	var cons jetstream.Consumer
	eventually(t, "create consumer", func() error {
		var err error
		cons, err = js2.CreateOrUpdateConsumer(tctx(t), "JOBS", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	batch, err := cons.Fetch(15, jetstream.FetchMaxWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(tctx(t)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 15 {
		t.Fatalf("fetched %d of 15 (%v)", n, batch.Error())
	}
	eventually(t, "work-queue removals", func() error {
		s, err := js2.Stream(tctx(t), "JOBS")
		if err != nil {
			return err
		}
		if st := s.CachedInfo().State; st.Msgs != 5 || st.FirstSeq != 16 {
			return fmt.Errorf("state %+v, want messages 16..20", st)
		}
		return nil
	})
}
