package test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A durable consumer of a stream with three replicas is replicated
// (docs/cluster.md, "Replicated consumers"): its info names its own
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
			// An ack whose answer was lost with a leadership change
			// (CI under heavy load: 10 s without one) is sent again,
			// as an application does: an ack is idempotent.
			eventually(t, "double ack", func() error { return m.DoubleAck(tctx(t)) })
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

// clusterClients connects a nats.go JetStream client to each server.
func clusterClients(t *testing.T, servers []*server.Server, opts ...nats.Option) ([]*nats.Conn, []jetstream.JetStream) {
	t.Helper()
	ncs := make([]*nats.Conn, len(servers))
	jss := make([]jetstream.JetStream, len(servers))
	for i, s := range servers {
		ncs[i] = connect(t, s.ClientURL(), opts...)
		var err error
		if jss[i], err = jetstream.New(ncs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return ncs, jss
}

// consumerInfoVia returns the info of consumer name of stream through js
// (the server it is connected to forwards nothing: whichever server
// answers, answers every client).
func consumerInfoVia(t *testing.T, js jetstream.JetStream, stream, name string) (*jetstream.ConsumerInfo, error) {
	t.Helper()
	c, err := js.Consumer(ctx2(t), stream, name)
	if err != nil {
		return nil, err
	}
	return c.CachedInfo(), nil
}

// consumerNamesVia returns the names CONSUMER.NAMES answers through js.
func consumerNamesVia(t *testing.T, js jetstream.JetStream, stream string) ([]string, error) {
	t.Helper()
	s, err := js.Stream(ctx2(t), stream)
	if err != nil {
		return nil, err
	}
	l := s.ConsumerNames(ctx2(t))
	var names []string
	for n := range l.Name() {
		names = append(names, n)
	}
	return names, l.Err()
}

// A consumer's num_replicas is honoured as nats-server v2.15.2 honours it
// (docs/cluster.md, "Consumers in a cluster"): of a stream with three
// replicas, a durable with num_replicas 1 and an ephemeral (one by
// default) run on one of its servers, chosen by the meta group, and every
// server's clients see them there (info with the same leader and no Raft
// group, CONSUMER.NAMES and LIST from every server); a durable left at 0
// has the stream's three; more than the stream has is 10126, and a
// count other than the stream's on a work-queue stream 10134. The one
// replica consumer delivers to a client of another server.
func TestJetStreamClusterConsumerReplicas(t *testing.T) {
	servers := jsCluster(t, 3)
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= 5; i++ {
		clusterPublish(t, js[0], fmt.Sprintf("orders.%d", i), uint64(i))
	}
	var one, three, eph *jetstream.ConsumerInfo
	eventually(t, "create the durable of one replica", func() error {
		c, err := js[1].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "one", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1})
		if err == nil {
			one = c.CachedInfo()
		}
		return err
	})
	eventually(t, "create the durable of the stream's replicas", func() error {
		c, err := js[2].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "three", AckPolicy: jetstream.AckExplicitPolicy})
		if err == nil {
			three = c.CachedInfo()
		}
		return err
	})
	eventually(t, "create an ephemeral", func() error {
		c, err := js[0].CreateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Hour})
		if err == nil {
			eph = c.CachedInfo()
		}
		return err
	})
	for _, ci := range []*jetstream.ConsumerInfo{one, eph} {
		if ci.Cluster == nil || ci.Cluster.Leader == "" || ci.Cluster.RaftGroup != "" || len(ci.Cluster.Replicas) != 0 || ci.Config.Replicas > 1 {
			t.Fatalf("%s: cluster %+v, replicas %d; want one replica, no group", ci.Name, ci.Cluster, ci.Config.Replicas)
		}
	}
	if three.Cluster == nil || !strings.HasPrefix(three.Cluster.RaftGroup, "C-R3F-") || len(three.Cluster.Replicas) != 2 {
		t.Fatalf("three: cluster %+v", three.Cluster)
	}
	for i := range servers {
		for _, want := range []*jetstream.ConsumerInfo{one, eph} {
			eventually(t, fmt.Sprintf("info of %s through %s", want.Name, servers[i].Name()), func() error {
				ci, err := consumerInfoVia(t, js[i], "ORDERS", want.Name)
				if err != nil {
					return err
				}
				if ci.Cluster == nil || ci.Cluster.Leader != want.Cluster.Leader || ci.Cluster.RaftGroup != "" || ci.NumPending != 5 {
					return fmt.Errorf("cluster %+v, %d pending; want leader %s, 5 pending", ci.Cluster, ci.NumPending, want.Cluster.Leader)
				}
				return nil
			})
		}
		wantNames := []string{eph.Name, "one", "three"}
		slices.Sort(wantNames)
		eventually(t, "names through "+servers[i].Name(), func() error {
			names, err := consumerNamesVia(t, js[i], "ORDERS")
			if err != nil || !slices.Equal(names, wantNames) {
				return fmt.Errorf("names %v (%v), want %v", names, err, wantNames)
			}
			return nil
		})
		eventually(t, "list through "+servers[i].Name(), func() error {
			s, err := js[i].Stream(ctx2(t), "ORDERS")
			if err != nil {
				return err
			}
			l := s.ListConsumers(ctx2(t))
			leaders := map[string]string{}
			for ci := range l.Info() {
				if ci.Cluster != nil {
					leaders[ci.Name] = ci.Cluster.Leader
				}
			}
			if l.Err() != nil || len(leaders) != 3 || leaders["one"] != one.Cluster.Leader || leaders[eph.Name] != eph.Cluster.Leader || leaders["three"] == "" {
				return fmt.Errorf("list: %v (%v)", leaders, l.Err())
			}
			return nil
		})
	}
	// The consumer of one replica delivers to a client of a server that
	// does not run it.
	// The messages delivered are counted over the tries: a try whose
	// double ack timed out under load (once in CI under -race) leaves the
	// rest of its batch pending for the ack wait (30 s), and a fresh try
	// then fetches nothing new.
	other := (leaderIndex(servers, one.Cluster.Leader) + 1) % 3
	fetched := map[uint64]bool{}
	eventually(t, "fetch through another server", func() error {
		c, err := js[other].Consumer(ctx2(t), "ORDERS", "one")
		if err != nil {
			return err
		}
		batch, err := c.Fetch(5-len(fetched), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			if md, err := m.Metadata(); err == nil {
				fetched[md.Sequence.Stream] = true
			}
			if err := m.DoubleAck(ctx2(t)); err != nil {
				return err
			}
		}
		if len(fetched) < 5 {
			return fmt.Errorf("fetched %d of 5 (%v)", len(fetched), batch.Error())
		}
		return nil
	})

	_, err := js[0].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "five", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 5})
	wantAPIError(t, err, 400, 10126, "consumer config replica count exceeds parent stream")
	eventually(t, "create JOBS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}, Replicas: 3, Retention: jetstream.WorkQueuePolicy})
		return err
	})
	_, err = js[1].CreateOrUpdateConsumer(ctx2(t), "JOBS", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1})
	wantAPIError(t, err, 400, 10134, "consumer config replicas must match interest retention stream's replicas")
}

// A consumer with one replica of a file stream with three keeps its
// delivery state on its server and comes back with it when that server
// restarts, as nats-server's does: what was acknowledged is not
// delivered again, and a client of another server sees its info and
// fetches the rest. So does an ephemeral (one replica by default), which
// a client of any server finds after its server restarted.
func TestJetStreamClusterOneReplicaConsumerRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= 10; i++ {
		clusterPublish(t, js[0], fmt.Sprintf("orders.%d", i), uint64(i))
	}
	hosts := map[string]int{}
	for _, cfg := range []jetstream.ConsumerConfig{
		{Durable: "one", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, Replicas: 1},
		{Name: "eph", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, InactiveThreshold: time.Hour},
	} {
		name := cmp.Or(cfg.Durable, cfg.Name)
		var cons jetstream.Consumer
		eventually(t, "create "+name, func() error {
			var err error
			cons, err = js[1].CreateOrUpdateConsumer(ctx2(t), "ORDERS", cfg)
			return err
		})
		ci := cons.CachedInfo()
		if ci.Cluster == nil || ci.Cluster.RaftGroup != "" || len(ci.Cluster.Replicas) != 0 || leaderIndex(servers, ci.Cluster.Leader) < 0 {
			t.Fatalf("%s: cluster %+v, want one replica", name, ci.Cluster)
		}
		hosts[name] = leaderIndex(servers, ci.Cluster.Leader)
		// The first pull request right after the create, through a server
		// that is neither the meta leader (which answered it) nor,
		// often, the consumer's: it must find the consumer's interest.
		batch, err := cons.Fetch(5, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		acked := 0
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx2(t)); err != nil { // confirmed once its state is durable
				t.Fatal(err)
			}
			acked++
		}
		if acked != 5 {
			t.Fatalf("%s: the first fetch after the create got %d of 5 messages: %v", name, acked, batch.Error())
		}
	}
	restarted := map[int]bool{}
	for _, name := range []string{"one", "eph"} {
		host := hosts[name]
		if !restarted[host] {
			servers[host].Shutdown()
			servers[host] = restartServer(t, opts[host])
			restarted[host] = true
			// The restarted server's client connection is closed: connect
			// every client again, so that js[via] works whichever server
			// was restarted before.
			_, js = clusterClients(t, servers)
		}
		via := (host + 1) % 3
		eventually(t, name+"'s info after the restart", func() error {
			ci, err := consumerInfoVia(t, js[via], "ORDERS", name)
			if err != nil {
				return err
			}
			if ci.Cluster == nil || ci.Cluster.Leader != servers[host].Name() || ci.AckFloor.Stream != 5 || ci.NumPending != 5 {
				return fmt.Errorf("cluster %+v, ack floor %+v, %d pending", ci.Cluster, ci.AckFloor, ci.NumPending)
			}
			return nil
		})
		got := map[uint64]bool{}
		eventually(t, "fetch the rest of "+name, func() error {
			c, err := js[via].Consumer(ctx2(t), "ORDERS", name)
			if err != nil {
				return err
			}
			batch, err := c.Fetch(5, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return err
			}
			for m := range batch.Messages() {
				md, _ := m.Metadata()
				if md.Sequence.Stream <= 5 {
					t.Fatalf("%s: acknowledged message %d delivered again after the restart", name, md.Sequence.Stream)
				}
				got[md.Sequence.Stream] = true
				_ = m.Ack()
			}
			if len(got) != 5 {
				return fmt.Errorf("fetched %d of 5", len(got))
			}
			return nil
		})
	}
}

// A client's first pull request right after its consumer create finds
// the consumer, whichever server it is connected to: a consumer of one
// replica placed on neither the client's server nor the meta leader
// (which answers the create) subscribes on its own server, and the
// client's server learns that interest over another route than the one
// the answer comes by. The consumer's server flushes its routes before
// it confirms the consumer to the meta leader; before, about one such
// create in a hundred under load was followed by a 503 no responders
// (the Fetch ending at once with nothing).
func TestJetStreamClusterFetchRightAfterCreate(t *testing.T) {
	servers := jsCluster(t, 3)
	leader := leaderIndex(servers, metaLeaderOf(t, servers))
	via := (leader + 1) % 3
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[via].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, js[via], "orders.1", 1)
	third := 0
	for i := 0; i < 60; i++ {
		name := fmt.Sprintf("c%d", i)
		var cons jetstream.Consumer
		eventually(t, "create "+name, func() error {
			var err error
			cons, err = js[via].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Name: name, AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute})
			return err
		})
		if ci := cons.CachedInfo(); ci.Cluster != nil && ci.Cluster.Leader != servers[via].Name() && ci.Cluster.Leader != servers[leader].Name() {
			third++
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for range batch.Messages() {
			got++
		}
		if got != 1 {
			t.Fatalf("%s (on %s): the first fetch after the create got %d messages: %v", name, cons.CachedInfo().Cluster.Leader, got, batch.Error())
		}
	}
	if third == 0 {
		t.Fatal("no consumer was placed on the third server (the test's premise)")
	}
}

// With five servers and a stream of three, a meta leader that holds no
// replica of the stream creates its consumers (checked against what the
// meta group holds, the answer from the consumer's leader), as
// nats-server's does: a durable of three replicas, one of one, an
// ephemeral; an update goes through it too, and so does a refusal.
func TestJetStreamClusterConsumerCreateMetaLeaderWithoutReplica(t *testing.T) {
	servers, _ := jsClusterMod(t, 5, func(_ int, o *server.Options) { sysAppAuth(o) })
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	var si *jetstream.StreamInfo
	eventually(t, "create ORDERS", func() error {
		s, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		if err == nil {
			si = s.CachedInfo()
		}
		return err
	})
	clusterPublish(t, js[0], "orders.1", 1)
	eventually(t, "the stream's replicas", func() error {
		s, err := js[0].Stream(ctx2(t), "ORDERS")
		if err != nil {
			return err
		}
		si = s.CachedInfo()
		if si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", si.Cluster)
		}
		return nil
	})
	holds := map[string]bool{si.Cluster.Leader: true}
	for _, p := range si.Cluster.Replicas {
		holds[p.Name] = true
	}
	var outside string
	for _, s := range servers {
		if !holds[s.Name()] {
			outside = s.Name()
			break
		}
	}
	metaLeader := func() string {
		for _, s := range servers {
			if mi := s.JetStreamMeta(); mi != nil && mi.Leader != "" {
				return mi.Leader
			}
		}
		return ""
	}
	sys := connect(t, servers[0].ClientURL(), nats.UserInfo("sys", "sys"))
	eventually(t, "a meta leader without a replica of ORDERS", func() error {
		l := metaLeader()
		if l != "" && !holds[l] {
			return nil
		}
		if l != "" {
			body := fmt.Sprintf(`{"placement":{"preferred":%q}}`, outside)
			if _, err := sys.Request("$JS.API.META.LEADER.STEPDOWN", []byte(body), 2*time.Second); err != nil {
				return err
			}
		}
		return fmt.Errorf("meta leader %q holds a replica of ORDERS (%v)", l, holds)
	})
	leader := metaLeader()
	for _, tc := range []struct {
		cfg      jetstream.ConsumerConfig
		replicas int
	}{
		{jetstream.ConsumerConfig{Durable: "three", AckPolicy: jetstream.AckExplicitPolicy}, 3},
		{jetstream.ConsumerConfig{Durable: "one", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1}, 1},
		{jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Hour}, 1},
	} {
		var ci *jetstream.ConsumerInfo
		eventually(t, "create "+tc.cfg.Durable, func() error {
			c, err := js[1].CreateOrUpdateConsumer(ctx2(t), "ORDERS", tc.cfg)
			if err != nil {
				return err
			}
			ci = c.CachedInfo()
			return nil
		})
		if l := metaLeader(); l != leader {
			t.Fatalf("the meta leader moved from %s to %s: the test did not test a meta leader without a replica", leader, l)
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || !holds[ci.Cluster.Leader] || ci.NumPending != 1 || len(ci.Cluster.Replicas) != tc.replicas-1 {
			t.Fatalf("%s: cluster %+v, %d pending; want %d replicas among %v", ci.Name, ci.Cluster, ci.NumPending, tc.replicas, holds)
		}
	}
	// An update, and the checks, made against the meta group's configs.
	eventually(t, "update", func() error {
		c, err := js[2].UpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "one", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1, MaxDeliver: 7})
		if err != nil {
			return err
		}
		if c.CachedInfo().Config.MaxDeliver != 7 {
			return fmt.Errorf("max deliver %d after the update", c.CachedInfo().Config.MaxDeliver)
		}
		return nil
	})
	_, err := js[3].CreateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "one", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1, MaxDeliver: 9})
	wantAPIError(t, err, 400, 10148, "consumer already exists")
	_, err = js[3].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "one", AckPolicy: jetstream.AckAllPolicy, Replicas: 1})
	wantAPIError(t, err, 500, 10012, "ack policy can not be updated")
}

// inactive_threshold removes a consumer through the meta group, decided
// by the consumer's leader, as nats-server's (consumer.go
// deleteNotActive): a durable of three replicas, one of one, and an
// ephemeral, none of them pulled from, are gone from every server's
// view once past it; a consumer being pulled from stays.
func TestJetStreamClusterConsumerInactiveThreshold(t *testing.T) {
	servers := jsCluster(t, 3)
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, js[0], "orders.1", 1)
	idle := []jetstream.ConsumerConfig{
		{Durable: "idle3", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Second},
		{Durable: "idle1", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Second, Replicas: 1},
		{Name: "idleeph", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Second},
	}
	for _, cfg := range append(idle, jetstream.ConsumerConfig{Durable: "busy", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: 2 * time.Second}) {
		eventually(t, "create", func() error {
			_, err := js[1].CreateOrUpdateConsumer(ctx2(t), "ORDERS", cfg)
			return err
		})
	}
	// busy keeps a pull request waiting for as long as the test runs.
	busy, err := js[2].Consumer(ctx2(t), "ORDERS", "busy")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := busy.Consume(func(m jetstream.Msg) { _ = m.Ack() }, jetstream.PullExpiry(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	for i := range servers {
		eventually(t, "the idle consumers gone, seen through "+servers[i].Name(), func() error {
			names, err := consumerNamesVia(t, js[i], "ORDERS")
			if err != nil || !slices.Equal(names, []string{"busy"}) {
				return fmt.Errorf("names %v (%v)", names, err)
			}
			for _, cfg := range idle {
				name := cmp.Or(cfg.Durable, cfg.Name)
				if _, err := js[i].Consumer(ctx2(t), "ORDERS", name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
					return fmt.Errorf("info of %s: %v", name, err)
				}
			}
			return nil
		})
	}
	if _, err := consumerInfoVia(t, js[0], "ORDERS", "busy"); err != nil {
		t.Fatalf("busy: %v", err)
	}
}

// A consumer's created and deleted advisories are sent once per
// consumer, as nats-server's consumer leader sends them, however many
// replicas it has.
func TestJetStreamClusterConsumerAdvisories(t *testing.T) {
	servers := jsCluster(t, 3)
	ncs, js := clusterClients(t, servers)
	var mu sync.Mutex
	seen := map[string]int{}
	sub, err := ncs[0].Subscribe("$JS.EVENT.ADVISORY.CONSUMER.>", func(m *nats.Msg) {
		mu.Lock()
		seen[m.Subject]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The advisory subscription is known everywhere once a probe
	// subscribed after it answers the clients of the other servers.
	probe, err := ncs[0].Subscribe("_PROBE.advisories", func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Unsubscribe()
	for _, nc := range ncs[1:] {
		eventually(t, "interest everywhere", func() error {
			_, err := nc.Request("_PROBE.advisories", nil, time.Second)
			return err
		})
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for _, cfg := range []jetstream.ConsumerConfig{
		{Durable: "three", AckPolicy: jetstream.AckExplicitPolicy},
		{Durable: "one", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1},
	} {
		eventually(t, "create "+cfg.Durable, func() error {
			_, err := js[1].CreateOrUpdateConsumer(ctx2(t), "ORDERS", cfg)
			return err
		})
	}
	for _, name := range []string{"three", "one"} {
		eventually(t, "delete "+name, func() error { return js[2].DeleteConsumer(ctx2(t), "ORDERS", name) })
	}
	count := func(subj string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[subj]
	}
	eventually(t, "the advisories", func() error {
		for _, name := range []string{"three", "one"} {
			for _, kind := range []string{"CREATED", "DELETED"} {
				if n := count("$JS.EVENT.ADVISORY.CONSUMER." + kind + ".ORDERS." + name); n == 0 {
					return fmt.Errorf("no %s advisory for %s", kind, name)
				}
			}
		}
		return nil
	})
	if err := ncs[0].Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for subj, n := range seen {
		if n != 1 && (strings.Contains(subj, ".CREATED.") || strings.Contains(subj, ".DELETED.")) {
			t.Errorf("%s: %d advisories, want 1", subj, n)
		}
	}
}
