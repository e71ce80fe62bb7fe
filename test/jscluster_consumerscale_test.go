package test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A stream of one replica scaled up to three (nats stream edit
// --replicas 3) takes its durable along, as nats-server v2.15.2 does
// (docs/cluster.md, "Scaling consumers"): the pull consumer WORK,
// with six messages acknowledged and four delivered and not, becomes a
// consumer of three replicas (info: its group C-R3F-<id>, two current
// replicas) with the same ack floor, delivered and pending acks; its
// first leader's server killed, the others go on: the acknowledged
// messages are never delivered again, the four unacknowledged ones are
// (once their ack wait ran out), then the rest.
func TestJetStreamClusterConsumerScaleUpFromOne(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	_, js := clusterClients(t, servers)
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 1}
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(tctx(t), cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	for n := 1; n <= 20; n++ {
		publishAcked(t, js[0], sent, n)
	}
	cons := createWork(t, js[0])
	home := leaderIndex(servers, cons.CachedInfo().Cluster.Leader)
	other := (home + 1) % 3
	if got := fetchSeqs(t, js[other], 10, 6); !slices.Equal(got, seqRange(1, 10)) {
		t.Fatalf("first fetch: %v", got)
	}
	before := workState(t, js[other], 1, "")
	if before != (ackState{AckFloor: 6, Delivered: 10, AckPending: 4}) {
		t.Fatalf("before the scale: %+v", before)
	}
	cfg.Replicas = 3
	scaleTo(t, js[other], cfg)
	waitReplicas(t, js[other], 3)
	if after := workState(t, js[other], 3, ""); after != before {
		t.Fatalf("after the scale: %+v, before %+v", after, before)
	}
	// The consumer's leader goes: another replica takes over with the
	// committed state.
	ci := workInfo(t, js[other], 3, "")
	lead := leaderIndex(servers, ci.Cluster.Leader)
	servers[lead].Shutdown()
	survivor := (lead + 1) % 3
	if after := workState(t, js[survivor], 3, ci.Cluster.Leader); after != before {
		t.Fatalf("after the consumer leader's loss: %+v, before %+v", after, before)
	}
	checkRest(t, js[survivor], 7, 20)
}

// checkRest fetches from consumer WORK through js, acknowledging
// everything, until it got every stream sequence from first to last
// (unacknowledged deliveries come again once their ack wait ran out, new
// ones at once: in any order) and requires nothing else, nothing twice.
func checkRest(t *testing.T, js jetstream.JetStream, first, last uint64) {
	t.Helper()
	n := int(last - first + 1)
	got := fetchSeqs(t, js, n, n)
	slices.Sort(got)
	if want := seqRange(first, last); !slices.Equal(got, want) {
		t.Fatalf("fetched %v, want %v once each (the acknowledged ones never again)", got, want)
	}
}

// createWork creates the durable pull consumer WORK of ORDERS, its
// replicas following the stream's, with a short ack wait.
func createWork(t *testing.T, js jetstream.JetStream) jetstream.Consumer {
	t.Helper()
	var cons jetstream.Consumer
	eventually(t, "create WORK", func() error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 4 * time.Second})
		return err
	})
	return cons
}

// fetchSeqs fetches from consumer WORK through js until it got n
// messages, acknowledging (double ack) the first acks of them, and
// returns their stream sequences in delivery order. A fetch that fails
// (the consumer's leader changing) is retried.
func fetchSeqs(t *testing.T, js jetstream.JetStream, n, acks int) []uint64 {
	t.Helper()
	var seqs []uint64
	eventually(t, fmt.Sprintf("fetch %d", n), func() error {
		c, err := js.Consumer(tctx(t), "ORDERS", "WORK")
		if err != nil {
			return err
		}
		batch, err := c.Fetch(n-len(seqs), jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if len(seqs) < acks {
				if err := m.DoubleAck(tctx(t)); err != nil {
					return err
				}
			}
			seqs = append(seqs, md.Sequence.Stream)
		}
		if len(seqs) < n {
			return fmt.Errorf("fetched %v", seqs)
		}
		return nil
	})
	return seqs
}

// seqRange returns first to last.
func seqRange(first, last uint64) []uint64 {
	var out []uint64
	for s := first; s <= last; s++ {
		out = append(out, s)
	}
	return out
}

// workInfo waits until consumer WORK, read through js, has a leader and
// the replicas of a consumer of r replicas (for more than one, its group
// and r-1 replicas, current but for the one on server down) and returns
// its info.
func workInfo(t *testing.T, js jetstream.JetStream, r int, down string) *jetstream.ConsumerInfo {
	t.Helper()
	var ci *jetstream.ConsumerInfo
	eventually(t, fmt.Sprintf("WORK of %d replicas", r), func() error {
		c, err := js.Consumer(tctx(t), "ORDERS", "WORK")
		if err != nil {
			return err
		}
		ci = c.CachedInfo()
		cl := ci.Cluster
		switch {
		case cl == nil || cl.Leader == "":
			return fmt.Errorf("cluster %+v", cl)
		case r == 1 && (cl.RaftGroup != "" || len(cl.Replicas) != 0):
			return fmt.Errorf("one replica: cluster %+v", cl)
		case r > 1 && (!strings.HasPrefix(cl.RaftGroup, fmt.Sprintf("C-R%dF-", r)) || len(cl.Replicas) != r-1):
			var ps []jetstream.PeerInfo
			for _, p := range cl.Replicas {
				ps = append(ps, *p)
			}
			return fmt.Errorf("%d replicas: group %s, leader %s, replicas %+v", r, cl.RaftGroup, cl.Leader, ps)
		}
		for _, p := range cl.Replicas {
			if p.Name != down && (!p.Current || p.Offline) {
				return errors.New("replica not current: " + p.Name)
			}
		}
		return nil
	})
	return ci
}

// workState waits for consumer WORK of r replicas (workInfo; down: a
// server that is down) and returns what its info says of its
// acknowledgements.
func workState(t *testing.T, js jetstream.JetStream, r int, down string) ackState {
	t.Helper()
	ci := workInfo(t, js, r, down)
	return ackState{AckFloor: ci.AckFloor.Stream, Delivered: ci.Delivered.Stream, AckPending: ci.NumAckPending}
}

// A stream of three replicas scaled down to one (nats stream edit
// --replicas 1) takes its durable along, as nats-server v2.15.2 does
// (docs/cluster.md, "Scaling consumers"): the pull consumer WORK, of
// three replicas with six messages acknowledged and four delivered and
// not, becomes a consumer of one replica on the server the stream keeps
// (info: no group, that server leading) with the same ack floor,
// delivered and pending acks, still after every server restarted; the
// acknowledged messages are never delivered again, the four
// unacknowledged ones are. Scaled up again, the consumer has three
// replicas again from that state, and survives its leader's loss.
func TestJetStreamClusterConsumerScaleDownToOne(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	_, js := clusterClients(t, servers)
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(tctx(t), cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	for n := 1; n <= 20; n++ {
		publishAcked(t, js[0], sent, n)
	}
	createWork(t, js[0])
	if got := fetchSeqs(t, js[1], 10, 6); !slices.Equal(got, seqRange(1, 10)) {
		t.Fatalf("first fetch: %v", got)
	}
	before := workState(t, js[1], 3, "")
	if before != (ackState{AckFloor: 6, Delivered: 10, AckPending: 4}) {
		t.Fatalf("before the scale: %+v", before)
	}
	leader := leaderIndex(servers, streamCluster(t, js[0]).Leader)
	other := (leader + 1) % 3
	cfg.Replicas = 1
	scaleTo(t, js[other], cfg)
	ci := workInfo(t, js[other], 1, "")
	home := ci.Cluster.Leader
	kept := leaderIndex(servers, home)
	waitSingle(t, js[other], home, opts, kept)
	if after := workState(t, js[other], 1, ""); after != before {
		t.Fatalf("after the scale-down: %+v, before %+v", after, before)
	}
	// Every server restarts: the consumer of one replica comes back from
	// its files.
	for _, s := range servers {
		s.Shutdown()
	}
	for i := range servers {
		servers[i] = restartServer(t, opts[i])
	}
	_, js = clusterClients(t, servers)
	if after := workState(t, js[other], 1, ""); after != before {
		t.Fatalf("after the restarts: %+v, before %+v", after, before)
	}
	checkRest(t, js[other], 7, 20)
	// Up again (once the consumer and the stream settled: 10008 until
	// then): the consumer's state starts its group again, and its leader
	// can go.
	for n := 21; n <= 25; n++ {
		publishAcked(t, js[other], sent, n)
	}
	if got := fetchSeqs(t, js[other], 2, 1); !slices.Equal(got, []uint64{21, 22}) {
		t.Fatalf("fetch before the scale-up: %v", got)
	}
	before = ackState{AckFloor: 21, Delivered: 22, AckPending: 1}
	if st := workState(t, js[other], 1, ""); st != before {
		t.Fatalf("before the scale-up: %+v", st)
	}
	cfg.Replicas = 3
	scaleTo(t, js[other], cfg)
	waitReplicas(t, js[other], 3)
	if after := workState(t, js[other], 3, ""); after != before {
		t.Fatalf("after the scale-up: %+v, before %+v", after, before)
	}
	ci = workInfo(t, js[other], 3, "")
	lead := leaderIndex(servers, ci.Cluster.Leader)
	servers[lead].Shutdown()
	survivor := (lead + 1) % 3
	if after := workState(t, js[survivor], 3, ci.Cluster.Leader); after != before {
		t.Fatalf("after the consumer leader's loss: %+v, before %+v", after, before)
	}
	checkRest(t, js[survivor], 22, 25)
}

// A consumer update changing num_replicas moves the consumer to the new
// count, as nats-server v2.15.2 does (measured: 1 -> 3 -> 1 keeps its
// delivered and acknowledged state): WORK, of one replica on a stream
// of three, with three messages acknowledged and two not, updated to
// three replicas keeps its state and survives its leader's loss; updated
// back to one replica it keeps it again, and delivers the two again.
func TestJetStreamClusterConsumerReplicasUpdate(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	sent := map[uint64]sentMsg{}
	for n := 1; n <= 10; n++ {
		publishAcked(t, js[0], sent, n)
	}
	ccfg := jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 4 * time.Second, Replicas: 1}
	update := func(js jetstream.JetStream, r int) {
		t.Helper()
		ccfg.Replicas = r
		eventually(t, fmt.Sprintf("WORK to %d replicas", r), func() error {
			_, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", ccfg)
			return err
		})
	}
	update(js[0], 1)
	if got := fetchSeqs(t, js[1], 5, 3); !slices.Equal(got, seqRange(1, 5)) {
		t.Fatalf("first fetch: %v", got)
	}
	before := ackState{AckFloor: 3, Delivered: 5, AckPending: 2}
	if st := workState(t, js[1], 1, ""); st != before {
		t.Fatalf("before the update: %+v", st)
	}
	update(js[2], 3)
	if after := workState(t, js[2], 3, ""); after != before {
		t.Fatalf("at three replicas: %+v, before %+v", after, before)
	}
	ci := workInfo(t, js[2], 3, "")
	lead := leaderIndex(servers, ci.Cluster.Leader)
	servers[lead].Shutdown()
	survivor := (lead + 1) % 3
	if after := workState(t, js[survivor], 3, ci.Cluster.Leader); after != before {
		t.Fatalf("after the consumer leader's loss: %+v, before %+v", after, before)
	}
	update(js[survivor], 1)
	if after := workState(t, js[survivor], 1, ""); after != before {
		t.Fatalf("back at one replica: %+v, before %+v", after, before)
	}
	checkRest(t, js[survivor], 4, 10)
}

// A replicated consumer's replica on a server whose store was wiped is
// replaced, as its stream's is (docs/cluster.md, "Replacing a
// replica"): the new replica joins the consumer's group, is caught up
// with its committed state and promoted; led from there, the consumer
// keeps its ack floor, delivered and pending acks, never delivers the
// acknowledged messages again and delivers the unacknowledged ones.
func TestJetStreamClusterConsumerWipedReplica(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	ncs, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	sent := map[uint64]sentMsg{}
	for n := 1; n <= 20; n++ {
		publishAcked(t, js[0], sent, n)
	}
	createWork(t, js[0])
	if got := fetchSeqs(t, js[1], 10, 6); !slices.Equal(got, seqRange(1, 10)) {
		t.Fatalf("first fetch: %v", got)
	}
	before := workState(t, js[1], 3, "")
	// Wipe a server that leads neither the consumer nor, if it can be
	// helped, the stream.
	cl := leaderIndex(servers, workInfo(t, js[1], 3, "").Cluster.Leader)
	sl := leaderIndex(servers, streamCluster(t, js[1]).Leader)
	wiped := (cl + 1) % 3
	if wiped == sl {
		wiped = (cl + 2) % 3
	}
	name := servers[wiped].Name()
	servers[wiped].Shutdown()
	if err := os.RemoveAll(opts[wiped].StoreDir); err != nil {
		t.Fatal(err)
	}
	servers[wiped] = restartServer(t, opts[wiped])
	ncs[wiped], js[wiped] = connect(t, servers[wiped].ClientURL()), nil
	var err error
	if js[wiped], err = jetstream.New(ncs[wiped]); err != nil {
		t.Fatal(err)
	}
	// Replaced: every replica current again, the wiped server's too.
	waitReplicas(t, js[cl], 3)
	if after := workState(t, js[cl], 3, ""); after != before {
		t.Fatalf("after the replacement: %+v, before %+v", after, before)
	}
	// The new replica leads: it holds the committed state.
	eventually(t, "the consumer led from "+name, func() error {
		if ci := workInfo(t, js[wiped], 3, ""); ci.Cluster.Leader != name {
			_, _ = ncs[wiped].Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.WORK", fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, name), 2*time.Second)
			return fmt.Errorf("leader %s", ci.Cluster.Leader)
		}
		return nil
	})
	if after := workState(t, js[wiped], 3, ""); after != before {
		t.Fatalf("led from the new replica: %+v, before %+v", after, before)
	}
	checkRest(t, js[wiped], 7, 20)
}

// A replicated consumer updated to one replica whose kept server stops
// right after the answer (while its group shrinks, or during its
// conversion) and starts again: the consumer ends as a consumer of one
// replica there with its ack floor, delivered and pending acks, and
// never delivers the acknowledged messages again (docs/cluster.md,
// "Scaling consumers": a restart before the group's tombstone runs the
// replica in its group again and converts it anew, after it restores
// the files).
func TestJetStreamClusterConsumerScaleDownRestart(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	sent := map[uint64]sentMsg{}
	for n := 1; n <= 20; n++ {
		publishAcked(t, js[0], sent, n)
	}
	ccfg := jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 4 * time.Second, Replicas: 3}
	eventually(t, "create WORK", func() error {
		_, err := js[0].CreateOrUpdateConsumer(tctx(t), "ORDERS", ccfg)
		return err
	})
	if got := fetchSeqs(t, js[1], 10, 6); !slices.Equal(got, seqRange(1, 10)) {
		t.Fatalf("first fetch: %v", got)
	}
	before := workState(t, js[1], 3, "")
	lead := leaderIndex(servers, workInfo(t, js[1], 3, "").Cluster.Leader)
	other := (lead + 1) % 3
	ccfg.Replicas = 1
	eventually(t, "WORK to one replica", func() error {
		_, err := js[other].CreateOrUpdateConsumer(tctx(t), "ORDERS", ccfg)
		return err
	})
	servers[lead].Shutdown()
	servers[lead] = restartServer(t, opts[lead])
	ci := workInfo(t, js[other], 1, "")
	if ci.Cluster.Leader != servers[lead].Name() {
		t.Fatalf("one replica on %s, want %s", ci.Cluster.Leader, servers[lead].Name())
	}
	if after := workState(t, js[other], 1, ""); after != before {
		t.Fatalf("after the restart: %+v, before %+v", after, before)
	}
	checkRest(t, js[other], 7, 20)
}
