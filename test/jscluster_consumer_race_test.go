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

// consumerRaceWorkers create and ask at once in
// TestJetStreamClusterConsumerRequestsAfterCreate, each making
// consumerRaceRounds create-then-ask rounds of each request.
const (
	consumerRaceWorkers = 4
	consumerRaceRounds  = 20
)

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
	requests := []raceRequest{
		{"INFO", ""},
		{"PAUSE", `{"pause_until":"` + until + `"}`},
		{"UNPIN", `{"group":"g"}`},
		{"LEADER.STEPDOWN", ""},
	}
	// Workers create and ask at once: the meta group's entries queue up
	// behind one another, as under a client's load.
	var mu sync.Mutex
	notFound := map[string]int{}
	var first []string
	var workers sync.WaitGroup
	for w := range consumerRaceWorkers {
		workers.Go(func() {
			for round := range consumerRaceRounds {
				for i, req := range requests {
					name := fmt.Sprintf("W%dC%d", w, round*len(requests)+i)
					replicas := 1 + 2*((round+i)%2)
					body, err := createThenAsk(js[ml], ncs[sl], name, replicas, req)
					if err != nil {
						t.Errorf("%s (R%d): %v", req.key, replicas, err)
						return
					}
					mu.Lock()
					if strings.Contains(body, `"err_code":10014`) {
						notFound[fmt.Sprintf("%s R%d", req.key, replicas)]++
						if len(first) < 4 {
							first = append(first, fmt.Sprintf("%s of %s: %s", req.key, name, body))
						}
					}
					mu.Unlock()
				}
			}
		})
	}
	workers.Wait()
	if len(notFound) > 0 {
		t.Fatalf("10014 for a consumer whose create was answered, of %d requests each: %v; first %s",
			consumerRaceWorkers*consumerRaceRounds, notFound, strings.Join(first, "; "))
	}
}

// raceRequest is one request of TestJetStreamClusterConsumerRequestsAfterCreate:
// the API subject's key and the body.
type raceRequest struct{ key, body string }

// createThenAsk creates durable name on stream CIR (replicas, a priority
// group "g") through create, sends req through ask as soon as the create
// is answered, deletes the consumer and returns req's answer. A create
// or delete that timed out (under load) is sent again, for clusterTimeout
// at most; an answer other than 10014 that is an error but for a
// step-down's 10008 (the consumer's group electing) is an error.
func createThenAsk(create jetstream.JetStream, ask *nats.Conn, name string, replicas int, req raceRequest) (string, error) {
	cfg := jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Replicas: replicas,
		PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"g"}}
	if err := retryFor(clusterTimeout, func(ctx context.Context) error {
		_, err := create.CreateConsumer(ctx, "CIR", cfg) // the same config: the same answer
		return err
	}); err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	subj := "$JS.API.CONSUMER." + req.key + ".CIR." + name
	msg, err := ask.Request(subj, []byte(req.body), 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("%s after its create: %w", subj, err)
	}
	var r apiReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return "", fmt.Errorf("%s: %q: %w", subj, msg.Data, err)
	}
	if r.Error != nil && r.Error.ErrCode != 10014 && !(req.key == "LEADER.STEPDOWN" && r.Error.ErrCode == 10008) {
		return "", fmt.Errorf("%s right after its create: %s", subj, msg.Data)
	}
	if err := retryFor(clusterTimeout, func(ctx context.Context) error { return create.DeleteConsumer(ctx, "CIR", name) }); err != nil {
		return "", fmt.Errorf("delete %s: %w", name, err)
	}
	return string(msg.Data), nil
}

// retryFor calls f, with a context of 2 s, until it returns nil or d has
// passed; it returns f's last error. It does not stop the test, so that
// a test's goroutines may call it (eventually's t.Fatalf may not).
func retryFor(d time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // as eventually: polling, bounded by the deadline
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
