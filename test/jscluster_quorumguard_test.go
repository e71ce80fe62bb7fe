package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/server"
)

// A stream of three replicas scaled to two whose assignment keeps a
// server that is down (docs/cluster.md, "Replacing a replica": the
// guard on a removal). Through the API alone the meta leader keeps the
// live servers (keep.go ranks a server without a route last), so the
// test has the kept follower's server go down after the meta leader
// chose, before the stream's leader carried the scale out: the leader's
// membership changes are held (Hooks.HoldMembership) from before the
// update until that server is down and the leader has not heard from
// it for longer than its contact window. Then the leader must not remove the live follower
// that leaves: {leader, down server} could commit nothing until that
// server came back. The group keeps its three voters, takes every
// publish meanwhile, and its info's desired status says "quorum:
// waiting for quorum to remove peer" (nats-server v2.15.2's line when
// canRemovePeer refuses); once the server is back the scale-down
// completes on the two assigned servers, every message kept, and the
// dropped server retires its replica.
func TestJetStreamClusterScaleDownWaitsForLiveQuorum(t *testing.T) {
	var hold atomic.Bool
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) {
		sysAppAuth(o)
		o.JetStreamClusterHooks = &jscluster.Hooks{
			HoldMembership: func(_, stream string) bool { return stream == "Q" && hold.Load() },
		}
	})
	app := nats.UserInfo("app", "app")
	ncs, js := clusterClients(t, servers, app)
	cfg := jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}, Replicas: 3}
	eventually(t, "create Q", func() error {
		_, err := js[0].CreateStream(ctx2(t), cfg)
		return err
	})
	seq := uint64(0)
	for seq < 20 {
		seq++
		clusterPublish(t, js[0], fmt.Sprintf("q.%d", seq), seq)
	}
	si := currentReplicas(t, js[0], "Q")
	group := si.Cluster.RaftGroup

	hold.Store(true)
	cfg.Replicas = 2
	eventually(t, "scale Q to two replicas", func() error {
		_, err := js[0].UpdateStream(ctx2(t), cfg)
		return err
	})
	// The assigned servers: the desired block of the scale in flight.
	var kept []string
	eventually(t, "Q's desired servers", func() error {
		a, err := guardInfo(ncs[0])
		if err != nil {
			return err
		}
		if a.Cluster == nil || a.Cluster.Desired == nil || len(a.Cluster.Desired.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", a.Cluster)
		}
		kept = nil
		for _, r := range a.Cluster.Desired.Replicas {
			kept = append(kept, r.Name)
		}
		slices.Sort(kept)
		return nil
	})
	leader := groupLeader(servers, group, -1)
	if leader < 0 || !slices.Contains(kept, servers[leader].Name()) {
		t.Fatalf("Q's group led by server %d, the scale keeps %v", leader, kept)
	}
	down, dropped := -1, -1
	for i, s := range servers {
		switch {
		case i == leader:
		case slices.Contains(kept, s.Name()):
			down = i
		default:
			dropped = i
		}
	}
	if down < 0 || dropped < 0 {
		t.Fatalf("kept %v, leader %s", kept, servers[leader].Name())
	}
	downName := servers[down].Name()
	t.Logf("Q led on %s; the scale keeps %v; %s stopped, %s leaves", servers[leader].Name(), kept, downName, servers[dropped].Name())
	servers[down].Shutdown()
	// The leader (whichever server leads now) has not heard from the
	// stopped server's replica for longer than its contact window (two
	// election timeouts: 400 ms with the test servers' 20 ms tick): the
	// guard can only see it down so. raft's RecentActive (the status's
	// Active) is no sign: in the quiet group it stayed set for good.
	eventually(t, "Q's leader not hearing from "+downName, func() error {
		l := groupLeader(servers, group, down)
		if l < 0 {
			return fmt.Errorf("no leader of %s", group)
		}
		gs, _ := servers[l].JetStreamRaftGroups("APP", group)
		for _, p := range gs[0].Status.Peers {
			if string(p.Server) == downName && p.Heard && p.Ago <= time.Second {
				return fmt.Errorf("%s heard from %s %v ago", servers[l].Name(), downName, p.Ago)
			}
		}
		return nil
	})
	quiet := false
	if l := groupLeader(servers, group, down); l >= 0 {
		gs, _ := servers[l].JetStreamRaftGroups("APP", group)
		quiet = gs[0].Status.Quiesced
	}
	hold.Store(false)
	released := time.Now()

	// First with nothing published (the group may be quiet, as a stream
	// nobody writes to is: its leader's raft then still counts the
	// stopped replica recently active), for several housekeeping ticks
	// (250 ms): the group keeps its three voters.
	for time.Since(released) < 1500*time.Millisecond {
		if err := groupVoters(servers, group, down, 3); err != nil {
			t.Fatalf("%v, %v after the hold ended (the group quiet then: %v)", err, time.Since(released).Round(time.Millisecond), quiet)
		}
		time.Sleep(20 * time.Millisecond) // the poll's pace; the loop is bounded by its deadline
	}
	// Then for a while every publish acknowledged within the client's
	// wait, the three voters kept, and the leader says what it waits
	// for.
	via := js[dropped]
	status := ""
	for time.Since(released) < 3*time.Second || status == "" {
		if time.Since(released) > clusterTimeout {
			t.Fatalf("no quorum status within %v", clusterTimeout)
		}
		seq++
		publishWithin(t, via, fmt.Sprintf("q.%d", seq), seq, 2*time.Second)
		if a, err := guardInfo(ncs[dropped]); status == "" && err == nil && a.Cluster != nil && a.Cluster.Desired != nil && a.Cluster.Desired.Status != nil {
			if d := a.Cluster.Desired.Status; d.Type == "quorum" {
				status = d.Type + ": " + d.Description
			}
		}
	}
	if status != "quorum: waiting for quorum to remove peer" {
		t.Errorf("desired status %q", status)
	}
	if err := groupVoters(servers, group, down, 3); err != nil {
		t.Fatalf("%v after %v", err, time.Since(released).Round(time.Millisecond))
	}
	t.Logf("the group quiet at the hold's end: %v; %d publishes acknowledged in the %v after, the group's three voters kept",
		quiet, seq-20, time.Since(released).Round(time.Millisecond))

	// The server back: the scale-down completes on the kept servers.
	servers[down] = restartServer(t, opts[down])
	back := time.Now()
	eventually(t, "Q led on "+fmt.Sprint(kept)+" alone", func() error {
		return ledGroupOf(servers, "APP", group, kept)
	})
	t.Logf("Q on %v alone %v after %s's restart", kept, time.Since(back).Round(time.Millisecond), downName)
	seq++
	publishWithin(t, via, fmt.Sprintf("q.%d", seq), seq, clusterTimeout)
	eventually(t, "the scale over, every message", func() error {
		s, err := via.Stream(ctx2(t), "Q")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		if si.Config.Replicas != 2 || si.State.Msgs != seq || si.State.FirstSeq != 1 {
			return fmt.Errorf("%d replicas, %d messages from %d, want %d", si.Config.Replicas, si.State.Msgs, si.State.FirstSeq, seq)
		}
		if a, err := guardInfo(ncs[dropped]); err != nil || a.Cluster == nil || a.Cluster.Desired != nil {
			return fmt.Errorf("cluster %+v (%v)", a.Cluster, err)
		}
		return nil
	})
	eventuallyWithin(t, 10*time.Second+clusterTimeout, servers[dropped].Name()+"'s replica retired", func() error {
		if gs, _ := servers[dropped].JetStreamRaftGroups("APP", group); len(gs) > 0 {
			return fmt.Errorf("%s still runs %s", servers[dropped].Name(), group)
		}
		return nil
	})
	for _, i := range []int{leader, down} {
		eventually(t, servers[i].Name()+" holds every message", func() error {
			si, err := accountStream(servers[i], "APP", "Q")
			if err != nil {
				return err
			}
			if si.State.Msgs != seq {
				return fmt.Errorf("%d messages, want %d", si.State.Msgs, seq)
			}
			return nil
		})
	}
}

// guardAnswer is the part of a stream info the guard's test reads.
type guardAnswer struct {
	Cluster *struct {
		Desired *struct {
			Replicas []struct {
				Name string `json:"name"`
			} `json:"replicas"`
			Status *struct {
				Type        string `json:"type"`
				Description string `json:"description"`
			} `json:"status"`
		} `json:"desired"`
	} `json:"cluster"`
}

// guardInfo asks stream Q's info through nc.
func guardInfo(nc *nats.Conn) (guardAnswer, error) {
	var a guardAnswer
	m, err := nc.Request("$JS.API.STREAM.INFO.Q", nil, 2*time.Second)
	if err != nil {
		return a, err
	}
	return a, json.Unmarshal(m.Data, &a)
}

// groupLeader returns the index of the server, other than the one of
// index skip (stopped), whose replica leads Raft group (of account APP),
// -1 when none does.
func groupLeader(servers []*server.Server, group string, skip int) int {
	for i, s := range servers {
		if i == skip {
			continue
		}
		if gs, _ := s.JetStreamRaftGroups("APP", group); len(gs) == 1 && gs[0].Status.Role == raftnode.Leader {
			return i
		}
	}
	return -1
}

// groupVoters reports, as an error, unless a server other than the one
// of index skip leads Raft group (of account APP) with n voters.
func groupVoters(servers []*server.Server, group string, skip, n int) error {
	l := groupLeader(servers, group, skip)
	if l < 0 {
		return fmt.Errorf("no leader of %s", group)
	}
	gs, _ := servers[l].JetStreamRaftGroups("APP", group)
	if v := gs[0].Status.Voters; len(v) != n {
		return fmt.Errorf("%s leads %s with voters %v, want %d", servers[l].Name(), group, v, n)
	}
	return nil
}
