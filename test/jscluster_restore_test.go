package test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// `nats stream restore` into a cluster of three (nats-server v2.15.2
// takes it: jsClusteredStreamRestoreRequest), through a server that does
// not lead the meta group: a backup of one server's stream (deleted
// sequences, headers, a durable consumer mid-way) comes back as a stream
// of one replica, and with --replicas 3 as a stream of three, each
// replica holding every message; the consumer goes on from where it was
// and a publish takes the next sequence (checkRestored), and a stream
// of three replicas keeps its messages when the server of the replica
// that took the snapshot stops. A restore over an existing stream is
// refused by the CLI; one whose placement nobody matches gets 10005.
func TestJetStreamClusterRestore(t *testing.T) {
	natsCLI(t)
	src := startServer(t, func(o *server.Options) { o.JetStream = true })
	backupFixture(t, src)
	dir := filepath.Join(t.TempDir(), "backup")
	if out, errOut := runCLI(t, src, "stream", "backup", "ORD", dir, "--consumers"); !strings.Contains(out+errOut, `for stream "ORD"`) {
		t.Fatalf("nats stream backup:\n%s%s", out, errOut)
	}
	servers := jsCluster(t, 3)
	nc := connect(t, servers[0].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	via := servers[metaFollower(t, servers)].ClientURL()

	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", replicas), func(t *testing.T) {
			restoreInto(t, via, dir, "--replicas", fmt.Sprint(replicas))
			s, err := js.Stream(context.Background(), "ORD")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.CachedInfo().Config.Replicas; got != replicas {
				t.Fatalf("num_replicas %d, want %d", got, replicas)
			}
			waitStoredOn(t, servers, "ORD", replicas, 4)
			checkRestored(t, via)
			if replicas == 3 {
				// Once the new replicas are promoted, the restoring one
				// can go.
				eventually(t, "the replicas of ORD current", func() error {
					si, err := s.Info(ctx2(t))
					if err != nil {
						return err
					}
					if ci := si.Cluster; ci == nil || len(ci.Replicas) != 2 || !ci.Replicas[0].Current || !ci.Replicas[1].Current {
						return fmt.Errorf("cluster %+v", si.Cluster)
					}
					return nil
				})
				leader := streamLeader(t, servers, js, "ORD")
				servers[leader].Shutdown()
				other := servers[(leader+1)%3]
				clusterPublishVia(t, other.ClientURL(), "ord.after", 8)
			}
			if out, errOut := runCLI(t, via, "stream", "rm", "-f", "ORD"); strings.Contains(out+errOut, "error") {
				t.Fatalf("nats stream rm:\n%s%s", out, errOut)
			}
		})
		if t.Failed() || replicas == 3 {
			break
		}
	}
}

// TestJetStreamClusterRestoreRefusals: a restore over an existing stream,
// and one placed on tags no server has.
func TestJetStreamClusterRestoreRefusals(t *testing.T) {
	natsCLI(t)
	src := startServer(t, func(o *server.Options) { o.JetStream = true })
	backupFixture(t, src)
	dir := filepath.Join(t.TempDir(), "backup")
	if out, errOut := runCLI(t, src, "stream", "backup", "ORD", dir, "--consumers"); !strings.Contains(out+errOut, `for stream "ORD"`) {
		t.Fatalf("nats stream backup:\n%s%s", out, errOut)
	}
	servers := jsCluster(t, 3)
	via := servers[metaFollower(t, servers)].ClientURL()
	restoreInto(t, via, dir)
	if got := runCLIFail(t, via, "stream", "restore", dir); !strings.Contains(got, `Stream "ORD" already exist`) {
		t.Fatalf("restore of an existing stream:\n%s", got)
	}
	if out, errOut := runCLI(t, via, "stream", "rm", "-f", "ORD"); strings.Contains(out+errOut, "error") {
		t.Fatalf("nats stream rm:\n%s%s", out, errOut)
	}
	if got := runCLIFail(t, via, "stream", "restore", dir, "--tag", "gpu"); !strings.Contains(got, "no suitable peers for placement, tags not matched ['gpu']") || !strings.Contains(got, "10005") {
		t.Fatalf("restore placed on tags nobody has:\n%s", got)
	}
}

// restoreInto runs `nats stream restore dir args...` against u until it
// restores (a request sent while the meta group elects goes unanswered).
func restoreInto(t *testing.T, u, dir string, args ...string) {
	t.Helper()
	eventually(t, "nats stream restore", func() error {
		p := startCLI(t, u, append([]string{"stream", "restore", dir}, args...)...)
		select {
		case <-p.done:
		case <-time.After(cliTimeout):
			t.Fatalf("nats %v did not finish within %v\n%s", p.args, cliTimeout, p.output())
		}
		if !strings.Contains(p.output(), `Restored stream "ORD"`) {
			return fmt.Errorf("%v: %s", p.err, p.output())
		}
		return nil
	})
}

// metaFollower returns the index of a server that does not lead the
// meta group.
func metaFollower(t *testing.T, servers []*server.Server) int {
	t.Helper()
	i := -1
	eventually(t, "a meta leader", func() error {
		for j, s := range servers {
			if !s.JetStreamMetaLeader() {
				continue
			}
			i = (j + 1) % len(servers)
			return nil
		}
		return fmt.Errorf("no meta leader")
	})
	return i
}

// waitStoredOn waits until n running servers hold a replica of stream
// name in the global account with msgs messages.
func waitStoredOn(t *testing.T, servers []*server.Server, name string, n int, msgs uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d replicas of %s", n, name), func() error {
		var have []string
		for _, s := range servers {
			if si, err := localStream(s, name); err == nil && si.State.Msgs == msgs {
				have = append(have, s.Name())
			}
		}
		if len(have) != n {
			return fmt.Errorf("replicas with %d messages on %v", msgs, have)
		}
		slices.Sort(have)
		return nil
	})
}

// clusterPublishVia publishes subj through the server at u until it is
// acknowledged with sequence want.
func clusterPublishVia(t *testing.T, u, subj string, want uint64) {
	t.Helper()
	js, err := jetstream.New(connect(t, u))
	if err != nil {
		t.Fatal(err)
	}
	clusterPublish(t, js, subj, want)
}
