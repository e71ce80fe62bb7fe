package test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A replicated consumer's leadership moved on request (CONSUMER.LEADER.
// STEPDOWN, `nats consumer cluster step-down`) while a client consumes:
// no message may come a second time as a first delivery (NumDelivered 1,
// the redelivered flag false). nats-server v2.15.2 passes (in an operator
// trial, two step-downs during 150,000 messages: no such message, 254
// redelivered after the ack wait with NumDelivered 2); cairn, on the same
// trial, delivered 502 messages twice with NumDelivered 1: the new leader
// starts from the committed state, and the deliveries of the old leader's
// last rounds had not committed when it handed over (docs/clustering.md,
// "Replicated consumers", "A lost leadership drops the delivering state").
// 4 runs of 4 fail here with 251 to 753 such messages (a pull batch or
// two). A likely cause, not checked: etcd raft drops proposals while a
// leadership transfer is in flight (ErrProposalDropped), so the rounds
// the old leader delivered during the transfer never commit; pausing
// deliveries and committing what was delivered before transferring would
// avoid it.
func TestJetStreamClusterConsumerStepDownNoFirstDeliveryTwice(t *testing.T) {
	servers := jsCluster(t, 3)
	nc := connect(t, servers[0].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	const total = 20000
	for i := 0; i < total; i++ {
		if _, err := js.PublishAsync("orders.x", []byte("o")); err != nil {
			t.Fatal(err)
		}
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
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	sys := connect(t, servers[1].ClientURL())
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	for _, at := range []int{1, 6000} {
		eventually(t, fmt.Sprintf("%d messages received", at), func() error {
			if n := received(); n < at {
				return fmt.Errorf("%d received", n)
			}
			return nil
		})
		eventually(t, "consumer step-down", func() error {
			msg, err := sys.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.worker", nil, 2*time.Second)
			if err != nil {
				return err
			}
			if !strings.Contains(string(msg.Data), `"success":true`) {
				return fmt.Errorf("%s", msg.Data)
			}
			return nil
		})
	}
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%d of %d messages received", received(), total)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(twice) > 0 {
		t.Fatalf("%d messages delivered again with NumDelivered 1 after a step-down, first %v", len(twice), twice[:min(len(twice), 5)])
	}
}
