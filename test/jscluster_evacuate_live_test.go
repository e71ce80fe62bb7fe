package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SERVER.EVACUATE of the one live server of a stream of two replicas
// whose other server is down (a new-user trial: the evacuated replica,
// left out of its assignment and knowing no leader, retired itself after
// 10 s and its files were deleted, leaving the acknowledged messages on
// the stopped server alone, and the stream without a leader for good).
// The replica stays while none of its group's other voters is heard
// (docs/cluster.md, "Evacuating a server"); once the other server is
// back, the stream has a leader, every message, and takes publishes.
func TestJetStreamClusterEvacuateLiveCopyOfTwo(t *testing.T) {
	servers, opts := jsClusterMod(t, 4, func(_ int, o *server.Options) { sysAppAuth(o) })
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"})
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	const msgs = twoReplicaMsgs
	li, fi := twoReplicaStream(t, servers, js, "X2", false)
	live := servers[li].Name()
	servers[fi].Shutdown()
	via := -1
	for i := range servers {
		if i != li && i != fi {
			via = i
			break
		}
	}
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	eventually(t, "evacuate "+live, func() error {
		m, err := sys.Request("$JS.API.SERVER.EVACUATE", []byte(fmt.Sprintf(`{"peer":%q}`, live)), 5*time.Second)
		if err != nil {
			return err
		}
		if string(m.Data) != evacuateOK {
			return fmt.Errorf("%s", m.Data)
		}
		return nil
	})
	// Past the 10 s a leaving replica that knows no leader waits
	// (retireAfter), with room for a loaded machine: the live copy must
	// still hold every message.
	for end := time.Now().Add(16 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		si, err := accountStream(servers[li], "APP", "X2")
		if err != nil {
			t.Fatalf("%s's replica of X2, the live copy, gone: %v", live, err)
		}
		if si.State.Msgs != msgs {
			t.Fatalf("%s's replica of X2 holds %d messages, want %d", live, si.State.Msgs, msgs)
		}
	}
	servers[fi] = restartServer(t, opts[fi])
	app := connect(t, servers[via].ClientURL(), nats.UserInfo("app", "app"))
	ajs, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	clusterPublish(t, ajs, "x2.after", msgs+1)
	eventually(t, "X2 led, whole", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := ajs.Stream(ctx, "X2")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		if si.Cluster == nil || si.Cluster.Leader == "" || si.State.Msgs != msgs+1 {
			return fmt.Errorf("leader %+v, %d messages", si.Cluster, si.State.Msgs)
		}
		return nil
	})
}
