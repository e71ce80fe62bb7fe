package test

import (
	"context"
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

// A stream of three replicas and its durable scaled 3 -> 1 -> 3 (the
// durable's config then says num_replicas 3, and the stream's group log
// starts from a config of one replica), then one of its servers stopped
// and removed (SERVER.REMOVE): the server that had no replica gets the
// stream's and the durable's. Its stream replica runs the group log's
// first config (one replica) until it caught up, which the test holds
// off (the stream's leader does not add it to the group meanwhile). The
// durable's replica there must start all the same, checked against the
// config the meta group assigns the stream: before, it was refused with
// 10126 against that stale config and never tried again (a trial found
// it current:false for good, and the server's /healthz 503 "consumer not
// found", until a restart). The durable has three current replicas, the
// new server's among them, while the stream's replica there is still
// held; once let go, the stream has three current replicas, every
// message, the durable its state, and the new server's health no
// problem.
func TestJetStreamClusterConsumerReplicaOnCatchingUpStream(t *testing.T) {
	h := &startHooks{}
	sc := startRescaled(t, h)
	h.hold.Store(true)
	sc.removeVictim(t)
	sc.waitWork(t, "while "+sc.spare+"'s stream replica is held")
	ci := streamCluster(t, sc.js)
	if ci == nil {
		t.Fatal("no stream info")
	}
	for _, p := range ci.Replicas {
		if p.Name == sc.spare && p.Current {
			t.Fatalf("%s's stream replica current while held: %+v (the test did not hold its catch-up)", sc.spare, p)
		}
	}
	h.hold.Store(false)
	sc.finish(t)
}

// As TestJetStreamClusterConsumerReplicaOnCatchingUpStream without the
// hold, but the new server's first three attempts to start the durable's
// replica fail (a test hook, as a failure that may pass): the replica is
// started again later (docs/cluster.md, "Consumers in a cluster"),
// and the durable ends with three current replicas, the new server's
// among them, and that server's health has no problem.
func TestJetStreamClusterConsumerReplicaStartRetried(t *testing.T) {
	h := &startHooks{}
	sc := startRescaled(t, h)
	h.failOn.Store(sc.spare)
	h.failLeft.Store(3)
	sc.removeVictim(t)
	sc.waitWork(t, "after failed starts on "+sc.spare)
	if n := h.attempts.Load(); n < 4 {
		t.Fatalf("%d attempts to start WORK on %s, want 3 failed and one more", n, sc.spare)
	}
	sc.finish(t)
}

// startHooks are the cluster hooks of startRescaled's servers.
type startHooks struct {
	hold     atomic.Bool  // ORDERS's leader changes no membership
	failOn   atomic.Value // string: the server whose starts of WORK fail
	failLeft atomic.Int32 // how many more of them fail
	attempts atomic.Int32 // starts of WORK tried on failOn
}

// of returns server name's hooks.
func (h *startHooks) of(name string) *jscluster.Hooks {
	return &jscluster.Hooks{
		HoldMembership: func(_, stream string) bool { return stream == "ORDERS" && h.hold.Load() },
		FailConsumerStart: func(_, _, consumer string) error {
			if on, _ := h.failOn.Load().(string); on != name || consumer != "WORK" {
				return nil
			}
			h.attempts.Add(1)
			if h.failLeft.Add(-1) >= 0 {
				return errors.New("test hook: failed start")
			}
			return nil
		},
	}
}

// rescaled is a cluster of four with ORDERS (20 messages) and its durable
// WORK (ten delivered, four acknowledged), both scaled 3 -> 1 -> 3, and
// the servers picked: victim, a follower of ORDERS that does not lead the
// meta group; spare, the server without a replica of ORDERS.
type rescaled struct {
	servers       []*server.Server
	js            jetstream.JetStream // through a server that is not the victim
	sent          map[uint64]sentMsg
	before        ackState
	victim, spare string
}

// startRescaled starts rescaled with hooks h.
func startRescaled(t *testing.T, h *startHooks) *rescaled {
	t.Helper()
	servers, _ := jsClusterMod(t, 4, func(_ int, o *server.Options) {
		sysAppAuth(o)
		o.JetStreamClusterHooks = h.of(o.ServerName)
	})
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), cfg)
		return err
	})
	sc := &rescaled{servers: servers, sent: map[uint64]sentMsg{}}
	publishRange(t, js[0], sc.sent, 1, 20)
	cons, before := fetchAckFour(t, js[0])
	sc.before = before
	for _, n := range []int{1, 3} {
		cfg.Replicas = n
		eventually(t, fmt.Sprintf("scale ORDERS to %d", n), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := js[0].UpdateStream(ctx, cfg)
			return err
		})
	}
	ccfg := cons.CachedInfo().Config
	for _, n := range []int{1, 3} {
		ccfg.Replicas = n
		eventually(t, fmt.Sprintf("scale WORK to %d", n), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := js[0].UpdateConsumer(ctx, "ORDERS", ccfg)
			return err
		})
	}
	placed := waitReplicas(t, js[0], 3)
	waitConsumerReplicas(t, js[0])
	meta := waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"})
	for _, n := range placed[1:] {
		if n != meta && sc.victim == "" {
			sc.victim = n
		}
	}
	for _, s := range servers {
		if !slices.Contains(placed, s.Name()) {
			sc.spare = s.Name()
		}
	}
	if sc.victim == "" || sc.spare == "" {
		t.Fatalf("ORDERS on %v, meta leader %s", placed, meta)
	}
	sc.js = js[(leaderIndex(servers, sc.victim)+1)%4]
	return sc
}

// removeVictim stops the victim and removes it (SERVER.REMOVE through
// another server).
func (sc *rescaled) removeVictim(t *testing.T) {
	t.Helper()
	vi := leaderIndex(sc.servers, sc.victim)
	sc.servers[vi].Shutdown()
	sys := connect(t, sc.servers[(vi+1)%4].ClientURL(), nats.UserInfo("sys", "sys"))
	eventually(t, "remove "+sc.victim, func() error {
		if r, err := tryStepDown(sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, sc.victim)); err != nil || !r.Success {
			return errors.Join(err, fmt.Errorf("%+v", r.Error))
		}
		return nil
	})
}

// waitWork waits until WORK has a leader and two other current replicas,
// the spare's among them, none on the victim.
func (sc *rescaled) waitWork(t *testing.T, when string) {
	t.Helper()
	eventually(t, "WORK on three current replicas, one on "+sc.spare+", "+when, func() error {
		ci, err := consumerInfoVia(t, sc.js, "ORDERS", "WORK")
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" {
			return fmt.Errorf("WORK's cluster %+v", ci.Cluster)
		}
		names := []string{ci.Cluster.Leader}
		for _, p := range ci.Cluster.Replicas {
			if !p.Current || p.Offline {
				return fmt.Errorf("WORK's replica %+v", p)
			}
			names = append(names, p.Name)
		}
		if len(names) != 3 || !slices.Contains(names, sc.spare) || slices.Contains(names, sc.victim) {
			return fmt.Errorf("WORK on %v", names)
		}
		return nil
	})
}

// finish waits until ORDERS has three current replicas, the spare's
// among them, and the spare's health has no problem, then checks every
// message and WORK's state.
func (sc *rescaled) finish(t *testing.T) {
	t.Helper()
	eventually(t, "ORDERS on three current replicas, one on "+sc.spare, func() error {
		if got := streamServers(t, sc.js, "ORDERS", 3); !slices.Contains(got, sc.spare) || slices.Contains(got, sc.victim) {
			return fmt.Errorf("ORDERS on %v", got)
		}
		return nil
	})
	sc.waitWork(t, "at the end")
	spare := sc.servers[leaderIndex(sc.servers, sc.spare)]
	eventually(t, sc.spare+"'s health", func() error {
		if ps := spare.JetStreamClusterHealth(); len(ps) > 0 {
			return fmt.Errorf("%+v", ps)
		}
		return nil
	})
	checkAll(t, sc.js, sc.sent)
	if after := consumerState(t, sc.js); after != sc.before {
		t.Fatalf("WORK at the end: %+v, before %+v", after, sc.before)
	}
}
