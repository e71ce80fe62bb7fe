package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

// What a clustered cairn reports to operators' tools (issues 15 and 16;
// docs/monitoring.md, "Replicas and the meta group"), checked as an
// operator's trial checked it: three servers, the system account SYS
// (sys/sys) and the account APP with JetStream, an R3 file stream ORDERS
// and a durable consumer.

// sysAppAuth gives a server the accounts of the trial.
func sysAppAuth(o *server.Options) {
	o.Auth = config.Auth{
		Users: []config.User{{Name: "sys", Password: "sys", Account: "SYS"}, {Name: "app", Password: "app", Account: "APP"}},
		Accounts: []config.Account{{Name: "SYS"}, {Name: "APP", JetStream: &config.AccountJetStream{MaxMemory: -1, MaxStore: -1,
			MaxStreams: -1, MaxConsumers: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}}},
	}
	o.Operator.SystemAccount = "SYS"
}

// sysAppNoAuth gives a server the accounts of the trial (sysAppAuth),
// with app the user of a client that gives no credentials.
func sysAppNoAuth(o *server.Options) {
	sysAppAuth(o)
	o.Auth.NoAuthUser = "app"
}

// monitored starts the HTTP monitoring of s and its $SYS requests, and
// returns the monitoring URL.
func monitored(t *testing.T, s *server.Server) string {
	t.Helper()
	m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: -1, Server: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if err := m.ServeSystemRequests(); err != nil {
		t.Fatal(err)
	}
	return m.URL()
}

// trialCluster starts the trial's cluster with ORDERS (msgs messages on
// orders.new) and the durable pull consumer worker, and returns the
// servers, their options, their monitoring URLs and APP's JetStream
// through the first server.
func trialCluster(t *testing.T, msgs int) ([]*server.Server, []server.Options, []string, jetstream.JetStream) {
	t.Helper()
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { sysAppAuth(o) })
	mons := make([]string, len(servers))
	for i, s := range servers {
		mons[i] = monitored(t, s)
	}
	js, err := jetstream.New(connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app")))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= msgs; i++ {
		clusterPublish(t, js, fmt.Sprintf("orders.%d", i), uint64(i))
	}
	eventually(t, "create worker", func() error {
		_, err := js.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	return servers, opts, mons, js
}

// httpGet returns the status and body of a monitoring request.
func httpGet(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// peer and cluster are the parts of a ClusterInfo the tests read.
type peer struct {
	Name    string        `json:"name"`
	Current bool          `json:"current"`
	Offline bool          `json:"offline"`
	Active  time.Duration `json:"active"`
	Lag     uint64        `json:"lag"`
}

type clusterPart struct {
	Name        string     `json:"name"`
	Leader      string     `json:"leader"`
	LeaderSince *time.Time `json:"leader_since"`
	Replicas    []peer     `json:"replicas"`
}

// leaderView fails unless ci is its leader's view: led by leader, since
// a time, and the two other servers of all listed current, seen lately.
func leaderView(ci *clusterPart, leader string, all []string) error {
	if ci == nil || ci.Leader != leader || ci.LeaderSince == nil || len(ci.Replicas) != len(all)-1 {
		return fmt.Errorf("cluster %+v, want %s's view", ci, leader)
	}
	for i, p := range ci.Replicas {
		want := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == leader })[i]
		if p.Name != want || !p.Current || p.Offline || p.Active <= 0 || p.Active > 5*time.Second {
			return fmt.Errorf("replica %d %+v, want %s current, seen lately", i, p, want)
		}
	}
	return nil
}

// metaLeaderOf returns the meta leader as the servers see it.
func metaLeaderOf(t *testing.T, servers []*server.Server) string {
	t.Helper()
	var name string
	eventually(t, "a meta leader every server knows", func() error {
		name = ""
		for _, s := range servers {
			mi := s.JetStreamMeta()
			if mi == nil || mi.Leader == "" || (name != "" && mi.Leader != name) {
				return fmt.Errorf("%s sees %+v", s.Name(), mi)
			}
			name = mi.Leader
		}
		return nil
	})
	return name
}

// docs/monitoring.md, "Replicas and the meta group": only the meta leader answers /jsz?leader-only=true
// (the others 400 "filtered response: not leader") and
// $SYS.REQ.SERVER.PING.JSZ with leader_only; its meta_cluster shows the
// two others current and seen lately; so `nats server check meta
// --expect 3` and `nats server check jetstream` say OK. statsz lists
// each server's routes, which `nats server ls` counts.
func TestJetStreamClusterLeaderOnly(t *testing.T) {
	natsCLI(t)
	servers, _, mons, _ := trialCluster(t, 3)
	names := []string{"n1", "n2", "n3"}
	eventually(t, "only the meta leader answers leader-only", func() error {
		leader := metaLeaderOf(t, servers)
		for i, s := range servers {
			code, body := httpGet(t, mons[i]+"/jsz?leader-only=true")
			if s.Name() != leader {
				if code != http.StatusBadRequest || string(body) != "filtered response: not leader" {
					return fmt.Errorf("%s, not the leader: %d %q", s.Name(), code, body)
				}
				continue
			}
			var ji struct {
				Meta *struct {
					Leader   string `json:"leader"`
					Replicas []peer `json:"replicas"`
					Size     int    `json:"cluster_size"`
				} `json:"meta_cluster"`
			}
			if err := json.Unmarshal(body, &ji); code != http.StatusOK || err != nil || ji.Meta == nil || ji.Meta.Size != 3 {
				return fmt.Errorf("%s, the leader: %d %s", s.Name(), code, body)
			}
			if err := leaderView(&clusterPart{Leader: ji.Meta.Leader, LeaderSince: &time.Time{}, Replicas: ji.Meta.Replicas}, leader, names); err != nil {
				return fmt.Errorf("meta_cluster of %s: %v", leader, err)
			}
		}
		return nil
	})

	// The $SYS form: one answer, the leader's. Each server answers its
	// requests in order and its answers reach us in order, so once the
	// three answers to a later PING are in, every answer to the JSZ
	// request is too.
	sys := connect(t, servers[0].ClientURL(), nats.UserInfo("sys", "sys"))
	jszSub, err := sys.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	pingSub, err := sys.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.PublishRequest("$SYS.REQ.SERVER.PING.JSZ", jszSub.Subject, []byte(`{"leader_only":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := sys.PublishRequest("$SYS.REQ.SERVER.PING", pingSub.Subject, nil); err != nil {
		t.Fatal(err)
	}
	routes := map[string][]string{}
	for len(routes) < 3 {
		m, err := pingSub.NextMsg(readTimeout)
		if err != nil {
			t.Fatalf("PING answered by %v only: %v", routes, err)
		}
		var r struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
			Stats struct {
				Routes []struct {
					Rid  uint64 `json:"rid"`
					Name string `json:"name"`
				} `json:"routes"`
			} `json:"statsz"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		routes[r.Server.Name] = []string{}
		for _, rt := range r.Stats.Routes {
			if rt.Rid == 0 {
				t.Fatalf("%s: route without rid: %s", r.Server.Name, m.Data)
			}
			routes[r.Server.Name] = append(routes[r.Server.Name], rt.Name)
		}
	}
	if n, _, _ := jszSub.Pending(); n != 1 {
		t.Fatalf("%d answers to PING.JSZ leader_only, want the meta leader's alone", n)
	}
	for _, n := range names {
		got := routes[n]
		slices.Sort(got)
		want := slices.DeleteFunc(slices.Clone(names), func(o string) bool { return o == n })
		if !slices.Equal(got, want) {
			t.Errorf("statsz routes of %s: %v, want %v", n, got, want)
		}
	}

	// The operator's tools.
	eventually(t, "nats server check meta", func() error {
		out, errOut, err := tryCLI(t, servers[1].ClientURL(), append(sysUser, "server", "check", "meta", "--expect", "3", "--lag-critical", "100", "--seen-critical", "5s")...)
		if err != nil || !strings.HasPrefix(out, "OK ") {
			return fmt.Errorf("%v: %s%s", err, out, errOut)
		}
		return nil
	})
	eventually(t, "nats server check jetstream", func() error {
		out, errOut, err := tryCLI(t, servers[2].ClientURL(), "--user", "app", "--password", "app", "server", "check", "jetstream")
		if err != nil || !strings.HasPrefix(out, "OK ") || !strings.Contains(out, "replicas_ok=1 ") {
			return fmt.Errorf("%v: %s%s", err, out, errOut)
		}
		return nil
	})
	var ls []struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Stats struct {
			Routes []json.RawMessage `json:"routes"`
		} `json:"statsz"`
	}
	cliJSON(t, servers[0].ClientURL(), &ls, append(sysUser, "server", "ls")...)
	for _, r := range ls {
		if len(r.Stats.Routes) != 2 {
			t.Errorf("nats server ls: %s has %d routes", r.Server.Name, len(r.Stats.Routes))
		}
	}
}

// stepTo hands the leadership of a stream (consumer "") or of a consumer
// over to server to, and waits until the info through js says so.
func stepTo(t *testing.T, nc *nats.Conn, js jetstream.JetStream, stream, consumer, to string) {
	t.Helper()
	subj := "$JS.API.STREAM.LEADER.STEPDOWN." + stream
	if consumer != "" {
		subj = "$JS.API.CONSUMER.LEADER.STEPDOWN." + stream + "." + consumer
	}
	eventually(t, fmt.Sprintf("%s %s led by %s", stream, consumer, to), func() error {
		leader := ""
		if consumer == "" {
			s, err := js.Stream(ctx2(t), stream)
			if err != nil {
				return err
			}
			if ci := s.CachedInfo().Cluster; ci != nil {
				leader = ci.Leader
			}
		} else {
			c, err := js.Consumer(ctx2(t), stream, consumer)
			if err != nil {
				return err
			}
			if ci := c.CachedInfo().Cluster; ci != nil {
				leader = ci.Leader
			}
		}
		if leader == to {
			return nil
		}
		_, _ = nc.Request(subj, []byte(fmt.Sprintf(`{"placement":{"preferred":%q}}`, to)), 2*time.Second)
		return fmt.Errorf("led by %q", leader)
	})
}

// docs/monitoring.md, "Replicas and the meta group": STREAM.LIST and CONSUMER.LIST carry each stream's and
// consumer's leader's cluster part, as STREAM.INFO and CONSUMER.INFO do,
// with how long ago each replica was heard from; a follower's /jsz lists
// the replicas it knows and its consumers' cluster parts; `nats stream
// report` shows the replicas and the leader.
func TestJetStreamClusterListsShowReplicas(t *testing.T) {
	natsCLI(t)
	servers, _, mons, js := trialCluster(t, 5)
	names := []string{"n1", "n2", "n3"}
	app := connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app"))
	// The meta leader answers STREAM.LIST: the stream is led elsewhere,
	// and its consumer by a third server, which answers neither list.
	meta := metaLeaderOf(t, servers)
	mi := leaderIndex(servers, meta)
	sl, cl := servers[(mi+1)%3].Name(), servers[(mi+2)%3].Name()
	stepTo(t, app, js, "ORDERS", "", sl)
	stepTo(t, app, js, "ORDERS", "worker", cl)

	eventually(t, "the lists carry the leaders' views", func() error {
		var list struct {
			Streams []struct {
				Cluster *clusterPart `json:"cluster"`
				State   struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
			} `json:"streams"`
		}
		if err := apiGet(app, "$JS.API.STREAM.LIST", &list); err != nil {
			return err
		}
		if len(list.Streams) != 1 || list.Streams[0].State.Msgs != 5 {
			return fmt.Errorf("STREAM.LIST %+v", list)
		}
		if err := leaderView(list.Streams[0].Cluster, sl, names); err != nil {
			return fmt.Errorf("STREAM.LIST: %v", err)
		}
		var clist struct {
			Consumers []struct {
				Cluster *clusterPart `json:"cluster"`
			} `json:"consumers"`
		}
		if err := apiGet(app, "$JS.API.CONSUMER.LIST.ORDERS", &clist); err != nil {
			return err
		}
		if len(clist.Consumers) != 1 {
			return fmt.Errorf("CONSUMER.LIST %+v", clist)
		}
		if err := leaderView(clist.Consumers[0].Cluster, cl, names); err != nil {
			return fmt.Errorf("CONSUMER.LIST: %v", err)
		}
		var info struct {
			Cluster *clusterPart `json:"cluster"`
		}
		if err := apiGet(app, "$JS.API.STREAM.INFO.ORDERS", &info); err != nil {
			return err
		}
		if err := leaderView(info.Cluster, sl, names); err != nil {
			return fmt.Errorf("STREAM.INFO: %v", err)
		}
		return nil
	})

	// /jsz of the consumer's leader, a follower of the stream.
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Cluster   *clusterPart `json:"cluster"`
				Consumers []struct {
					Cluster *clusterPart `json:"cluster"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	eventually(t, "a follower's /jsz", func() error {
		_, body := httpGet(t, mons[leaderIndex(servers, cl)]+"/jsz?acc=APP&consumers=true")
		if err := json.Unmarshal(body, &jsz); err != nil {
			return err
		}
		if len(jsz.Accounts) != 1 || len(jsz.Accounts[0].Streams) != 1 || len(jsz.Accounts[0].Streams[0].Consumers) != 1 {
			return fmt.Errorf("/jsz %s", body)
		}
		sd := jsz.Accounts[0].Streams[0]
		ci := sd.Cluster
		if ci == nil || ci.Leader != sl || ci.LeaderSince != nil || len(ci.Replicas) != 2 {
			return fmt.Errorf("a follower's stream: %+v", ci)
		}
		for _, p := range ci.Replicas {
			if p.Name == cl || (p.Name == sl) != p.Current || (p.Name == sl && p.Active <= 0) {
				return fmt.Errorf("a follower's stream replicas: %+v", ci.Replicas)
			}
		}
		if err := leaderView(sd.Consumers[0].Cluster, cl, names); err != nil {
			return fmt.Errorf("the consumer's leader's consumer_detail: %v", err)
		}
		return nil
	})

	out, _ := runCLI(t, servers[0].ClientURL(), "--user", "app", "--password", "app", "stream", "report")
	row := tableRow(out, "ORDERS")
	if len(row) == 0 || !strings.Contains(row[len(row)-1], sl+"*") || strings.Count(row[len(row)-1], "n") != 3 || strings.Contains(row[len(row)-1], "!") {
		t.Fatalf("nats stream report: replicas %v in\n%s", row, out)
	}
}

// apiGet sends a $JS.API request without a body and decodes the answer.
func apiGet(nc *nats.Conn, subj string, v any) error {
	m, err := nc.Request(subj, nil, readTimeout)
	if err != nil {
		return fmt.Errorf("%s: %w", subj, err)
	}
	return json.Unmarshal(m.Data, v)
}

// metricLabels returns the label sets of the series named name in a
// Prometheus text exposition.
func metricLabels(body []byte, name string) []map[string]string {
	var out []map[string]string
	re := regexp.MustCompile(`(\w+)="([^"]*)"`)
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		labels := map[string]string{}
		for _, m := range re.FindAllStringSubmatch(l, -1) {
			labels[m[1]] = m[2]
		}
		out = append(out, labels)
	}
	return out
}

// docs/monitoring.md, "Replicas and the meta group": /metrics labels each server with the meta leader and
// whether it is that leader, each stream and consumer with whether this
// server leads it; /varz has the meta group; ha_assets counts the Raft
// groups of each server (meta, stream, consumer); the account's storage
// counts its three replicas.
func TestJetStreamClusterLeadershipReports(t *testing.T) {
	servers, _, mons, js := trialCluster(t, 4)
	meta := metaLeaderOf(t, servers)
	app := connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app"))
	stepTo(t, app, js, "ORDERS", "", servers[(leaderIndex(servers, meta)+1)%3].Name())
	s, err := js.Stream(ctx2(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	si := s.CachedInfo()
	streamLeader := si.Cluster.Leader
	for i, srv := range servers {
		_, body := httpGet(t, mons[i]+"/metrics")
		for _, l := range metricLabels(body, "jetstream_server_total_streams") {
			if l["meta_leader"] != meta || l["is_meta_leader"] != fmt.Sprint(srv.Name() == meta) || l["cluster"] != clusterName {
				t.Errorf("%s: server labels %v (meta leader %s)", srv.Name(), l, meta)
			}
		}
		streams := metricLabels(body, "jetstream_stream_total_messages")
		if len(streams) != 1 || streams[0]["stream_leader"] != streamLeader || streams[0]["is_stream_leader"] != fmt.Sprint(srv.Name() == streamLeader) ||
			streams[0]["is_meta_leader"] != fmt.Sprint(srv.Name() == meta) || !strings.HasPrefix(streams[0]["stream_raft_group"], "S-R3F-") {
			t.Errorf("%s: stream labels %v (stream leader %s)", srv.Name(), streams, streamLeader)
		}
		var varz struct {
			JetStream struct {
				Stats struct {
					HAAssets int `json:"ha_assets"`
				} `json:"stats"`
				Meta *struct {
					Name   string `json:"name"`
					Leader string `json:"leader"`
					Size   int    `json:"cluster_size"`
				} `json:"meta"`
			} `json:"jetstream"`
		}
		_, body = httpGet(t, mons[i]+"/varz")
		if err := json.Unmarshal(body, &varz); err != nil {
			t.Fatal(err)
		}
		if m := varz.JetStream.Meta; m == nil || m.Leader != meta || m.Name != clusterName || m.Size != 3 || varz.JetStream.Stats.HAAssets != 3 {
			t.Errorf("%s: /varz jetstream %+v, meta %+v", srv.Name(), varz.JetStream, varz.JetStream.Meta)
		}
		var jsz struct {
			HAAssets int `json:"ha_assets"`
			Accounts []struct {
				Store uint64 `json:"storage"`
			} `json:"account_details"`
		}
		_, body = httpGet(t, mons[i]+"/jsz?acc=APP")
		if err := json.Unmarshal(body, &jsz); err != nil {
			t.Fatal(err)
		}
		if jsz.HAAssets != 3 || len(jsz.Accounts) != 1 || jsz.Accounts[0].Store != 3*si.State.Bytes {
			t.Errorf("%s: /jsz ha_assets %d, account %+v (stream bytes %d)", srv.Name(), jsz.HAAssets, jsz.Accounts, si.State.Bytes)
		}
	}
	ai, err := js.AccountInfo(ctx2(t))
	if err != nil {
		t.Fatal(err)
	}
	if ai.Store != 3*si.State.Bytes || ai.Streams != 1 {
		t.Fatalf("account info storage %d, want three replicas of %d", ai.Store, si.State.Bytes)
	}
}

// healthTexts are the reasons /healthz may give while a restarted
// server catches up (nats-server v2.15.2's texts, and cairn's own for a
// meta replica not started yet).
var healthTexts = []string{
	"JetStream is still recovering meta layer", // replaying its meta log after the restart
	"JetStream has not established contact with a meta leader",
	"JetStream cluster waits to enter its meta group", // cairn's, after the replay and before its meta replica starts (under load)
	"JetStream is not current with the meta leader",
	"JetStream stream 'APP > ORDERS' is not current: ",
	"JetStream consumer 'APP > ORDERS > worker' is not current: ",
}

// docs/monitoring.md, "Replicas and the meta group": a server restarted far behind answers /healthz 503, with
// nats-server's reasons, until its replica of the stream has caught up:
// never 200 while it holds fewer messages than the stream has.
func TestJetStreamClusterHealthzCatchingUp(t *testing.T) {
	servers, opts, _, js := trialCluster(t, 0)
	const total = 20000
	servers[2].Shutdown()
	pub := connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app"))
	// A publish in flight while the stream's leadership moves off the
	// stopped server can go unanswered (core NATS, as with nats-server):
	// its future fails after the timeout and it is sent again under the
	// same message ID, which the stream deduplicates.
	pjs, err := jetstream.New(pub, jetstream.WithPublishAsyncMaxPending(1000), jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var batch []jetstream.PubAckFuture
	for i := 0; i < total; i++ {
		f, err := pjs.PublishAsync("orders.new", []byte("x"), jetstream.WithMsgID(strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, f)
		if (i+1)%500 == 0 { // in batches the async window holds
			select {
			case <-pjs.PublishAsyncComplete():
			case <-time.After(clusterTimeout):
				t.Fatal("publishes neither acknowledged nor timed out")
			}
			for _, f := range batch {
				select {
				case <-f.Ok():
				case <-f.Err():
					m := f.Msg()
					eventually(t, "publish again "+m.Header.Get(jetstream.MsgIDHeader), func() error {
						_, err := pjs.PublishMsg(ctx2(t), m)
						return err
					})
				}
			}
			batch = batch[:0]
		}
	}
	eventually(t, "every message stored", func() error {
		s, err := js.Stream(ctx2(t), "ORDERS")
		if err != nil {
			return err
		}
		if n := s.CachedInfo().State.Msgs; n != total {
			return fmt.Errorf("%d messages", n)
		}
		return nil
	})
	restarted := restartServer(t, opts[2])
	mon := monitored(t, restarted)
	seen := map[string]bool{}
	deadline := time.Now().Add(2 * clusterTimeout)
	for {
		code, body := httpGet(t, mon+"/healthz")
		var hs struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal(body, &hs); err != nil {
			t.Fatalf("/healthz %d %s", code, body)
		}
		_, jbody := httpGet(t, mon+"/jsz")
		var jsz struct {
			Messages uint64 `json:"messages"`
		}
		if err := json.Unmarshal(jbody, &jsz); err != nil {
			t.Fatal(err)
		}
		if code == http.StatusOK {
			if jsz.Messages != total {
				t.Fatalf("/healthz ok with %d of %d messages (reasons seen: %v)", jsz.Messages, total, seen)
			}
			break
		}
		if code != http.StatusServiceUnavailable || hs.Status != "unavailable" ||
			!slices.ContainsFunc(healthTexts, func(p string) bool { return strings.HasPrefix(hs.Error, p) }) {
			t.Fatalf("/healthz %d %s", code, body)
		}
		seen[hs.Error] = true
		if time.Now().After(deadline) {
			t.Fatalf("never healthy; last %s with %d messages", body, jsz.Messages)
		}
		time.Sleep(20 * time.Millisecond) // polling, as a probe does; the loop ends on the condition
	}
	t.Logf("reasons seen: %v", seen)
}

// docs/monitoring.md, "Replicas and the meta group": with two of the three servers stopped, the one left
// answers STREAM.INFO with what it holds (no leader; itself current, the
// others offline) and CONSUMER.INFO with 10008, as nats-server does,
// instead of leaving the client to time out; `nats stream info` works.
func TestJetStreamClusterQuorumLostInfo(t *testing.T) {
	natsCLI(t)
	servers, _, mons, _ := trialCluster(t, 3)
	last := servers[0]
	servers[1].Shutdown()
	servers[2].Shutdown()
	app := connect(t, last.ClientURL(), nats.UserInfo("app", "app"))
	eventually(t, "STREAM.INFO answered without a quorum", func() error {
		var info struct {
			Cluster *clusterPart `json:"cluster"`
			State   struct {
				Msgs uint64 `json:"messages"`
			} `json:"state"`
		}
		if err := apiGet(app, "$JS.API.STREAM.INFO.ORDERS", &info); err != nil {
			return err
		}
		ci := info.Cluster
		if ci == nil || ci.Leader != "" || len(ci.Replicas) != 3 || info.State.Msgs != 3 {
			return fmt.Errorf("info %+v cluster %+v", info, ci)
		}
		for _, p := range ci.Replicas {
			if (p.Name == last.Name()) != p.Current || (p.Name != last.Name()) != p.Offline {
				return fmt.Errorf("replicas %+v", ci.Replicas)
			}
		}
		return nil
	})
	// The consumer's group loses its leader once the leader finds it
	// has no quorum; then 10008.
	eventually(t, "CONSUMER.INFO answered 10008 without a quorum", func() error {
		m, err := app.Request("$JS.API.CONSUMER.INFO.ORDERS.worker", nil, readTimeout)
		if err != nil {
			return err
		}
		if !strings.Contains(string(m.Data), `"err_code":10008`) {
			return fmt.Errorf("%s", m.Data)
		}
		return nil
	})
	if _, errOut, err := tryCLI(t, last.ClientURL(), "--user", "app", "--password", "app", "stream", "info", "ORDERS"); err != nil {
		t.Fatalf("nats stream info: %v %s", err, errOut)
	}
	// The meta replica finds its leader gone once its beats stop for an
	// election timeout; until then /healthz names the stream's problem.
	eventually(t, "/healthz: no contact with a meta leader", func() error {
		code, body := httpGet(t, mons[0]+"/healthz")
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "JetStream has not established contact with a meta leader") {
			return fmt.Errorf("/healthz %d %s", code, body)
		}
		return nil
	})
}

// docs/monitoring.md, "Replicas and the meta group": a replica's
// `active` in stream, consumer and meta cluster info, and /raftz's
// `last_seen`, are the time since the replica was last heard from on the
// system clock, in nanoseconds as nats-server reports it, not a count of
// Raft ticks (trial 32: "seen 100ms ago", always a multiple of the
// 100 ms tick).
func TestJetStreamClusterMonitorReplicaActive(t *testing.T) {
	servers, opts, mons, js := trialCluster(t, 5)
	meta := metaLeaderOf(t, servers)
	tick := opts[0].RaftTick // the harness's (20 ms)
	if tick == 0 {
		tick = 100 * time.Millisecond
	}
	onTick := func(d time.Duration) bool { return d%tick == 0 }
	eventually(t, "replicas' active in nanoseconds", func() error {
		s, err := js.Stream(ctx2(t), "ORDERS")
		if err != nil {
			return err
		}
		c, err := js.Consumer(ctx2(t), "ORDERS", "worker")
		if err != nil {
			return err
		}
		parts := map[string]*jetstream.ClusterInfo{"stream": s.CachedInfo().Cluster, "consumer": c.CachedInfo().Cluster}
		for what, ci := range parts {
			if ci == nil || len(ci.Replicas) != 2 {
				return fmt.Errorf("%s cluster %+v", what, ci)
			}
			for _, p := range ci.Replicas {
				if p.Active <= 0 || p.Active > 5*time.Second || onTick(p.Active) {
					return fmt.Errorf("%s replica %s active %d ns", what, p.Name, p.Active)
				}
			}
		}
		for i, s := range servers {
			if s.Name() != meta {
				continue
			}
			var ji struct {
				Meta clusterPart `json:"meta_cluster"`
			}
			if _, body := httpGet(t, mons[i]+"/jsz"); json.Unmarshal(body, &ji) != nil || len(ji.Meta.Replicas) != 2 {
				return fmt.Errorf("meta leader /jsz %s", body)
			}
			for _, p := range ji.Meta.Replicas {
				if p.Active <= 0 || onTick(p.Active) {
					return fmt.Errorf("meta replica %s active %d ns", p.Name, p.Active)
				}
			}
			var rz map[string]map[string]struct {
				Peers map[string]struct {
					LastSeen string `json:"last_seen"`
				} `json:"peers"`
			}
			if _, body := httpGet(t, mons[i]+"/raftz"); json.Unmarshal(body, &rz) != nil {
				return fmt.Errorf("/raftz %s", body)
			}
			for _, g := range rz {
				for name, grp := range g {
					for id, p := range grp.Peers {
						d, err := time.ParseDuration(p.LastSeen)
						if err != nil || d <= 0 || onTick(d) {
							return fmt.Errorf("/raftz %s peer %s last_seen %q", name, id, p.LastSeen)
						}
					}
				}
			}
		}
		return nil
	})
}

// The start log names the meta group's members as this server's replica
// applied them, not its voters record, which names the servers known
// when it bootstrapped or joined (trial 32: a server invited into the
// meta group logged "meta group of [k1 k2]", its record, for a group of
// three). A fourth server joins a running cluster of three: it names
// the four once its replica is one of them; a server of the three,
// restarted, names the four at once (its record still names three).
func TestJetStreamClusterMonitorMetaMembersLog(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, nil)
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	want := "JetStream cluster: meta group of [n1 n2 n3 n4]\n"
	lines := func(b *syncBuffer) []string {
		var out []string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, "meta group of") || strings.Contains(l, "joining the meta group") {
				out = append(out, l)
			}
		}
		return out
	}

	log4 := &syncBuffer{}
	o4 := opts[0]
	o4.ServerName, o4.StoreDir, o4.Port = "n4", t.TempDir(), server.RandomPort
	o4.Cluster.Port = freePort(t)
	o4.Logger = logger.New(log4, false, false)
	servers = append(servers, restartServer(t, o4))
	waitMeta(t, servers, []string{"n1", "n2", "n3", "n4"})
	eventually(t, "the new server names the four members", func() error {
		if l := lines(log4); len(l) != 2 || !strings.Contains(l[0], "joining the meta group as a new replica") || !strings.HasSuffix(l[1]+"\n", want) {
			return fmt.Errorf("log lines %q", l)
		}
		return nil
	})

	servers[0].Shutdown()
	log1 := &syncBuffer{}
	o1 := opts[0]
	o1.Logger = logger.New(log1, false, false)
	servers[0] = restartServer(t, o1)
	eventually(t, "the restarted server names the four members", func() error {
		if l := lines(log1); len(l) != 1 || !strings.HasSuffix(l[0]+"\n", want) {
			return fmt.Errorf("log lines %q", l)
		}
		return nil
	})
}

// docs/monitoring.md, "Replicas and the meta group": /jsz counts the
// consumers running on its server (each stream's consumer_count there
// and the total), as nats-server v2.15.2's does: a durable of one
// replica counts on its server only. STREAM.INFO counts the stream's
// consumers over the cluster. Before, every server of the stream counted
// it (trial 142: `nats server report jetstream` showed 18 consumers
// where nats-server showed 12).
func TestJetStreamClusterJszCountsLocalConsumers(t *testing.T) {
	servers, _, mons, js := trialCluster(t, 2)
	eventually(t, "create ONE", func() error {
		_, err := js.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "ONE", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1})
		return err
	})
	var on string
	eventually(t, "ONE's server", func() error {
		c, err := js.Consumer(ctx2(t), "ORDERS", "ONE")
		if err != nil {
			return err
		}
		ci := c.CachedInfo()
		if ci.Cluster == nil || ci.Cluster.Leader == "" {
			return fmt.Errorf("ONE's cluster %+v", ci.Cluster)
		}
		on = ci.Cluster.Leader
		return nil
	})
	for i, srv := range servers {
		want := 1 // worker, of three replicas
		if srv.Name() == on {
			want = 2
		}
		eventually(t, srv.Name()+"'s /jsz", func() error {
			var jsz struct {
				Consumers int `json:"consumers"`
				Accounts  []struct {
					Streams []struct {
						State struct {
							Consumers int `json:"consumer_count"`
						} `json:"state"`
					} `json:"stream_detail"`
				} `json:"account_details"`
			}
			_, body := httpGet(t, mons[i]+"/jsz?acc=APP&streams=true")
			if err := json.Unmarshal(body, &jsz); err != nil {
				return err
			}
			if jsz.Consumers != want || len(jsz.Accounts) != 1 || len(jsz.Accounts[0].Streams) != 1 || jsz.Accounts[0].Streams[0].State.Consumers != want {
				return fmt.Errorf("consumers %d, want %d (ONE on %s): %s", jsz.Consumers, want, on, body)
			}
			return nil
		})
	}
	s, err := js.Stream(ctx2(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Consumers; n != 2 {
		t.Fatalf("STREAM.INFO consumer_count %d, want 2 (over the cluster)", n)
	}
}
