package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// docs/cluster.md, "First leaders": the first leaders of new replicated
// streams and consumers spread over their servers, as nats-server
// v2.15.2's preferred peer (picked at random among the group's online
// servers) spreads them, rather than all landing on the meta leader.
// On three servers, 9 streams of three replicas created one after the
// other (groups in a row: each server's turn comes three times) are
// led by every server, and so are 9 durables of three replicas of one
// of them. What the create answer guarantees holds whichever server
// leads: a publish through a server that is neither the meta leader
// nor the stream's leader, right after the answer, finds the stream,
// and a fetch right after a consumer's create finds the consumer.
func TestJetStreamClusterFirstLeadersSpread(t *testing.T) {
	servers := jsCluster(t, 3)
	meta := metaLeaderOf(t, servers)
	js := make([]jetstream.JetStream, 3)
	for i, s := range servers {
		var err error
		if js[i], err = jetstream.New(connect(t, s.ClientURL())); err != nil {
			t.Fatal(err)
		}
	}
	// Through a server that does not lead the meta group: the create is
	// answered by the meta leader over the route.
	via := 0
	if servers[0].Name() == meta {
		via = 1
	}
	const n = 9
	streams := map[string]int{}
	for i := range n {
		name := fmt.Sprintf("FL%d", i)
		var info *jetstream.StreamInfo
		eventually(t, "create "+name, func() error {
			s, err := js[via].CreateStream(ctx2(t), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3})
			if err != nil {
				return err
			}
			info = s.CachedInfo()
			return nil
		})
		if info.Cluster == nil || leaderIndex(servers, info.Cluster.Leader) < 0 {
			t.Fatalf("%s: the create answered cluster %+v", name, info.Cluster)
		}
		checkLeaderView(t, name, info.Cluster)
		// An update through the same server is answered with the
		// leader's view too.
		upd, err := js[via].UpdateStream(ctx2(t), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>", name + "b.>"}, Replicas: 3})
		if err != nil {
			t.Fatalf("%s: update: %v", name, err)
		}
		checkLeaderView(t, name+" update", upd.CachedInfo().Cluster)
		leader := info.Cluster.Leader
		streams[leader]++
		other := 0 // neither the meta leader nor the stream's leader
		for servers[other].Name() == meta || servers[other].Name() == leader {
			other++
		}
		ack, err := js[other].Publish(ctx2(t), name+".x", []byte("x"))
		if err != nil || ack.Sequence != 1 {
			t.Fatalf("%s, led by %s: a publish through %s right after the create: %+v %v", name, leader, servers[other].Name(), ack, err)
		}
		// A create of the same config answers the stream's info with
		// its state, as nats-server's does (the answering replica may
		// apply the publish a moment after the PubAck).
		eventually(t, name+": a create of the same config answers its message", func() error {
			again, err := js[via].CreateStream(ctx2(t), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>", name + "b.>"}, Replicas: 3})
			if err != nil {
				return err
			}
			if got := again.CachedInfo().State.Msgs; got != 1 {
				return fmt.Errorf("answered %d messages, want 1", got)
			}
			return nil
		})
	}
	t.Logf("meta leader %s; stream leaders %v", meta, streams)
	for _, s := range servers {
		if streams[s.Name()] == 0 {
			t.Errorf("%s leads none of %d new streams (leaders %v, meta leader %s)", s.Name(), n, streams, meta)
		}
	}
	consumers := map[string]int{}
	for i := range n {
		name := fmt.Sprintf("D%d", i)
		var cons jetstream.Consumer
		eventually(t, "create "+name, func() error {
			var err error
			cons, err = js[via].CreateConsumer(ctx2(t), "FL0", jetstream.ConsumerConfig{Durable: name, Replicas: 3, AckPolicy: jetstream.AckExplicitPolicy})
			return err
		})
		ci := cons.CachedInfo().Cluster
		if ci == nil || leaderIndex(servers, ci.Leader) < 0 {
			t.Fatalf("%s: the create answered cluster %+v", name, ci)
		}
		checkLeaderView(t, name, ci)
		consumers[ci.Leader]++
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("%s, led by %s: fetch right after the create: %v", name, ci.Leader, err)
		}
		got := 0
		for range batch.Messages() {
			got++
		}
		if got != 1 {
			t.Fatalf("%s, led by %s: fetched %d of 1 right after the create (%v)", name, ci.Leader, got, batch.Error())
		}
	}
	t.Logf("consumer leaders %v", consumers)
	for _, s := range servers {
		if consumers[s.Name()] == 0 {
			t.Errorf("%s leads none of %d new consumers (leaders %v, meta leader %s)", s.Name(), n, consumers, meta)
		}
	}
}

// checkLeaderView fails t unless the cluster block of a create's (or an
// update's) answer
// is the leader's view, as nats-server v2.15.2's stream and consumer
// leaders answer the create themselves: leader_since set and the two
// other servers listed as replicas, the leader not among them (the meta
// leader's own view, when another server led, listed the leader as a
// replica and left itself out).
func checkLeaderView(t *testing.T, name string, ci *jetstream.ClusterInfo) {
	t.Helper()
	var names []string
	for _, r := range ci.Replicas {
		names = append(names, r.Name)
	}
	if ci.LeaderSince == nil || len(ci.Replicas) != 2 || contains(names, ci.Leader) {
		t.Errorf("%s: answered leader %s since %v, replicas %v: want the leader's view, the two others as replicas", name, ci.Leader, ci.LeaderSince, names)
	}
}
