package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The operator's trial as a differential test: three cairn binaries and
// three nats-server v2.15.2 binaries, each trio started from the same
// configuration files (JetStream, a cluster, the system account SYS
// with sys/sys, the account APP with JetStream), the R3 file stream
// ORDERS with 20 messages and a durable consumer; then the key sets of
// what operators' tools read are compared, and the values that must agree
// (docs/monitoring.md, "Replicas and the meta group").

// trio is one implementation's three servers.
type trio struct {
	name    string
	clients []string // nats://127.0.0.1:<port>
	mons    []string // http://127.0.0.1:<port>
	names   []string
	procs   []*proc
}

// startTrio starts bin three times from the trial's configuration files.
func startTrio(t *testing.T, name, bin string) *trio {
	t.Helper()
	dir := t.TempDir()
	tr := &trio{name: name}
	var clusterPorts []int
	for range 3 {
		clusterPorts = append(clusterPorts, freePort(t))
	}
	var routes []string
	for _, p := range clusterPorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	for i := range 3 {
		cp, hp := freePort(t), freePort(t)
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster {
  name: C1
  listen: 127.0.0.1:%d
  routes: [%s]
}
accounts {
  SYS { users: [{user: sys, password: sys}] }
  APP { jetstream: enabled, users: [{user: app, password: app}] }
}
system_account: SYS
`, i+1, cp, hp, filepath.Join(dir, fmt.Sprintf("d%d", i+1)), clusterPorts[i], strings.Join(routes, ", "))
		path := filepath.Join(dir, fmt.Sprintf("n%d.conf", i+1))
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		tr.procs = append(tr.procs, startProc(t, bin, nil, "-c", path))
		tr.clients = append(tr.clients, fmt.Sprintf("nats://127.0.0.1:%d", cp))
		tr.mons = append(tr.mons, fmt.Sprintf("http://127.0.0.1:%d", hp))
		tr.names = append(tr.names, fmt.Sprintf("n%d", i+1))
	}
	t.Cleanup(func() { tr.logOnFailure(t) })
	return tr
}

// logOnFailure logs the end of each server's output when the test failed,
// so that a wait that timed out in CI shows what the servers went through.
func (tr *trio) logOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	for i, p := range tr.procs {
		lines := strings.Split(p.log.String(), "\n")
		t.Logf("%s %s, last %d lines:\n%s", tr.name, tr.names[i], min(len(lines), 80), strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
}

// metaLeader returns the index of the server leading the meta group, as
// each /jsz says.
func (tr *trio) metaLeader(t *testing.T) int {
	t.Helper()
	leader := -1
	// Three processes started one after another on a loaded machine: the
	// routes and the meta group's first election may take longer than the
	// usual convergence (clusterTimeout).
	eventuallyWithin(t, 3*clusterTimeout, tr.name+": a meta leader", func() error {
		for i, m := range tr.mons {
			var ji struct {
				Meta *struct {
					Leader string `json:"leader"`
				} `json:"meta_cluster"`
			}
			_, body := httpGet(t, m+"/jsz")
			if json.Unmarshal(body, &ji) != nil || ji.Meta == nil || ji.Meta.Leader == "" {
				return fmt.Errorf("n%d: %s", i+1, body)
			}
			leader = slices.Index(tr.names, ji.Meta.Leader)
		}
		return nil
	})
	return leader
}

// populate makes ORDERS with 20 messages and the consumer worker.
func (tr *trio) populate(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(connect(t, tr.clients[0], nats.UserInfo("app", "app")))
	if err != nil {
		t.Fatal(err)
	}
	tr.metaLeader(t)
	eventually(t, tr.name+": create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= 20; i++ {
		clusterPublish(t, js, fmt.Sprintf("orders.%d", i), uint64(i))
	}
	eventually(t, tr.name+": create worker", func() error {
		_, err := js.CreateOrUpdateConsumer(ctx2(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	return js
}

// clusterKeyDiffs are the documented differences of the compared key
// sets (docs/compatibility.md), matched at the end of a difference.
var clusterKeyDiffs = map[string]string{
	// nats-server's dedicated route of the system account (its pinned
	// accounts, cluster { accounts }); cairn has one route per peer for
	// every account, nats-server's pool_size -1, under which nats-server
	// names no account either (docs/compatibility.md, "Route connections
	// per peer").
	"-$.routes[].account": "one route per peer",
}

// clusterDiff compares two key sets and fails on each difference that
// is neither documented here nor among the single-server endpoints'
// documented differences (monitorKeyDiffs, sysKeyDiffs).
func clusterDiff(t *testing.T, what string, cairn, ns map[string]bool, seen map[string]bool) {
	t.Helper()
	for _, d := range monKeyDiff(what, cairn, ns) {
		i := max(strings.LastIndex(d, " +$"), strings.LastIndex(d, " -$"))
		signed := d[i+1:]
		if strings.HasSuffix(signed, ".leader_since") || strings.HasSuffix(signed, ".peers.PEER.last_replicated_index") {
			continue // which server leads a stream or a consumer differs between the two clusters (/raftz: a leader's only)
		}
		if strings.HasSuffix(signed, ".voted_for") || strings.HasSuffix(signed, ".catching_up") {
			// /raftz, omitempty in both: a replica that learned its
			// leader without voting in its term has no vote, one behind
			// for a moment catches up.
			continue
		}
		if strings.HasSuffix(signed, ".meta.snapshot.last_duration") || strings.HasSuffix(signed, ".meta_cluster.snapshot.last_duration") {
			// omitempty in both: present once the server wrote a
			// checkpoint of its meta group (cairn: every 30 s while it
			// changes, or a snapshot installed from the leader at the
			// join; nats-server: a meta snapshot of its own).
			continue
		}
		if strings.HasSuffix(signed, ".replicas[].lag") || strings.HasSuffix(signed, ".replicas[].offline") {
			// omitempty in both (nats-server v2.15.2 PeerInfo): present
			// only while a replica lags or is unreachable, for a moment
			// in either cluster.
			continue
		}
		if p, ok := clusterDiffDocumented(signed); ok {
			seen[p] = true
			continue
		}
		if ok, _ := sysKeyDiffAllowed(d); ok {
			continue
		}
		if monDiffDocumented(signed) {
			continue
		}
		t.Errorf("%s", d)
	}
}

// clusterDiffDocumented returns the entry of clusterKeyDiffs a signed
// path is, or is under.
func clusterDiffDocumented(signed string) (string, bool) {
	for p := range clusterKeyDiffs {
		if signed == p || strings.HasPrefix(signed, p+".") {
			return p, true
		}
	}
	return "", false
}

// monDiffDocumented reports whether a signed path is among the HTTP
// endpoints' documented differences (monitorKeyDiffs), whatever the
// endpoint.
func monDiffDocumented(signed string) bool {
	for k := range monitorKeyDiffs {
		if strings.HasSuffix(k, " "+signed) {
			return true
		}
	}
	return false
}

// raftzShape returns a /raftz answer with its data keys replaced, so
// that key sets compare: each account becomes "ACC", each group its kind
// ("_meta_", "S", "C") and each peer "PEER"; not JSON: fails.
func raftzShape(t *testing.T, b []byte) []byte {
	t.Helper()
	var rz map[string]map[string]map[string]any
	if err := json.Unmarshal(b, &rz); err != nil {
		t.Fatalf("/raftz: %v in %s", err, b)
	}
	out := map[string]map[string]map[string]any{}
	for _, groups := range rz {
		if out["ACC"] == nil {
			out["ACC"] = map[string]map[string]any{}
		}
		for name, g := range groups {
			kind := name
			if i := strings.Index(name, "-"); i > 0 {
				kind = name[:i]
			}
			if peers, ok := g["peers"].(map[string]any); ok {
				merged := map[string]any{}
				for _, p := range peers {
					for k, v := range p.(map[string]any) {
						merged[k] = v
					}
				}
				g["peers"] = map[string]any{"PEER": merged}
			}
			out["ACC"][kind] = g
		}
	}
	nb, _ := json.Marshal(out)
	return nb
}

func keysOf(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	keys := map[string]bool{}
	monWalk(v, "$", keys)
	return keys
}

// TestJetStreamClusterMonitorDifferential compares what a three-server
// cairn cluster and a three-server nats-server cluster report to
// operators' tools, started from the same files.
func TestJetStreamClusterMonitorDifferential(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("compares cairn with nats-server itself")
	}
	diffRequireNatsServer(t)
	trios := []*trio{startTrio(t, "cairn", buildCairn(t)), startTrio(t, "nats-server", natsServerBinary(t))}
	type view struct{ bodies map[string][]byte }
	views := make([]view, 2)
	for i, tr := range trios {
		js := tr.populate(t)
		leader := tr.metaLeader(t)
		follower := (leader + 1) % 3
		bodies := map[string][]byte{}
		// A follower's leader-only refusal, exactly.
		code, body := httpGet(t, tr.mons[follower]+"/jsz?leader-only=true")
		bodies["leader-only status"] = []byte(fmt.Sprint(code))
		bodies["leader-only body"] = body
		eventually(t, tr.name+": healthy and settled", func() error {
			for j, m := range tr.mons {
				if code, body := httpGet(t, m+"/healthz"); code != http.StatusOK {
					return fmt.Errorf("n%d /healthz %d %s", j+1, code, body)
				}
			}
			s, err := js.Stream(ctx2(t), "ORDERS")
			if err != nil {
				return err
			}
			if ci := s.CachedInfo().Cluster; ci == nil || len(ci.Replicas) != 2 || !ci.Replicas[0].Current || !ci.Replicas[1].Current {
				return fmt.Errorf("stream cluster %+v", ci)
			}
			return nil
		})
		for _, ep := range []string{"/jsz?accounts=true&streams=true&consumers=true&config=true", "/varz", "/routez", "/routez?subs=detail"} {
			_, bodies["leader "+ep] = httpGet(t, tr.mons[leader]+ep)
			_, bodies["follower "+ep] = httpGet(t, tr.mons[follower]+ep)
		}
		app := connect(t, tr.clients[follower], nats.UserInfo("app", "app"))
		for _, subj := range []string{"$JS.API.INFO", "$JS.API.STREAM.LIST", "$JS.API.STREAM.INFO.ORDERS", "$JS.API.CONSUMER.LIST.ORDERS", "$JS.API.CONSUMER.INFO.ORDERS.worker"} {
			m, err := app.Request(subj, nil, readTimeout)
			if err != nil {
				t.Fatalf("%s %s: %v", tr.name, subj, err)
			}
			bodies[subj] = m.Data
		}
		for _, ep := range []string{"/raftz", "/raftz?acc=APP"} {
			_, b := httpGet(t, tr.mons[leader]+ep)
			bodies["leader "+ep] = raftzShape(t, b)
			_, b = httpGet(t, tr.mons[follower]+ep)
			bodies["follower "+ep] = raftzShape(t, b)
		}
		sys := connect(t, tr.clients[0], nats.UserInfo("sys", "sys"))
		for _, n := range []int{leader, follower} {
			for _, acc := range []string{"", "APP"} {
				// nats server request raft [--account APP]
				body := fmt.Sprintf(`{"server_name":%q,"exact_match":true,"account":%q}`, tr.names[n], acc)
				m, err := sys.Request("$SYS.REQ.SERVER.PING.RAFTZ", []byte(body), readTimeout)
				if err != nil {
					t.Fatalf("%s RAFTZ %s: %v", tr.name, body, err)
				}
				var env struct {
					Data json.RawMessage `json:"data"`
				}
				if err := json.Unmarshal(m.Data, &env); err != nil {
					t.Fatal(err)
				}
				bodies[fmt.Sprintf("RAFTZ leader=%v acc=%s", n == leader, acc)] = raftzShape(t, env.Data)
			}
		}
		for _, n := range []int{leader, follower} {
			m, err := sys.Request("$SYS.REQ.SERVER.PING.STATSZ", []byte(fmt.Sprintf(`{"server_name":%q,"exact_match":true}`, tr.names[n])), readTimeout)
			if err != nil {
				t.Fatalf("%s statsz of %s: %v", tr.name, tr.names[n], err)
			}
			role := "leader"
			if n == follower {
				role = "follower"
			}
			bodies[role+" statsz"] = m.Data
		}
		views[i] = view{bodies}
	}

	seen := map[string]bool{}
	c, ns := views[0].bodies, views[1].bodies
	for _, k := range []string{"leader-only status", "leader-only body"} {
		if string(c[k]) != string(ns[k]) {
			t.Errorf("%s: cairn %q, nats-server %q", k, c[k], ns[k])
		}
	}
	for k := range ns {
		if strings.HasPrefix(k, "leader-only") {
			continue
		}
		clusterDiff(t, k, keysOf(t, c[k]), keysOf(t, ns[k]), seen)
	}
	for p := range clusterKeyDiffs {
		if !seen[p] {
			t.Errorf("clusterKeyDiffs entry %q matched no difference: remove it", p)
		}
	}

	// The values both report alike.
	for i, tr := range trios {
		b := views[i].bodies
		app := connect(t, tr.clients[0], nats.UserInfo("app", "app"))
		eventually(t, tr.name+": account storage over three replicas", func() error {
			var info struct {
				Store   uint64 `json:"storage"`
				Streams int    `json:"streams"`
			}
			var si struct {
				State struct {
					Bytes uint64 `json:"bytes"`
				} `json:"state"`
			}
			if err := apiGet(app, "$JS.API.INFO", &info); err != nil {
				return err
			}
			if err := apiGet(app, "$JS.API.STREAM.INFO.ORDERS", &si); err != nil {
				return err
			}
			if info.Store != 3*si.State.Bytes || info.Streams != 1 {
				return fmt.Errorf("storage %d for a stream of %d bytes", info.Store, si.State.Bytes)
			}
			return nil
		})
		for _, role := range []string{"leader", "follower"} {
			var st struct {
				Stats struct {
					Routes    []json.RawMessage `json:"routes"`
					JetStream struct {
						Stats struct {
							HAAssets int `json:"ha_assets"`
						} `json:"stats"`
						Meta *struct {
							Name     string            `json:"name"`
							Replicas []json.RawMessage `json:"replicas"`
						} `json:"meta"`
					} `json:"jetstream"`
				} `json:"statsz"`
			}
			if err := json.Unmarshal(b[role+" statsz"], &st); err != nil {
				t.Fatal(err)
			}
			js := st.Stats.JetStream
			if len(st.Stats.Routes) == 0 || js.Stats.HAAssets != 3 || js.Meta == nil {
				t.Errorf("%s %s statsz: %d routes, ha_assets %d, meta %+v", tr.name, role, len(st.Stats.Routes), js.Stats.HAAssets, js.Meta)
				continue
			}
			if wantName := map[string]string{"leader": "C1", "follower": "_meta_"}[role]; js.Meta.Name != wantName || (role == "leader") != (len(js.Meta.Replicas) == 2) {
				t.Errorf("%s %s statsz meta: %q with %d replicas", tr.name, role, js.Meta.Name, len(js.Meta.Replicas))
			}
		}
	}
}
