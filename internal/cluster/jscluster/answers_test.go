package jscluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// oneServer is a Cluster of one server, "s1", leading its meta group
// (one voter), without transport or engines: enough for the responder
// rule, which reads the meta state, the node's status and the replicas.
func oneServer(t *testing.T) *Cluster {
	t.Helper()
	net := raftnode.NewMemNetwork(1, nil)
	node, err := raftnode.Open(raftnode.Config{FS: vfs.NewCrashFS(), Dir: "wal", Server: "s1", Transport: net.Transport("s1"), TickInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	net.Attach("s1", node)
	ml, err := meta.Open(meta.Config{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{name: "s1", node: node, meta: ml, accounts: map[string]*account{}, replicas: map[streamKey]*replica{}, creplicas: map[consumerKey]*creplica{}}
	if err := node.AddGroup(raftnode.GroupConfig{ID: meta.MetaGroup, Replica: 1, Incarnation: node.Incarnation(), Peers: []raftnode.Peer{{Replica: 1, Server: "s1"}}}, ml.StateMachine()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { net.Run(stop) })
	node.Start()
	t.Cleanup(func() {
		_ = node.Close()
		close(stop)
		wg.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !c.metaLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no meta leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c
}

func (c *Cluster) mustPropose(t *testing.T, op meta.Op) meta.Result {
	t.Helper()
	w, err := c.meta.Propose(op)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := w.Wait(ctx)
	if err != nil || res.Err != nil {
		t.Fatalf("%T: %v %v", op, err, res.Err)
	}
	return res
}

// The responder rule (package comment): the meta leader answers the
// requests about the account's streams as a whole and about streams it
// does not know; a stream's requests are answered where its replica
// leads, and nowhere else, whoever leads the meta group.
func TestAnswers(t *testing.T) {
	c := oneServer(t)
	acc := c.account("A")
	for _, key := range []string{"", "INFO", "STREAM.CREATE", "STREAM.NAMES", "STREAM.LIST", "STREAM.DELETE", "STREAM.INFO", "CONSUMER.CREATE"} {
		if !acc.Answers(key, map[bool]string{true: "", false: "ORDERS"}[key == "" || key == "INFO" || key == "STREAM.NAMES" || key == "STREAM.LIST"]) {
			t.Errorf("the meta leader does not answer %q about an unknown stream", key)
		}
	}
	c.mustPropose(t, &meta.AddServer{Name: "s1", Cluster: "C", Incarnation: c.node.Incarnation()})
	c.mustPropose(t, &meta.AssignStream{Account: "A", Name: "ORDERS", Config: []byte(`{"name":"ORDERS","subjects":["orders.>"]}`), Created: 1, Servers: []raftnode.ServerID{"s1"}})
	if acc.Answers("STREAM.INFO", "ORDERS") {
		t.Error("STREAM.INFO of an assigned stream answered where no replica runs")
	}
	for _, key := range []string{"STREAM.CREATE", "STREAM.UPDATE", "STREAM.DELETE", "STREAM.PEER.REMOVE", "STREAM.PEER.EVACUATE"} {
		if !acc.Answers(key, "ORDERS") {
			t.Errorf("the meta leader does not answer %s of an assigned stream", key)
		}
	}
	sa, _, _, _ := c.assignment(streamKey{"A", "ORDERS"})
	r := &replica{sa: sa, leadState: &leadState{}}
	c.replicas[streamKey{"A", "ORDERS"}] = r
	if acc.Answers("STREAM.INFO", "ORDERS") {
		t.Error("STREAM.INFO answered by a replica that does not lead")
	}
	r.leads.Store(true)
	for _, key := range []string{"STREAM.INFO", "STREAM.PURGE", "STREAM.MSG.GET", "STREAM.LEADER.STEPDOWN", "CONSUMER.CREATE", "CONSUMER.INFO"} {
		if !acc.Answers(key, "ORDERS") {
			t.Errorf("%s not answered by the stream's leader", key)
		}
	}
	if acc2 := c.account("B"); !acc2.Answers("STREAM.INFO", "ORDERS") {
		t.Error("another account's unknown stream is not the meta leader's to answer")
	}
}

// CONSUMER.DELETE of a stream the meta group holds is the meta leader's
// to answer whether or not this server's meta state holds the consumer
// yet (nats-server v2.15.2 jsConsumerDeleteRequest): a server that leads
// the stream but whose meta replica had not applied a consumer's
// creation answered the delete sent right after the create's answer with
// its engine's 10014 (TestJetStreamClusterMemoryScaleDownToOne, once
// under load). The meta leader answers 10014 for a consumer it does not
// hold, and leaves a stream it does not hold to the engine (10059).
func TestConsumerDeleteForMetaLeader(t *testing.T) {
	c := oneServer(t)
	acc := c.account("A")
	if err, handled := acc.ConsumerDelete("ORDERS", "D"); handled {
		t.Errorf("delete in a stream the meta group does not hold handled: %v", err)
	}
	c.mustPropose(t, &meta.AddServer{Name: "s1", Cluster: "C", Incarnation: c.node.Incarnation()})
	c.mustPropose(t, &meta.AssignStream{Account: "A", Name: "ORDERS", Config: []byte(`{"name":"ORDERS","subjects":["orders.>"]}`), Created: 1, Servers: []raftnode.ServerID{"s1"}})
	sa, _, _, _ := c.assignment(streamKey{"A", "ORDERS"})
	r := &replica{sa: sa, leadState: &leadState{}}
	r.leads.Store(true)
	c.replicas[streamKey{"A", "ORDERS"}] = r
	if !acc.forMeta("CONSUMER.DELETE", "ORDERS", "D") {
		t.Error("CONSUMER.DELETE of a consumer this server's meta state does not hold left to the stream's leader")
	}
	err, handled := acc.ConsumerDelete("ORDERS", "D")
	if !handled || err == nil || err.ErrCode != uint16(jserr.ConsumerNotFound) {
		t.Errorf("delete of a consumer the meta group does not hold: %v, handled %v; want 10014", err, handled)
	}
}

// CONSUMER.INFO, PAUSE, UNPIN and LEADER.STEPDOWN of a consumer this
// server's meta state does not hold, in a stream it holds, are the meta
// leader's, which answers 10014 when it does not hold the consumer
// either (ConsumerMissing), as nats-server v2.15.2's meta leader answers
// (jsConsumerInfoRequest): the stream's leader, whose meta replica may
// not have applied a consumer's creation yet, answered them with its
// engine's 10014 right after the create's answer
// (TestJetStreamClusterConsumerRequestsAfterCreate). A consumer the meta
// state holds is its leader's; a stream it does not hold, Answers'.
func TestConsumerMissingForMetaLeader(t *testing.T) {
	c := oneServer(t)
	acc := c.account("A")
	keys := []string{"CONSUMER.INFO", "CONSUMER.PAUSE", "CONSUMER.UNPIN", "CONSUMER.LEADER.STEPDOWN"}
	for _, key := range keys {
		if _, decided := acc.AnswersConsumer(key, "ORDERS", "D", nil); decided {
			t.Errorf("%s in a stream the meta group does not hold decided by the consumer rule", key)
		}
	}
	if err := acc.ConsumerMissing("ORDERS", "D"); err != nil {
		t.Errorf("a stream the meta group does not hold: %v, want nil (the engine's 10059)", err)
	}
	c.mustPropose(t, &meta.AddServer{Name: "s1", Cluster: "C", Incarnation: c.node.Incarnation()})
	c.mustPropose(t, &meta.AssignStream{Account: "A", Name: "ORDERS", Config: []byte(`{"name":"ORDERS","subjects":["orders.>"]}`), Created: 1, Servers: []raftnode.ServerID{"s1"}})
	for _, key := range keys {
		if answers, decided := acc.AnswersConsumer(key, "ORDERS", "D", nil); !answers || !decided || !acc.forMeta(key, "ORDERS", "D") {
			t.Errorf("%s of a consumer the meta state does not hold: answers %v, decided %v; want the meta leader's", key, answers, decided)
		}
	}
	if !acc.forMeta("CONSUMER.PEER.REMOVE", "ORDERS", "D") {
		t.Error("CONSUMER.PEER.REMOVE of a consumer the meta group does not hold not sent to the meta leader")
	}
	if err := acc.ConsumerMissing("ORDERS", "D"); err == nil || err.ErrCode != uint16(jserr.ConsumerNotFound) {
		t.Errorf("a consumer the meta group does not hold: %v, want 10014", err)
	}
	c.mustPropose(t, &meta.AssignConsumer{Account: "A", Stream: "ORDERS", Name: "D", Action: meta.Create, Config: []byte(`{"durable_name":"D"}`), Created: 1, Servers: []raftnode.ServerID{"s1"}})
	for _, key := range keys {
		if acc.forMeta(key, "ORDERS", "D") {
			t.Errorf("%s of a consumer the meta group holds sent to the meta leader", key)
		}
	}
	if err := acc.ConsumerMissing("ORDERS", "D"); err != nil {
		t.Errorf("a consumer the meta group holds: %v", err)
	}
}
