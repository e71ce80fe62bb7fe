package test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// A replicated consumer's leadership moved on request (CONSUMER.LEADER.
// STEPDOWN, `nats consumer cluster step-down`) while a client consumes:
// no message may come a second time as a first delivery (NumDelivered 1,
// the redelivered flag false). nats-server v2.15.2 passes (in an operator
// trial, two step-downs during 150,000 messages: no such message, 254
// redelivered after the ack wait with NumDelivered 2); cairn, on the same
// trial, delivered 502 messages twice with NumDelivered 1: the new leader
// starts from the committed state, and the deliveries of the old leader's
// last rounds had not committed when it handed over (docs/cluster.md,
// "Replicated consumers", "A lost leadership drops the delivering state").
// Without the hand-over through the consumer, 4 runs of 4 failed here
// with 251 to 753 such messages (a pull batch or two): etcd raft drops
// proposals while a leadership transfer is under way, and the old leader
// went on delivering (docs/cluster.md, "Handing the leadership
// over").
func TestJetStreamClusterConsumerStepDownNoFirstDeliveryTwice(t *testing.T) {
	serialTest(t) // see the lame duck test
	servers := productionTicks(t)
	sys := connect(t, servers[1].ClientURL())
	stepDown := func() error {
		msg, err := sys.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.worker", nil, 2*time.Second)
		if err != nil {
			return err
		}
		if !strings.Contains(string(msg.Data), `"success":true`) {
			return fmt.Errorf("%s", msg.Data)
		}
		return nil
	}
	consumeNoFirstTwice(t, servers[0], nil, map[int]func() error{1: stepDown, 6000: stepDown})
}

// Lame duck mode of the server leading a replicated consumer while a
// client of another server consumes: the hand-over goes through the
// consumer as a step-down's does, and no message comes a second time as
// a first delivery.
func TestJetStreamClusterConsumerLameDuckNoFirstDeliveryTwice(t *testing.T) {
	// Not in parallel: beside other cluster tests under -race (load
	// average 9 to 12 on 2 cores) the consumer's leader is deposed now
	// and then by CheckQuorum (an election timeout is 200 ms here), and
	// what it delivered that had not committed is delivered again as
	// first deliveries (docs/cluster.md, "Handing the leadership
	// over": a leadership lost otherwise than by a hand-over): 2 runs in
	// 12 (and 1 in 12 of the step-down test) failed so, with 502 to
	// 1,757 messages, after the fixes of two causes that had failed 2
	// runs in 10 (lame duck mode finding no active follower; the deposed
	// status published only after the round's fsync). Serial, beside a
	// run of every cluster test, 1 run in 12 still failed so (2,510
	// messages: a leader whose followers had not answered for an
	// election timeout, deposed as the lame duck mode began), as did 1
	// in 12 before the fixes (no active follower found).
	serialTest(t)
	servers := productionTicks(t)
	leaving := servers[2]
	sys := connect(t, servers[1].ClientURL())
	onLeaving := func(js jetstream.JetStream) {
		eventually(t, "the consumer's leader on the server to leave", func() error {
			c, err := js.Consumer(pollCtx(t), "ORDERS", "worker")
			if err != nil || c.CachedInfo().Cluster == nil {
				return fmt.Errorf("consumer info: %v", err)
			}
			if l := c.CachedInfo().Cluster.Leader; l != leaving.Name() {
				_, _ = sys.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.worker", fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, leaving.Name()), 2*time.Second)
				return fmt.Errorf("consumer leader %q", l)
			}
			return nil
		})
	}
	var ldm chan struct{} // closed once the lame duck server stopped
	t.Cleanup(func() {
		if ldm != nil {
			<-ldm
		}
	})
	lameDuck := func() error {
		ldm = make(chan struct{})
		go func() { defer close(ldm); leaving.LameDuck(2*time.Second, time.Second) }()
		return nil
	}
	consumeNoFirstTwice(t, servers[0], onLeaving, map[int]func() error{6000: lameDuck})
}

// productionTicks starts a cluster of three with the production Raft
// tick (100 ms: an election timeout of 1 s) rather than the tests' 20 ms:
// these tests count first deliveries repeated by a hand-over, and a
// leader CheckQuorum deposes under load (its followers silent for 200 ms,
// once more in a CI run under -race: 251 messages) repeats up to the
// window of uncommitted deliveries whatever the hand-over does. A hand-over
// is asked for, so the longer timeout costs these tests nothing.
func productionTicks(t *testing.T) []*server.Server {
	t.Helper()
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftTick = 100 * time.Millisecond })
	return servers
}

// consumeNoFirstTwice fills an R3 stream ORDERS with 20,000 messages
// through a client of s, creates the durable pull consumer worker (then
// runs ready, if not nil), consumes every message, running each act
// (retried until it succeeds) once that many messages were received,
// and fails if a message came again with NumDelivered 1.
func consumeNoFirstTwice(t *testing.T, s interface{ ClientURL() string }, ready func(jetstream.JetStream), acts map[int]func() error) {
	t.Helper()
	nc := connect(t, s.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	const total = 20000
	for i := 0; i < total; {
		_, err := js.PublishAsync("orders.x", []byte("o"))
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			// A loaded machine: wait for the acknowledgements, then go on.
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				t.Fatal("publishes not acknowledged")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		i++
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("publishes not acknowledged")
	}
	var cons jetstream.Consumer
	eventually(t, "create worker", func() error {
		cons, err = js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		return err
	})
	if ready != nil {
		ready(js)
	}
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var twice []uint64
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		mu.Lock()
		if seen[md.Sequence.Stream] && md.NumDelivered == 1 {
			twice = append(twice, md.Sequence.Stream)
		}
		seen[md.Sequence.Stream] = true
		if len(seen) == total {
			select {
			case <-done:
			default:
				close(done)
			}
		}
		mu.Unlock()
		_ = m.Ack()
	}, jetstream.PullExpiry(5*time.Second)) // a pull request lost while the leadership moves is renewed after 5 s, not 30 s
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	ats := slices.Sorted(maps.Keys(acts))
	for _, at := range ats {
		// Shorter than nats.go's wait for a pull request lost while the
		// leadership moved (two missed heartbeats, 30 s): the old leader
		// leaves none unanswered (docs/cluster.md, "Handing the
		// leadership over").
		waitFor(t, 25*time.Second, fmt.Sprintf("%d messages received", at), func() bool { return received() >= at })
		eventually(t, fmt.Sprintf("the act at %d messages", at), acts[at])
	}
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%d of %d messages received", received(), total)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(twice) > 0 {
		t.Fatalf("%d messages delivered again with NumDelivered 1 after the leadership moved, first %v", len(twice), twice[:min(len(twice), 5)])
	}
}
