package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A replicated consumer paused through CONSUMER.PAUSE keeps its
// config.pause_until when its leadership moves, as in nats-server v2.15.2
// (the pause is in the consumer's committed state on every replica).
// Trial 34 found it read 0001-01-01T00:00:00Z after a step-down, the
// consumer still paused.
func TestJetStreamClusterPauseSurvivesStepDown(t *testing.T) {
	servers := jsCluster(t, 3)
	nc := connect(t, servers[0].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create PQ and its consumer", func() error {
		if _, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "PQ", Subjects: []string{"pq"}, Replicas: 3}); err != nil {
			return err
		}
		_, err := js.CreateOrUpdateConsumer(tctx(t), "PQ", jetstream.ConsumerConfig{Durable: "PC", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	eventually(t, "pause PC", func() error {
		_, err := js.PauseConsumer(tctx(t), "PQ", "PC", until)
		return err
	})
	var old string
	eventually(t, "PC paused under its leader", func() error {
		ci, err := pauseInfo(t, js)
		if err != nil {
			return err
		}
		old = ci.Cluster.Leader
		return nil
	})
	eventually(t, "consumer step-down", func() error {
		msg, err := nc.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.PQ.PC", nil, 2*time.Second)
		if err != nil {
			return err
		}
		if !strings.Contains(string(msg.Data), `"success":true`) {
			return fmt.Errorf("step-down: %s", msg.Data)
		}
		return nil
	})
	eventually(t, "PC paused until "+until.String()+" under a new leader", func() error {
		ci, err := pauseInfo(t, js)
		if err != nil {
			return err
		}
		if ci.Cluster.Leader == old {
			return fmt.Errorf("leader still %s", old)
		}
		if ci.Config.PauseUntil == nil || !ci.Config.PauseUntil.Equal(until) {
			t.Fatalf("after the step-down pause_until is %v, want %v (paused %v)", ci.Config.PauseUntil, until, ci.Paused)
		}
		return nil
	})
}

// pauseInfo returns PQ > PC's info once it has a leader and is paused.
func pauseInfo(t *testing.T, js jetstream.JetStream) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, "PQ", "PC")
	if err != nil {
		return nil, err
	}
	ci := c.CachedInfo()
	if ci.Cluster == nil || ci.Cluster.Leader == "" || !ci.Paused {
		return nil, fmt.Errorf("leader %+v, paused %v", ci.Cluster, ci.Paused)
	}
	return ci, nil
}
