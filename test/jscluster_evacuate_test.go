package test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The answers of the evacuate subjects, byte for byte as nats-server
// v2.15.2 sends them (measured on nats-server processes: docs/cluster.md,
// "Evacuating a server").
const (
	evacuateOK        = `{"type":"io.nats.jetstream.api.v1.meta_server_evacuate_response","success":true}`
	evacuateNotMember = `{"type":"io.nats.jetstream.api.v1.meta_server_evacuate_response","error":{"code":400,"err_code":10044,"description":"server is not a member of the cluster"}}`
	evacuateEmpty     = `{"type":"io.nats.jetstream.api.v1.meta_server_evacuate_response","error":{"code":400,"err_code":10003,"description":"bad request"}}`
	peerEvacuatedOK   = `{"type":"io.nats.jetstream.api.v1.stream_evacuate_peer_response","success":true}`
	peerNotMember     = `{"type":"io.nats.jetstream.api.v1.stream_evacuate_peer_response","error":{"code":400,"err_code":10040,"description":"peer not a member"}}`
	peerNoStream      = `{"type":"io.nats.jetstream.api.v1.stream_evacuate_peer_response","error":{"code":404,"err_code":10059,"description":"stream not found"}}`
	peerRemapFailed   = `{"type":"io.nats.jetstream.api.v1.stream_evacuate_peer_response","error":{"code":503,"err_code":10075,"description":"peer remap failed"}}`
)

// wantEvacAnswer sends body to subj through nc and requires the answer's exact
// bytes.
func wantEvacAnswer(t *testing.T, nc *nats.Conn, subj, body, want string) {
	t.Helper()
	msg, err := nc.Request(subj, []byte(body), 5*time.Second)
	if err != nil {
		t.Fatalf("%s %s: %v", subj, body, err)
	}
	if string(msg.Data) != want {
		t.Fatalf("%s %s:\n got %s\nwant %s", subj, body, msg.Data, want)
	}
}

// evacuateSetup creates ORDERS (three replicas) with orders.1..10, the
// durable C (three replicas) and the durable ONE (one replica), each
// with its ack floor at 4, on a cluster of n servers.
func evacuateSetup(t *testing.T, n int) ([]*server.Server, []server.Options, []jetstream.JetStream) {
	t.Helper()
	return evacuateSetupMem(t, n, false)
}

// evacuateSetupMem is evacuateSetup with ONE kept in memory
// (mem_storage) when memOne.
func evacuateSetupMem(t *testing.T, n int, memOne bool) ([]*server.Server, []server.Options, []jetstream.JetStream) {
	t.Helper()
	servers, opts := jsClusterMod(t, n, func(_ int, o *server.Options) { sysAppAuth(o) })
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= 10; i++ {
		clusterPublish(t, js[0], fmt.Sprintf("orders.%d", i), uint64(i))
	}
	for _, cc := range []jetstream.ConsumerConfig{
		{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy},
		{Durable: "ONE", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1, MemoryStorage: memOne},
	} {
		eventually(t, "create "+cc.Durable, func() error {
			_, err := js[0].CreateOrUpdateConsumer(ctx2(t), "ORDERS", cc)
			return err
		})
		consumeAck(t, js[0], cc.Durable, 4)
	}
	return servers, opts, js
}

// consumerServers returns the servers of durable name of ORDERS (leader
// first), an error unless there are n, every follower current.
func consumerServers(t *testing.T, js jetstream.JetStream, name string, n int) ([]string, error) {
	ci, err := consumerInfoVia(t, js, "ORDERS", name)
	if err != nil {
		return nil, err
	}
	if ci.Cluster == nil || ci.Cluster.Leader == "" {
		return nil, fmt.Errorf("%s: no leader: %+v", name, ci.Cluster)
	}
	out := []string{ci.Cluster.Leader}
	for _, p := range ci.Cluster.Replicas {
		if !p.Current {
			return nil, fmt.Errorf("%s: replica %+v not current", name, p)
		}
		out = append(out, p.Name)
	}
	if len(out) != n {
		return nil, fmt.Errorf("%s on %v, want %d servers", name, out, n)
	}
	return out, nil
}

// ordersOn returns ORDERS's servers (leader first), an error unless
// there are n, every follower current.
func ordersOn(t *testing.T, js jetstream.JetStream, n int) ([]string, error) {
	s, err := js.Stream(ctx2(t), "ORDERS")
	if err != nil {
		return nil, err
	}
	ci := s.CachedInfo().Cluster
	if ci == nil || ci.Leader == "" {
		return nil, fmt.Errorf("no leader: %+v", ci)
	}
	out := []string{ci.Leader}
	for _, p := range ci.Replicas {
		if !p.Current {
			return nil, fmt.Errorf("replica %+v not current", p)
		}
		out = append(out, p.Name)
	}
	if len(out) != n {
		return nil, fmt.Errorf("ORDERS on %v, want %d servers", out, n)
	}
	return out, nil
}

// evacuatedServes stops the evacuated server and checks the others
// serve every message of ORDERS (orders.1..10 and a new orders.11) and
// each durable's next delivery after its ack floor 4.
func evacuatedServes(t *testing.T, servers []*server.Server, victim string) {
	t.Helper()
	vi := leaderIndex(servers, victim)
	servers[vi].Shutdown()
	rest := slices.Delete(slices.Clone(servers), vi, vi+1)
	_, js := clusterClients(t, rest, nats.UserInfo("app", "app"))
	clusterPublish(t, js[0], "orders.11", 11)
	orders, err := js[0].Stream(ctx2(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 11; n++ {
		if m, err := orders.GetMsg(ctx2(t), uint64(n)); err != nil || m.Subject != fmt.Sprintf("orders.%d", n) {
			t.Fatalf("message %d: %+v, %v", n, m, err)
		}
	}
	for _, name := range []string{"C", "ONE"} {
		if got := consumeAck(t, js[0], name, 1); got[0] != 5 {
			t.Fatalf("%s delivered %v after its ack floor 4, want stream sequence 5", name, got)
		}
	}
}

// SERVER.EVACUATE of a server holding a replica of an R3 stream, of its
// R3 durable and its durable of one replica, in a cluster of four: every
// replica moves to the other servers with every message and each
// durable's ack floor, the server stays a member of the meta group, and
// the answers are nats-server's bytes.
func TestJetStreamClusterServerEvacuate(t *testing.T) {
	servers, _, js := evacuateSetup(t, 4)
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"})
	one, err := consumerServers(t, js[0], "ONE", 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := one[0] // holds ORDERS, C and ONE
	vi := leaderIndex(servers, victim)
	via := (vi + 1) % 4
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	wantEvacAnswer(t, sys, "$JS.API.SERVER.EVACUATE", `{"peer":"n9"}`, evacuateNotMember)
	wantEvacAnswer(t, sys, "$JS.API.SERVER.EVACUATE", `{"peer_id":"zzz"}`, evacuateNotMember)
	wantEvacAnswer(t, sys, "$JS.API.SERVER.EVACUATE", `{}`, evacuateEmpty)
	wantEvacAnswer(t, sys, "$JS.API.SERVER.EVACUATE", fmt.Sprintf(`{"peer":%q}`, victim), evacuateOK)

	eventually(t, "ORDERS, C and ONE off "+victim, func() error { return offServer(t, js[via], victim) })
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"}) // still a member
	app := connect(t, servers[via].ClientURL(), nats.UserInfo("app", "app"))
	wantEvacAnswer(t, app, "$JS.API.STREAM.PEER.EVACUATE.ORDERS", fmt.Sprintf(`{"peer":%q}`, victim), peerNotMember)
	wantEvacAnswer(t, app, "$JS.API.STREAM.PEER.EVACUATE.NOPE", fmt.Sprintf(`{"peer":%q}`, victim), peerNoStream)
	evacuatedServes(t, servers, victim)
}

// SERVER.EVACUATE of a server holding a durable of one replica kept in
// memory (mem_storage; an ordered consumer, a KV watcher's among them,
// is a mem_storage ephemeral of one replica): it moves with its state,
// taken from its runtime and handed over in memory, ahead of the
// stream's replica, as a file one does, and delivers the message after
// its ack floor. nats-server v2.15.2 moves it with its state (measured
// by hand: docs/cluster.md, "Moving consumers of one replica"). Before,
// the stream's replica moved without it, and it stayed stopped on the
// evacuated server.
func TestJetStreamClusterServerEvacuateMemStorageSingle(t *testing.T) {
	servers, _, js := evacuateSetupMem(t, 4, true)
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"})
	var one []string
	eventually(t, "ONE current", func() error {
		var err error
		one, err = consumerServers(t, js[0], "ONE", 1)
		return err
	})
	victim := one[0] // holds ORDERS, C and ONE
	vi := leaderIndex(servers, victim)
	via := (vi + 1) % 4
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	wantEvacAnswer(t, sys, "$JS.API.SERVER.EVACUATE", fmt.Sprintf(`{"peer":%q}`, victim), evacuateOK)
	// ONE moves first, then the stream's replica and C's: each wait has
	// its own deadline, as under load each takes seconds.
	eventually(t, "ONE off "+victim, func() error {
		on, err := consumerServers(t, js[via], "ONE", 1)
		if err != nil {
			return err
		}
		if slices.Contains(on, victim) {
			return fmt.Errorf("ONE still on %v", on)
		}
		return nil
	})
	eventually(t, "ORDERS, C and ONE off "+victim, func() error { return offServer(t, js[via], victim) })
	evacuatedServes(t, servers, victim)
}

// CONSUMER.PEER.EVACUATE of a durable of one replica kept in memory
// (mem_storage) moves it with its state to another server of its
// stream, as nats-server v2.15.2 does; before, 10075 "peer remap
// failed".
func TestJetStreamClusterConsumerPeerEvacuateMemStorage(t *testing.T) {
	const typ = `{"type":"io.nats.jetstream.api.v1.consumer_evacuate_peer_response",`
	servers, _, js := evacuateSetupMem(t, 4, true)
	var stream, one []string
	eventually(t, "ORDERS and ONE current", func() error {
		var err error
		if stream, err = ordersOn(t, js[0], 3); err != nil {
			return err
		}
		one, err = consumerServers(t, js[0], "ONE", 1)
		return err
	})
	app := connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app"))
	wantEvacAnswer(t, app, "$JS.API.CONSUMER.PEER.EVACUATE.ORDERS.ONE", fmt.Sprintf(`{"peer":%q}`, one[0]), typ+`"success":true}`)
	eventually(t, "ONE moved", func() error {
		o, err := consumerServers(t, js[0], "ONE", 1)
		if err != nil {
			return err
		}
		if o[0] == one[0] || !slices.Contains(stream, o[0]) {
			return fmt.Errorf("ONE on %v (was %v), ORDERS on %v", o, one, stream)
		}
		return nil
	})
	// Its info shows it on its new server while its move ends (the group
	// of two handing over, then ending): a fetch meanwhile may end with
	// a 409 "leadership change", and is asked again.
	if got := nextOf(t, js[0], "ORDERS", "ONE"); got != 5 {
		t.Fatalf("ONE delivered %d after its ack floor 4, want stream sequence 5", got)
	}
}

// SERVER.EVACUATE of the meta leader in a cluster of three, with no
// server to take its replica of an R3 stream: the replica is dropped
// (the stream runs on the other two, num_replicas still 3), its durable
// of one replica moves with its state, and the server, still a member of
// the meta group, is kept out of the stream's placement (the meta
// leader's healing does not hand the replica back, STREAM.PEER.EVACUATE
// finds no server: 10075) until a fourth server joins and takes the
// replica, as nats-server v2.15.2 does.
func TestJetStreamClusterServerEvacuateNoRoom(t *testing.T) {
	servers, opts, js := evacuateSetup(t, 3)
	victim := waitMeta(t, servers, []string{"n1", "n2", "n3"})
	vi := leaderIndex(servers, victim)
	via := (vi + 1) % 3
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	wantEvacAnswer(t, sys, "$JS.API.SERVER.EVACUATE", fmt.Sprintf(`{"peer":%q}`, victim), evacuateOK)

	var two []string
	eventually(t, "ORDERS and ONE off "+victim, func() error {
		on, err := ordersOn(t, js[via], 2)
		if err != nil {
			return err
		}
		one, err := consumerServers(t, js[via], "ONE", 1)
		if err != nil {
			return err
		}
		if slices.Contains(on, victim) || one[0] == victim {
			return fmt.Errorf("ORDERS on %v, ONE on %v", on, one)
		}
		two = on
		return nil
	})
	waitMeta(t, servers, []string{"n1", "n2", "n3"}) // still a member
	// Kept out: the meta leader's healing (every 5 s) would otherwise
	// put the replica straight back on the only server that can take it.
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if on, err := ordersOn(t, js[via], 2); err == nil && slices.Contains(on, victim) {
			t.Fatalf("ORDERS back on %v", on)
		}
		time.Sleep(200 * time.Millisecond)
	}
	app := connect(t, servers[via].ClientURL(), nats.UserInfo("app", "app"))
	wantEvacAnswer(t, app, "$JS.API.STREAM.PEER.EVACUATE.ORDERS", fmt.Sprintf(`{"peer":%q}`, two[1]), peerRemapFailed)

	o4 := opts[via]
	o4.ServerName, o4.StoreDir, o4.Port = "n4", t.TempDir(), server.RandomPort
	o4.Cluster.Port = freePort(t)
	servers = append(servers, restartServer(t, o4))
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"})
	eventually(t, "ORDERS and C back to three, on n4", func() error {
		for name, on := range map[string]func() ([]string, error){
			"ORDERS": func() ([]string, error) { return ordersOn(t, js[via], 3) },
			"C":      func() ([]string, error) { return consumerServers(t, js[via], "C", 3) },
		} {
			got, err := on()
			if err != nil {
				return err
			}
			if !slices.Contains(got, "n4") || slices.Contains(got, victim) {
				return fmt.Errorf("%s on %v", name, got)
			}
		}
		return nil
	})
	evacuatedServes(t, servers, victim)
}

// STREAM.PEER.EVACUATE moves one replica of a stream to a server placed
// as a create places it, with its consumers' replicas (the durable of
// one replica with its state), as nats-server v2.15.2 does.
func TestJetStreamClusterStreamPeerEvacuate(t *testing.T) {
	servers, _, js := evacuateSetup(t, 4)
	one, err := consumerServers(t, js[0], "ONE", 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := one[0]
	app := connect(t, servers[(leaderIndex(servers, victim)+1)%4].ClientURL(), nats.UserInfo("app", "app"))
	wantEvacAnswer(t, app, "$JS.API.STREAM.PEER.EVACUATE.ORDERS", `{"peer":"n9"}`, peerNotMember)
	wantEvacAnswer(t, app, "$JS.API.STREAM.PEER.EVACUATE.ORDERS", fmt.Sprintf(`{"peer":%q}`, victim), peerEvacuatedOK)
	eventually(t, "ORDERS, C and ONE off "+victim, func() error {
		on, err := ordersOn(t, js[0], 3)
		if err != nil {
			return err
		}
		c, err := consumerServers(t, js[0], "C", 3)
		if err != nil {
			return err
		}
		o, err := consumerServers(t, js[0], "ONE", 1)
		if err != nil {
			return err
		}
		if slices.Contains(on, victim) || slices.Contains(c, victim) || o[0] == victim {
			return fmt.Errorf("ORDERS on %v, C on %v, ONE on %v", on, c, o)
		}
		return nil
	})
	evacuatedServes(t, servers, victim)
}

// CONSUMER.PEER.EVACUATE moves a consumer's replica to a server of its
// stream it is not on: a durable of one replica with its state, one of
// two replicas by a replica move; a durable on every server of its
// stream has nowhere to go (10075), as nats-server v2.15.2 answers
// (measured: docs/cluster.md, "Evacuating a server").
func TestJetStreamClusterConsumerPeerEvacuate(t *testing.T) {
	consumerPeerRemap(t, "EVACUATE", "consumer_evacuate_peer_response")
}

// CONSUMER.PEER.REMOVE moves the replica as CONSUMER.PEER.EVACUATE does,
// with its answers (nats-server v2.15.2 serves both alike; before, cairn
// answered it 10009).
func TestJetStreamClusterConsumerPeerRemove(t *testing.T) {
	consumerPeerRemap(t, "REMOVE", "consumer_remove_peer_response")
}

// consumerPeerRemap runs CONSUMER.PEER.<api>'s test, its answers of
// type typ.
func consumerPeerRemap(t *testing.T, api, typ string) {
	typ = `{"type":"io.nats.jetstream.api.v1.` + typ + `",`
	servers, _, js := evacuateSetup(t, 4)
	eventually(t, "create TWO", func() error {
		_, err := js[0].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "TWO", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 2})
		return err
	})
	consumeAck(t, js[0], "TWO", 4)
	stream, err := ordersOn(t, js[0], 3)
	if err != nil {
		t.Fatal(err)
	}
	one, err := consumerServers(t, js[0], "ONE", 1)
	if err != nil {
		t.Fatal(err)
	}
	var two []string
	eventually(t, "TWO current on two", func() error {
		two, err = consumerServers(t, js[0], "TWO", 2)
		return err
	})
	app := connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app"))
	req := func(path string) string { return `$JS.API.CONSUMER.PEER.` + api + `.` + path }
	body := func(peer string) string { return fmt.Sprintf(`{"peer":%q}`, peer) }
	wantEvacAnswer(t, app, req("ORDERS.C"), body(stream[1]), typ+`"error":{"code":503,"err_code":10075,"description":"peer remap failed"}}`)
	wantEvacAnswer(t, app, req("ORDERS.NOPE"), body(stream[1]), typ+`"error":{"code":404,"err_code":10014,"description":"consumer not found"}}`)
	wantEvacAnswer(t, app, req("NOPE.C"), body(stream[1]), typ+`"error":{"code":404,"err_code":10059,"description":"stream not found"}}`)
	wantEvacAnswer(t, app, req("ORDERS.ONE"), body("n9"), typ+`"error":{"code":400,"err_code":10040,"description":"peer not a member"}}`)
	wantEvacAnswer(t, app, req("ORDERS.ONE"), "", typ+`"error":{"code":400,"err_code":10003,"description":"bad request"}}`)
	wantEvacAnswer(t, app, req("ORDERS.ONE"), body(one[0]), typ+`"success":true}`)
	wantEvacAnswer(t, app, req("ORDERS.TWO"), body(two[0]), typ+`"success":true}`)
	eventually(t, "ONE and TWO moved", func() error {
		o, err := consumerServers(t, js[0], "ONE", 1)
		if err != nil {
			return err
		}
		tw, err := consumerServers(t, js[0], "TWO", 2)
		if err != nil {
			return err
		}
		if o[0] == one[0] || !slices.Contains(stream, o[0]) || slices.Contains(tw, two[0]) || !slices.Contains(stream, tw[0]) || !slices.Contains(stream, tw[1]) {
			return fmt.Errorf("ONE on %v (was %v), TWO on %v (was %v), ORDERS on %v", o, one, tw, two, stream)
		}
		return nil
	})
	for _, name := range []string{"ONE", "TWO"} {
		if got := consumeAck(t, js[0], name, 1); got[0] != 5 {
			t.Fatalf("%s delivered %v after its ack floor 4, want stream sequence 5", name, got)
		}
	}
}

// offServer reports, through js, whether ORDERS (three replicas), its
// durable C (three) and its durable ONE (one) are all off server victim
// and current elsewhere.
func offServer(t *testing.T, js jetstream.JetStream, victim string) error {
	for name, n := range map[string]int{"ORDERS": 3, "C": 3, "ONE": 1} {
		var on []string
		var err error
		if name == "ORDERS" {
			on, err = ordersOn(t, js, n)
		} else {
			on, err = consumerServers(t, js, name, n)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if slices.Contains(on, victim) {
			return fmt.Errorf("%s still on %v", name, on)
		}
	}
	return nil
}
