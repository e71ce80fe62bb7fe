package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A stream of two replicas, with a durable of two, whose follower's
// server is stopped and then removed (SERVER.REMOVE): the survivor can
// never be elected again in a group of two without the lost voter, so
// before, the stream and the durable stayed leaderless for good
// (a new-user trial; nats-server v2.15.2 shrinks the group and adds the
// new peer). The survivor forces the lost voter out and leads alone
// (docs/cluster.md, "A stream of two replicas"): the stream and the
// durable are led again, back on two current replicas (the third
// server's), with every acknowledged message, and take publishes and
// acknowledgements.
func TestJetStreamClusterLostVoterOfTwoForcedOut(t *testing.T) {
	testLostVoterOfTwo(t, "$JS.API.SERVER.REMOVE")
}

// As above, with the stopped server's replica removed from the stream
// alone (STREAM.PEER.REMOVE, `nats stream cluster peer-remove`); then
// the stopped server comes back: its replicas of the stream and the
// durable, out of their assignments, retire, though their groups'
// leaders no longer talk to them (ledElsewhere), and the durable's info
// through every server is its leader's (a trial: the stale copy stayed
// for good and answered the durable's info 10008 to clients of every
// server).
func TestJetStreamClusterLostVoterOfTwoPeerRemoved(t *testing.T) {
	servers, opts, lost, _ := testLostVoterOfTwo(t, "$JS.API.STREAM.PEER.REMOVE.X2")
	restartLost(t, servers, opts, lost, func() {})
	for i := range servers {
		nc := connect(t, servers[i].ClientURL(), nats.UserInfo("app", "app"))
		for range 5 {
			m, err := nc.Request("$JS.API.CONSUMER.INFO.X2.D", nil, 2*time.Second)
			if err != nil || !strings.Contains(string(m.Data), `"num_ack_pending"`) || strings.Contains(string(m.Data), `"error"`) {
				t.Fatalf("durable's info through %s: %v %s", servers[i].Name(), err, msgData(m))
			}
		}
	}
}

// restartLost restarts the stopped server lost of testLostVoterOfTwo
// on its store (in servers), runs whileStale while its replica of X2
// is still on disk, then waits for that replica to retire.
func restartLost(t *testing.T, servers []*server.Server, opts []server.Options, lost string, whileStale func()) {
	t.Helper()
	li := leaderIndex(servers, lost)
	servers[li] = restartServer(t, opts[li])
	dir := filepath.Join(opts[li].StoreDir, "jetstream", "APP", "streams", "X2")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("%s's replica of X2 before it could retire: %v", lost, err)
	}
	whileStale()
	// Past the 10 s a leaving replica that knows no leader waits
	// (retireAfter), with room for a loaded machine.
	eventuallyWithin(t, 10*time.Second+2*clusterTimeout, lost+"'s replica of X2 retired", func() error {
		if _, err := os.Stat(dir); err == nil {
			return fmt.Errorf("%s still holds %s", lost, dir)
		}
		return nil
	})
}

// removeLost removes the stopped server lost with a request to subject
// (a body naming it) through server s, as the system account for
// SERVER.REMOVE, else as the stream's account, app (a stream's request
// goes to its account's API).
func removeLost(t *testing.T, s *server.Server, subject, lost string) {
	t.Helper()
	user := "app"
	if subject == "$JS.API.SERVER.REMOVE" {
		user = "sys"
	}
	nc := connect(t, s.ClientURL(), nats.UserInfo(user, user))
	eventually(t, "remove "+lost, func() error {
		if r, err := tryStepDown(nc, subject, fmt.Sprintf(`{"peer":%q}`, lost)); err != nil || !r.Success {
			return errors.Join(err, fmt.Errorf("%+v", r.Error))
		}
		return nil
	})
}

// msgData is m's payload, or nothing for no message.
func msgData(m *nats.Msg) []byte {
	if m == nil {
		return nil
	}
	return m.Data
}

// testLostVoterOfTwo runs the scenario above, removing the stopped
// follower's server with a request to subject (a body naming it), as
// the system account for SERVER.REMOVE, else as the stream's; it
// returns the servers, their options, the stopped server's name and a
// client of the stream's account.
func testLostVoterOfTwo(t *testing.T, subject string) ([]*server.Server, []server.Options, string, jetstream.JetStream) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { sysAppAuth(o) })
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	const msgs = twoReplicaMsgs
	li, fi := twoReplicaStream(t, servers, js, "X2", true)
	lost := servers[fi].Name()
	servers[fi].Shutdown()
	removeLost(t, servers[li], subject, lost)
	live := []string{servers[0].Name(), servers[1].Name(), servers[2].Name()}
	live = slices.DeleteFunc(live, func(n string) bool { return n == lost })
	ajs := js[li]
	// Past the 10 s the survivor waits without a leader (forceOutAfter),
	// with room for a loaded machine.
	eventuallyWithin(t, 10*time.Second+2*clusterTimeout, "X2 led, on two current replicas, whole", func() error {
		s, err := ajs.Stream(ctx2(t), "X2")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		if si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != 1 || !si.Cluster.Replicas[0].Current {
			return fmt.Errorf("cluster %+v", si.Cluster)
		}
		if got := []string{si.Cluster.Leader, si.Cluster.Replicas[0].Name}; !slices.Contains(got, live[0]) || !slices.Contains(got, live[1]) {
			return fmt.Errorf("X2 on %v, want %v", got, live)
		}
		if si.State.Msgs != msgs {
			return fmt.Errorf("%d messages, want %d", si.State.Msgs, msgs)
		}
		return nil
	})
	clusterPublish(t, ajs, "x2.after", msgs+1)
	eventually(t, "the durable led, on two current replicas", func() error {
		ci, err := consumerInfoVia(t, ajs, "X2", "D")
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || len(ci.Cluster.Replicas) != 1 || !ci.Cluster.Replicas[0].Current || ci.Cluster.Replicas[0].Name == lost {
			return fmt.Errorf("cluster %+v", ci.Cluster)
		}
		return nil
	})
	cons, err := ajs.Consumer(ctx2(t), "X2", "D")
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < msgs+1 {
		batch, err := cons.Fetch(msgs+1-got, jetstream.FetchMaxWait(clusterTimeout/4))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx2(t)); err != nil {
				t.Fatalf("ack of message %d: %v", got+n+1, err)
			}
			n++
		}
		if n == 0 {
			t.Fatalf("fetched %d of %d messages: %v", got, msgs+1, batch.Error())
		}
		got += n
	}
	return servers, opts, lost, ajs
}
