package test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	cjs "github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/server"
)

// localStream returns the info of this server's own replica of stream
// name in the global account (its engine's view, not the leader's).
func localStream(s *server.Server, name string) (*cjs.StreamInfo, error) {
	for _, a := range s.Accounts() {
		if a.Name == "$G" && a.JetStream != nil {
			si, err := a.JetStream.StreamInfo(name, cjs.InfoOptions{})
			if err != nil {
				return nil, err
			}
			return si, nil
		}
	}
	return nil, errors.New("no JetStream in $G")
}

// replicasAgree waits until every running server's replica of stream
// name has subjects and msgs messages, first sequence first.
func replicasAgree(t *testing.T, servers []*server.Server, name string, subjects []string, msgs, first uint64) {
	t.Helper()
	for _, s := range servers {
		if s == nil {
			continue
		}
		eventually(t, fmt.Sprintf("%s's replica of %s", s.Name(), name), func() error {
			si, err := localStream(s, name)
			if err != nil {
				return err
			}
			if !slices.Equal(si.Config.Subjects, subjects) || si.State.Msgs != msgs || si.State.FirstSeq != first {
				return fmt.Errorf("subjects %v, %d messages from %d; want %v, %d from %d", si.Config.Subjects, si.State.Msgs, si.State.FirstSeq, subjects, msgs, first)
			}
			return nil
		})
	}
}

// ctx2 is a context of 2 seconds, for requests retried with eventually:
// a request sent while the cluster elects may go unanswered.
func ctx2(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clusterPublish publishes subj through js until it is acknowledged with
// sequence want.
func clusterPublish(t *testing.T, js jetstream.JetStream, subj string, want uint64) {
	t.Helper()
	publishWithin(t, js, subj, want, clusterTimeout)
}

// streamLeader returns the index of the server leading stream name, as
// the stream's info through js says.
func streamLeader(t *testing.T, servers []*server.Server, js jetstream.JetStream, name string) int {
	t.Helper()
	leader := -1
	eventually(t, "the leader of "+name, func() error {
		s, err := js.Stream(ctx2(t), name)
		if err != nil {
			return err
		}
		if ci := s.CachedInfo().Cluster; ci == nil || leaderIndex(servers, ci.Leader) < 0 {
			return fmt.Errorf("cluster %+v", ci)
		}
		leader = leaderIndex(servers, s.CachedInfo().Cluster.Leader)
		return nil
	})
	return leader
}

// twoReplicaMsgs is how many messages twoReplicaStream publishes.
const twoReplicaMsgs = 20

// twoReplicaStream creates stream name of two replicas on subjects
// strings.ToLower(name)+".>" through js[0], with the durable D (explicit
// acks) when durable, publishes twoReplicaMsgs messages to it (subjects
// …1 to …twoReplicaMsgs, sequences 1 to twoReplicaMsgs)
// and returns the indexes of the servers of its leader and of its
// follower once the follower is current (currentFollower).
func twoReplicaStream(t *testing.T, servers []*server.Server, js []jetstream.JetStream, name string, durable bool) (leader, follower int) {
	t.Helper()
	prefix := strings.ToLower(name)
	eventually(t, "create "+name, func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Replicas: 2})
		return err
	})
	if durable {
		eventually(t, "create the durable", func() error {
			_, err := js[0].CreateOrUpdateConsumer(ctx2(t), name, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
			return err
		})
	}
	for i := 1; i <= twoReplicaMsgs; i++ {
		clusterPublish(t, js[0], fmt.Sprintf("%s.%d", prefix, i), uint64(i))
	}
	return currentFollower(t, servers, js, name, nil)
}

// currentFollower returns the indexes of the servers of the leader of
// stream name, a stream of two replicas (streamLeader, through js[0]),
// and of its follower, once the stream's info through the leader's
// server (js[leader]) lists the follower current and also, when not nil,
// returns nil (both waited on as one condition).
func currentFollower(t *testing.T, servers []*server.Server, js []jetstream.JetStream, name string, also func(leader int) error) (leader, follower int) {
	t.Helper()
	leader = streamLeader(t, servers, js[0], name)
	follower = -1
	eventually(t, name+"'s follower current", func() error {
		s, err := js[leader].Stream(ctx2(t), name)
		if err != nil {
			return err
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || len(ci.Replicas) != 1 || !ci.Replicas[0].Current {
			return fmt.Errorf("cluster %+v", ci)
		}
		follower = leaderIndex(servers, ci.Replicas[0].Name)
		if also != nil {
			return also(leader)
		}
		return nil
	})
	return leader, follower
}

// STREAM.UPDATE of a replicated file stream in a cluster, sent through a
// server that does not lead the stream: the new subjects take publishes
// at once, every replica runs the new config (it travelled through the
// stream's log), a follower restarted later still has it, and so have the
// others after the leader's server stops; nats stream edit works too,
// and a server that was down during an update takes it from the log.
// The changes the cluster cannot make are refused with nats-server's
// codes.
func TestJetStreamClusterStreamUpdate(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js := make([]jetstream.JetStream, 3)
	for i, s := range servers {
		var err error
		if js[i], err = jetstream.New(connect(t, s.ClientURL())); err != nil {
			t.Fatal(err)
		}
	}
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), cfg)
		return err
	})
	for i := 1; i <= 3; i++ {
		clusterPublish(t, js[0], fmt.Sprintf("orders.%d", i), uint64(i))
	}
	leader := streamLeader(t, servers, js[0], "ORDERS")
	via := (leader + 1) % 3
	cfg.Subjects = []string{"orders.>", "more.>"}
	cfg.MaxMsgs = 100
	var si *jetstream.StreamInfo
	eventually(t, "update ORDERS", func() error {
		s, err := js[via].UpdateStream(ctx2(t), cfg)
		if err == nil {
			si = s.CachedInfo()
		}
		return err
	})
	if !slices.Equal(si.Config.Subjects, cfg.Subjects) || si.Config.MaxMsgs != 100 || si.Cluster == nil {
		t.Fatalf("update answer: config %+v cluster %+v", si.Config, si.Cluster)
	}
	clusterPublish(t, js[via], "more.1", 4)
	replicasAgree(t, servers, "ORDERS", cfg.Subjects, 4, 1)

	// Refusals, with nats-server's codes.
	refused := func(what string, c jetstream.StreamConfig, code jetstream.ErrorCode) {
		t.Helper()
		_, err := js[via].UpdateStream(tctx(t), c)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != code {
			t.Fatalf("%s: %v, want %d", what, err, code)
		}
	}
	storage := cfg
	storage.Storage = jetstream.MemoryStorage
	refused("change of storage", storage, 10052)
	eventually(t, "create OTHER", func() error {
		_, err := js[via].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, Replicas: 3})
		return err
	})
	overlap := cfg
	overlap.Subjects = append(slices.Clone(cfg.Subjects), "other.x")
	refused("overlapping subjects", overlap, 10065)
	refused("no such stream", jetstream.StreamConfig{Name: "NOPE", Subjects: []string{"nope"}, Replicas: 3}, 10059)

	// A follower stopped, publishes meanwhile, restarted: it replays the
	// update from its checkpoint and log and catches up.
	follower := (leader + 2) % 3
	servers[follower].Shutdown()
	clusterPublish(t, js[via], "more.2", 5)
	servers[follower] = restartServer(t, opts[follower])
	replicasAgree(t, servers, "ORDERS", cfg.Subjects, 5, 1)

	// The leader's server stops: the new leader took the config from the
	// log and serves the new subjects.
	servers[leader].Shutdown()
	servers[leader] = nil
	rest := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == leader })
	jsF, err := jetstream.New(connect(t, servers[follower].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	clusterPublish(t, jsF, "more.3", 6)
	replicasAgree(t, servers, "ORDERS", cfg.Subjects, 6, 1)

	// nats stream edit, through one of the two left, while the former
	// leader's server is down; it replays the update from the log when
	// it comes back.
	eventually(t, "nats stream edit", func() error {
		out, errOut, err := tryCLI(t, servers[rest[0]].ClientURL(), "stream", "edit", "ORDERS", "--max-msgs", "50", "-f")
		if err != nil {
			return fmt.Errorf("%v: %s %s", err, out, errOut)
		}
		return nil
	})
	servers[leader] = restartServer(t, opts[leader])
	for i := range servers {
		eventually(t, "max_msgs 50 on "+servers[i].Name(), func() error {
			si, err := localStream(servers[i], "ORDERS")
			if err != nil {
				return err
			}
			if si.Config.MaxMsgs != 50 || !slices.Equal(si.Config.Subjects, cfg.Subjects) {
				return fmt.Errorf("config %+v", si.Config)
			}
			return nil
		})
	}
}

// A replicated memory stream's replica restarts empty and replays its
// group's whole log: from the config the log started with, so that the
// publishes before an update are decided as they were (here, max_msgs
// 3 dropped the first two), and the update applied where it was.
func TestJetStreamClusterStreamUpdateMemoryReplay(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: "MEM", Subjects: []string{"mem.>"}, Replicas: 3, Storage: jetstream.MemoryStorage, MaxMsgs: 3}
	eventually(t, "create MEM", func() error {
		_, err := js.CreateStream(ctx2(t), cfg)
		return err
	})
	for i := 1; i <= 5; i++ {
		clusterPublish(t, js, fmt.Sprintf("mem.%d", i), uint64(i))
	}
	cfg.MaxMsgs = 10
	cfg.Subjects = []string{"mem.>", "extra"}
	eventually(t, "update MEM", func() error {
		_, err := js.UpdateStream(ctx2(t), cfg)
		return err
	})
	clusterPublish(t, js, "extra", 6)
	clusterPublish(t, js, "mem.7", 7)
	replicasAgree(t, servers, "MEM", cfg.Subjects, 5, 3)
	leader := streamLeader(t, servers, js, "MEM")
	follower := (leader + 1) % 3
	servers[follower].Shutdown()
	servers[follower] = restartServer(t, opts[follower])
	replicasAgree(t, servers, "MEM", cfg.Subjects, 5, 3)
}

// tryCLI runs nats --server u args... and returns its output and error
// instead of failing the test.
func tryCLI(t *testing.T, u string, args ...string) (string, string, error) {
	t.Helper()
	p := startCLI(t, u, args...)
	select {
	case <-p.done:
	case <-time.After(cliTimeout):
		return p.stdout.String(), p.stderr.String(), errors.New("timed out")
	}
	return p.stdout.String(), strings.TrimSpace(p.stderr.String()), p.err
}
