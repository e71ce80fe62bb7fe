package test

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/server"
)

// A stream of three replicas in a cluster of three drops the replica of a
// removed server no other server can take, and runs on two
// (docs/cluster.md, "Removing a server"); its durable's replica there
// is dropped too, and its info lists the two left, as nats-server
// v2.15.2 remaps a consumer's peers to its stream's. When a fourth server joins,
// the meta leader brings it back to three, as nats-server v2.15.2 places
// a new peer in a stream missing one (reconcilePeerAssignments): the new
// replica holds every message, the durable's replica left on the removed
// server moves there with the durable's state, and with one of the two
// old servers stopped the stream and its durable still serve (the new
// replicas are voters that count toward the majority).
func TestJetStreamClusterDroppedReplicaHealed(t *testing.T) {
	droppedReplicaHealed(t, nil)
}

// The same, with the meta leader's first proposal growing the durable
// back to three replicas failing (a meta leader change, a timeout): the
// durable is grown again (growShortConsumers, docs/cluster.md "Removing
// a server") and ends on three servers, n4 among them.
func TestJetStreamClusterShortConsumerGrownAgain(t *testing.T) {
	var attempts atomic.Int32
	droppedReplicaHealed(t, &jscluster.Hooks{FailGrowConsumer: func(_, _, consumer string) error {
		if consumer == "C" && attempts.Add(1) == 1 {
			return errors.New("test hook: the growth's proposal failed")
		}
		return nil
	}})
	if n := attempts.Load(); n < 2 {
		t.Fatalf("%d proposals growing C, want the failed one and another", n)
	}
}

// droppedReplicaHealed runs TestJetStreamClusterDroppedReplicaHealed with
// hooks (nil: none) on every server.
func droppedReplicaHealed(t *testing.T, hooks *jscluster.Hooks) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) {
		sysAppAuth(o)
		o.JetStreamClusterHooks = hooks
	})
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for n := 1; n <= 10; n++ {
		clusterPublish(t, js[0], fmt.Sprintf("orders.%d", n), uint64(n))
	}
	eventually(t, "create the durable C", func() error {
		_, err := js[0].CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	consumeAck(t, js[0], "C", 4) // C's ack floor 4: state the moved replica must carry

	// Remove a server that neither leads the meta group nor the stream.
	meta := waitMeta(t, servers, []string{"n1", "n2", "n3"})
	placed := streamServers(t, js[0], "ORDERS", 3)
	victim := ""
	for _, n := range placed[1:] {
		if n != meta {
			victim = n
			break
		}
	}
	vi := leaderIndex(servers, victim)
	via := (vi + 1) % 3
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	if r := stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, victim)); !r.Success {
		t.Fatalf("remove %s: %+v", victim, r.Error)
	}
	rest := slices.Delete(slices.Clone(servers), vi, vi+1)
	eventually(t, "ORDERS runs on two", func() error {
		if got := streamServers(t, js[via], "ORDERS", 2); slices.Contains(got, victim) {
			return fmt.Errorf("ORDERS on %v", got)
		}
		return nil
	})
	servers[vi].Shutdown()
	// The durable's replicas follow the stream's, as nats-server's
	// consumer info lists only the replicas left: the leader and one
	// other, not the removed server's.
	eventually(t, "C's info without "+victim, func() error {
		ci, err := consumerInfoVia(t, js[via], "ORDERS", "C")
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || ci.Cluster.Leader == victim || len(ci.Cluster.Replicas) != 1 {
			return fmt.Errorf("C's cluster %+v", ci.Cluster)
		}
		if p := ci.Cluster.Replicas[0]; p.Name == victim || !p.Current {
			return fmt.Errorf("C's replica %+v", p)
		}
		return nil
	})

	o4 := opts[via]
	o4.ServerName, o4.StoreDir, o4.Port = "n4", t.TempDir(), server.RandomPort
	o4.Cluster.Port = freePort(t)
	rest = append(rest, restartServer(t, o4))
	var names []string
	for _, s := range rest {
		names = append(names, s.Name())
	}
	waitMeta(t, rest, names)
	_, jsr := clusterClients(t, rest, nats.UserInfo("app", "app"))
	eventually(t, "ORDERS back to three replicas, one on n4", func() error {
		if got := streamServers(t, jsr[0], "ORDERS", 3); !slices.Contains(got, "n4") {
			return fmt.Errorf("ORDERS on %v", got)
		}
		return nil
	})
	eventually(t, "C's replica on n4", func() error {
		ci, err := consumerInfoVia(t, jsr[0], "ORDERS", "C")
		if err != nil {
			return err
		}
		if ci.Cluster == nil {
			return fmt.Errorf("no cluster info")
		}
		names := []string{ci.Cluster.Leader}
		for _, p := range ci.Cluster.Replicas {
			if !p.Current {
				return fmt.Errorf("C's replica %+v not current", p)
			}
			names = append(names, p.Name)
		}
		if len(names) != 3 || !slices.Contains(names, "n4") || slices.Contains(names, victim) {
			return fmt.Errorf("C on %v", names)
		}
		return nil
	})

	// n4's replicas now count: stop one of the two old servers.
	stop := 0
	if rest[0].Name() == meta {
		stop = 1 // keep the meta leader, so that the test does not wait on a meta election too
	}
	rest[stop].Shutdown()
	left := slices.Delete(slices.Clone(rest), stop, stop+1)
	_, jsl := clusterClients(t, left, nats.UserInfo("app", "app"))
	clusterPublish(t, jsl[0], "orders.11", 11)
	orders, err := jsl[0].Stream(ctx2(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 11; n++ {
		if m, err := orders.GetMsg(ctx2(t), uint64(n)); err != nil || m.Subject != fmt.Sprintf("orders.%d", n) {
			t.Fatalf("message %d: %+v, %v", n, m, err)
		}
	}
	if got := consumeAck(t, jsl[0], "C", 1); got[0] != 5 {
		t.Fatalf("C delivered %v after its ack floor 4, want stream sequence 5", got)
	}
}

// consumeAck fetches n messages of ORDERS through durable name,
// acknowledges each (confirmed), and returns their stream sequences.
func consumeAck(t *testing.T, js jetstream.JetStream, name string, n int) []uint64 {
	t.Helper()
	var cons jetstream.Consumer
	eventually(t, "durable "+name, func() error {
		var err error
		cons, err = js.Consumer(ctx2(t), "ORDERS", name)
		return err
	})
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, md.Sequence.Stream)
		if err := m.DoubleAck(ctx2(t)); err != nil {
			t.Fatal(err)
		}
	}
	if len(seqs) != n {
		t.Fatalf("%s delivered %d messages, want %d (%v)", name, len(seqs), n, batch.Error())
	}
	return seqs
}
