package test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// createMemoryOrders creates ORDERS, a memory stream of r replicas, through
// js.
func createMemoryOrders(t *testing.T, js jetstream.JetStream, r int) jetstream.StreamConfig {
	t.Helper()
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: r, Storage: jetstream.MemoryStorage, Duplicates: time.Hour}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, cfg)
		return err
	})
	return cfg
}

// waitCurrent waits until the stream, seen through js, has a leader and
// names server as a current replica (or as its leader).
func waitCurrent(t *testing.T, js jetstream.JetStream, server string) {
	t.Helper()
	eventually(t, server+" current", func() error {
		ci := streamCluster(t, js)
		if ci == nil || ci.Leader == "" {
			return fmt.Errorf("cluster %+v", ci)
		}
		if ci.Leader == server {
			return nil
		}
		for _, p := range ci.Replicas {
			if p.Name == server && p.Current && !p.Offline && !p.Pending {
				return nil
			}
		}
		return fmt.Errorf("cluster %+v", ci)
	})
}

// A follower of an R3 memory stream restarts (its memory is gone): its
// replica replays the group's log from its server's WAL and is current
// again; with the other follower stopped, the leader and it acknowledge
// more; with the leader stopped and the other follower back, the
// restarted replica leads or follows a leader that serves every
// acknowledged message, deleted ones still deleted.
func TestJetStreamClusterMemoryReplicaRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0 := jsAt(t, servers[0])
	createMemoryOrders(t, js0, 3)
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 100)
	s := deleteAcked(t, js0, sent, 5, 6, 70)
	leader := leaderIndex(servers, s.CachedInfo().Cluster.Leader)
	if leader < 0 {
		t.Fatalf("leader %q", s.CachedInfo().Cluster.Leader)
	}
	restarted, other := (leader+1)%3, (leader+2)%3
	servers[restarted].Shutdown()
	jsL := jsAt(t, servers[leader])
	publishRange(t, jsL, sent, 101, 130)
	servers[restarted] = restartServer(t, opts[restarted])
	waitCurrent(t, jsL, servers[restarted].Name())
	jsR := servesWithoutOther(t, servers, opts, sent, leader, restarted, other, 131, 150)
	publishRange(t, jsR, sent, 151, 160)
	checkAll(t, jsR, sent)
	// The duplicate window survived: message 120 again is a duplicate.
	m := orderMsg(120)
	eventually(t, "republish 120", func() error {
		ack, err := jsR.PublishMsg(tctx(t), m)
		if err == nil && !ack.Duplicate {
			return fmt.Errorf("message 120 stored again: %+v", ack)
		}
		return err
	})
}

// All three servers of an R3 memory stream stop and start again: cairn
// replays each replica from its server's WAL, so every acknowledged
// message is still there (nats-server v2.15.2 keeps a memory stream's
// Raft log in memory and comes back with the stream empty:
// docs/cluster.md, "Memory streams").
func TestJetStreamClusterMemoryStreamFullRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0 := jsAt(t, servers[0])
	createMemoryOrders(t, js0, 3)
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 60)
	for _, s := range servers {
		s.Shutdown()
	}
	for i := range servers {
		servers[i] = restartServer(t, opts[i])
	}
	js1 := jsAt(t, servers[1])
	publishRange(t, js1, sent, 61, 70)
	checkAll(t, js1, sent)
	waitReplicas(t, js1, 3)
}

// A memory stream scaled 3 -> 5 -> 3 (nats stream edit --replicas): the
// new replicas are caught up by stream snapshots whose messages come from
// the other replicas' memory (docs/cluster.md, "Memory streams") and
// hold everything: with the original followers stopped, the leader and
// the new replicas serve every acknowledged message. A new replica's
// server restarting loses what its snapshot gave it (its log starts
// there): it asks for a replacement, which is caught up again and is
// current. Scaled down to 3, every message stays.
func TestJetStreamClusterMemoryScale(t *testing.T) {
	servers, opts := jsClusterOpts(t, 5)
	_, js := clusterClients(t, servers)
	cfg := createMemoryOrders(t, js[0], 3)
	sent := map[uint64]sentMsg{}
	publishRange(t, js[0], sent, 1, 100)
	deleteAcked(t, js[0], sent, 2, 3, 60)
	three := waitReplicas(t, js[0], 3)
	setReplicas(t, js[0], cfg, 5)
	publishRange(t, js[0], sent, 101, 120)
	five := waitReplicas(t, js[0], 5)
	idx := func(name string) int { return leaderIndex(servers, name) }
	var added []int
	for i, srv := range servers {
		if !slices.Contains(three, srv.Name()) {
			added = append(added, i)
		}
	}
	// The original followers stop: the leader and the two new replicas
	// are a majority of five holding everything.
	var stopped []int
	for _, n := range three[1:] {
		stopped = append(stopped, idx(n))
		servers[idx(n)].Shutdown()
	}
	live := added[0]
	publishRange(t, js[live], sent, 121, 130)
	checkAll(t, js[live], sent)
	for _, i := range stopped {
		servers[i] = restartServer(t, opts[i])
	}
	waitReplicas(t, js[live], 5)
	// A new replica's server restarts: its replica is replaced, caught up
	// again, current.
	restarted := added[1]
	servers[restarted].Shutdown()
	publishRange(t, js[live], sent, 131, 140)
	servers[restarted] = restartServer(t, opts[restarted])
	waitCurrent(t, js[live], servers[restarted].Name())
	waitReplicas(t, js[live], 5)
	checkAll(t, js[live], sent)
	setReplicas(t, js[live], cfg, 3)
	after := waitReplicas(t, js[live], 3)
	publishRange(t, js[live], sent, 141, 150)
	checkAll(t, js[live], sent)
	t.Logf("replicas: %v, then %v, then %v", three, five, after)
}

// nats stream cluster peer-remove of a memory stream's follower in a
// cluster of four: the replica moves to the fourth server, caught up by a
// stream snapshot, current; it then carries acknowledged writes with the
// other follower down, and with the leader stopped and that follower
// back every acknowledged message is served.
func TestJetStreamClusterMemoryPeerRemove(t *testing.T) {
	servers, opts := jsClusterOpts(t, 4)
	js0 := jsAt(t, servers[0])
	createMemoryOrders(t, js0, 3)
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 100)
	names := waitReplicas(t, js0, 3)
	leader := leaderIndex(servers, names[0])
	removed, spare := leaderIndex(servers, names[1]), -1
	for i, srv := range servers {
		if !slices.Contains(names, srv.Name()) {
			spare = i
		}
	}
	peerRemoveMoves(t, servers, js0, sent, leader, removed, spare)
	other := 6 - leader - removed - spare
	servesWithoutOther(t, servers, opts, sent, leader, spare, other, 121, 140)
}

// A memory stream of one replica with data scales to three: its server's
// memory store becomes the first replica of the new group, the two new
// replicas are caught up by stream snapshots; with the original server
// stopped every acknowledged message is served by the other two, deleted
// ones still deleted and the duplicate window kept. The original server
// restarting has lost what its store held before the scale-up (the log
// does not hold it): its replica is replaced, caught up, current. A
// memory stream of one replica with an ephemeral consumer (which stays
// at one replica) scales up, the ephemeral keeping its state; with
// durables: TestJetStreamClusterMemoryScaleUpConsumers.
func TestJetStreamClusterMemoryScaleUpFromOne(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	_, js := clusterClients(t, servers)
	cfg := createMemoryOrders(t, js[0], 1)
	sent, home, other := scaleUpFromOne(t, servers, js, cfg)
	m := orderMsg(50)
	eventually(t, "republish 50", func() error {
		ack, err := js[other].PublishMsg(tctx(t), m)
		if err == nil && !ack.Duplicate {
			return fmt.Errorf("message 50 stored again: %+v", ack)
		}
		return err
	})
	servers[home] = restartServer(t, opts[home])
	waitCurrent(t, js[other], servers[home].Name())
	waitReplicas(t, js[other], 3)
	// The other two stop in turn: the replaced replica and one of them
	// hold everything.
	third := 3 - home - other
	servers[third].Shutdown()
	publishRange(t, js[other], sent, 121, 130)
	servers[third] = restartServer(t, opts[third])
	waitCurrent(t, js[other], servers[third].Name())
	servers[other].Shutdown()
	jsH := jsAt(t, servers[home])
	checkAll(t, jsH, sent)
	servers[other] = restartServer(t, opts[other])
	// A memory stream of one replica with an ephemeral consumer (which
	// stays at one replica) scales up, the ephemeral keeping its state,
	// as nats-server v2.15.2's (measured: two delivered and acknowledged,
	// the same after --replicas 3).
	withc := jetstream.StreamConfig{Name: "WITHC", Subjects: []string{"withc"}, Storage: jetstream.MemoryStorage}
	var eph jetstream.Consumer
	eventually(t, "create WITHC and its consumer", func() error {
		if _, err := jsH.CreateOrUpdateStream(ctx2(t), withc); err != nil {
			return err
		}
		var err error
		eph, err = jsH.CreateOrUpdateConsumer(ctx2(t), "WITHC", jetstream.ConsumerConfig{InactiveThreshold: time.Hour, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
		return err
	})
	for range 5 {
		if _, err := jsH.Publish(ctx2(t), "withc", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	fetchAck(t, eph, 3, 2)
	withc.Replicas = 3
	if _, err := jsH.UpdateStream(ctx2(t), withc); err != nil {
		t.Fatalf("memory stream with an ephemeral consumer 1 -> 3: %v", err)
	}
	eventually(t, "WITHC on three replicas", func() error {
		st, err := jsH.Stream(ctx2(t), "WITHC")
		if err != nil {
			return err
		}
		if ci := st.CachedInfo().Cluster; ci == nil || len(ci.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", ci)
		}
		return nil
	})
	eventually(t, "the ephemeral with its state", func() error {
		ci, err := eph.Info(ctx2(t))
		if err != nil {
			return err
		}
		if ci.Delivered.Stream != 3 || ci.AckFloor.Stream != 2 || ci.NumAckPending != 1 || ci.NumPending != 2 || ci.Config.Replicas > 1 {
			return fmt.Errorf("delivered %d, ack floor %d, %d ack pending, %d pending, %d replicas", ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumAckPending, ci.NumPending, ci.Config.Replicas)
		}
		return nil
	})
}

// A durable consumer of an R3 memory stream (three replicas, as its
// stream) keeps its acknowledgements across the restart of a follower's
// server and the stop of the leader's: the next fetch through the
// restarted server delivers the first message not acknowledged.
func TestJetStreamClusterMemoryConsumerRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0 := jsAt(t, servers[0])
	createMemoryOrders(t, js0, 3)
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 40)
	var cons jetstream.Consumer
	eventually(t, "create the consumer", func() error {
		var err error
		cons, err = js0.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	// The consumer's leader may not be subscribed yet right after the
	// create (no responders): fetch until 20 messages are acknowledged.
	got := 0
	eventually(t, "fetch and acknowledge 20", func() error {
		batch, err := cons.Fetch(20-got, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil || md.Sequence.Stream != uint64(got+1) {
				t.Fatalf("delivered %+v (%v), want stream sequence %d", md, err, got+1)
			}
			if err := m.DoubleAck(tctx(t)); err != nil {
				return err
			}
			got++
		}
		if got != 20 {
			return fmt.Errorf("%d acknowledged (%v)", got, batch.Error())
		}
		return nil
	})
	names := waitReplicas(t, js0, 3)
	leader := leaderIndex(servers, names[0])
	restarted := leaderIndex(servers, names[1])
	servers[restarted].Shutdown()
	servers[restarted] = restartServer(t, opts[restarted])
	jsR := jsAt(t, servers[restarted])
	waitCurrent(t, jsR, servers[restarted].Name())
	servers[leader].Shutdown()
	eventually(t, "fetch after the restart", func() error {
		c, err := jsR.Consumer(ctx2(t), "ORDERS", "D")
		if err != nil {
			return err
		}
		b, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range b.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if md.Sequence.Stream != 21 {
				t.Fatalf("delivered %d, want 21", md.Sequence.Stream)
			}
			return nil
		}
		return fmt.Errorf("nothing delivered: %v", b.Error())
	})
}

// A follower of an R3 memory stream whose store directory is wiped comes
// back under a new store identity: the meta leader replaces its replica
// by a new one on the same server, caught up by a stream snapshot from
// the others' memory and promoted; with the other follower down it
// carries acknowledged writes, and with the leader stopped and that
// follower back every acknowledged message is served through it.
func TestJetStreamClusterMemoryWipedFollower(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0 := jsAt(t, servers[0])
	createMemoryOrders(t, js0, 3)
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 80)
	names := waitReplicas(t, js0, 3)
	leader, wiped := leaderIndex(servers, names[0]), leaderIndex(servers, names[1])
	other := 3 - leader - wiped
	servers[wiped].Shutdown()
	if err := os.RemoveAll(opts[wiped].StoreDir); err != nil {
		t.Fatal(err)
	}
	jsL := jsAt(t, servers[leader])
	publishRange(t, jsL, sent, 81, 100)
	servers[wiped] = restartServer(t, opts[wiped])
	waitCurrent(t, jsL, servers[wiped].Name())
	servesWithoutOther(t, servers, opts, sent, leader, wiped, other, 101, 110)
}

// A memory stream scaled up from one replica has every replica's state
// from a snapshot (or, for the first, from the base its log starts at):
// when every server restarts, all three lose it, are fenced, and the
// group can never elect a leader. The meta leader resets the stream, as
// nats-server v2.15.2 brings it back (measured: docs/cluster.md,
// "Memory streams"): it answers, empty, with its config and created
// time; its durable consumer is back with nothing delivered or
// acknowledged; it takes publishes again from sequence 1, which the
// consumer delivers, and every replica is current.
func TestJetStreamClusterMemoryResetAfterFullRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	_, js := clusterClients(t, servers)
	cfg := createMemoryOrders(t, js[0], 1)
	_, home, other := scaleUpFromOne(t, servers, js, cfg)
	var cons jetstream.Consumer
	eventually(t, "create the consumer", func() error {
		var err error
		cons, err = js[other].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	eventually(t, "fetch and acknowledge one", func() error {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range b.Messages() {
			return m.DoubleAck(tctx(t))
		}
		return fmt.Errorf("nothing delivered: %v", b.Error())
	})
	s, err := js[other].Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	created := s.CachedInfo().Created
	ci, err := cons.Info(tctx(t))
	if err != nil || ci.AckFloor.Stream == 0 {
		t.Fatalf("consumer before the restart %+v: %v", ci, err)
	}
	for i, srv := range servers {
		if i != home {
			srv.Shutdown()
		}
	}
	for i := range servers {
		servers[i] = restartServer(t, opts[i])
	}
	_, js = clusterClients(t, servers)
	eventually(t, "the stream answers, empty", func() error {
		s, err = js[home].Stream(ctx2(t), "ORDERS")
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" || info.State.Msgs != 0 || info.State.FirstSeq != 0 || info.State.LastSeq != 0 {
			return fmt.Errorf("state %+v cluster %+v", info.State, info.Cluster)
		}
		return nil
	})
	if info := s.CachedInfo(); !info.Created.Equal(created) || info.Config.Storage != jetstream.MemoryStorage || info.Config.Replicas != 3 || info.Config.Duplicates != cfg.Duplicates {
		t.Fatalf("after the reset: created %v (was %v), config %+v", info.Created, created, info.Config)
	}
	eventually(t, "the consumer answers, from the start", func() error {
		c, err := js[home].Consumer(ctx2(t), "ORDERS", "D")
		if err != nil {
			return err
		}
		ci := c.CachedInfo()
		if ci.Delivered.Stream != 0 || ci.AckFloor.Stream != 0 || ci.NumPending != 0 || ci.NumAckPending != 0 || ci.Config.AckPolicy != jetstream.AckExplicitPolicy {
			return fmt.Errorf("consumer %+v", ci)
		}
		cons = c
		return nil
	})
	sent := map[uint64]sentMsg{}
	for n := 1; n <= 20; n++ {
		publishAcked(t, js[home], sent, n)
	}
	if _, ok := sent[1]; !ok || len(sent) != 20 {
		t.Fatalf("sequences after the reset: %v", slices.Sorted(maps.Keys(sent)))
	}
	checkAll(t, js[other], sent)
	eventually(t, "the consumer delivers sequence 1", func() error {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range b.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if md.Sequence.Stream != 1 {
				t.Fatalf("delivered stream sequence %d, want 1", md.Sequence.Stream)
			}
			return nil
		}
		return fmt.Errorf("nothing delivered: %v", b.Error())
	})
	waitReplicas(t, js[home], 3)
}

// Every server of an R3 memory stream restarts when only one of its
// replicas (a replacement for a wiped follower, caught up by a snapshot)
// lost its state: the other two replay their logs and elect a leader, so
// the stream is not reset: the lost replica is replaced the normal way,
// every acknowledged message is still there and the replacement is
// current.
func TestJetStreamClusterMemoryMinorityLostFullRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	_, js := clusterClients(t, servers)
	createMemoryOrders(t, js[0], 3)
	sent := map[uint64]sentMsg{}
	for n := 1; n <= 50; n++ {
		publishAcked(t, js[0], sent, n)
	}
	names := waitReplicas(t, js[0], 3)
	leader, wiped := leaderIndex(servers, names[0]), leaderIndex(servers, names[1])
	servers[wiped].Shutdown()
	if err := os.RemoveAll(opts[wiped].StoreDir); err != nil {
		t.Fatal(err)
	}
	for n := 51; n <= 60; n++ {
		publishAcked(t, js[leader], sent, n)
	}
	servers[wiped] = restartServer(t, opts[wiped])
	waitCurrent(t, js[leader], servers[wiped].Name())
	for _, s := range servers {
		s.Shutdown()
	}
	for i := range servers {
		servers[i] = restartServer(t, opts[i])
	}
	_, js = clusterClients(t, servers)
	checkAll(t, js[wiped], sent)
	for n := 61; n <= 70; n++ {
		publishAcked(t, js[wiped], sent, n)
	}
	waitReplicas(t, js[wiped], 3)
	checkAll(t, js[leader], sent)
}
