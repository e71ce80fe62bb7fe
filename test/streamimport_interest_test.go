package test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A stream import is interest in the exporting account only while
// something in the importing account subscribes what it carries, as
// nats-server v2.15.2's shadow subscriptions are: a request that only an
// idle import matches gets the no-responders status, and a push consumer
// whose deliver subject only an idle import matches goes inactive and is
// deleted after its inactive_threshold (a new-user trial found external
// sources leaving a consumer on the origin at every restart).
func TestStreamImportIdleIsNoInterest(t *testing.T) {
	conf := fmt.Sprintf(`
jetstream { store_dir: %q }
accounts {
  A { jetstream: enabled, users = [ { user: a, password: p } ], exports = [ { stream: "ev.>" } ] }
  B { users = [ { user: b, password: p } ], imports = [ { stream: { account: A, subject: "ev.>" } } ] }
}
`, t.TempDir())
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		a := connect(t, tg.url, nats.UserInfo("a", "p"))
		if _, err := a.Request("ev.x", []byte("hi"), clusterTimeout); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request through an idle import: %v, want no responders", err)
		}
		b := connect(t, tg.url, nats.UserInfo("b", "p"))
		sub, err := b.SubscribeSync("ev.x")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		// B takes it (it cannot answer into A): a timeout, not a 503.
		if _, err := a.Request("ev.x", []byte("hi"), 500*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("request B subscribes: %v, want a timeout", err)
		}
		if _, err := sub.NextMsg(clusterTimeout); err != nil {
			t.Fatalf("B's subscriber: %v", err)
		}

		js, err := a.JetStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.AddStream(&nats.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
			t.Fatal(err)
		}
		ci, err := js.AddConsumer("S", &nats.ConsumerConfig{
			DeliverSubject: "ev.push", AckPolicy: nats.AckNonePolicy, InactiveThreshold: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the push consumer only an idle import listens to deleted", func() error {
			if _, err := js.ConsumerInfo("S", ci.Name); !errors.Is(err, nats.ErrConsumerNotFound) {
				return fmt.Errorf("consumer info: %v", err)
			}
			return nil
		})
	})
}
