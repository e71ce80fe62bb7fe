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

// singleState is what a client sees of a consumer of one replica: its
// server (the cluster's leader) and its delivery and ack state.
type singleState struct {
	server              string
	delivered, ackFloor uint64
	ackPending          int
}

// singleOf reads consumer name of ORDERS through js.
func singleOf(t *testing.T, js jetstream.JetStream, name string) (singleState, error) {
	t.Helper()
	return singleOfStream(t, js, "ORDERS", name)
}

// takeSome fetches n messages of consumer name of ORDERS and
// acknowledges the first acks of them.
func takeSome(t *testing.T, js jetstream.JetStream, name string, n, acks int) {
	t.Helper()
	takeSomeOf(t, js, "ORDERS", name, n, acks)
}

// takeSomeOf fetches n messages of consumer name of stream and
// acknowledges the first acks of them.
func takeSomeOf(t *testing.T, js jetstream.JetStream, stream, name string, n, acks int) {
	t.Helper()
	c, err := js.Consumer(ctx2(t), stream, name)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < n {
		batch, err := c.Fetch(n-got, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if got < acks {
				if err := m.DoubleAck(ctx2(t)); err != nil {
					t.Fatal(err)
				}
			}
			got++
		}
	}
}

// A consumer of one replica on a server a replicated stream's replica
// leaves moves with its state. nats stream cluster peer-remove of the
// server holding the durable D (num_replicas 1) and the ephemeral E of
// an R3 stream on four servers: both move to a server of the stream that
// stays, keeping what was delivered and acknowledged (D: 6 delivered, 4
// acknowledged, 2 pending; E: 3 delivered, 3 acknowledged), and go on
// delivering from there; the stream's replica then moves to the fourth
// server. nats-server v2.15.2 moves them too (to a server of the stream)
// but restarts them empty (measured: docs/compatibility.md).
func TestJetStreamClusterPeerRemoveMovesSingleConsumers(t *testing.T) {
	peerRemoveMovesSingles(t, jetstream.FileStorage, false)
}

// The same with D and E kept in memory (mem_storage; an ordered
// consumer, a KV watcher's among them, is a mem_storage ephemeral of one
// replica): they move with their state too, taken from the runtime and
// handed over in memory. Before, they were left out of the move: the
// peer-remove moved the stream's replica without them, and they stopped
// on the removed server. nats-server v2.15.2 (measured by hand on four
// processes, docs/cluster.md "Moving consumers of one replica") starts a
// mem_storage durable there over on another server of the stream with
// nothing delivered or acknowledged, and deletes a mem_storage
// ephemeral.
func TestJetStreamClusterPeerRemoveMovesMemStorageSingles(t *testing.T) {
	peerRemoveMovesSingles(t, jetstream.FileStorage, true)
}

// The same for a memory stream's consumers of one replica (which keep
// their state in memory, mem_storage or not). Before, they were left out
// of the move as above.
func TestJetStreamClusterMemoryPeerRemoveMovesSingles(t *testing.T) {
	peerRemoveMovesSingles(t, jetstream.MemoryStorage, false)
}

// peerRemoveMovesSingles runs the peer-remove test above with a stream
// of storage and D and E with mem_storage memCons.
func peerRemoveMovesSingles(t *testing.T, storage jetstream.StorageType, memCons bool) {
	servers, _ := jsClusterMod(t, 4, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: storage})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 20)
	placed := streamServers(t, js0, "ORDERS", 3)
	var spare string
	for _, s := range servers {
		if !slices.Contains(placed, s.Name()) {
			spare = s.Name()
		}
	}
	// D and E on the same server of the stream, other than its leader:
	// create ephemerals until one lands where D is.
	if _, err := js0.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, Replicas: 1, MemoryStorage: memCons}); err != nil {
		t.Fatal(err)
	}
	d, err := singleOf(t, js0, "D")
	if err != nil {
		t.Fatal(err)
	}
	victim := d.server
	var eName string
	for i := 0; i < 40 && eName == ""; i++ {
		c, err := js0.CreateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, InactiveThreshold: time.Hour, MemoryStorage: memCons})
		if err != nil {
			t.Fatal(err)
		}
		name := c.CachedInfo().Name
		if st, err := singleOf(t, js0, name); err == nil && st.server == victim {
			eName = name
		} else if err := js0.DeleteConsumer(ctx2(t), "ORDERS", name); err != nil {
			t.Fatal(err)
		}
	}
	if eName == "" || !slices.Contains(placed, victim) || spare == "" {
		t.Fatalf("D on %s, no ephemeral there; stream on %v", victim, placed)
	}
	takeSome(t, js0, "D", 6, 4)
	takeSome(t, js0, eName, 3, 3)
	want := map[string]singleState{"D": {delivered: 6, ackFloor: 4, ackPending: 2}, eName: {delivered: 3, ackFloor: 3}}
	for name, w := range want {
		eventually(t, name+" state before", func() error {
			st, err := singleOf(t, js0, name)
			if err != nil || st.delivered != w.delivered || st.ackFloor != w.ackFloor || st.ackPending != w.ackPending {
				return fmt.Errorf("%s: %+v %v", name, st, err)
			}
			return nil
		})
	}

	vi := leaderIndex(servers, victim)
	via := (vi + 1) % 4
	js := jsAt(t, servers[via])
	out, errOut := runCLI(t, servers[via].ClientURL(), "stream", "cluster", "peer-remove", "ORDERS", victim, "-f")
	if !strings.Contains(out+errOut, "Requested removal of peer") {
		t.Fatalf("nats stream cluster peer-remove:\n%s\n%s", out, errOut)
	}
	for name, w := range want {
		eventually(t, name+" moved with its state", func() error {
			st, err := singleOf(t, js, name)
			if err != nil || st.server == victim || !slices.Contains(placed, st.server) ||
				st.delivered != w.delivered || st.ackFloor != w.ackFloor || st.ackPending != w.ackPending {
				return fmt.Errorf("%s: %+v %v", name, st, err)
			}
			return nil
		})
	}
	eventually(t, "the stream's replica moved", func() error {
		now := streamServers(t, js, "ORDERS", 3)
		if slices.Contains(now, victim) || !slices.Contains(now, spare) {
			return fmt.Errorf("ORDERS on %v", now)
		}
		return nil
	})
	// They go on from where they were: D's next new message is 7, E's 4.
	for name, next := range map[string]uint64{"D": 7, eName: 4} {
		c, err := js.Consumer(ctx2(t), "ORDERS", name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("%s next: %v", name, err)
		}
		md, _ := m.Metadata()
		if md.Sequence.Stream != next {
			t.Fatalf("%s delivered %d, want %d", name, md.Sequence.Stream, next)
		}
	}
}

// A stream update moving a replicated stream with consumers
// (nats stream edit TRIO --tag '!az:2'): TRIO of three replicas on n1,
// n2, n3 keeps n1 and n3 and replaces n2 by n4; its replicated durable R
// moves its replica from n2 to n4, and its durables of one replica on n2
// move to n1 or n3 (before the stream's replica leaves n2), every one
// keeping what it delivered and acknowledged, as nats-server v2.15.2
// keeps them when it moves a stream (measured: docs/compatibility.md).
// Meanwhile another move, or a scale, is 10124.
func TestJetStreamClusterStreamMoveWithConsumers(t *testing.T) {
	streamMoveWithConsumers(t, jetstream.FileStorage, false)
}

// The same with the durables of one replica kept in memory
// (mem_storage): they move with their state too, taken from the runtime
// and handed over in memory, as nats-server v2.15.2 moves them (measured
// by hand: docs/cluster.md, "Moving consumers of one replica"). Before,
// the update was 10069 "stream placement can not be changed".
func TestJetStreamClusterStreamMoveWithMemStorageSingles(t *testing.T) {
	streamMoveWithConsumers(t, jetstream.FileStorage, true)
}

// The same for a memory stream, whose consumers all keep their state in
// memory: before, 10069 as above.
func TestJetStreamClusterMemoryStreamMoveWithSingles(t *testing.T) {
	streamMoveWithConsumers(t, jetstream.MemoryStorage, false)
}

// streamMoveWithConsumers runs the move test above with a stream of
// storage and durables of one replica with mem_storage memCons.
func streamMoveWithConsumers(t *testing.T, storage jetstream.StorageType, memCons bool) {
	_, _, _, nc := placementCluster(t, nil)
	body := func(tags string) string {
		st := "file"
		if storage == jetstream.MemoryStorage {
			st = "memory"
		}
		return fmt.Sprintf(`{"name":"TRIO","subjects":["trio.>"],"num_replicas":3,"storage":%q,"placement":{"tags":%s}}`, st, tags)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.TRIO", body(`["ssd"]`), 0, "")
	if got := placedOn(t, nc, "TRIO", 3); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("TRIO on %v", got)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		eventually(t, "publish", func() error {
			_, err := js.Publish(ctx2(t), "trio.x", []byte("x"), jetstream.WithMsgID(fmt.Sprint(i)))
			return err
		})
	}
	// R (three replicas), and durables of one replica until one is on n2.
	names := []string{"R"}
	eventually(t, "create R", func() error {
		_, err := js.CreateOrUpdateConsumer(ctx2(t), "TRIO", jetstream.ConsumerConfig{Durable: "R", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	onN2 := ""
	for i := 0; i < 30 && onN2 == ""; i++ {
		name := fmt.Sprintf("S%d", i)
		var c jetstream.Consumer
		eventually(t, "create "+name, func() error { // idempotent: a slow answer is asked again
			var err error
			c, err = js.CreateOrUpdateConsumer(ctx2(t), "TRIO", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, Replicas: 1, MemoryStorage: memCons})
			return err
		})
		names = append(names, name)
		if ci := c.CachedInfo().Cluster; ci != nil && ci.Leader == "n2" {
			onN2 = name
		}
	}
	if onN2 == "" {
		t.Fatal("no consumer of one replica on n2")
	}
	want := map[string]singleState{}
	for i, name := range names {
		n := 2 + i%4
		takeSomeOf(t, js, "TRIO", name, n, n-1)
		want[name] = singleState{delivered: uint64(n), ackFloor: uint64(n - 1), ackPending: 1}
	}
	for name, w := range want {
		eventually(t, name+" before the move", func() error {
			st, err := singleOfStream(t, js, "TRIO", name)
			if err != nil || st.delivered != w.delivered || st.ackFloor != w.ackFloor || st.ackPending != w.ackPending {
				return fmt.Errorf("%s: %+v %v", name, st, err)
			}
			return nil
		})
	}

	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.TRIO", body(`["!az:2"]`), 0, "")
	// While its consumers of one replica move ahead of it, another move,
	// or a scale, is nats-server's 10124.
	for _, again := range []string{body(`["ssd"]`), strings.Replace(body(`["!az:2"]`), `"num_replicas":3`, `"num_replicas":2`, 1)} {
		a, err := jsAnswer(nc, "$JS.API.STREAM.UPDATE.TRIO", again)
		if err != nil || a.Error == nil || a.Error.ErrCode != 10124 || a.Error.Code != 400 || a.Error.Description != "stream move already in progress" {
			t.Fatalf("%s during the move: %+v %v", again, a.Error, err)
		}
	}
	waitMoved(t, nc, "TRIO", []string{"n1", "n3", "n4"}, 20)
	for name, w := range want {
		eventually(t, name+" moved with its state", func() error {
			st, err := singleOfStream(t, js, "TRIO", name)
			if err != nil || st.server == "" || st.server == "n2" ||
				st.delivered != w.delivered || st.ackFloor != w.ackFloor || st.ackPending != w.ackPending {
				return fmt.Errorf("%s: %+v %v", name, st, err)
			}
			return nil
		})
	}
	// They go on from where they were: each delivers the message after
	// the last it delivered.
	for name, w := range want {
		if seq := nextOf(t, js, "TRIO", name); seq != w.delivered+1 {
			t.Fatalf("%s delivered %d next, want %d", name, seq, w.delivered+1)
		}
	}
	eventually(t, "R's replicas", func() error {
		c, err := js.Consumer(ctx2(t), "TRIO", "R")
		if err != nil {
			return err
		}
		ci := c.CachedInfo().Cluster
		got := []string{ci.Leader}
		for _, p := range ci.Replicas {
			if !p.Current {
				return fmt.Errorf("%s not current", p.Name)
			}
			got = append(got, p.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"n1", "n3", "n4"}) {
			return fmt.Errorf("R on %v", got)
		}
		return nil
	})
}

// singleOfStream reads consumer name of stream through js.
func singleOfStream(t *testing.T, js jetstream.JetStream, stream, name string) (singleState, error) {
	t.Helper()
	c, err := js.Consumer(ctx2(t), stream, name)
	if err != nil {
		return singleState{}, err
	}
	ci := c.CachedInfo()
	st := singleState{delivered: ci.Delivered.Stream, ackFloor: ci.AckFloor.Stream, ackPending: ci.NumAckPending}
	if ci.Cluster != nil {
		st.server = ci.Cluster.Leader
	}
	return st, nil
}

// nats server cluster peer-remove (SERVER.REMOVE) of a server holding a
// durable of one replica of an R3 stream: the durable moves with its
// state to a server of the stream that stays before the stream's replica
// moves to the fourth server, and goes on delivering from there.
func TestJetStreamClusterServerRemoveMovesSingleConsumers(t *testing.T) {
	servers, _ := jsClusterMod(t, 4, func(_ int, o *server.Options) { sysAppAuth(o) })
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for n := 1; n <= 10; n++ {
		clusterPublish(t, js[0], fmt.Sprintf("orders.%d", n), uint64(n))
	}
	placed := streamServers(t, js[0], "ORDERS", 3)
	if _, err := js[0].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	d, err := singleOf(t, js[0], "D")
	if err != nil || !slices.Contains(placed, d.server) {
		t.Fatalf("D: %+v %v; stream on %v", d, err, placed)
	}
	victim, spare := d.server, ""
	for _, s := range servers {
		if !slices.Contains(placed, s.Name()) {
			spare = s.Name()
		}
	}
	takeSome(t, js[0], "D", 5, 3)
	vi := leaderIndex(servers, victim)
	via := (vi + 1) % 4
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	r := stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, victim))
	if !r.Success || r.Error != nil {
		t.Fatalf("remove %s: %+v (%+v)", victim, r, r.Error)
	}
	eventually(t, "D moved with its state", func() error {
		st, err := singleOf(t, js[via], "D")
		if err != nil || st.server == victim || !slices.Contains(placed, st.server) || st.delivered != 5 || st.ackFloor != 3 || st.ackPending != 2 {
			return fmt.Errorf("D: %+v %v", st, err)
		}
		return nil
	})
	eventually(t, "the removed server's replica moved", func() error {
		now := streamServers(t, js[via], "ORDERS", 3)
		if slices.Contains(now, victim) || !slices.Contains(now, spare) {
			return fmt.Errorf("ORDERS on %v", now)
		}
		return nil
	})
	c, err := js[via].Consumer(ctx2(t), "ORDERS", "D")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if md, _ := m.Metadata(); md.Sequence.Stream != 6 {
		t.Fatalf("D delivered %d after the move, want 6", md.Sequence.Stream)
	}
}
