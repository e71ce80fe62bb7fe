package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
// (docs/cluster.md, "Replacing a replica").
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

// SERVER.REMOVE of the meta leader, which leads a replicated stream of
// three replicas: with a fourth server, the stream's replica on it moves
// there; in a cluster of three, with no server to take it, the stream
// drops it and runs on the two others (as nats-server v2.15.2 drops a
// removed peer that cannot be replaced). Either way the removed server's
// leadership ends (its replica hands it over and leaves the group), the
// other servers form the meta group, and every acknowledged message is
// served. A trial found the removed meta leader still leading the
// stream.
func TestJetStreamClusterServerRemoveMetaLeaderLeadingStream(t *testing.T) {
	for _, n := range []int{4, 3} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) { removeMetaLeaderLeadingStream(t, n) })
	}
}

func removeMetaLeaderLeadingStream(t *testing.T, size int) {
	servers, _ := jsClusterMod(t, size, func(_ int, o *server.Options) { sysAppAuth(o) })
	ncs, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	var all []string
	for _, s := range servers {
		all = append(all, s.Name())
	}
	leader := waitMeta(t, servers, all)
	li := leaderIndex(servers, leader)
	// Streams of three replicas until one has a replica on the meta
	// leader (placement takes the emptiest servers: the second at most).
	var name string
	for _, n := range []string{"A", "B"} {
		eventually(t, "create "+n, func() error {
			_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: n, Subjects: []string{strings.ToLower(n) + ".>"}, Replicas: 3})
			return err
		})
		if slices.Contains(streamServers(t, js[0], n, 3), leader) {
			name = n
			break
		}
	}
	if name == "" {
		t.Fatalf("no stream on the meta leader %s", leader)
	}
	subj := func(n uint64) string { return fmt.Sprintf("%s.%d", strings.ToLower(name), n) }
	for n := uint64(1); n <= 20; n++ {
		clusterPublish(t, js[0], subj(n), n)
	}
	eventually(t, "create the durable C", func() error {
		_, err := js[0].CreateOrUpdateConsumer(ctx2(t), name, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	if placed := streamServers(t, js[0], name, 3); placed[0] != leader {
		r := stepDownRequest(t, ncs[0], "$JS.API.STREAM.LEADER.STEPDOWN."+name, fmt.Sprintf(`{"placement":{"preferred":%q}}`, leader))
		if !r.Success {
			t.Fatalf("step-down of %s to %s: %+v", name, leader, r.Error)
		}
	}
	eventually(t, leader+" leads "+name, func() error {
		if got := streamServers(t, js[0], name, 3); got[0] != leader {
			return fmt.Errorf("%s leads", got[0])
		}
		return nil
	})

	via := (li + 1) % size
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	if r := stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, leader)); !r.Success {
		t.Fatalf("remove the meta leader %s: %+v", leader, r.Error)
	}
	rest := slices.Delete(slices.Clone(servers), li, li+1)
	names := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == leader })
	waitMeta(t, rest, names)
	want := min(3, size-1)
	eventually(t, name+" off the removed server", func() error {
		now := streamServers(t, js[via], name, want)
		if slices.Contains(now, leader) {
			return fmt.Errorf("%s on %v", name, now)
		}
		return nil
	})
	eventually(t, "the removed server's replica gone", func() error {
		if _, err := accountStream(servers[li], "APP", name); err == nil {
			return fmt.Errorf("%s still runs a replica of %s", leader, name)
		}
		return nil
	})
	for n := uint64(21); n <= 30; n++ {
		clusterPublish(t, js[via], subj(n), n)
	}
	// The durable is led elsewhere and delivers.
	eventually(t, "C led off the removed server", func() error {
		ci, err := consumerInfoVia(t, js[via], name, "C")
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || ci.Cluster.Leader == leader || ci.NumPending != 30 {
			return fmt.Errorf("cluster %+v, pending %d", ci.Cluster, ci.NumPending)
		}
		return nil
	})
	cons, err := js[via].Consumer(ctx2(t), name, "C")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(30, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		if err := m.DoubleAck(ctx2(t)); err != nil {
			t.Fatal(err)
		}
	}
	if got != 30 {
		t.Fatalf("C delivered %d messages, want 30", got)
	}
	s, err := js[via].Stream(ctx2(t), name)
	if err != nil {
		t.Fatal(err)
	}
	for n := uint64(1); n <= 30; n++ {
		if m, err := s.GetMsg(ctx2(t), n); err != nil || m.Subject != subj(n) {
			t.Fatalf("message %d: %+v %v", n, m, err)
		}
	}
}

// The same as TestJetStreamClusterMoveLeaderRestarts with cairn
// processes and SIGKILL: the leader of a stream of two replicas is
// killed right after its replica's peer removal is answered, then
// started again; the stream gets a leader, moves to the spare server,
// and serves every acknowledged message.
func TestJetStreamClusterMoveLeaderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	if targetIsNatsServer() {
		// nats-server v2.15.2 passed it in 11 of 12 runs (one timed
		// out waiting for the move, not investigated).
		t.Skip("cairn's moves")
	}
	t.Parallel() // processes that mostly wait; before the ports are picked
	kc := newKillClusterArgs(t, buildCairn(t), 3, func(int) []string { return []string{"-js", "-sd", t.TempDir()} })
	var urls []string
	for _, p := range kc.procs {
		urls = append(urls, p.url)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 2})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js, sent, 1, 300)
	placed := waitReplicas(t, js, 2)
	leader := int(placed[0][1] - '1')
	spare := 3 - leader - int(placed[1][1]-'1')
	r := stepDownRequest(t, nc, "$JS.API.STREAM.PEER.REMOVE.ORDERS", fmt.Sprintf(`{"peer":%q}`, placed[0]))
	if !r.Success {
		t.Fatalf("peer-remove %s: %+v", placed[0], r.Error)
	}
	kc.procs[leader].kill()
	kc.procs[leader].start()
	eventually(t, "ORDERS led on the follower and the spare server", func() error {
		ci := streamCluster(t, js)
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 1 {
			return fmt.Errorf("cluster %+v", ci)
		}
		names := []string{ci.Leader, ci.Replicas[0].Name}
		if !ci.Replicas[0].Current || slices.Contains(names, placed[0]) || !slices.Contains(names, fmt.Sprintf("n%d", spare+1)) {
			return fmt.Errorf("on %v (%+v)", names, ci.Replicas[0])
		}
		return nil
	})
	publishRange(t, js, sent, 301, 310)
	checkAll(t, js, sent)
}

// A placement change moving both replicas of a stream of two (n2 and n3
// to "az:1": n1 and n4), its leader's server stopped as soon as the
// update is answered and started again: the restarted server runs its
// leaving replica, the group elects a leader and carries the move out,
// every acknowledged message on the new servers.
func TestJetStreamClusterPlacementMoveLeaderRestarts(t *testing.T) {
	servers, opts, _, nc := placementCluster(t, nil)
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	body := func(tags string) string {
		return fmt.Sprintf(`{"name":"PAIR","subjects":["pair.>"],"num_replicas":2,"placement":{"tags":%s}}`, tags)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.PAIR", body(`["!hdd","!az:1"]`), 0, "")
	const msgs = 100
	for i := 1; i <= msgs; i++ {
		eventually(t, "publish", func() error {
			_, err := js.Publish(fmt.Sprintf("pair.%d", i), []byte("x"), nats.MsgId(fmt.Sprint(i)))
			return err
		})
	}
	placedOn(t, nc, "PAIR", 2)
	a, err := jsAnswer(nc, "$JS.API.STREAM.INFO.PAIR", "")
	if err != nil || a.Cluster == nil {
		t.Fatalf("info: %+v %v", a, err)
	}
	leader := leaderIndex(servers, a.Cluster.Leader)
	if leader != 1 && leader != 2 {
		t.Fatalf("PAIR led by %q, want n2 or n3", a.Cluster.Leader)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body(`["az:1"]`), 0, "")
	servers[leader].Shutdown()
	servers[leader] = restartServer(t, opts[leader])
	waitMoved(t, nc, "PAIR", []string{"n1", "n4"}, msgs)
	for _, i := range []int{0, 3} {
		eventually(t, servers[i].Name()+"'s replica of PAIR", func() error {
			si, err := accountStream(servers[i], "APP", "PAIR")
			if err != nil {
				return err
			}
			if si.State.Msgs != msgs || si.State.FirstSeq != 1 {
				return fmt.Errorf("%d messages from %d", si.State.Msgs, si.State.FirstSeq)
			}
			return nil
		})
	}
	if ack, err := js.Publish("pair.new", []byte("x")); err != nil || ack.Sequence != msgs+1 {
		t.Fatalf("publish after the move: %+v %v", ack, err)
	}
}
