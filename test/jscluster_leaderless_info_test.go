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

// A stream of two replicas, with a durable, whose follower's server is
// stopped and removed (SERVER.REMOVE): the meta group assigns a new
// replica on the third server, which starts empty, while the survivor
// waits 10 s without a leader before it forces the lost voter out
// (docs/cluster.md, "A stream of two replicas"). Through that window
// every answer to STREAM.INFO, CONSUMER.INFO, STREAM.LIST and the
// account info, through every server, must come from a replica that
// holds the stream's data: no answer reports fewer messages than were
// acknowledged (or a lower ack floor, or less storage), and none
// reports the new replica current before it caught up with a leader
// (docs/cluster.md, "Who answers"). Before, the
// new replica answered STREAM.INFO with its own empty state, itself
// listed current (`Messages: 0` for a stream that lost nothing: a
// new-user trial), as the meta leader listed it in STREAM.LIST when it
// ran there. nats-server v2.15.2 answers from the survivor.
func TestJetStreamClusterLeaderlessInfoNotFromNewReplica(t *testing.T) {
	testLeaderlessInfoNotFromNewReplica(t, "$JS.API.SERVER.REMOVE")
}

// As above, with the stopped server's replica removed from the stream
// alone (STREAM.PEER.REMOVE, `nats stream cluster peer-remove`).
func TestJetStreamClusterLeaderlessInfoNotFromNewReplicaPeerRemoved(t *testing.T) {
	testLeaderlessInfoNotFromNewReplica(t, "$JS.API.STREAM.PEER.REMOVE.LI")
}

// infoAnswer is the part of a STREAM.INFO, CONSUMER.INFO or STREAM.LIST
// answer the leaderless window is checked on.
type infoAnswer struct {
	Error *struct {
		ErrCode int `json:"err_code"`
	} `json:"error"`
	State *struct {
		Msgs uint64 `json:"messages"`
	} `json:"state"`
	AckFloor *struct {
		Stream uint64 `json:"stream_seq"`
	} `json:"ack_floor"`
	Cluster *struct {
		Leader   string `json:"leader"`
		Replicas []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
		} `json:"replicas"`
	} `json:"cluster"`
	Streams []infoAnswer `json:"streams"`
}

// accountAnswer is the part of a $JS.API.INFO answer checked: the
// account's file storage over every replica.
type accountAnswer struct {
	Storage *uint64 `json:"storage"`
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

// testLeaderlessInfoNotFromNewReplica runs the scenario above, removing
// the stopped follower's server with a request to subject (a body
// naming it), as the system account for SERVER.REMOVE, else as the
// stream's. The meta leader is moved to the third server first, so
// that STREAM.LIST is answered where the new replica runs.
func testLeaderlessInfoNotFromNewReplica(t *testing.T, subject string) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { sysAppAuth(o) })
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	ncs, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	eventually(t, "create LI", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "LI", Subjects: []string{"li.>"}, Replicas: 2})
		return err
	})
	eventually(t, "create the durable", func() error {
		_, err := js[0].CreateOrUpdateConsumer(ctx2(t), "LI", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	const msgs, acked = 30, 10
	for i := 1; i <= msgs; i++ {
		clusterPublish(t, js[0], fmt.Sprintf("li.%d", i), uint64(i))
	}
	cons, err := js[0].Consumer(ctx2(t), "LI", "D")
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
	li := streamLeader(t, servers, js[0], "LI")
	fi := -1
	eventually(t, "LI's follower current, the durable's ack floor on both", func() error {
		s, err := js[li].Stream(ctx2(t), "LI")
		if err != nil {
			return err
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || len(ci.Replicas) != 1 || !ci.Replicas[0].Current {
			return fmt.Errorf("cluster %+v", ci)
		}
		fi = leaderIndex(servers, ci.Replicas[0].Name)
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
	// The account's storage: both replicas' bytes, as the meta leader
	// counts them.
	var storage uint64
	eventually(t, "the account's storage of both replicas", func() error {
		s, err := js[li].Stream(ctx2(t), "LI")
		if err != nil {
			return err
		}
		storage = 2 * s.CachedInfo().State.Bytes
		m, err := ncs[li].Request("$JS.API.INFO", nil, 2*time.Second)
		if err != nil {
			return err
		}
		var a accountAnswer
		if err := json.Unmarshal(m.Data, &a); err != nil || a.Storage == nil || *a.Storage != storage || storage == 0 {
			return fmt.Errorf("account info %s, want storage %d (%v)", m.Data, storage, err)
		}
		return nil
	})
	lost := servers[fi].Name()
	servers[fi].Shutdown()
	user := "app"
	if subject == "$JS.API.SERVER.REMOVE" {
		user = "sys"
	}
	nc := connect(t, servers[li].ClientURL(), nats.UserInfo(user, user))
	eventually(t, "remove "+lost, func() error {
		if r := stepDownRequest(t, nc, subject, fmt.Sprintf(`{"peer":%q}`, lost)); !r.Success {
			return fmt.Errorf("%+v", r.Error)
		}
		return nil
	})
	live := []int{li, ni}
	leaderless := 0 // STREAM.INFO answers without a leader: the window was seen
	// Past the 10 s the survivor waits without a leader (forceOutAfter),
	// with room for a loaded machine; the check runs on every answer of
	// every round until the stream is back on two current replicas.
	eventuallyWithin(t, 10*time.Second+2*clusterTimeout, "LI led, on two current replicas", func() error {
		var done bool
		for _, i := range live {
			for _, subj := range []string{"$JS.API.STREAM.INFO.LI", "$JS.API.CONSUMER.INFO.LI.D", "$JS.API.STREAM.LIST", "$JS.API.INFO"} {
				for _, raw := range gatherAnswers(t, ncs[i], subj, 200*time.Millisecond) {
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
					checkLeaderless(t, subj, raw, a, msgs, acked, newServer)
					for _, si := range a.Streams {
						checkLeaderless(t, subj, raw, si, msgs, acked, newServer)
					}
					if subj != "$JS.API.STREAM.INFO.LI" || a.Cluster == nil {
						continue
					}
					if a.Cluster.Leader == "" {
						leaderless++
						continue
					}
					cur := []string{a.Cluster.Leader}
					for _, p := range a.Cluster.Replicas {
						if p.Current {
							cur = append(cur, p.Name)
						}
					}
					done = done || len(cur) == 2 && slices.Contains(cur, newServer) && slices.Contains(cur, servers[li].Name())
				}
			}
		}
		if !done {
			return fmt.Errorf("LI not yet led on %s and %s", servers[li].Name(), newServer)
		}
		return nil
	})
	t.Logf("%d STREAM.INFO answers without a leader, each with every acknowledged message", leaderless)
	if leaderless == 0 {
		t.Fatalf("no STREAM.INFO answered while LI had no leader: the survivor on %s stayed silent", servers[li].Name())
	}
	s, err := js[ni].Stream(ctx2(t), "LI")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().State.Msgs; got != msgs {
		t.Fatalf("LI holds %d messages, want %d", got, msgs)
	}
}
