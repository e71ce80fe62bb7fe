package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// metaView is the meta group as the server that leads it reports it
// (/jsz meta_cluster): the leader and every member's name, and whether
// every follower is current and none is still being added.
func metaView(servers []*server.Server) (leader string, members []string, settled bool) {
	for _, s := range servers {
		mi := s.JetStreamMeta()
		if mi == nil || !mi.IsLeader {
			continue
		}
		members = []string{mi.Leader}
		settled = true
		for _, p := range mi.Replicas {
			members = append(members, p.Name)
			settled = settled && p.Current && !p.Pending
		}
		slices.Sort(members)
		return mi.Leader, members, settled
	}
	return "", nil, false
}

// waitMeta waits until the meta group, as its leader reports it, is
// exactly want (sorted names) with every member current, and every
// running server of servers names the same leader; it returns the
// leader.
func waitMeta(t *testing.T, servers []*server.Server, want []string) string {
	t.Helper()
	var leader string
	eventually(t, fmt.Sprintf("a meta group of %v", want), func() error {
		l, members, settled := metaView(servers)
		if !slices.Equal(members, want) || !settled {
			return fmt.Errorf("leader %q, members %v, settled %v", l, members, settled)
		}
		for _, s := range servers {
			if mi := s.JetStreamMeta(); mi == nil || mi.Leader != l {
				return fmt.Errorf("%s sees meta leader %+v, not %s", s.Name(), mi, l)
			}
		}
		leader = l
		return nil
	})
	return leader
}

// streamServers returns the servers of stream name's replicas (leader
// first) once every follower is current.
func streamServers(t *testing.T, js jetstream.JetStream, name string, n int) []string {
	t.Helper()
	var out []string
	eventually(t, "stream "+name+" current on its servers", func() error {
		s, err := js.Stream(ctx2(t), name)
		if err != nil {
			return err
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != n-1 {
			return fmt.Errorf("cluster %+v", ci)
		}
		out = []string{ci.Leader}
		for _, p := range ci.Replicas {
			if !p.Current || p.Pending {
				return fmt.Errorf("replica %+v not current", p)
			}
			out = append(out, p.Name)
		}
		return nil
	})
	return out
}

// A fourth server started later, routed to the three of a running
// cluster (whose routes do not name it), is added to the meta group by
// the meta leader (a learner caught up by the meta snapshot, then a
// voter): /jsz's meta_cluster lists four; a new R3 stream is placed on it
// (it holds the fewest replicas); with the meta leader stopped the other
// three elect one among themselves, which serves creates, and the
// stream on the new server keeps serving.
func TestJetStreamClusterFourthServerJoins(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, nil)
	_, js := clusterClients(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, js[0], "orders.1", 1)
	waitMeta(t, servers, []string{"n1", "n2", "n3"})

	o4 := opts[0]
	o4.ServerName, o4.StoreDir, o4.Port = "n4", t.TempDir(), server.RandomPort
	o4.Cluster.Port = freePort(t)
	servers = append(servers, restartServer(t, o4))
	all := []string{"n1", "n2", "n3", "n4"}
	waitMeta(t, servers, all)

	_, js4 := clusterClients(t, servers[3:])
	eventually(t, "create NEW", func() error {
		_, err := js4[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "NEW", Subjects: []string{"new.>"}, Replicas: 3})
		return err
	})
	placed := streamServers(t, js4[0], "NEW", 3)
	if !slices.Contains(placed, "n4") {
		t.Fatalf("NEW placed on %v, not on the new server n4 (it held the fewest replicas)", placed)
	}
	clusterPublish(t, js4[0], "new.1", 1)

	leader := waitMeta(t, servers, all)
	li := leaderIndex(servers, leader)
	servers[li].Shutdown()
	rest := slices.Delete(slices.Clone(servers), li, li+1)
	eventually(t, "a new meta leader among the other three", func() error {
		if l, _, _ := metaView(rest); l == "" || l == leader {
			return fmt.Errorf("meta leader %q", l)
		}
		return nil
	})
	_, jsr := clusterClients(t, rest)
	eventually(t, "create MORE through the new meta leader", func() error {
		_, err := jsr[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "MORE", Subjects: []string{"more.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, jsr[0], "new.2", 2)
	clusterPublish(t, jsr[0], "more.1", 1)
}

// $JS.API.SERVER.REMOVE of a member of a cluster of four (nats server
// cluster peer-remove) of the server leading an R3 stream: answered with
// success once the removal committed; the stream's replica there moves to
// the server that had none and the meta group then has three members, and the
// stream serves every acknowledged message; removing it again is 10044
// (no longer a member), as nats-server answers. Then the meta leader
// removes itself: it hands its leadership over first.
func TestJetStreamClusterServerRemove(t *testing.T) {
	servers, _ := jsClusterMod(t, 4, func(_ int, o *server.Options) { sysAppAuth(o) })
	_, js := clusterClients(t, servers, nats.UserInfo("app", "app"))
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for n := 1; n <= 10; n++ {
		clusterPublish(t, js[0], fmt.Sprintf("orders.%d", n), uint64(n))
	}
	placed := streamServers(t, js[0], "ORDERS", 3)
	leader := waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"})
	// The victim: the stream's leader (its replica hands its leadership
	// over before it leaves: the removed server still applies the move
	// before it leaves the meta group); the spare: the server without a
	// replica.
	victim, spare := placed[0], ""
	for _, s := range servers {
		if n := s.Name(); !slices.Contains(placed, n) {
			spare = n
		}
	}
	if victim == "" || spare == "" {
		t.Fatalf("stream on %v, meta leader %s", placed, leader)
	}
	vi := leaderIndex(servers, victim)
	via := (vi + 1) % 4
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	r := stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, victim))
	if r.Type != "io.nats.jetstream.api.v1.meta_server_remove_response" || !r.Success || r.Error != nil {
		t.Fatalf("remove %s: %+v (%+v)", victim, r, r.Error)
	}
	rest := slices.Delete(slices.Clone(servers), vi, vi+1)
	var names []string
	for _, s := range rest {
		names = append(names, s.Name())
	}
	waitMeta(t, rest, names)
	eventually(t, "the removed server's replica moved", func() error {
		now := streamServers(t, js[via], "ORDERS", 3)
		if slices.Contains(now, victim) || !slices.Contains(now, spare) {
			return fmt.Errorf("ORDERS on %v", now)
		}
		return nil
	})
	// Until the meta group has let the removed replica go, nats-server's
	// first check answers 10202 (its order); then 10044.
	eventually(t, "remove it again: 10044", func() error {
		r = stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, victim))
		if r.Error != nil && r.Error.ErrCode == 10202 && r.Error.Description == "cluster member change is in progress" {
			return fmt.Errorf("%+v", r.Error)
		}
		return nil
	})
	wantStepDownError(t, "remove it again", r, 10044, "server is not a member of the cluster")
	servers[vi].Shutdown()
	for n := 11; n <= 20; n++ {
		clusterPublish(t, js[via], fmt.Sprintf("orders.%d", n), uint64(n))
	}

	// The meta leader removes itself.
	leader = waitMeta(t, rest, names)
	r = stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", fmt.Sprintf(`{"peer":%q}`, leader))
	if !r.Success {
		t.Fatalf("remove the meta leader %s: %+v", leader, r.Error)
	}
	left := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == leader })
	li := leaderIndex(rest, leader)
	last := slices.Delete(slices.Clone(rest), li, li+1)
	waitMeta(t, last, left)
	rest[li].Shutdown()
	_, jsl := clusterClients(t, last, nats.UserInfo("app", "app"))
	eventually(t, "create MORE on the two left", func() error {
		_, err := jsl[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "MORE", Subjects: []string{"more.>"}, Replicas: 2})
		return err
	})
	clusterPublish(t, jsl[0], "more.1", 1)
	orders, err := jsl[1].Stream(ctx2(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 20; n++ {
		m, err := orders.GetMsg(ctx2(t), uint64(n))
		if err != nil || m.Subject != fmt.Sprintf("orders.%d", n) {
			t.Fatalf("message %d: %+v, %v", n, m, err)
		}
	}
}

// jszMeta is what /jsz says of the meta group.
type jszMeta struct {
	Meta *struct {
		Leader   string `json:"leader"`
		Size     int    `json:"cluster_size"`
		Replicas []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
		} `json:"replicas"`
	} `json:"meta_cluster"`
}

// procMeta reads /jsz's meta_cluster of the server whose monitoring port
// is port.
func procMeta(port int) (jszMeta, error) {
	var out jszMeta
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", port))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&out)
	return out, err
}

// Three cairn processes routed to one another, and a fourth started
// later routed to the first only: it joins the meta group (/jsz's
// meta_cluster of the leader lists four, each current); the meta leader
// is killed with SIGKILL and the other three elect one, which places an
// R3 stream that serves publishes.
func TestJetStreamClusterFourthServerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	if targetIsNatsServer() {
		t.Skip("cairn's meta group")
	}
	t.Parallel() // processes that mostly wait; before the ports are picked
	bin := buildCairn(t)
	mon := []int{freePort(t), freePort(t), freePort(t), freePort(t)}
	kc := newKillClusterArgs(t, bin, 3, func(i int) []string {
		return []string{"-js", "-sd", t.TempDir(), "-m", strconv.Itoa(mon[i])}
	})
	seed := kc.procs[0].args[slices.Index(kc.procs[0].args, "--cluster")+1]
	p4 := &serverProc{t: t, bin: bin, url: "nats://127.0.0.1:" + strconv.Itoa(freePort(t))}
	p4.args = []string{"-a", "127.0.0.1", "-p", strings.TrimPrefix(p4.url, "nats://127.0.0.1:"), "-n", "n4",
		"--cluster", "nats://127.0.0.1:" + strconv.Itoa(freePort(t)), "--cluster_name", "KILL", "--routes", seed,
		"-js", "-sd", t.TempDir(), "-m", strconv.Itoa(mon[3])}
	t.Cleanup(p4.kill)
	p4.start()
	kc.procs = append(kc.procs, p4)
	leader := -1
	eventually(t, "a meta group of four", func() error {
		for i, port := range mon {
			m, err := procMeta(port)
			if err != nil || m.Meta == nil || m.Meta.Leader != fmt.Sprintf("n%d", i+1) {
				continue
			}
			if m.Meta.Size != 4 || len(m.Meta.Replicas) != 3 {
				return fmt.Errorf("leader n%d: %+v", i+1, *m.Meta)
			}
			for _, r := range m.Meta.Replicas {
				if !r.Current {
					return fmt.Errorf("leader n%d: %+v", i+1, *m.Meta)
				}
			}
			leader = i
			return nil
		}
		return fmt.Errorf("no meta leader")
	})
	kc.procs[leader].kill()
	var urls []string
	for i, p := range kc.procs {
		if i != leader {
			urls = append(urls, p.url)
		}
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS through the new meta leader", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, js, "orders.1", 1)
	eventually(t, "a new meta leader among the other three", func() error {
		for i, port := range mon {
			if i == leader {
				continue
			}
			if m, err := procMeta(port); err == nil && m.Meta != nil && m.Meta.Leader != "" && m.Meta.Leader != fmt.Sprintf("n%d", leader+1) {
				return nil
			}
		}
		return fmt.Errorf("no new meta leader")
	})
}
