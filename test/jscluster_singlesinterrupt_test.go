package test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/server"
)

// The move of a durable of one replica off a peer-removed server,
// interrupted between its two steps: the meta leader stops right after
// step 1 (the consumer assigned its server and the new one) and starts
// again. The meta leader of the moment finishes the move, and the
// consumer ends with one replica, its config's num_replicas 1, its
// delivered and acknowledged state kept. Before, it stayed a group of
// two replicas for good (a trial's `nats consumer info` showed a
// C-R2F group under num_replicas 1; docs/cluster.md, "Moving
// consumers of one replica").
func TestJetStreamClusterSingleMoveInterrupted(t *testing.T) {
	var (
		mu      sync.Mutex
		held    = -1 // the server whose mover the hook holds
		step1   = make(chan struct{})
		hookFor = func(i int) *jscluster.Hooks {
			return &jscluster.Hooks{SingleMoveStep1: func(_, _, _ string, quit <-chan struct{}) {
				mu.Lock()
				first := held < 0
				if first {
					held = i
					close(step1)
				}
				mu.Unlock()
				if first {
					<-quit // until the server stops
				}
			}}
		}
	)
	servers, opts := jsClusterMod(t, 4, func(i int, o *server.Options) {
		o.RaftRetain = 8
		o.JetStreamClusterHooks = hookFor(i)
	})
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	publishRange(t, js0, map[uint64]sentMsg{}, 1, 20)
	placed := streamServers(t, js0, "ORDERS", 3)
	eventually(t, "create D", func() error {
		_, err := js0.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1})
		return err
	})
	takeSome(t, js0, "D", 6, 4)
	want := singleState{delivered: 6, ackFloor: 4, ackPending: 2}
	var victim string
	eventually(t, "D's state", func() error {
		st, err := singleOf(t, js0, "D")
		if err != nil || st.delivered != want.delivered || st.ackFloor != want.ackFloor || st.ackPending != want.ackPending {
			return fmt.Errorf("%+v %v", st, err)
		}
		victim = st.server
		return nil
	})
	if !slices.Contains(placed, victim) {
		t.Fatalf("D on %s, the stream on %v", victim, placed)
	}
	via := (leaderIndex(servers, victim) + 1) % 4
	nc := connect(t, servers[via].ClientURL())
	if r := stepDownRequest(t, nc, "$JS.API.STREAM.PEER.REMOVE.ORDERS", fmt.Sprintf(`{"peer":%q}`, victim)); !r.Success {
		t.Fatalf("peer-remove %s: %+v", victim, r.Error)
	}
	waitClosed(t, "step 1 of D's move", step1)
	mu.Lock()
	m := held
	mu.Unlock()
	stopped := time.Now()
	servers[m].Shutdown()
	servers[m] = restartServer(t, opts[m])

	js := jsAt(t, servers[(m+1)%4])
	eventually(t, "D back to one replica with its state", func() error {
		c, err := js.Consumer(ctx2(t), "ORDERS", "D")
		if err != nil {
			return err
		}
		ci := c.CachedInfo()
		if ci.Cluster == nil || ci.Cluster.Leader == "" || len(ci.Cluster.Replicas) != 0 {
			return fmt.Errorf("cluster %+v", ci.Cluster)
		}
		if ci.Config.Replicas != 1 || ci.Delivered.Stream != want.delivered || ci.AckFloor.Stream != want.ackFloor || ci.NumAckPending != want.ackPending {
			return fmt.Errorf("num_replicas %d, delivered %d, ack floor %d, pending acks %d", ci.Config.Replicas, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumAckPending)
		}
		if !slices.Contains(placed, ci.Cluster.Leader) {
			return fmt.Errorf("on %s, the stream on %v", ci.Cluster.Leader, placed)
		}
		return nil
	})
	t.Logf("D back to one replica %v after its mover's server stopped (held: %s, D was on %s)", time.Since(stopped).Round(10*time.Millisecond), servers[m].Name(), victim)
	// It delivers the next message from there.
	takeSome(t, js, "D", 1, 1)
}
