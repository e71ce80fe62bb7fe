package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A stream of five replicas scaled to three while two of its followers'
// servers are down: the two come back with replicas out of the
// assignment, whose group's leader removed them and no longer talks to
// them. Until they retire (10 s without a leader), they must not answer
// the stream's info for their leaderless group: a trial saw half of the
// STREAM.INFO answers, through every server, come from them, with the
// messages published since the scale missing, no leader and the old
// replica list (nats-server v2.15.2: every answer right).
func TestJetStreamClusterLeftReplicaAnswersNoInfo(t *testing.T) {
	servers, opts := jsClusterOpts(t, 5)
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4", "n5"})
	ncs, js := clusterClients(t, servers)
	eventually(t, "create X5", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "X5", Subjects: []string{"x5.>"}, Replicas: 5})
		return err
	})
	for i := 1; i <= 20; i++ {
		clusterPublish(t, js[0], fmt.Sprintf("x5.%d", i), uint64(i))
	}
	li := streamLeader(t, servers, js[0], "X5")
	var down []int
	for i := range servers {
		if i != li && len(down) < 2 {
			down = append(down, i)
		}
	}
	for _, i := range down {
		servers[i].Shutdown()
	}
	up := slices.DeleteFunc([]int{0, 1, 2, 3, 4}, func(i int) bool { return slices.Contains(down, i) })
	ajs := js[li]
	// The scale keeps the live replicas once the leader no longer
	// counts the stopped ones current (keep.go); right after a stop it
	// may still, for a contact window, and keep one of them.
	gone := []string{servers[down[0]].Name(), servers[down[1]].Name()}
	eventually(t, "the stopped replicas not current", func() error {
		ci, err := clusterOf(t, ajs, "X5")
		if err != nil {
			return err
		}
		for _, r := range ci.Replicas {
			if slices.Contains(gone, r.Name) && r.Current {
				return fmt.Errorf("%s current", r.Name)
			}
		}
		return nil
	})
	eventually(t, "X5 scaled to three", func() error {
		_, err := ajs.UpdateStream(ctx2(t), jetstream.StreamConfig{Name: "X5", Subjects: []string{"x5.>"}, Replicas: 3})
		return err
	})
	const total = 30
	for i := 21; i <= total; i++ {
		clusterPublish(t, ajs, fmt.Sprintf("x5.%d", i), uint64(i))
	}
	eventually(t, "X5 on the three live servers", func() error {
		ci, err := clusterOf(t, ajs, "X5")
		if err != nil {
			return err
		}
		var got []string
		ok := len(ci.Replicas) == 2
		for _, r := range ci.Replicas {
			got = append(got, fmt.Sprintf("%s current=%v offline=%v", r.Name, r.Current, r.Offline))
			ok = ok && r.Current && !slices.Contains(gone, r.Name)
		}
		if !ok {
			return fmt.Errorf("leader %s, replicas %v", ci.Leader, got)
		}
		return nil
	})
	var dirs []string
	for _, i := range down {
		servers[i] = restartServer(t, opts[i])
		ncs[i] = connect(t, servers[i].ClientURL())
		dirs = append(dirs, filepath.Join(opts[i].StoreDir, "jetstream", "$G", "streams", "X5"))
	}
	// The left replicas know no leader; from leaderlessAfter (2 s) on
	// they answered. Ask through every server until past that, while
	// they are still on disk.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
		for _, i := range append(slices.Clone(up), down...) {
			m, err := ncs[i].Request("$JS.API.STREAM.INFO.X5", nil, 2*time.Second)
			if err != nil {
				continue // a server still starting may leave it unanswered
			}
			var si struct {
				State struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
				Error *struct{} `json:"error"`
			}
			if err := json.Unmarshal(m.Data, &si); err != nil {
				t.Fatal(err)
			}
			if si.Error == nil && si.State.Msgs != total {
				t.Fatalf("stream info through %s: %d messages, want %d: %s", servers[i].Name(), si.State.Msgs, total, m.Data)
			}
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("a left replica retired before the check ended (%v): the check proved nothing", err)
		}
	}
	eventuallyWithin(t, 10*time.Second+2*clusterTimeout, "the left replicas retired", func() error {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				return fmt.Errorf("%s still there", d)
			}
		}
		return nil
	})
}

// clusterOf returns the cluster part of stream name's info through js.
func clusterOf(t *testing.T, js jetstream.JetStream, name string) (*jetstream.ClusterInfo, error) {
	s, err := js.Stream(ctx2(t), name)
	if err != nil {
		return nil, err
	}
	if ci := s.CachedInfo().Cluster; ci != nil {
		return ci, nil
	}
	return nil, fmt.Errorf("%s: no cluster", name)
}
