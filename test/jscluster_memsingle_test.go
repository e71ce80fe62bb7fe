package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A memory stream of one replica moves as a file stream of one replica
// does (docs/cluster.md, "Moving a stream of one replica"), its
// consumers' states handed over in memory ("Memory streams").
// nats-server v2.15.2 moves it (measured by hand, three processes with
// az tags: `nats stream add M --storage memory --replicas 1 --tag
// az:1`, 10 messages, a durable with 8 delivered and 3 of them
// acknowledged, `nats stream edit M --tag az:2`: M on n2 about 2 s
// later with its 10 messages, the durable there with 8 delivered, 5
// pending acks, 2 pending; `nats server cluster evacuate` of an
// untagged memory stream's server: the same, a mem_storage durable's
// state kept too).

// memMsgs is how many messages memSoloSetup publishes to MSOLO.
const memMsgs = 100

// memSoloSetup creates MSOLO, a memory stream of one replica, with
// msolo.1 to msolo.100, its durable D of one replica with 10 delivered
// and the first 6 acknowledged, and its durable K (mem_storage) with 4
// delivered and acknowledged (ack waits of 10 minutes: no redelivery
// within a test), on a cluster of n servers; it returns the server
// MSOLO is on.
func memSoloSetup(t *testing.T, n int, mod func(int, *server.Options)) ([]*server.Server, []server.Options, []jetstream.JetStream, string) {
	t.Helper()
	servers, opts, js := oneReplicaCluster(t, n, mod, jetstream.StreamConfig{Name: "MSOLO", Subjects: []string{"msolo.>"}, Storage: jetstream.MemoryStorage, Replicas: 1}, memMsgs,
		jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute, Replicas: 1},
		jetstream.ConsumerConfig{Durable: "K", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute, Replicas: 1, MemoryStorage: true})
	takeSomeOf(t, js[0], "MSOLO", "D", 10, 6)
	takeSomeOf(t, js[0], "MSOLO", "K", 4, 4)
	home, err := memSoloOn(t, js[0], "", memMsgs, 10, 4)
	if err != nil {
		t.Fatal(err)
	}
	return servers, opts, js, home
}

// memSoloOn returns the server MSOLO runs on, an error unless it has
// one replica (no group), num_replicas 1, messages 1 to msgs, and D
// and K on the same server, one replica each, D with dDelivered
// delivered, ack floor 6 and dDelivered-6 pending acks, K with
// kDelivered delivered, ack floor 4 and kDelivered-4 pending acks, each
// with the messages it never delivered pending, off server not (when
// not empty).
func memSoloOn(t *testing.T, js jetstream.JetStream, not string, msgs, dDelivered, kDelivered uint64) (string, error) {
	s, err := js.Stream(ctx2(t), "MSOLO")
	if err != nil {
		return "", err
	}
	si := s.CachedInfo()
	ci := si.Cluster
	if ci == nil || ci.Leader == "" || len(ci.Replicas) != 0 || ci.RaftGroup != "" {
		return "", fmt.Errorf("MSOLO's cluster %+v", ci)
	}
	if si.Config.Replicas != 1 || si.Config.Storage != jetstream.MemoryStorage || si.State.Msgs != msgs || si.State.FirstSeq != 1 || si.State.LastSeq != msgs {
		return "", fmt.Errorf("MSOLO: num_replicas %d, storage %v, state %+v", si.Config.Replicas, si.Config.Storage, si.State)
	}
	if ci.Leader == not {
		return "", fmt.Errorf("MSOLO still on %s", not)
	}
	want := map[string]singleState{
		"D": {server: ci.Leader, delivered: dDelivered, ackFloor: 6, ackPending: int(dDelivered - 6)},
		"K": {server: ci.Leader, delivered: kDelivered, ackFloor: 4, ackPending: int(kDelivered - 4)},
	}
	for name, w := range want {
		c, err := js.Consumer(ctx2(t), "MSOLO", name)
		if err != nil {
			return "", err
		}
		info := c.CachedInfo()
		got := singleState{delivered: info.Delivered.Stream, ackFloor: info.AckFloor.Stream, ackPending: info.NumAckPending}
		if info.Cluster != nil {
			got.server = info.Cluster.Leader
		}
		if got != w || info.NumPending != msgs-w.delivered {
			return "", fmt.Errorf("%s %+v, %d pending; want %+v, %d pending", name, got, info.NumPending, w, msgs-w.delivered)
		}
		if cc := info.Cluster; cc == nil || len(cc.Replicas) != 0 || info.Config.Replicas != 1 {
			return "", fmt.Errorf("%s's cluster %+v", name, cc)
		}
	}
	return ci.Leader, nil
}

// holdsNoStream reports an error unless server srv runs no stream of the
// account APP.
func holdsNoStream(srv *server.Server) error {
	for _, a := range srv.Accounts() {
		if a.Name != "APP" || a.JetStream == nil {
			continue
		}
		if names := a.JetStream.Names(""); len(names) != 0 {
			return fmt.Errorf("%s holds streams %v", srv.Name(), names)
		}
		return nil
	}
	return fmt.Errorf("no JetStream in APP on %s", srv.Name())
}

// noGroupsOf reports an error while a server of servers runs a Raft
// group of the account APP: a move of a stream of one replica and of its
// consumers is through once each runs as one replica again, its groups
// removed everywhere.
func noGroupsOf(servers []*server.Server) error {
	for _, s := range servers {
		if gs, _ := s.JetStreamRaftGroups("APP", ""); len(gs) != 0 {
			return fmt.Errorf("%s runs %d groups of APP (%s first)", s.Name(), len(gs), gs[0].Name)
		}
	}
	return nil
}

// memSoloServes checks, through js, every message of MSOLO (msolo.1 to
// msolo.<last>), that a publish is acknowledged with the next sequence,
// and that D delivers next the first message it never delivered
// (msolo.<dNext>: its state moved with it), not acknowledged.
func memSoloServes(t *testing.T, js jetstream.JetStream, last int, dNext uint64) {
	t.Helper()
	clusterPublish(t, js, fmt.Sprintf("msolo.%d", last+1), uint64(last+1))
	s, err := js.Stream(ctx2(t), "MSOLO")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= last+1; n++ {
		if m, err := s.GetMsg(ctx2(t), uint64(n)); err != nil || m.Subject != fmt.Sprintf("msolo.%d", n) {
			t.Fatalf("message %d: %+v, %v", n, m, err)
		}
	}
	c, err := js.Consumer(ctx2(t), "MSOLO", "D")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		if md == nil || md.Sequence.Stream != dNext {
			t.Fatalf("D delivered %+v next, want stream sequence %d", md, dNext)
		}
		return
	}
	t.Fatalf("D delivered nothing: %v", batch.Error())
}

// SERVER.EVACUATE of the server of a memory stream of one replica, then
// STREAM.PEER.EVACUATE and STREAM.PEER.REMOVE of its new server: each
// time the stream moves to another server with every message, still one
// replica (no group), its durables D and K (mem_storage) with it, their
// delivered and acknowledged state kept; the server it left runs no
// stream; a publish is acknowledged with the next sequence and D
// delivers the next message it never delivered. Before, the stream
// stayed (10075 for STREAM.PEER.EVACUATE).
func TestJetStreamClusterMemorySingleStreamEvacuate(t *testing.T) {
	servers, _, js, home := memSoloSetup(t, 4, nil)
	hi := leaderIndex(servers, home)
	via := (hi + 1) % 4
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	start := time.Now()
	wantEvacAnswer(t, sys, "$JS.API.SERVER.EVACUATE", fmt.Sprintf(`{"peer":%q}`, home), evacuateOK)
	var moved string
	eventuallyWithin(t, 45*time.Second, "MSOLO, D and K off "+home, func() error {
		on, err := memSoloOn(t, js[via], home, memMsgs, 10, 4)
		if err != nil {
			return err
		}
		if err := holdsNoStream(servers[hi]); err != nil {
			return err
		}
		moved = on
		return noGroupsOf(servers)
	})
	t.Logf("MSOLO moved from %s to %s in %v (SERVER.EVACUATE)", home, moved, time.Since(start).Round(10*time.Millisecond))
	memSoloServes(t, js[via], memMsgs, 11)

	// Once more, by STREAM.PEER.EVACUATE, right after: the move waits
	// for the first one's settle. D delivered msolo.11 since.
	mi := leaderIndex(servers, moved)
	app := connect(t, servers[(mi+1)%4].ClientURL(), nats.UserInfo("app", "app"))
	start = time.Now()
	wantEvacAnswer(t, app, "$JS.API.STREAM.PEER.EVACUATE.MSOLO", fmt.Sprintf(`{"peer":%q}`, moved), peerEvacuatedOK)
	var again string
	eventuallyWithin(t, 45*time.Second, "MSOLO off "+moved, func() error {
		on, err := memSoloOn(t, js[via], moved, memMsgs+1, 11, 4)
		if err != nil {
			return err
		}
		again = on
		if err := holdsNoStream(servers[mi]); err != nil {
			return err
		}
		return noGroupsOf(servers)
	})
	t.Logf("MSOLO moved from %s to %s in %v (STREAM.PEER.EVACUATE)", moved, again, time.Since(start).Round(10*time.Millisecond))
	memSoloServes(t, js[via], memMsgs+1, 12)

	// And by STREAM.PEER.REMOVE (nats stream cluster peer-remove).
	ai := leaderIndex(servers, again)
	start = time.Now()
	if r := stepDownRequest(t, app, "$JS.API.STREAM.PEER.REMOVE.MSOLO", fmt.Sprintf(`{"peer":%q}`, again)); !r.Success {
		t.Fatalf("STREAM.PEER.REMOVE: %+v", r)
	}
	eventuallyWithin(t, 45*time.Second, "MSOLO off "+again, func() error {
		on, err := memSoloOn(t, js[via], again, memMsgs+2, 12, 4)
		if err != nil {
			return err
		}
		if err := holdsNoStream(servers[ai]); err != nil {
			return err
		}
		if err := noGroupsOf(servers); err != nil {
			return err
		}
		t.Logf("MSOLO moved from %s to %s in %v (STREAM.PEER.REMOVE)", again, on, time.Since(start).Round(10*time.Millisecond))
		return nil
	})
	memSoloServes(t, js[via], memMsgs+2, 13)
}

// A stream update naming a placement the server of a memory stream of
// one replica does not match moves it to a server matching it, as
// nats-server v2.15.2 does: the update is answered with the new
// placement; MSOLO ends on the tagged server, one replica (no group),
// with every message (one published during the move too), D and K
// (mem_storage) there with their state; the old server runs no stream;
// a publish is acknowledged with the next sequence and D delivers the
// first message it never delivered. Before, the update was 10069
// "stream placement can not be changed".
func TestJetStreamClusterMemorySingleStreamPlacementMove(t *testing.T) {
	servers, _, js, home := memSoloSetup(t, 3, func(i int, o *server.Options) { o.Tags = []string{fmt.Sprintf("az:%d", i+1)} })
	hi := leaderIndex(servers, home)
	ti := (hi + 1) % 3 // the destination
	via := (hi + 2) % 3
	dest := servers[ti].Name()
	tag := fmt.Sprintf("az:%d", ti+1)
	app := connect(t, servers[via].ClientURL(), nats.UserInfo("app", "app"))

	start := time.Now()
	body := fmt.Sprintf(`{"name":"MSOLO","subjects":["msolo.>"],"storage":"memory","num_replicas":1,"placement":{"tags":[%q]}}`, tag)
	msg, err := app.Request("$JS.API.STREAM.UPDATE.MSOLO", []byte(body), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var a apiAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		t.Fatalf("%q: %v", msg.Data, err)
	}
	if a.Error != nil || a.Config == nil || a.Config.Replicas != 1 || a.Config.Placement == nil || !slices.Equal(a.Config.Placement.Tags, []string{tag}) {
		t.Fatalf("the update's answer: %s", msg.Data)
	}
	answered := time.Since(start)
	// Published during the move, kept by it.
	clusterPublish(t, js[via], fmt.Sprintf("msolo.%d", memMsgs+1), memMsgs+1)
	eventuallyWithin(t, 45*time.Second, "MSOLO, D and K on "+dest, func() error {
		on, err := memSoloOn(t, js[via], home, memMsgs+1, 10, 4)
		if err != nil {
			return err
		}
		if on != dest {
			return fmt.Errorf("MSOLO on %s, want %s", on, dest)
		}
		if err := holdsNoStream(servers[hi]); err != nil {
			return err
		}
		return noGroupsOf(servers)
	})
	t.Logf("MSOLO moved from %s to %s (%s): answered in %v, moved in %v", home, dest, tag, answered.Round(time.Millisecond), time.Since(start).Round(10*time.Millisecond))
	memSoloServes(t, js[via], memMsgs+1, 11)
}

// A move of a memory stream of one replica whose destination stops
// while D moves there (D's group of two voters, held after its step 1
// by a test hook) rolls back: D, then MSOLO go back to their server
// alone, every message there, D and K with their state (the stream's
// conversion there hands their states over as the move's does); a
// publish takes the next sequence and D delivers the next message it
// never delivered; the destination, started again, runs no stream.
func TestJetStreamClusterMemorySingleStreamMoveRollsBack(t *testing.T) {
	servers, opts, js, home, hi, di := rollBackSetup(t, memSoloSetup, "MSOLO")
	via := (hi + 1) % 4
	if via == di {
		via = (via + 1) % 4
	}
	eventuallyWithin(t, 120*time.Second, "MSOLO back on "+home+" alone", func() error {
		on, err := memSoloOn(t, js[via], "", memMsgs, 10, 4)
		if err != nil {
			return err
		}
		if on != home {
			return fmt.Errorf("MSOLO on %s", on)
		}
		return noGroupsOf([]*server.Server{servers[hi]})
	})
	dest := servers[di].Name()
	t.Logf("MSOLO back on %s alone after %s stopped", home, dest)
	memSoloServes(t, js[via], memMsgs, 11)
	servers[di] = restartServer(t, opts[di])
	eventually(t, dest+" runs no stream", func() error { return holdsNoStream(servers[di]) })
}
