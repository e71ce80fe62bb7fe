package test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A server restarted under another name over its store directory joins
// the meta group under the new name, as nats-server v2.15.2 adds it as a
// new peer (here while n1 is down as well, so that n2 needs n3x's vote
// to elect a meta leader before any leader catalogued n3x): the meta
// group lists four servers, the old name offline, and
// the renamed server's /healthz answers 200. As in nats-server, the
// stream replica the old name held is not served under the new name (the
// stream lists the old name, offline) and the stream serves on the other
// two; SERVER.REMOVE of the old name then hands that replica, and the
// replica of the stream's durable there, to the renamed server, their
// replica IDs kept (meta.RenameReplicas): both are current there, and the renamed server, as the stream's leader, serves
// every acknowledged message (docs/cluster.md, "A server renamed over
// its store"). Before, cairn kept the renamed server outside the meta
// group, its /healthz 503 for good.
func TestJetStreamClusterRenamedServerJoins(t *testing.T) {
	servers, opts, js0, sent := renamedOrders(t)
	if _, err := js0.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	streamServers(t, js0, "ORDERS", 3)

	// n1 down too: n2 and n3x elect the meta leader, which needs n3x's
	// vote before any leader catalogued its new name.
	servers[0].Shutdown()
	servers[2].Shutdown()
	o := opts[2]
	o.ServerName = "n3x"
	servers[2] = restartServer(t, o)
	eventually(t, "n2 and n3x in a meta group", func() error {
		for _, s := range servers[1:] {
			if mi := s.JetStreamMeta(); mi != nil && mi.IsLeader {
				for _, p := range mi.Replicas {
					if p.Current && (p.Name == "n3x" || p.Name == "n2") {
						return nil
					}
				}
				return fmt.Errorf("%s leads: %+v", s.Name(), mi.Replicas)
			}
		}
		return fmt.Errorf("no meta leader")
	})
	servers[0] = restartServer(t, opts[0])
	js0 = jsAt(t, servers[0])
	eventually(t, "n3x in the meta group, n3 offline", func() error {
		l, members, _ := metaView(servers)
		mi := servers[slices.IndexFunc(servers, func(s *server.Server) bool { return s.Name() == l })].JetStreamMeta()
		if !slices.Equal(members, []string{"n1", "n2", "n3", "n3x"}) || mi.Size != 4 {
			return fmt.Errorf("leader %q, members %v, size %d", l, members, mi.Size)
		}
		for _, p := range mi.Replicas {
			if p.Name == "n3" && (p.Current || !p.Offline) || p.Name != "n3" && !p.Current {
				return fmt.Errorf("replica %+v", *p)
			}
		}
		return nil
	})
	m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: -1, Server: servers[2]})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	waitFor(t, clusterTimeout, "n3x's /healthz ok", func() bool {
		code, _ := monGet(t, m.URL()+"/healthz")
		return code == 200
	})
	publishRange(t, js0, sent, 21, 30) // on n1 and n2: n3's replica is not served by n3x

	removeN3(t, servers)
	eventually(t, "ORDERS on n1, n2 and n3x", func() error {
		now := streamServers(t, js0, "ORDERS", 3)
		if slices.Sort(now); !slices.Equal(now, []string{"n1", "n2", "n3x"}) {
			return fmt.Errorf("ORDERS on %v", now)
		}
		return nil
	})
	eventually(t, "D on n1, n2 and n3x", func() error {
		c, err := js0.Consumer(ctx2(t), "ORDERS", "D")
		if err != nil {
			return err
		}
		ci := c.CachedInfo().Cluster
		names := []string{ci.Leader}
		for _, p := range ci.Replicas {
			if !p.Current {
				return fmt.Errorf("%+v", ci)
			}
			names = append(names, p.Name)
		}
		if slices.Sort(names); !slices.Equal(names, []string{"n1", "n2", "n3x"}) {
			return fmt.Errorf("%+v", ci)
		}
		return nil
	})
	// n3x leads ORDERS first: a stream info asked while the leadership
	// moves may go unanswered, so each waits 2 s at most here (readAsLeader
	// waits jsTimeout for it).
	nc2 := connect(t, servers[2].ClientURL())
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, clusterTimeout, "n3x leads ORDERS", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if s, err := js2.Stream(ctx, "ORDERS"); err == nil && s.CachedInfo().Cluster.Leader == "n3x" {
			return true
		}
		_, _ = nc2.Request("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", []byte(`{"placement":{"preferred":"n3x"}}`), 2*time.Second)
		return false
	})
	readAsLeader(t, servers, 2, sent)
	checkAll(t, js2, sent)
}

// renamedOrders starts the cluster of a renamed-server test: three
// servers with the trial's accounts, app the user of a client without
// credentials (sysAppNoAuth), and ORDERS (orders.>, three replicas,
// direct gets) holding 20 messages published through the first server
// (publishRange). It returns the servers, their options, the JetStream
// client through the first server and the messages sent.
func renamedOrders(t *testing.T) ([]*server.Server, []server.Options, jetstream.JetStream, map[uint64]sentMsg) {
	t.Helper()
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { sysAppNoAuth(o) })
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, AllowDirect: true})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 20)
	return servers, opts, js0, sent
}

// removeN3 removes n3, the first name of the server renamed n3x, through
// the first server as the system account (SERVER.REMOVE), and waits for
// the meta group of n1, n2 and n3x.
func removeN3(t *testing.T, servers []*server.Server) {
	t.Helper()
	sys := connect(t, servers[0].ClientURL(), nats.UserInfo("sys", "sys"))
	eventually(t, "SERVER.REMOVE n3", func() error {
		r := stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", `{"peer":"n3"}`)
		if !r.Success || r.Error != nil {
			return fmt.Errorf("%+v (%+v)", r, r.Error)
		}
		return nil
	})
	waitMeta(t, servers, []string{"n1", "n2", "n3x"})
}

// A stream of two replicas whose leader's server is restarted under
// another name over its store, the old name then removed
// (SERVER.REMOVE), keeps its quorum: the renamed server's replica of the
// stream, and of its durable, is the one the store held under the old
// name, kept with its ID (meta.RenameReplicas), so the stream gets a
// leader again with every acknowledged message, takes new publishes, and
// the durable goes on from its ack floor (docs/cluster.md, "A server
// renamed over its store"). The placement tags leave the renamed server
// the only one that can take the old name's replica: before, it retired
// and quarantined its good replica before the new one was added, and the
// group, one of its two voters gone, never had a leader again (a trial;
// nats-server v2.15.2 serves the stream within 15 s).
func TestJetStreamClusterRenamedServerKeepsReplicaOfTwo(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(i int, o *server.Options) {
		sysAppNoAuth(o)
		o.Tags = []string{"rack:a"}
		if i == 2 {
			o.Tags = []string{"rack:b"}
		}
	})
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 2,
			Placement: &jetstream.Placement{Tags: []string{"rack:a"}}})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 40)
	var cons jetstream.Consumer
	eventually(t, "create D", func() error {
		var err error
		cons, err = js0.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	acked := 0
	eventually(t, "fetch and ack 15", func() error {
		for acked < 15 {
			batch, err := cons.Fetch(15-acked, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return err
			}
			for m := range batch.Messages() {
				if err := m.DoubleAck(ctx2(t)); err != nil {
					return err
				}
				acked++
			}
			if err := batch.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	on := streamServers(t, js0, "ORDERS", 2)
	if on[0] == "n3" || on[1] == "n3" {
		t.Fatalf("ORDERS on %v, not rack:a", on)
	}
	l := leaderIndex(servers, on[0])
	renamed := on[0] + "x"
	other := servers[1-l] // the rack:a server that is not the leader (n1 or n2)

	servers[l].Shutdown()
	o := opts[l]
	o.ServerName = renamed
	servers[l] = restartServer(t, o)
	want := sorted("n1", "n2", "n3", renamed)
	eventually(t, renamed+" in the meta group, "+on[0]+" offline", func() error {
		lead, members, _ := metaView(servers)
		if lead == "" || !slices.Equal(members, want) {
			return fmt.Errorf("leader %q, members %v", lead, members)
		}
		mi := servers[leaderIndex(servers, lead)].JetStreamMeta()
		for _, p := range mi.Replicas {
			if p.Name == renamed && !p.Current {
				return fmt.Errorf("replica %+v", *p)
			}
		}
		return nil
	})

	sys := connect(t, other.ClientURL(), nats.UserInfo("sys", "sys"))
	eventually(t, "SERVER.REMOVE "+on[0], func() error {
		msg, err := sys.Request("$JS.API.SERVER.REMOVE", []byte(`{"peer":"`+on[0]+`"}`), 5*time.Second)
		if err != nil {
			return err
		}
		if !strings.Contains(string(msg.Data), `"success":true`) {
			return fmt.Errorf("%s", msg.Data)
		}
		return nil
	})
	jsO := jsAt(t, other)
	eventually(t, "ORDERS led, on "+other.Name()+" and "+renamed, func() error {
		now := streamServers(t, jsO, "ORDERS", 2)
		if slices.Sort(now); !slices.Equal(now, sorted(other.Name(), renamed)) {
			return fmt.Errorf("ORDERS on %v", now)
		}
		return nil
	})
	checkAll(t, jsO, sent)
	publishRange(t, jsO, sent, 41, 45)
	checkAll(t, jsO, sent)

	eventually(t, "D led, on "+other.Name()+" and "+renamed+", its ack floor 15", func() error {
		c, err := jsO.Consumer(ctx2(t), "ORDERS", "D")
		if err != nil {
			return err
		}
		ci := c.CachedInfo()
		names := []string{ci.Cluster.Leader}
		for _, p := range ci.Cluster.Replicas {
			if !p.Current {
				return fmt.Errorf("%+v", ci.Cluster)
			}
			names = append(names, p.Name)
		}
		if slices.Sort(names); !slices.Equal(names, sorted(other.Name(), renamed)) || ci.AckFloor.Stream != 15 || ci.Delivered.Stream != 15 {
			return fmt.Errorf("cluster %+v, ack floor %+v, delivered %+v", ci.Cluster, ci.AckFloor, ci.Delivered)
		}
		cons = c
		return nil
	})
	deadline := time.Now().Add(clusterTimeout)
	for next := uint64(16); next <= 45; {
		if time.Now().After(deadline) {
			t.Fatalf("D delivered up to %d of 45", next-1)
		}
		batch, err := cons.Fetch(int(46-next), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			if md.Sequence.Stream != next || md.NumDelivered != 1 {
				t.Fatalf("delivered stream sequence %d (delivery %d), want %d, first delivery", md.Sequence.Stream, md.NumDelivered, next)
			}
			if err := m.DoubleAck(ctx2(t)); err != nil {
				t.Fatal(err)
			}
			next++
		}
	}

	m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: -1, Server: servers[l]})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	waitFor(t, clusterTimeout, renamed+"'s /healthz ok", func() bool {
		code, _ := monGet(t, m.URL()+"/healthz")
		return code == 200
	})
}

// sorted returns names sorted.
func sorted(names ...string) []string {
	slices.Sort(names)
	return names
}
