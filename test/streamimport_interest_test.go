package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
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

// The same across a route: B's subscriptions are announced in A as
// their shadows, not the import itself, so a request published in A on
// one server while B's only subscriber is on the other gets delivered
// there, and once that subscriber is gone gets the no-responders status
// again (before, every server announced the import's whole subject to
// its peers: the request was routed and timed out, and a push consumer
// delivering into the import on another server never went inactive,
// which left a killed stream leader's external source consumer on the
// origin for good). cairn only (the cluster harness writes no accounts
// for nats-server).
func TestStreamImportInterestAcrossRoutes(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("the cluster harness writes no accounts for nats-server")
	}
	path := filepath.Join(t.TempDir(), "acc.conf")
	conf := `
accounts {
  A { users = [ { user: a, password: p } ], exports = [ { stream: "ev.>" } ] }
  B { users = [ { user: b, password: p } ], imports = [ { stream: { account: A, subject: "ev.>" } } ] }
}
`
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tc := startCluster(t, 2, func(_ int, o *server.Options) { o.Auth = cfg.Auth })
	a := connect(t, tc.nodes[0].url, nats.UserInfo("a", "p"))
	b := connect(t, tc.nodes[1].url, nats.UserInfo("b", "p"))
	noResponders := func(what string) {
		t.Helper()
		eventually(t, what, func() error {
			if _, err := a.Request("ev.x", []byte("hi"), 500*time.Millisecond); !errors.Is(err, nats.ErrNoResponders) {
				return fmt.Errorf("request: %v, want no responders", err)
			}
			return nil
		})
	}
	noResponders("a request no subscriber of B can take")
	sub, err := b.SubscribeSync("ev.x")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B's subscriber on the other server", func() error {
		if _, err := a.Request("ev.x", []byte("hi"), 200*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("request: %v, want a timeout (B takes it, cannot answer)", err)
		}
		if _, err := sub.NextMsg(time.Second); err != nil {
			return fmt.Errorf("B's subscriber: %v", err)
		}
		return nil
	})
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	noResponders("a request once B's subscriber is gone")
}
