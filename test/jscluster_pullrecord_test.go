package test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A Consume whose cluster restarted whole goes on at once when its
// consumer has a leader again: the request it sent on reconnecting found
// no leader (503 No Responders: nats.go then waits for two of its idle
// heartbeats to miss, 30 s with the default options); the replica elected
// leader sends the reply subjects its log recorded a 409 Leadership
// Change, and the client asks again (docs/cluster.md, "Pull requests
// through a change of leader"; nats-server v2.15.2 records each waiting
// request in its consumer's group as well). Before, the client got
// nothing for 30 s.
func TestJetStreamClusterConsumeAfterFullRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0 := jsAt(t, servers[0])
	eventually(t, "create the stream", func() error {
		_, err := js0.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	if _, err := js0.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	reconnect := func(o *nats.Options) error { o.AllowReconnect = true; return nil }
	nc := connect(t, servers[1].ClientURL(), reconnect, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	js1, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js1.Consumer(ctx2(t), "ORDERS", "C")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 100)
	var mu sync.Mutex
	var noResponders int
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		got <- m.Subject()
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		t.Logf("%s consume: %v", time.Now().Format("15:04:05.000"), err)
		if errors.Is(err, nats.ErrNoResponders) {
			mu.Lock()
			noResponders++
			mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	publishUntilAcked(t, js0, "orders.before")
	waitMsg(t, got, "orders.before", clusterTimeout)
	// Its acknowledgement committed: so did the record of its request.
	eventually(t, "the ack committed", func() error {
		ci, err := js0.Consumer(ctx2(t), "ORDERS", "C")
		if err != nil {
			return err
		}
		if f := ci.CachedInfo().AckFloor.Stream; f != 1 {
			return fmt.Errorf("ack floor %d", f)
		}
		return nil
	})
	for _, i := range []int{0, 2, 1} {
		servers[i].Shutdown()
	}
	// The client's server first, alone: the client's request on
	// reconnecting finds no leader.
	servers[1] = restartServer(t, opts[1])
	eventually(t, "the client's request answered 503", func() error {
		mu.Lock()
		defer mu.Unlock()
		if noResponders == 0 {
			return errors.New("no 503 yet")
		}
		return nil
	})
	servers[0] = restartServer(t, opts[0])
	servers[2] = restartServer(t, opts[2])
	publishUntilAcked(t, jsAt(t, servers[0]), "orders.after")
	// Well within the 30 s the client waits without the 409.
	waitMsg(t, got, "orders.after", 10*time.Second)
}

// publishUntilAcked publishes one message on subject, again until it is
// acknowledged.
func publishUntilAcked(t *testing.T, js jetstream.JetStream, subject string) {
	t.Helper()
	eventually(t, "publish "+subject, func() error {
		_, err := js.Publish(ctx2(t), subject, []byte("x"))
		return err
	})
}

// waitMsg waits at most d for the consumer to receive subject.
func waitMsg(t *testing.T, got chan string, subject string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case s := <-got:
			if s == subject {
				return
			}
		case <-deadline:
			t.Fatalf("%s not received within %v", subject, d)
		}
	}
}
