package test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A server renamed over its store (n3 restarted as n3x, n3 then
// removed), whose Raft WAL is later damaged: at its next start the WAL is
// quarantined and a new one starts under a new store incarnation, but its
// meta group voters record still names the store's first name, n3,
// with the old incarnation. Before, the server stayed out of the meta
// group for good ("this server "n3x" is not among the members"; a
// trial); it now joins it as a new replica, as a server whose WAL alone
// was replaced does (docs/cluster.md, "A server renamed over its
// store"), and its replica of the stream is replaced: three current
// replicas again, every acknowledged message served.
func TestJetStreamClusterRenamedServerDamagedWALRejoins(t *testing.T) {
	servers, opts, js0, sent := renamedOrders(t)
	streamServers(t, js0, "ORDERS", 3)

	servers[2].Shutdown()
	o := opts[2]
	o.ServerName = "n3x"
	servers[2] = restartServer(t, o)
	eventually(t, "n3x catalogued", func() error {
		if _, members, _ := metaView(servers); !slices.Equal(members, []string{"n1", "n2", "n3", "n3x"}) {
			return fmt.Errorf("members %v", members)
		}
		return nil
	})
	removeN3(t, servers)
	onThree(t, js0)

	servers[2].Shutdown()
	files, _ := filepath.Glob(filepath.Join(o.StoreDir, "jetstream", "$SYS", "_js_", "raft", "*.wal"))
	if len(files) == 0 {
		t.Fatal("no WAL segment")
	}
	for _, f := range files {
		flipMiddle(t, f)
	}
	publishRange(t, js0, sent, 21, 30)
	servers[2] = restartServer(t, o)
	waitMeta(t, servers, []string{"n1", "n2", "n3x"})
	onThree(t, js0)
	publishRange(t, js0, sent, 31, 40)
	readAsLeader(t, servers, 2, sent)
}

// onThree waits until ORDERS has current replicas on n1, n2 and n3x.
func onThree(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	eventuallyWithin(t, 3*clusterTimeout, "ORDERS on n1, n2 and n3x", func() error {
		now := streamServers(t, js, "ORDERS", 3)
		if slices.Sort(now); !slices.Equal(now, []string{"n1", "n2", "n3x"}) {
			return fmt.Errorf("ORDERS on %v", now)
		}
		return nil
	})
}
