package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Two of three servers restart with damaged Raft WALs (docs/cluster.md,
// "Forcing a new cluster"): each quarantines its WAL and waits to join
// the meta group as a new replica, but the meta group's voters are their
// two old replicas and the intact server's, so no leader is ever elected:
// every JetStream request is answered 10008, for good. The flag on a
// damaged server is refused (it has nothing to recover from). Restarted
// with ForceNewCluster, the intact server leads the meta group alone and
// the stream and consumer groups too: every acknowledged message is
// served, a publish is acknowledged, the durable goes on from its ack
// floor, and the two damaged servers are added back until the stream
// and its durable have three current replicas again; the force is
// recorded, so that it is done once.
func TestJetStreamClusterForceNewAfterMajorityWALsDamaged(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(i int, o *server.Options) { o.RaftRetain = 8 })
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, AllowDirect: true})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 200)
	eventually(t, "create the durable C", func() error {
		_, err := js0.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	consumeAck(t, js0, "C", 5)

	// The survivor is the meta leader; it is made the stream's and the
	// durable's leader too, so that its WAL holds every acknowledged
	// entry (the procedure's advice: the server most up to date).
	survivor := slices.IndexFunc(servers, func(s *server.Server) bool { return s.Name() == metaLeaderOf(t, servers) })
	name := servers[survivor].Name()
	readAsLeader(t, servers, survivor, sent)
	consumerLedBy(t, servers[survivor], "C", name)
	var victims []int
	for i := range servers {
		if i != survivor {
			victims = append(victims, i)
		}
	}
	for _, v := range victims {
		servers[v].Shutdown()
	}
	servers[survivor].Shutdown()
	for _, v := range victims {
		files, _ := filepath.Glob(filepath.Join(opts[v].StoreDir, "jetstream", "$SYS", "_js_", "raft", "*.wal"))
		if len(files) == 0 {
			t.Fatalf("no WAL on %s", servers[v].Name())
		}
		for _, f := range files {
			flipMiddle(t, f)
		}
	}

	// The outage: the damaged servers (given the flag: refused) and the
	// intact one (without it) elect no meta leader.
	for _, v := range victims {
		o := opts[v]
		o.ForceNewCluster = true
		servers[v] = restartServer(t, o)
	}
	servers[survivor] = restartServer(t, opts[survivor])
	nc := connect(t, servers[survivor].ClientURL())
	eventually(t, "STREAM.NAMES answered 10008", func() error {
		return apiCode(nc, "$JS.API.STREAM.NAMES", 10008)
	})
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, s := range servers {
			if mi := s.JetStreamMeta(); mi != nil && mi.Leader != "" {
				t.Fatalf("%s knows the meta leader %s with two of three WALs lost", s.Name(), mi.Leader)
			}
		}
	}
	if err := apiCode(nc, "$JS.API.STREAM.NAMES", 10008); err != nil {
		t.Fatal(err)
	}

	// The force.
	servers[survivor].Shutdown()
	forced := opts[survivor]
	forced.ForceNewCluster = true
	servers[survivor] = restartServer(t, forced)
	waitFor(t, clusterTimeout, name+" leads the meta group", func() bool {
		mi := servers[survivor].JetStreamMeta()
		return mi != nil && mi.Leader == name
	})
	jsS := jsAt(t, servers[survivor])
	readAsLeader(t, servers, survivor, sent)
	publishRange(t, jsS, sent, 201, 210)
	// The durable is asked once the cluster is whole again: until a
	// rejoining server is in the meta group and its new replica of C
	// heard from C's leader, that server may answer CONSUMER.INFO with
	// 10008 (a leaderless member, as nats-server's do), racing the
	// leader's answer. Asked right after the force, C's info was
	// answered 10008 for 20 s once in some 80 runs (the cause was not
	// established; the run kept no log).
	waitFor(t, 3*clusterTimeout, "ORDERS and C with three current replicas", func() bool {
		return threeCurrent(t, jsS, servers)
	})
	waitMetaFormed(t, servers)
	if got := consumeAck(t, jsS, "C", 1); got[0] != 6 {
		t.Fatalf("C delivered %v after its 5 acknowledged, want sequence 6", got)
	}
	publishRange(t, jsS, sent, 211, 220)
	for _, v := range victims {
		readAsLeader(t, servers, v, sent)
	}
	if _, err := os.Stat(filepath.Join(opts[survivor].StoreDir, "jetstream", "$SYS", "_js_", "forced", "meta.json")); err != nil {
		t.Fatalf("the force is not recorded: %v", err)
	}
}

// consumerLedBy steps the leadership of ORDERS' durable down until
// server srv (named name) leads it.
func consumerLedBy(t *testing.T, srv *server.Server, durable, name string) {
	t.Helper()
	nc := connect(t, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, name+" leads "+durable, func() error {
		c, err := js.Consumer(tctx(t), "ORDERS", durable)
		if err != nil || c.CachedInfo().Cluster == nil {
			return fmt.Errorf("consumer info: %v", err)
		}
		if l := c.CachedInfo().Cluster.Leader; l != name {
			_, _ = nc.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS."+durable, fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, name), 2*time.Second)
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
}

// apiCode requests subject (an empty body) and returns nil if the answer
// is a JetStream API error with the code want.
func apiCode(nc *nats.Conn, subject string, want int) error {
	msg, err := nc.Request(subject, nil, 2*time.Second)
	if err != nil {
		return err
	}
	var r struct {
		Error *struct {
			ErrCode int `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return err
	}
	if r.Error == nil || r.Error.ErrCode != want {
		return fmt.Errorf("%s answered %s, want error %d", subject, msg.Data, want)
	}
	return nil
}

// threeCurrent reports whether ORDERS and its durable C each have a
// leader and two current, online replicas, together on every server.
func threeCurrent(t *testing.T, js jetstream.JetStream, servers []*server.Server) bool {
	s, err := js.Stream(pollCtx(t), "ORDERS")
	if err != nil {
		return false
	}
	c, err := js.Consumer(pollCtx(t), "ORDERS", "C")
	if err != nil {
		return false
	}
	for _, ci := range []*jetstream.ClusterInfo{s.CachedInfo().Cluster, c.CachedInfo().Cluster} {
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != len(servers)-1 {
			return false
		}
		on := map[string]bool{ci.Leader: true}
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return false
			}
			on[p.Name] = true
		}
		for _, srv := range servers {
			if !on[srv.Name()] {
				return false
			}
		}
	}
	return true
}

// The force given to a server of a healthy cluster is refused: the
// other members say hello with the stores the meta group knows them by,
// so their WALs were not lost and the group has its quorum without it
// (a force would split the cluster). The server rejoins as it was, the
// stream keeps its three replicas and nothing is recorded.
func TestJetStreamClusterForceNewRefusedWhileOthersIntact(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, nil)
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, AllowDirect: true})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 20)
	servers[0].Shutdown()
	o := opts[0]
	o.ForceNewCluster = true
	servers[0] = restartServer(t, o)
	waitMetaFormed(t, servers)
	js1 := jsAt(t, servers[1])
	publishRange(t, js1, sent, 21, 30)
	waitFor(t, clusterTimeout, "ORDERS with three current replicas", func() bool {
		s, err := js1.Stream(pollCtx(t), "ORDERS")
		if err != nil {
			return false
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 || s.CachedInfo().State.Msgs != 30 {
			return false
		}
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return false
			}
		}
		return true
	})
	readAsLeader(t, servers, 0, sent)
	if _, err := os.Stat(filepath.Join(opts[0].StoreDir, "jetstream", "$SYS", "_js_", "forced")); !os.IsNotExist(err) {
		t.Fatalf("a force was recorded on a healthy cluster: %v", err)
	}
}
