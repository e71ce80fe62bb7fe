package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A file stream of one replica scaled up to three (docs/cluster.md,
// "Scaling", "From one replica") with consumers kept in memory
// (mem_storage: a durable of num_replicas 1 and an ephemeral, as an
// ordered consumer is): the stream's conversion stops them, and their
// state, which only their runtimes hold, is handed over in memory
// (memscale.go), so each keeps what it delivered and acknowledged and
// delivers the next message.
func TestJetStreamClusterScaleUpKeepsMemStorageSingles(t *testing.T) {
	servers, _, js := oneReplicaCluster(t, 3, nil, jetstream.StreamConfig{Name: "SOLO", Subjects: []string{"solo.>"}, Replicas: 1}, soloMsgs,
		jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute, Replicas: 1, MemoryStorage: true},
		jetstream.ConsumerConfig{Name: "E", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute, InactiveThreshold: time.Hour, MemoryStorage: true})
	_ = servers
	takeSomeOf(t, js[0], "SOLO", "D", 10, 6)
	takeSomeOf(t, js[0], "SOLO", "E", 5, 5)
	eventually(t, "scale SOLO to three", func() error {
		_, err := js[0].UpdateStream(ctx2(t), jetstream.StreamConfig{Name: "SOLO", Subjects: []string{"solo.>"}, Replicas: 3})
		return err
	})
	want := map[string]singleState{"D": {delivered: 10, ackFloor: 6, ackPending: 4}, "E": {delivered: 5, ackFloor: 5}}
	for name, w := range want {
		eventually(t, name+" kept its state", func() error {
			st, err := singleOfStream(t, js[0], "SOLO", name)
			if err != nil || st.server == "" || st.delivered != w.delivered || st.ackFloor != w.ackFloor || st.ackPending != w.ackPending {
				return fmt.Errorf("%s: %+v %v", name, st, err)
			}
			return nil
		})
	}
	for name, next := range map[string]uint64{"D": 11, "E": 6} {
		if seq := nextOf(t, js[0], "SOLO", name); seq != next {
			t.Fatalf("%s delivered %d next, want %d", name, seq, next)
		}
	}
}
