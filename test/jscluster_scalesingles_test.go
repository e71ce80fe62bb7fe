package test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/route"
)

// A replicated file stream scaled down to one replica whose durables of
// one replica are on two different servers (docs/cluster.md, "Scaling
// down to one replica"): the update succeeds, the durable that is not on
// the kept server moves there first with its delivered and acknowledged
// state (the kept server being the one holding a durable, the fewest
// moves), and both go on from where they were. nats-server v2.15.2
// migrates them the same way (measured: docs/cluster.md). Before, the
// update answered 10061 "Replicas configuration can not be updated".
func TestJetStreamClusterScaleDownMovesSingleConsumers(t *testing.T) {
	scaleDownMovesSingles(t, jetstream.FileStorage, false)
}

// The same with a mem_storage durable and a mem_storage ephemeral (their
// state kept in memory; an ordered consumer, a KV watcher's among them,
// is a mem_storage ephemeral of one replica): as nats-server v2.15.2
// (measured), they move with their state.
func TestJetStreamClusterScaleDownMovesMemStorageSingles(t *testing.T) {
	scaleDownMovesSingles(t, jetstream.FileStorage, true)
}

// The same for a memory stream's durables: as nats-server v2.15.2
// (measured), they move with their state.
func TestJetStreamClusterMemoryScaleDownMovesSingles(t *testing.T) {
	scaleDownMovesSingles(t, jetstream.MemoryStorage, false)
}

// scaleDownMovesSingles runs the test above with a stream of storage
// and durables with mem_storage memCons.
func scaleDownMovesSingles(t *testing.T, storage jetstream.StorageType, memCons bool) {
	servers := jsCluster(t, 3)
	js := jsAt(t, servers[0])
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: storage}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js, sent, 1, 30)
	durable := func(name string) singleState {
		t.Helper()
		ccfg := jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, Replicas: 1, MemoryStorage: memCons}
		if memCons && name == "B" {
			// An ephemeral, as an ordered consumer is.
			ccfg.Durable, ccfg.Name, ccfg.InactiveThreshold = "", name, time.Hour
		}
		if _, err := js.CreateOrUpdateConsumer(ctx2(t), "ORDERS", ccfg); err != nil {
			t.Fatal(err)
		}
		st, err := singleOf(t, js, name)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// A and B on two different servers (a consumer of one replica is
	// placed at random among its stream's servers).
	a := durable("A")
	var b singleState
	for i := 0; ; i++ {
		if b = durable("B"); b.server != a.server && b.server != "" {
			break
		}
		if i == 40 {
			t.Fatalf("B always on %s with A", a.server)
		}
		if err := js.DeleteConsumer(ctx2(t), "ORDERS", "B"); err != nil {
			t.Fatal(err)
		}
	}
	takeSome(t, js, "A", 6, 4)
	takeSome(t, js, "B", 5, 3)
	want := map[string]singleState{"A": {delivered: 6, ackFloor: 4, ackPending: 2}, "B": {delivered: 5, ackFloor: 3, ackPending: 2}}
	for name, w := range want {
		eventually(t, name+" state before", func() error {
			st, err := singleOf(t, js, name)
			if err != nil || st.delivered != w.delivered || st.ackFloor != w.ackFloor || st.ackPending != w.ackPending {
				return fmt.Errorf("%s: %+v %v", name, st, err)
			}
			return nil
		})
	}

	// The update's answer waits for the moves (at most 10 s, then 10008,
	// which a client retries); 10061 is the refusal this test is about.
	one := cfg
	one.Replicas = 1
	start := time.Now()
	eventually(t, "scale to one replica", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, err := js.UpdateStream(ctx, one)
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == 10061 {
			t.Fatalf("scale to one replica: %v", err)
		}
		return err
	})
	t.Logf("scaled to one replica in %v", time.Since(start).Round(time.Millisecond))
	var kept string
	eventually(t, "a stream of one replica", func() error {
		s, err := js.Stream(ctx2(t), "ORDERS")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		if si.Config.Replicas != 1 || si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != 0 {
			return fmt.Errorf("replicas %d, cluster %+v", si.Config.Replicas, si.Cluster)
		}
		kept = si.Cluster.Leader
		return nil
	})
	if kept != a.server && kept != b.server {
		t.Errorf("kept %s, not a durable's server (%s, %s): two moves where one would do", kept, a.server, b.server)
	}
	for name, w := range want {
		eventually(t, name+" on the kept server with its state", func() error {
			st, err := singleOf(t, js, name)
			if err != nil || st.server != kept || st.delivered != w.delivered || st.ackFloor != w.ackFloor || st.ackPending != w.ackPending {
				return fmt.Errorf("%s: %+v %v (kept %s)", name, st, err, kept)
			}
			return nil
		})
	}
	// They go on from where they were: A's next message is 7, B's 6.
	for name, next := range map[string]uint64{"A": 7, "B": 6} {
		if seq := nextOf(t, js, "ORDERS", name); seq != next {
			t.Fatalf("%s delivered %d next, want %d", name, seq, next)
		}
	}
}

// A consumer of one replica whose server is down cannot move (its state
// is out of reach), so it keeps the stream's scale-down to one replica
// on its server, where a consumer of one replica on another server
// cannot move either (its destination is down): the update answers
// 10061 "Replicas configuration can not be updated" and changes
// nothing (docs/cluster.md, "Scaling down to one replica"; nats-server
// v2.15.2 starts such a scale-down and moves the consumer once its
// server is back).
func TestJetStreamClusterScaleDownSingleOnDownServerRefused(t *testing.T) {
	servers := jsCluster(t, 3)
	js := jsAt(t, servers[0])
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), cfg)
		return err
	})
	// X and Y on two different servers, neither of them servers[0].
	place := func(name string, not ...string) string {
		t.Helper()
		for range 60 {
			// Each request asked again while it times out (a loaded
			// machine: the create or delete may take over 2 s).
			ccfg := jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1}
			var st singleState
			eventually(t, "create "+name, func() error {
				if _, err := js.CreateOrUpdateConsumer(ctx2(t), "ORDERS", ccfg); err != nil {
					return err
				}
				var err error
				st, err = singleOf(t, js, name)
				return err
			})
			if st.server != "" && !slices.Contains(not, st.server) {
				return st.server
			}
			eventually(t, "delete "+name, func() error {
				err := js.DeleteConsumer(ctx2(t), "ORDERS", name)
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					return nil // a delete whose answer was lost
				}
				return err
			})
		}
		t.Fatalf("%s always on one of %v", name, not)
		return ""
	}
	x := place("X", servers[0].Name())
	place("Y", servers[0].Name(), x)
	down := leaderIndex(servers, x)
	servers[down].Shutdown()
	eventually(t, "routes to "+x+" gone", func() error {
		for i, s := range servers {
			if i != down && slices.ContainsFunc(s.ClusterPeers(), func(p route.Peer) bool { return p.Name == x }) {
				return fmt.Errorf("%s still routes to %s", s.Name(), x)
			}
		}
		return nil
	})
	one := cfg
	one.Replicas = 1
	eventually(t, "scale to one replica refused", func() error {
		_, err := js.UpdateStream(ctx2(t), one)
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			t.Fatal("scaled to one replica with a consumer of one replica on a server that is down")
		case !errors.As(err, &apiErr) || apiErr.ErrorCode != 10061:
			return err // no meta leader yet, a request lost while it elects
		}
		return nil
	})
	s, err := js.Stream(ctx2(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("replicas %d after the refusal", r)
	}
}
