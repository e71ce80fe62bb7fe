package test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A stream of three replicas sourcing another, led in turn by each of
// its servers: each new leader resumes from the copies the stream holds,
// whoever made them. Before, each replica's sourcer kept its own
// position from its start, and a new leader copied again everything it
// had not copied itself as leader (a trial: an aggregate of 6,000
// messages held 12,000 after a rolling restart; nats-server v2.15.2
// resumes from the stream's last Nats-Stream-Source header). After each
// step-down a marker is published to the origin; once the marker is
// copied, the aggregate must hold each origin message exactly once.
func TestJetStreamClusterSourceNewLeaderNoRecopy(t *testing.T) {
	servers := jsCluster(t, 3)
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	ncs, js := clusterClients(t, servers)
	eventually(t, "create RX and AGGX", func() error {
		if _, err := js[0].CreateOrUpdateStream(ctx2(t), jetstream.StreamConfig{Name: "RX", Subjects: []string{"rx.>"}, Replicas: 3}); err != nil {
			return err
		}
		_, err := js[0].CreateOrUpdateStream(ctx2(t), jetstream.StreamConfig{Name: "AGGX", Replicas: 3, Sources: []*jetstream.StreamSource{{Name: "RX"}}})
		return err
	})
	sent := uint64(0)
	publish := func(n int) {
		t.Helper()
		for range n {
			sent++
			clusterPublish(t, js[0], fmt.Sprintf("rx.%d", sent), sent)
		}
		eventually(t, fmt.Sprintf("AGGX holds the %d messages of RX", sent), func() error {
			s, err := js[0].Stream(ctx2(t), "AGGX")
			if err != nil {
				return err
			}
			if got := s.CachedInfo().State.Msgs; got != sent {
				return fmt.Errorf("%d messages, want %d", got, sent)
			}
			return nil
		})
	}
	publish(50)
	for _, next := range []int{0, 1, 2, 0} {
		li := streamLeader(t, servers, js[0], "AGGX")
		if li != next {
			eventually(t, "AGGX led by "+servers[next].Name(), func() error {
				if _, err := tryStepDown(ncs[li], "$JS.API.STREAM.LEADER.STEPDOWN.AGGX", fmt.Sprintf(`{"placement":{"preferred":%q}}`, servers[next].Name())); err != nil {
					li = streamLeader(t, servers, js[0], "AGGX")
					return err
				}
				if li = streamLeader(t, servers, js[0], "AGGX"); li != next {
					return fmt.Errorf("led by %s", servers[li].Name())
				}
				return nil
			})
		}
		publish(5)
	}
}
