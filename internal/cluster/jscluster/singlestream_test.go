package jscluster

import (
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/route"
)

// routedHost is the Host of a server routed to the named servers: only
// what placement reads (the routed peers, the cluster's name).
type routedHost struct {
	Host
	peers []string
}

func (h routedHost) ClusterPeers() []route.Peer {
	ps := make([]route.Peer, len(h.peers))
	for i, p := range h.peers {
		ps[i] = route.Peer{Name: p}
	}
	return ps
}
func (routedHost) ClusterName() string { return "C" }

// soloCluster is oneServer, routed to s2 and s3, with s1 to s3 in its
// catalogue and stream A > S of one replica assigned to s2; its movers
// stop when the test ends.
func soloCluster(t *testing.T) (*Cluster, streamKey) {
	t.Helper()
	c := oneServer(t)
	c.host = routedHost{peers: []string{"s2", "s3"}}
	c.quit = make(chan struct{})
	c.cfg.Logf = func(string, ...any) {}
	c.cfg.Infof = c.cfg.Logf
	t.Cleanup(func() {
		close(c.quit)
		c.done.Wait()
	})
	for _, s := range []raftnode.ServerID{"s1", "s2", "s3"} {
		inc := raftnode.Incarnation{byte(len(s)), s[1]}
		if s == "s1" {
			inc = c.node.Incarnation()
		}
		c.mustPropose(t, &meta.AddServer{Name: s, Cluster: "C", Incarnation: inc})
	}
	c.mustPropose(t, &meta.AssignStream{Account: "A", Name: "S", Config: []byte(`{"name":"S","subjects":["s.>"],"num_replicas":1}`),
		Created: 1, Servers: []raftnode.ServerID{"s2"}})
	return c, streamKey{"A", "S"}
}

// A move's step 3 is through once the stream settled on the
// destination, whatever follows the settle before the mover looks: a
// move back asked meanwhile (STREAM.PEER.REMOVE of the destination)
// proposes its step 1 within milliseconds of the settle. Before, the
// mover waited for the stream on the destination alone, settled, missed
// it under load (TestJetStreamClusterMemorySingleStreamEvacuate: moved
// n4 to n3, then n3 to n4 within 3.7 s), and held its key for its whole
// 20 s, while the STREAM.PEER.REMOVE of n4 found it running and was
// lost.
func TestSingleStreamSettledSince(t *testing.T) {
	c, k := soloCluster(t)
	c.mustPropose(t, &meta.UpdateStream{Account: "A", Name: "S", Config: []byte(`{"name":"S","subjects":["s.>"],"num_replicas":1}`), Servers: []raftnode.ServerID{"s2", "s3"}})
	step1, _, _, _ := c.assignment(k)
	if from, to, ok := singleStreamMove(step1); !ok || from != "s2" || to != "s3" {
		t.Fatalf("step 1: %+v", step1)
	}
	if c.settledSince(k, step1) {
		t.Fatal("settled at step 1")
	}
	c.mustPropose(t, &meta.UpdateStream{Account: "A", Name: "S", Config: step1.Config, Servers: []raftnode.ServerID{"s3"}})
	step3, _, _, _ := c.assignment(k)
	if !step3.Unsettled() || c.settledSince(k, step1) {
		t.Fatalf("step 3 (%+v) counted settled", step3)
	}
	// The settle and the next move's step 1, before the mover looks.
	c.mustPropose(t, &meta.SettleStream{Account: "A", Stream: "S", Group: step3.Group, Replica: step3.Replicas[0].ID})
	c.mustPropose(t, &meta.UpdateStream{Account: "A", Name: "S", Config: step1.Config, Servers: []raftnode.ServerID{"s3", "s2"}})
	if next, _, _, _ := c.assignment(k); !slices.Equal(meta.Servers(next.Replicas), []raftnode.ServerID{"s3", "s2"}) {
		t.Fatalf("the next move's step 1: %+v", next)
	}
	if !c.settledSince(k, step1) {
		t.Fatal("the move settled on s3 and went on: not counted settled")
	}
	c.mustPropose(t, &meta.RemoveStream{Account: "A", Name: "S"})
	if !c.settledSince(k, step1) {
		t.Fatal("a deleted stream not counted settled")
	}
}

// A request to move a stream of one replica off its server that comes
// while a mover of that stream and server runs (an earlier move's off
// the same server, ending: the stream came back meanwhile) is taken up
// once that mover ends: its step 1 is proposed (to any server but s2). Before, the request was
// answered as running and nothing moved the stream
// (TestJetStreamClusterMemorySingleStreamEvacuate: "MSOLO still on n4"
// for 45 s after STREAM.PEER.REMOVE answered success).
func TestSingleStreamMoveAskedWhileAMoverEnds(t *testing.T) {
	c, k := soloCluster(t)
	release := make(chan struct{})
	if !c.runMover(singleMoveKey{k, "s2"}, func() { <-release }, func() {}) {
		t.Fatal("the earlier mover did not start")
	}
	sa, _, _, _ := c.assignment(k)
	if err := c.evacuateSingle(sa, "s2"); err != nil {
		t.Fatalf("STREAM.PEER.REMOVE of s2: %v", err)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		sa, _, _, _ := c.assignment(k)
		if from, _, moving := singleStreamMove(sa); moving && from == "s2" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("S on %v after the earlier mover ended, want its step 1 off s2", meta.Servers(sa.Replicas))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A consumer's move of one replica is through once it settled on its
// new server, whatever follows the settle before the mover looks (a
// move of it asked meanwhile proposes its first step right after), as
// for a stream's move (TestSingleStreamSettledSince).
func TestConsumerSettledSince(t *testing.T) {
	c, _ := soloCluster(t)
	// S, of one replica on s2, moving to s3 (step 1 applied).
	c.mustPropose(t, &meta.UpdateStream{Account: "A", Name: "S", Config: []byte(`{"name":"S","subjects":["s.>"],"num_replicas":1}`), Servers: []raftnode.ServerID{"s2", "s3"}})
	k := consumerKey{"A", "S", "D"}
	cfg := []byte(`{"durable_name":"D","ack_policy":"explicit","num_replicas":1}`)
	assign := func(servers ...raftnode.ServerID) {
		c.mustPropose(t, &meta.AssignConsumer{Account: "A", Stream: "S", Name: "D", Action: meta.CreateOrUpdate, Config: cfg, Created: 7, Servers: servers})
	}
	assign("s2")
	assign("s2", "s3") // its move's first step
	grown, _, _, _ := c.consumerAssignment(k)
	if len(grown.Replicas) != 2 || c.consumerSettledSince(k, grown) {
		t.Fatalf("grown (%+v) counted settled", grown)
	}
	assign("s3") // the shrink
	shrunk, _, _, _ := c.consumerAssignment(k)
	if !shrunk.Unsettled() || c.consumerSettledSince(k, grown) {
		t.Fatalf("shrunk (%+v) counted settled", shrunk)
	}
	// The settle and a move back's first step, before the mover looks.
	c.mustPropose(t, &meta.SettleConsumer{Account: "A", Stream: "S", Name: "D", Group: shrunk.Group, Replica: shrunk.Replicas[0].ID})
	assign("s3", "s2")
	if !c.consumerSettledSince(k, grown) {
		t.Fatal("the consumer settled on s3 and moved on: not counted settled")
	}
	c.mustPropose(t, &meta.RemoveConsumer{Account: "A", Stream: "S", Name: "D"})
	if !c.consumerSettledSince(k, grown) {
		t.Fatal("a deleted consumer not counted settled")
	}
}

// A replicated stream's replica to move off a server after its consumers
// of one replica there (STREAM.PEER.REMOVE, SERVER.REMOVE, an
// evacuation: moveSinglesThen) is asked again when a mover of the same
// stream and server was running: before, the request found it running,
// was answered, and its replica never moved (helper-124).
func TestMoveSinglesAskedWhileAMoverRuns(t *testing.T) {
	c, _ := soloCluster(t)
	c.mustPropose(t, &meta.AssignStream{Account: "A", Name: "R", Config: []byte(`{"name":"R","subjects":["r.>"],"num_replicas":3}`),
		Created: 2, Servers: []raftnode.ServerID{"s1", "s2", "s3"}})
	c.mustPropose(t, &meta.AssignConsumer{Account: "A", Stream: "R", Name: "D", Action: meta.CreateOrUpdate,
		Config: []byte(`{"durable_name":"D","ack_policy":"explicit","num_replicas":1}`), Created: 3, Servers: []raftnode.ServerID{"s2"}})
	k := streamKey{"A", "R"}
	release := make(chan struct{})
	if !c.runMover(singleMoveKey{k, "s2"}, func() { <-release }, func() {}) {
		t.Fatal("the earlier mover did not start")
	}
	sa, _, _, _ := c.assignment(k)
	moved := make(chan struct{})
	if !c.moveSinglesThen(sa, "s2", func() { close(moved) }) {
		t.Fatal("the consumer of one replica on s2 not found to move")
	}
	// The earlier mover moves D (here: it is deleted) and ends.
	c.mustPropose(t, &meta.RemoveConsumer{Account: "A", Stream: "R", Name: "D"})
	close(release)
	select {
	case <-moved:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's replica on s2 was never moved after the running mover ended")
	}
}
