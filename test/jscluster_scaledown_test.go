package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A replicated file stream scaled down to one replica (num_replicas 3 ->
// 1 and 5 -> 1 by stream update) with messages published before and
// during the scale: the replica that stays (on the server of the stream's
// consumer of one replica) becomes
// the stream of one replica, the others' files go, and every
// acknowledged message is served byte for byte, then again after every
// server restarted. A durable consumer of one replica on the kept server
// keeps its ack floor and pending acks (docs/cluster.md, "Scaling
// down to one replica"; a replicated consumer kept in memory:
// TestJetStreamClusterMemStorageConsumerToOne). StreamInfo's cluster is then a stream of one replica's: the
// leader, no replicas. Scaled up again (before and after the restarts),
// it is replicated again with every message.
func TestJetStreamClusterScaleDownToOne(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) { scaleDownToOne(t, n) })
	}
}

func scaleDownToOne(t *testing.T, n int) {
	servers, opts := jsClusterMod(t, n, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	js := make([]jetstream.JetStream, n)
	ncs := make([]*nats.Conn, n)
	for i, s := range servers {
		ncs[i] = connect(t, s.ClientURL())
		var err error
		if js[i], err = jetstream.New(ncs[i]); err != nil {
			t.Fatal(err)
		}
	}
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: n, Duplicates: time.Hour}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].CreateStream(ctx, cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	for i := 1; i <= 60; i++ {
		publishAcked(t, js[0], sent, i)
	}
	one := cfg
	one.Replicas = 1
	// A durable of one replica with acknowledgements pending: the
	// stream keeps its replica on the consumer's server (not
	// necessarily the leader's, which then hands its leadership over).
	cons, err := js[0].CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	home := cons.CachedInfo().Cluster.Leader
	kept := leaderIndex(servers, home)
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		if got <= 4 {
			if err := m.DoubleAck(tctx(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != 10 {
		t.Fatalf("fetched %d", got)
	}
	before := consumerState(t, js[kept])
	// Publishes go on while the stream scales down.
	var mu sync.Mutex
	during := map[uint64]sentMsg{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { publishUntil(js[kept], 100000, stop, &mu, during) })
	other := (kept + 1) % n
	scaleTo(t, js[other], one)
	waitSingle(t, js[other], home, opts, kept)
	close(stop)
	wg.Wait()
	mu.Lock()
	for seq, m := range during {
		sent[seq] = m
	}
	mu.Unlock()
	if len(during) == 0 {
		t.Fatal("nothing was published during the scale")
	}
	for i := 2001; i <= 2010; i++ {
		publishAcked(t, js[other], sent, i)
	}
	checkAll(t, js[other], sent)
	if after := consumerState(t, js[kept]); after != before {
		t.Fatalf("consumer after the scale-down: %+v, before %+v", after, before)
	}
	// Up again (the update waits for the settle), and down again, the
	// servers running all along.
	scaleTo(t, js[other], cfg)
	waitReplicas(t, js[other], n)
	publishAcked(t, js[other], sent, 2011)
	checkAll(t, js[other], sent)
	scaleTo(t, js[other], one)
	waitSingle(t, js[other], home, opts, kept)
	checkAll(t, js[other], sent)
	// Every server restarts: the stream of one replica comes back whole.
	for _, s := range servers {
		s.Shutdown()
	}
	for i := range servers {
		servers[i] = restartServer(t, opts[i])
	}
	for i, s := range servers {
		if js[i], err = jetstream.New(connect(t, s.ClientURL())); err != nil {
			t.Fatal(err)
		}
	}
	waitSingle(t, js[other], home, opts, kept)
	checkAll(t, js[other], sent)
	if after := consumerState(t, js[kept]); after != before {
		t.Fatalf("consumer after the restarts: %+v, before %+v", after, before)
	}
	publishAcked(t, js[other], sent, 3001)
	checkAll(t, js[other], sent)
	// Settled under a new group, it scales up again: its server's store
	// starts the group, the others catch up. (The update goes to the meta
	// leader: asked before the restarted servers know one, it goes
	// unanswered for scaleTo's 5 s.)
	waitMetaFormed(t, servers)
	scaleTo(t, js[other], cfg)
	waitReplicas(t, js[other], n)
	publishAcked(t, js[other], sent, 3002)
	checkAll(t, js[other], sent)
}

// scaleTo updates stream cfg.Name to cfg through js, retried until it
// succeeds.
func scaleTo(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	eventually(t, fmt.Sprintf("scale to %d", cfg.Replicas), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.UpdateStream(ctx, cfg)
		return err
	})
}

// ackState is what a consumer's info says of its acknowledgements.
type ackState struct {
	AckFloor, Delivered uint64
	AckPending          int
}

// consumerState returns consumer WORK's acknowledgement state.
func consumerState(t *testing.T, js jetstream.JetStream) ackState {
	t.Helper()
	var st ackState
	eventually(t, "consumer info", func() error {
		c, err := js.Consumer(tctx(t), "ORDERS", "WORK")
		if err != nil {
			return err
		}
		ci := c.CachedInfo()
		st = ackState{AckFloor: ci.AckFloor.Stream, Delivered: ci.Delivered.Stream, AckPending: ci.NumAckPending}
		return nil
	})
	return st
}

// waitSingle waits until stream ORDERS is a stream of one replica led by
// home (server kept) with nothing of a replica left on the disks: no
// checkpoint file on home, no stream directory elsewhere.
func waitSingle(t *testing.T, js jetstream.JetStream, home string, opts []server.Options, kept int) {
	t.Helper()
	eventually(t, "one replica on "+home, func() error {
		s, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		// As nats-server v2.15.2 shows a stream of one replica: the
		// cluster's name and the leader.
		if ci := si.Cluster; si.Config.Replicas != 1 || ci == nil || ci.Name == "" || ci.Leader != home || ci.RaftGroup != "" ||
			ci.LeaderSince != nil || len(ci.Replicas) != 0 {
			return fmt.Errorf("replicas %d, cluster %+v", si.Config.Replicas, si.Cluster)
		}
		for i, o := range opts {
			dir := filepath.Join(o.StoreDir, "jetstream", "$G", "streams", "ORDERS")
			_, err := os.Stat(dir)
			if i != kept && err == nil {
				return fmt.Errorf("server %d still holds %s", i, dir)
			}
			if _, err := os.Stat(filepath.Join(dir, "replica.ckpt")); i == kept && err == nil {
				return errors.New("the kept replica's checkpoint file is still there")
			}
		}
		return nil
	})
}

// publishUntil publishes messages from first on, each until it is
// acknowledged (a retry keeps its Nats-Msg-Id, so a publish whose answer
// was lost is acknowledged as a duplicate of where it is stored), until
// stop closes, recording what was acknowledged in sent. The message
// under way when stop closes is still retried until acknowledged (at
// most clusterTimeout), so that nothing stored goes unrecorded.
func publishUntil(js jetstream.JetStream, first int, stop chan struct{}, mu *sync.Mutex, sent map[uint64]sentMsg) {
	for i := first; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		m := &nats.Msg{Subject: fmt.Sprintf("orders.%d", i%7), Header: nats.Header{}, Data: fmt.Appendf(nil, "during-%d", i)}
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("id-%d", i))
		for deadline := time.Now().Add(clusterTimeout); time.Now().Before(deadline); {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ack, err := js.PublishMsg(ctx, m)
			cancel()
			if err == nil {
				mu.Lock()
				sent[ack.Sequence] = sentMsg{subject: m.Subject, hdr: m.Header, data: m.Data}
				mu.Unlock()
				break
			}
			time.Sleep(20 * time.Millisecond) // a retry after an error, bounded by the deadline
		}
	}
}

// A replicated mem_storage durable of a file stream scales down to one
// replica with its state (it starts from its group's committed state in
// memory, having no files for it), as nats-server v2.15.2 scales it:
// by its own update (num_replicas 3 -> 1), and with its stream (3 -> 1).
// Before, both answered 10061.
func TestJetStreamClusterMemStorageConsumerToOne(t *testing.T) {
	servers := jsCluster(t, 3)
	js := jsAt(t, servers[0])
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js, sent, 1, 30)
	ccfg := func(name string, replicas int) jetstream.ConsumerConfig {
		return jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MemoryStorage: true, Replicas: replicas}
	}
	for _, byStream := range []bool{false, true} {
		name := "OWN"
		if byStream {
			name = "WITH"
		}
		c, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", ccfg(name, 3))
		if err != nil {
			t.Fatal(err)
		}
		fetchAck(t, c, 6, 4)
		before, err := c.Info(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if before.NumAckPending != 2 || before.Delivered.Stream != 6 {
			t.Fatalf("%s before: %+v", name, before)
		}
		if byStream {
			one := cfg
			one.Replicas = 1
			if _, err := js.UpdateStream(tctx(t), one); err != nil {
				t.Fatalf("stream 3 -> 1 with a mem_storage durable: %v", err)
			}
		} else if _, err := js.UpdateConsumer(tctx(t), "ORDERS", ccfg(name, 1)); err != nil {
			t.Fatalf("mem_storage durable 3 -> 1: %v", err)
		}
		waitOneReplicaState(t, c, before)
		if err := js.DeleteConsumer(tctx(t), "ORDERS", name); err != nil {
			t.Fatal(err)
		}
	}
}

// waitOneReplicaState waits until consumer c runs as one replica with the
// delivery state before had: delivered, ack floor, pending acks and
// pending messages.
func waitOneReplicaState(t *testing.T, c jetstream.Consumer, before *jetstream.ConsumerInfo) {
	t.Helper()
	eventually(t, "the consumer of one replica with its state", func() error {
		ci, err := c.Info(tctx(t))
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || len(ci.Cluster.Replicas) != 0 {
			return fmt.Errorf("cluster %+v", ci.Cluster)
		}
		same := func(a, b jetstream.SequenceInfo) bool { return a.Consumer == b.Consumer && a.Stream == b.Stream }
		if !same(ci.Delivered, before.Delivered) || !same(ci.AckFloor, before.AckFloor) || ci.NumAckPending != before.NumAckPending || ci.NumPending != before.NumPending {
			return fmt.Errorf("delivered %+v ack floor %+v, %d ack pending, %d pending; before %+v %+v %d %d",
				ci.Delivered, ci.AckFloor, ci.NumAckPending, ci.NumPending, before.Delivered, before.AckFloor, before.NumAckPending, before.NumPending)
		}
		return nil
	})
}
