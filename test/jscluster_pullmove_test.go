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
// (CONSUMER.LEADER.STEPDOWN) under a nats.go pull client: no pull
// request may be left unanswered, so the longest pause between two
// messages stays well under the client's expiry, and no ack sent while
// the leadership moved is lost (a lost ack's message comes again,
// flagged, after its ack wait). Before the old leader waited for its
// successor's interest to reach every server (docs/clustering.md,
// "Handing the leadership over"), the client's pull request sent on the
// 409 Leadership Change could reach a server that knew no leader's
// interest yet and go unanswered until the client's heartbeats missed
// (here 10 s, 30 s with nats.go's defaults), and acks sent during the
// transfer were dropped.
func TestJetStreamClusterConsumerStepDownNoPullStall(t *testing.T) {
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
	stop := make(chan struct{})
	var published sync.WaitGroup
	published.Add(1)
	go func() {
		defer published.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = pub.Publish(ctx, "orders.x", []byte("o"))
			cancel()
		}
	}()
	defer func() { close(stop); published.Wait() }()
	const ackWait = 3 * time.Second
	var cons jetstream.Consumer
	eventually(t, "create worker", func() error {
		cons, err = js.CreateOrUpdateConsumer(pollCtx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
		return err
	})
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var again []uint64
	var last time.Time
	var longest time.Duration
	errs := map[string]int{}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		md, err := m.Metadata()
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if now.Sub(last) > time.Second && !last.IsZero() {
			t.Logf("%s pause of %v ends", now.Format("15:04:05.000"), now.Sub(last))
		}
		if !last.IsZero() && now.Sub(last) > longest {
			longest = now.Sub(last)
		}
		last = now
		if md.NumDelivered > 1 {
			again = append(again, md.Sequence.Stream)
		}
		seen[md.Sequence.Stream] = true
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs[err.Error()]++
		if !errors.Is(err, jetstream.ErrConsumerLeadershipChanged) {
			t.Logf("%s consume: %v", time.Now().Format("15:04:05.000"), err)
		}
	}), jetstream.PullMaxMessages(20), jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
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
	if longest > 5*time.Second {
		t.Errorf("the client waited %v for a message across a leadership move (its expiry is 10 s)", longest)
	}
	if len(again) > 0 {
		t.Errorf("%d messages delivered again (an ack lost while the leadership moved), first %v", len(again), again[:min(len(again), 5)])
	}
}
