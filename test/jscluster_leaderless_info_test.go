package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Who answers for a stream whose group has no leader while a new
// replica, started empty, is assigned to it (docs/cluster.md, "Who
// answers"): every answer to STREAM.INFO, CONSUMER.INFO, STREAM.LIST and
// the account info, through every server, must come from a replica that
// holds the stream's data: no answer reports fewer messages than were
// acknowledged (or a lower ack floor, or less storage), and none
// reports the new replica current before it caught up with a leader.
// Before, the new replica answered STREAM.INFO with its own empty state,
// itself listed current (`Messages: 0` for a stream that lost nothing: a
// new-user trial), and the meta leader, when it ran the new replica,
// listed and counted the stream from it. nats-server v2.15.2 answers
// from the survivor.

// A stream of two replicas, with a durable, whose follower's server is
// stopped and removed (SERVER.REMOVE): the meta group assigns a new
// replica on the third server, which starts empty, while the survivor
// waits without a leader before it forces the lost voter out
// (docs/cluster.md, "A stream of two replicas"). The meta leader is
// moved to the third server first, so that STREAM.LIST and the account
// info are answered where the new replica runs.
func TestJetStreamClusterLeaderlessInfoNotFromNewReplica(t *testing.T) {
	testLeaderlessInfoNotFromNewReplica(t, "$JS.API.SERVER.REMOVE")
}

// As above, with the stopped server's replica removed from the stream
// alone (STREAM.PEER.REMOVE, `nats stream cluster peer-remove`).
func TestJetStreamClusterLeaderlessInfoNotFromNewReplicaPeerRemoved(t *testing.T) {
	testLeaderlessInfoNotFromNewReplica(t, "$JS.API.STREAM.PEER.REMOVE.LI")
}

// A stream of three replicas on five servers, with a durable, whose two
// followers' servers are stopped, one of them then removed
// (SERVER.REMOVE): the meta group assigns a new replica on a free
// server, which starts empty and stays so, since the survivor alone
// cannot elect a leader (no lost voter is forced out of a group of
// three). For 6 s, three times as long as a replica waits before it
// answers for its leaderless group, only the survivor answers; once the
// other stopped server is back, the group is led again, the new replica
// is caught up and promoted, and the stream is on three current
// replicas with every message.
func TestJetStreamClusterLeaderlessInfoNewReplicaOfThree(t *testing.T) {
	servers, opts := jsClusterMod(t, 5, func(_ int, o *server.Options) { sysAppAuth(o) })
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4", "n5"})
	ncs, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	const msgs, acked = 30, 10
	fillLeaderless(t, js[0], "L3", 3, msgs, acked)
	li := streamLeader(t, servers, js[0], "L3")
	var followers []int
	eventually(t, "L3's followers current", func() error {
		s, err := js[li].Stream(ctx2(t), "L3")
		if err != nil {
			return err
		}
		ci := s.CachedInfo().Cluster
		followers = followers[:0]
		for _, p := range ci.Replicas {
			if !p.Current {
				return fmt.Errorf("cluster %+v", ci)
			}
			followers = append(followers, leaderIndex(servers, p.Name))
		}
		if len(followers) != 2 {
			return fmt.Errorf("cluster %+v", ci)
		}
		return nil
	})
	storage := accountStorage(t, ncs[li], js[li], "L3", 3)
	back, lost := followers[0], followers[1]
	servers[back].Shutdown()
	servers[lost].Shutdown()
	removeLost(t, servers[li], "$JS.API.SERVER.REMOVE", servers[lost].Name())
	var live []int
	for i := range servers {
		if i != back && i != lost {
			live = append(live, i)
		}
	}
	ni := -1
	eventually(t, "L3's new replica assigned", func() error {
		m, err := ncs[li].Request("$JS.API.STREAM.INFO.L3", nil, 2*time.Second)
		if err != nil {
			return err
		}
		var a infoAnswer
		if err := json.Unmarshal(m.Data, &a); err != nil || a.Cluster == nil {
			return fmt.Errorf("%s: %v", m.Data, err)
		}
		for _, p := range a.Cluster.Replicas {
			if i := leaderIndex(servers, p.Name); i != li && i != back && i != lost {
				ni = i
				return nil
			}
		}
		return fmt.Errorf("cluster %+v", a.Cluster)
	})
	newServer := servers[ni].Name()
	leaderless := 0
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
		for _, i := range live {
			n, _ := checkLeaderlessAnswers(t, ncs[i], "L3", msgs, acked, storage, newServer)
			leaderless += n
		}
	}
	t.Logf("%d STREAM.INFO answers without a leader, each with every acknowledged message", leaderless)
	if leaderless == 0 {
		t.Fatalf("no STREAM.INFO answered while L3 had no leader: the survivor on %s stayed silent", servers[li].Name())
	}
	servers[back] = restartServer(t, opts[back])
	want := []string{servers[li].Name(), servers[back].Name(), newServer}
	slices.Sort(want)
	eventually(t, fmt.Sprintf("L3 led, on %v current", want), func() error {
		return currentIs(live, want, func(i int) []string {
			_, c := checkLeaderlessAnswers(t, ncs[i], "L3", msgs, acked, storage, newServer)
			return c
		})
	})
}

// currentIs returns nil when want names the current replicas of the
// last answer that lists them (current returns them, or nil, for each
// server of live in turn), else an error naming them.
func currentIs(live []int, want []string, current func(i int) []string) error {
	var cur []string
	for _, i := range live {
		if c := current(i); c != nil {
			cur = c
		}
	}
	if !slices.Equal(cur, want) {
		return fmt.Errorf("current %v", cur)
	}
	return nil
}

// infoAnswer is the part of a STREAM.INFO, CONSUMER.INFO or STREAM.LIST
// answer the leaderless window is checked on.
type infoAnswer struct {
	Error *struct {
		ErrCode int `json:"err_code"`
	} `json:"error"`
	State *struct {
		Msgs  uint64 `json:"messages"`
		Bytes uint64 `json:"bytes"`
	} `json:"state"`
	AckFloor *struct {
		Stream uint64 `json:"stream_seq"`
	} `json:"ack_floor"`
	Cluster *clusterPart `json:"cluster"`
	Streams []infoAnswer `json:"streams"`
}

// accountAnswer is the part of a $JS.API.INFO answer checked: the
// account's file storage over every replica.
type accountAnswer struct {
	Storage *uint64 `json:"storage"`
}

// fillLeaderless creates stream name (subjects <name>.>, replicas) with
// a durable D through js, publishes msgs messages and acknowledges the
// first acked of them through D.
func fillLeaderless(t *testing.T, js jetstream.JetStream, name string, replicas, msgs, acked int) {
	t.Helper()
	eventually(t, "create "+name, func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: replicas})
		return err
	})
	eventually(t, "create the durable", func() error {
		_, err := js.CreateOrUpdateConsumer(ctx2(t), name, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	for i := 1; i <= msgs; i++ {
		clusterPublish(t, js, fmt.Sprintf("%s.%d", name, i), uint64(i))
	}
	cons, err := js.Consumer(ctx2(t), name, "D")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(acked, jetstream.FetchMaxWait(clusterTimeout/4))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx2(t)); err != nil {
			t.Fatalf("ack of message %d: %v", n+1, err)
		}
		n++
	}
	if n != acked {
		t.Fatalf("fetched %d messages, want %d: %v", n, acked, batch.Error())
	}
}

// accountStorage waits until the account info through nc counts stream
// name's replicas (its bytes times replicas) and returns that storage.
func accountStorage(t *testing.T, nc *nats.Conn, js jetstream.JetStream, name string, replicas uint64) uint64 {
	t.Helper()
	var storage uint64
	eventually(t, "the account's storage of every replica", func() error {
		s, err := js.Stream(ctx2(t), name)
		if err != nil {
			return err
		}
		storage = replicas * s.CachedInfo().State.Bytes
		m, err := nc.Request("$JS.API.INFO", nil, 2*time.Second)
		if err != nil {
			return err
		}
		var a accountAnswer
		if err := json.Unmarshal(m.Data, &a); err != nil || a.Storage == nil || *a.Storage != storage || storage == 0 {
			return fmt.Errorf("account info %s, want storage %d (%v)", m.Data, storage, err)
		}
		return nil
	})
	return storage
}

// gatherAnswers sends a request to subj through nc and returns every
// answer that arrives within wait (each server that answers, answers).
func gatherAnswers(t *testing.T, nc *nats.Conn, subj string, wait time.Duration) [][]byte {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return out
		}
		m, err := sub.NextMsg(left)
		if err != nil {
			return out
		}
		out = append(out, m.Data)
	}
}

// checkLeaderlessAnswers asks STREAM.INFO and CONSUMER.INFO (durable D)
// of stream, STREAM.LIST and the account info through nc, and fails the
// test on any answer that reports fewer than msgs messages, an ack
// floor below ackFloor, a storage below storage, or, without a leader,
// the replica on newServer current. It returns how many STREAM.INFO
// answers had no leader, and the servers a STREAM.INFO answer with a
// leader shows current (the leader and its current replicas, sorted;
// nil if none had a leader).
func checkLeaderlessAnswers(t *testing.T, nc *nats.Conn, stream string, msgs, ackFloor, storage uint64, newServer string) (leaderless int, current []string) {
	t.Helper()
	info := "$JS.API.STREAM.INFO." + stream
	for _, subj := range []string{info, "$JS.API.CONSUMER.INFO." + stream + ".D", "$JS.API.STREAM.LIST", "$JS.API.INFO"} {
		for _, raw := range gatherAnswers(t, nc, subj, 200*time.Millisecond) {
			if subj == "$JS.API.INFO" {
				var a accountAnswer
				if err := json.Unmarshal(raw, &a); err != nil {
					t.Fatalf("%s: %q: %v", subj, raw, err)
				}
				if a.Storage != nil && *a.Storage < storage {
					t.Fatalf("%s answered storage %d, %d before: %s", subj, *a.Storage, storage, raw)
				}
				continue
			}
			var a infoAnswer
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Fatalf("%s: %q: %v", subj, raw, err)
			}
			checkLeaderless(t, subj, raw, a, msgs, ackFloor, newServer)
			for _, si := range a.Streams {
				checkLeaderless(t, subj, raw, si, msgs, ackFloor, newServer)
			}
			if subj != info || a.Cluster == nil {
				continue
			}
			if a.Cluster.Leader == "" {
				leaderless++
				continue
			}
			current = []string{a.Cluster.Leader}
			for _, p := range a.Cluster.Replicas {
				if p.Current {
					current = append(current, p.Name)
				}
			}
			slices.Sort(current)
		}
	}
	return leaderless, current
}

// checkLeaderless fails the test when an answer a (to subj) reports
// fewer than msgs messages, an ack floor below ackFloor (a consumer's),
// or, without a leader, the replica on newServer current.
func checkLeaderless(t *testing.T, subj string, raw []byte, a infoAnswer, msgs, ackFloor uint64, newServer string) {
	t.Helper()
	if a.State != nil && a.State.Msgs < msgs {
		t.Fatalf("%s answered %d messages, %d acknowledged: %s", subj, a.State.Msgs, msgs, raw)
	}
	if a.AckFloor != nil && a.AckFloor.Stream < ackFloor {
		t.Fatalf("%s answered ack floor %d, %d acknowledged: %s", subj, a.AckFloor.Stream, ackFloor, raw)
	}
	if a.Cluster != nil && a.Cluster.Leader == "" {
		for _, p := range a.Cluster.Replicas {
			if p.Name == newServer && p.Current {
				t.Fatalf("%s answered the new replica on %s current without a leader: %s", subj, newServer, raw)
			}
		}
	}
}

// testLeaderlessInfoNotFromNewReplica runs the scenario of a stream of
// two above, removing the stopped follower's server with a request to
// subject (a body naming it), as the system account for SERVER.REMOVE,
// else as the stream's. The survivor is seen answering for its
// leaderless stream before the removal (so that the change is seen to
// keep it answering: the window after the removal is short, forceOutAfter).
func testLeaderlessInfoNotFromNewReplica(t *testing.T, subject string) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { sysAppAuth(o) })
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	ncs, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	const msgs, acked = 30, 10
	fillLeaderless(t, js[0], "LI", 2, msgs, acked)
	li, fi := currentFollower(t, servers, js, "LI", func(li int) error {
		c, err := consumerInfoVia(t, js[li], "LI", "D")
		if err != nil {
			return err
		}
		if c.AckFloor.Stream != acked || c.Cluster == nil || len(c.Cluster.Replicas) != 1 || !c.Cluster.Replicas[0].Current {
			return fmt.Errorf("durable ack floor %d, cluster %+v", c.AckFloor.Stream, c.Cluster)
		}
		return nil
	})
	ni := 3 - li - fi // the third server: the new replica's
	newServer := servers[ni].Name()
	sys := connect(t, servers[li].ClientURL(), nats.UserInfo("sys", "sys"))
	if metaLeaderOf(t, servers) != newServer {
		if r := stepDownRequest(t, sys, "$JS.API.META.LEADER.STEPDOWN", fmt.Sprintf(`{"placement":{"preferred":%q}}`, newServer)); !r.Success {
			t.Fatalf("meta step-down to %s: %+v", newServer, r.Error)
		}
		eventually(t, "the meta leader on "+newServer, func() error {
			if l := metaLeaderOf(t, servers); l != newServer {
				return fmt.Errorf("meta leader %s", l)
			}
			return nil
		})
	}
	storage := accountStorage(t, ncs[li], js[li], "LI", 2)
	lost := servers[fi].Name()
	servers[fi].Shutdown()
	live := []int{li, ni}
	eventually(t, "the survivor answers for leaderless LI", func() error {
		n := 0
		for _, i := range live {
			l, _ := checkLeaderlessAnswers(t, ncs[i], "LI", msgs, acked, storage, newServer)
			n += l
		}
		if n == 0 {
			return fmt.Errorf("no answer without a leader")
		}
		return nil
	})
	removeLost(t, servers[li], subject, lost)
	want := []string{servers[li].Name(), newServer}
	slices.Sort(want)
	// Past the wait of the survivor without a leader (forceOutAfter),
	// with room for a loaded machine; every answer of every round is
	// checked until the stream is back on two current replicas.
	eventuallyWithin(t, 10*time.Second+2*clusterTimeout, fmt.Sprintf("LI led, on %v current", want), func() error {
		return currentIs(live, want, func(i int) []string {
			_, c := checkLeaderlessAnswers(t, ncs[i], "LI", msgs, acked, storage, newServer)
			return c
		})
	})
	s, err := js[ni].Stream(ctx2(t), "LI")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().State.Msgs; got != msgs {
		t.Fatalf("LI holds %d messages, want %d", got, msgs)
	}
}
