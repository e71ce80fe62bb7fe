package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A replicated consumer's leadership moved again and again
// (CONSUMER.LEADER.STEPDOWN) under a nats.go pull client (Consume, and a
// loop of Fetch as `nats bench js fetch` runs): no pull request may be
// left unanswered, so the longest pause between two messages stays well
// under the client's expiry, and no ack sent while the leadership moved
// is lost (a lost ack's message comes again, flagged, after its ack
// wait). Before the old leader waited for its successor's interest to
// reach every server (docs/cluster.md, "Moving the subscriptions"),
// 3 runs of 20 of the Consume case stalled for the client's whole
// expiry (its request sent again on the 409 Leadership Change got a 503
// no responders, which Consume ignores), and 13 of 20 lost acks.
func TestJetStreamClusterConsumerStepDownNoPullStall(t *testing.T) {
	t.Run("consume", func(t *testing.T) {
		pullMoves(t, func(cons jetstream.Consumer, got func(jetstream.Msg), failed func(error)) func() {
			cc, err := cons.Consume(got, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { failed(err) }),
				jetstream.PullMaxMessages(20), jetstream.PullExpiry(pullMoveExpiry), jetstream.PullHeartbeat(pullMoveExpiry/2))
			if err != nil {
				t.Fatal(err)
			}
			return cc.Stop
		})
	})
	t.Run("fetch", func(t *testing.T) {
		pullMoves(t, func(cons jetstream.Consumer, got func(jetstream.Msg), failed func(error)) func() {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					batch, err := cons.Fetch(20, jetstream.FetchMaxWait(pullMoveExpiry))
					if err != nil {
						failed(err)
						continue
					}
					for m := range batch.Messages() {
						got(m)
					}
					if err := batch.Error(); err != nil {
						failed(err)
					}
				}
			})
			return func() { close(stop); wg.Wait() }
		})
	})
}

// pullMoveExpiry is the pull requests' expiry in pullMoves: a request
// left unanswered stalls the client that long.
const pullMoveExpiry = 10 * time.Second

// pullMoves runs a pull client (start: it hands each message to got and
// each error to failed, and returns its stop) on a durable R3 consumer
// of an R3 stream fed by a publisher, steps the consumer's leader down
// 20 times, and fails if the client waited 7 s or more for a message (a
// request left unanswered costs the expiry, 10 s; the old leader gives
// up waiting for its successor after 4 s) or a message came again.
func pullMoves(t *testing.T, start func(cons jetstream.Consumer, got func(jetstream.Msg), failed func(error)) (stop func())) {
	serialTest(t) // it bounds the longest pause between messages
	servers := jsCluster(t, 3)
	nc := connect(t, servers[0].ClientURL())
	sys := connect(t, servers[1].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitMetaFormed(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(pollCtx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	// A publisher through another server keeps messages coming, so the
	// client always has a pull request waiting on the consumer's leader.
	const moves, per = 20, 60
	pub, err := jetstream.New(connect(t, servers[2].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	stopPub := make(chan struct{})
	var published sync.WaitGroup
	published.Go(func() {
		for {
			select {
			case <-stopPub:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = pub.Publish(ctx, "orders.x", []byte("o"))
			cancel()
		}
	})
	defer func() { close(stopPub); published.Wait() }()
	var cons jetstream.Consumer
	eventually(t, "create worker", func() error {
		cons, err = js.CreateOrUpdateConsumer(pollCtx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second})
		return err
	})
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var again []uint64
	var last time.Time
	var longest time.Duration
	errs := map[string]int{}
	got := func(m jetstream.Msg) {
		_ = m.Ack()
		md, err := m.Metadata()
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if !last.IsZero() && now.Sub(last) > longest {
			longest = now.Sub(last)
		}
		last = now
		if md.NumDelivered > 1 {
			again = append(again, md.Sequence.Stream)
		}
		seen[md.Sequence.Stream] = true
	}
	failed := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs[err.Error()]++
	}
	stop := start(cons, got, failed)
	defer stop()
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	stepDown := func() error {
		msg, err := sys.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.worker", nil, 500*time.Millisecond)
		if err != nil {
			return err
		}
		if !strings.Contains(string(msg.Data), `"success":true`) {
			return errors.New(string(msg.Data))
		}
		return nil
	}
	for i := 1; i <= moves; i++ {
		waitFor(t, 30*time.Second, fmt.Sprintf("%d messages received", i*per), func() bool { return received() >= i*per })
		eventually(t, fmt.Sprintf("step-down %d", i), stepDown)
	}
	waitFor(t, 30*time.Second, "messages after the last step-down", func() bool { return received() >= (moves+1)*per })
	mu.Lock()
	defer mu.Unlock()
	t.Logf("longest pause between two messages across %d step-downs: %v; %d delivered again; client errors %v", moves, longest, len(again), errs)
	if longest >= 7*time.Second {
		t.Errorf("the client waited %v for a message across a leadership move (its expiry is %v)", longest, pullMoveExpiry)
	}
	if len(again) > 0 {
		t.Errorf("%d messages delivered again (an ack lost while the leadership moved), first %v", len(again), again[:min(len(again), 5)])
	}
}
