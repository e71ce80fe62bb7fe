package test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// consumerRaceRounds is how many create-then-ask rounds
// TestJetStreamClusterConsumerRequestsAfterCreate makes of each request.
const consumerRaceRounds = 50

// CONSUMER.INFO, PAUSE, UNPIN and LEADER.STEPDOWN sent through another
// server at once after a CONSUMER.CREATE was answered find the consumer,
// as in nats-server v2.15.2, whose meta leader alone answers 10014 for a
// consumer its meta state does not hold (docs/cluster.md, "Who
// answers"). The create goes through the meta leader's server and the
// request through the stream's leader, on another server: a stream
// leader whose meta replica had not yet applied the consumer's creation
// answered 10014 from its engine, before the consumer's leader answered.
// Consumers of three replicas and of one alternate; each has a priority
// group, for UNPIN.
func TestJetStreamClusterConsumerRequestsAfterCreate(t *testing.T) {
	servers := jsCluster(t, 3)
	ncs, js := clusterClients(t, servers)
	eventually(t, "create CIR", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "CIR", Subjects: []string{"cir.>"}, Replicas: 3, MaxMsgs: 1000})
		return err
	})
	ml, sl := raceLeaders(t, servers, ncs, js)
	t.Logf("meta leader %s, stream leader %s", servers[ml].Name(), servers[sl].Name())
	// Publishes keep the stream's leader busy meanwhile, as a stream in
	// use would (the race is its meta replica applying late).
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	for range 2 {
		pjs := js[sl]
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = pjs.Publish(ctx, "cir.x", []byte("x")) // errors (an election) do not matter
				cancel()
			}
		})
	}
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	requests := []struct{ key, body string }{
		{"INFO", ""},
		{"PAUSE", `{"pause_until":"` + until + `"}`},
		{"UNPIN", `{"group":"g"}`},
		{"LEADER.STEPDOWN", ""},
	}
	notFound := map[string]int{}
	var first []string
	n := 0
	for round := range consumerRaceRounds {
		for _, req := range requests {
			n++
			name := fmt.Sprintf("C%d", n)
			replicas := 1 + 2*(n%2)
			cfg := jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Replicas: replicas,
				PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"g"}}
			eventually(t, "create "+name, func() error { // a create that timed out is sent again (the same config: the same answer)
				_, err := js[ml].CreateConsumer(ctx2(t), "CIR", cfg)
				return err
			})
			subj := "$JS.API.CONSUMER." + req.key + ".CIR." + name
			msg, err := ncs[sl].Request(subj, []byte(req.body), 5*time.Second)
			if err != nil {
				t.Fatalf("round %d: %s (R%d) after its create: %v", round, subj, replicas, err)
			}
			var r apiReply
			if err := json.Unmarshal(msg.Data, &r); err != nil {
				t.Fatalf("%s: %q: %v", subj, msg.Data, err)
			}
			switch {
			case r.Error != nil && r.Error.ErrCode == 10014:
				notFound[fmt.Sprintf("%s R%d", req.key, replicas)]++
				if len(first) < 4 {
					first = append(first, fmt.Sprintf("%s: %s", subj, msg.Data))
				}
			case r.Error != nil && !(req.key == "LEADER.STEPDOWN" && r.Error.ErrCode == 10008):
				t.Errorf("%s (R%d) right after its create: %s", subj, replicas, msg.Data)
			}
			eventually(t, "delete "+name, func() error { return js[ml].DeleteConsumer(ctx2(t), "CIR", name) })
		}
	}
	if len(notFound) > 0 {
		t.Fatalf("10014 for a consumer whose create was answered, of %d requests each: %v; first %s",
			consumerRaceRounds, notFound, strings.Join(first, "; "))
	}
}

// raceLeaders returns the indexes of the meta leader's server and of the
// server leading stream CIR once they differ: the stream's leader is
// stepped down until it is off the meta leader.
func raceLeaders(t *testing.T, servers []*server.Server, ncs []*nats.Conn, js []jetstream.JetStream) (ml, sl int) {
	t.Helper()
	eventually(t, "CIR led off the meta leader", func() error {
		ml = leaderIndex(servers, metaLeaderOf(t, servers))
		sl = streamLeader(t, servers, js[0], "CIR")
		if ml != sl {
			return nil
		}
		if _, err := tryStepDown(ncs[0], "$JS.API.STREAM.LEADER.STEPDOWN.CIR", ""); err != nil {
			return err
		}
		return fmt.Errorf("the meta leader %s leads CIR", servers[ml].Name())
	})
	return ml, sl
}
