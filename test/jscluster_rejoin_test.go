package test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A server removed (SERVER.REMOVE) while it runs, then restarted on its
// store: before, it stayed outside the meta group for good (the
// catalogue never took its store back; only an empty store returned
// it). It retires its Raft WAL at the start and rejoins as a new replica
// (docs/cluster.md, "Removing a server"): the meta group has its three
// members again, a new stream of three replicas is placed on it, current,
// and the stream whose replica the removal dropped gets it back, with
// every message.
func TestJetStreamClusterRemovedRunningRejoins(t *testing.T) {
	servers, opts, js, vi, via := removalCluster(t)
	victim := servers[vi].Name()
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	if r := stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, victim)); !r.Success {
		t.Fatalf("remove %s: %+v", victim, r.Error)
	}
	rest := slices.Delete(slices.Clone(servers), vi, vi+1)
	waitMeta(t, rest, []string{rest[0].Name(), rest[1].Name()})
	streamServers(t, js[via], "A", 2) // the removed server's replica dropped
	// While it runs it stays out, as nats-server disables JetStream on it:
	// its removal recorded, its health says so, the meta group has two.
	record := filepath.Join(opts[vi].StoreDir, "jetstream", "$SYS", "_js_", "removed")
	eventually(t, victim+" records its removal", func() error {
		_, err := os.Stat(record)
		return err
	})
	if ps := servers[vi].JetStreamClusterHealth(); len(ps) == 0 || !strings.Contains(ps[0].Text, "removed from the meta group") {
		t.Fatalf("%s's health %+v", victim, ps)
	}
	waitMeta(t, rest, []string{rest[0].Name(), rest[1].Name()})
	servers[vi].Shutdown()
	servers[vi] = restartServer(t, opts[vi])
	rejoined(t, servers, js[via], victim, 10)
}

// As above, with the server removed while it was down: restarted on its
// store, it learns its removal from the others
// (TestJetStreamClusterRemovedWhileDownLearnsIt) and rejoins as a new
// replica.
func TestJetStreamClusterRemovedDownRejoins(t *testing.T) {
	servers, opts, js, vi, via := removalCluster(t)
	victim := servers[vi].Name()
	servers[vi].Shutdown()
	removeLost(t, servers[via], "$JS.API.SERVER.REMOVE", victim)
	rest := slices.Delete(slices.Clone(servers), vi, vi+1)
	waitMeta(t, rest, []string{rest[0].Name(), rest[1].Name()})
	streamServers(t, js[via], "A", 2)
	servers[vi] = restartServer(t, opts[vi])
	rejoined(t, servers, js[via], victim, 10)
}

// rejoined waits for the removed server victim, restarted, to be a
// member of the meta group of servers again, checks that a new stream
// of three replicas (B) is placed on it and current there, and that
// stream A, whose replica on it the removal dropped, has it back with
// its msgs messages.
func rejoined(t *testing.T, servers []*server.Server, js jetstream.JetStream, victim string, msgs uint64) {
	t.Helper()
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	eventually(t, "create B", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "B", Subjects: []string{"b.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, js, "b.1", 1)
	if placed := streamServers(t, js, "B", 3); !slices.Contains(placed, victim) {
		t.Fatalf("B on %v, not on %s", placed, victim)
	}
	eventually(t, "A back on three replicas", func() error {
		s, err := js.Stream(ctx2(t), "A")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		if si.Cluster == nil || len(si.Cluster.Replicas) != 2 || si.State.Msgs != msgs {
			return fmt.Errorf("cluster %+v, %d messages", si.Cluster, si.State.Msgs)
		}
		return nil
	})
	streamServers(t, js, "A", 3)
}

// removalCluster starts three servers with the system and APP accounts,
// stream A of three replicas holding a.1 to a.10, and returns them with
// an APP client per server, the index of a follower of the meta group
// to remove (vi) and of another server to ask through (via).
func removalCluster(t *testing.T) (servers []*server.Server, opts []server.Options, js []jetstream.JetStream, vi, via int) {
	t.Helper()
	servers, opts = jsClusterMod(t, 3, func(_ int, o *server.Options) { sysAppAuth(o) })
	leader := waitMeta(t, servers, []string{"n1", "n2", "n3"})
	_, js = clusterClients(t, servers, nats.UserInfo("app", "app"))
	eventually(t, "create A", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "A", Subjects: []string{"a.>"}, Replicas: 3})
		return err
	})
	for n := 1; n <= 10; n++ {
		clusterPublish(t, js[0], fmt.Sprintf("a.%d", n), uint64(n))
	}
	streamServers(t, js[0], "A", 3)
	vi = (leaderIndex(servers, leader) + 1) % 3
	return servers, opts, js, vi, (vi + 1) % 3
}
