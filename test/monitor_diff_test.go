package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

// TestMonitorDifferential starts cairn and nats-server v2.15.2 side by
// side with monitoring on, gives both the same clients, streams and
// consumers, then requests every monitoring endpoint with the options
// operators and tools use, and compares the answers: the HTTP status and
// the set of JSON keys, recursively (array elements merged, the keys of
// maps whose keys are data, such as http_req_stats, not compared). Values
// are each server's own.
//
// Every key nats-server returns must be in cairn's answer and cairn must
// return no key nats-server does not, except the differences listed in
// monitorKeyDiffs, each a row of docs/compatibility.md or
// docs/monitoring.md; an entry that no longer matches fails the test too.
// Like TestDifferential it needs the nats-server binary (skipped without
// it unless CAIRN_REQUIRE_CLI=1).
func TestMonitorDifferential(t *testing.T) {
	diffRequireNatsServer(t)
	opts := server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, ServerName: "mon"}
	co, no := opts, opts
	co.StoreDir = filepath.Join(t.TempDir(), "cairn")
	no.StoreDir = filepath.Join(t.TempDir(), "nats-server")
	cs, cairnMon := startCairnServer(t, co)
	cairnURL := cs.ClientURL()
	ports, _ := startNatsServerExtra(t, no, "http_port: -1\n")
	if len(ports.Monitoring) == 0 {
		t.Fatal("nats-server wrote no monitoring URL in its ports file")
	}
	sides := []*monSide{{name: "cairn", url: cairnURL, mon: cairnMon}, {name: "nats-server", url: ports.Nats[0], mon: ports.Monitoring[0]}}
	for _, s := range sides {
		monPopulate(t, s)
	}

	seen := map[string]bool{}
	for _, ep := range monitorEndpoints {
		var keys [2]map[string]bool
		var codes [2]int
		for i, s := range sides {
			codes[i], keys[i] = monKeys(t, s.mon+strings.ReplaceAll(ep, "{cid}", s.cid))
		}
		if codes[0] != codes[1] {
			t.Errorf("%s: status %d from cairn, %d from nats-server", ep, codes[0], codes[1])
		}
		for _, d := range monKeyDiff(ep, keys[0], keys[1]) {
			if _, ok := monitorKeyDiffs[d]; ok {
				seen[d] = true
				continue
			}
			t.Errorf("%s (not in monitorKeyDiffs)", d)
		}
	}
	for d := range monitorKeyDiffs {
		if !seen[d] {
			t.Errorf("monitorKeyDiffs entry %q matched no difference: remove it", d)
		}
	}
}

// monitorEndpoints are the requests compared: every endpoint, with the
// options prometheus-nats-exporter, KEDA, nats-top, the Helm chart's
// probes and dashboards send, and bad ones.
var monitorEndpoints = []string{
	"/varz",
	"/connz", "/connz?subs=true", "/connz?subs=detail&auth=true", "/connz?state=closed",
	"/connz?state=all&sort=bytes_to&limit=5&offset=0", "/connz?state=closed&sort=reason", "/connz?cid={cid}", "/connz?state=closed&subs=detail",
	"/connz?sort=stop", "/connz?sort=nope", "/connz?limit=x", "/connz?state=nope", "/connz?subs=maybe",
	"/connz?offset=99999999999&limit=99999999999",
	"/routez", "/routez?subs=detail",
	"/subsz", "/subsz?subs=true", "/subscriptionsz?subs=1&test=x.y", "/subsz?test=x.*", "/subsz?limit=1e3",
	"/jsz", "/jsz?accounts=true", "/jsz?streams=true", "/jsz?consumers=true&config=true",
	"/jsz?accounts=true&streams=true&consumers=true&config=true&raft=true", "/jsz?acc=$G&streams=true",
	"/jsz?leader-only=true", "/jsz?offset=5&accounts=true", "/jsz?streams=yes",
	"/healthz", "/healthz?details=true", "/healthz?js-enabled-only=true", "/healthz?js-server-only=true",
	"/healthz?account=$G&stream=S", "/healthz?account=$G&stream=S&consumer=C", "/healthz?account=$G&stream=NOPE",
	"/healthz?stream=S", "/healthz?stream=S&details=true", "/healthz?account=$G&stream=S&consumer=NOPE&details=true",
	"/accountz", "/accountz?acc=$G", "/accstatz", "/accstatz?unused=true",
	"/leafz", "/leafz?subs=true", "/gatewayz", "/gatewayz?accs=true",
	"/raftz", "/raftz?acc=$G&group=x",
}

// monitorKeyDiffs are the documented differences of key sets: "<request>
// <+|-><path>", + for a key only cairn returns, - for one only
// nats-server returns.
var monitorKeyDiffs = map[string]string{
	// docs/compatibility.md: cairn's PubAck follows the fsync, as
	// nats-server's with sync_interval: always, which reports
	// sync_always too (sync_interval, strict, limits and feature_flags
	// have nats-server's keys).
	"/varz +$.jetstream.config.sync_always": "sync policy",
}

func init() {
	for _, ep := range []string{"/jsz", "/jsz?accounts=true", "/jsz?streams=true", "/jsz?consumers=true&config=true",
		"/jsz?accounts=true&streams=true&consumers=true&config=true&raft=true", "/jsz?acc=$G&streams=true",
		"/jsz?leader-only=true", "/jsz?offset=5&accounts=true"} {
		monitorKeyDiffs[ep+" +$.config.sync_always"] = "sync policy"
	}
}

type monSide struct {
	name, url, mon string
	cid            string // the connection id of the client that stays
}

// monPopulate gives a server a stream with messages and a consumer, a
// client with plain and queue subscriptions that stays connected, and a
// client that closed.
func monPopulate(t *testing.T, s *monSide) {
	t.Helper()
	nc := connect(t, s.url, nats.Name("mon-stays"))
	subSync(t, nc, "x.>")
	if _, err := nc.QueueSubscribeSync("x.y", "q"); err != nil {
		t.Fatal(err)
	}
	flush(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"a.>"}}); err != nil {
		t.Fatalf("%s: create stream: %v", s.name, err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatalf("%s: create consumer: %v", s.name, err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "a.b", []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("%s: publish: %v", s.name, err)
		}
	}
	if id, err := nc.GetClientID(); err == nil {
		s.cid = fmt.Sprint(id)
	}
	gone := connect(t, s.url, nats.Name("mon-gone"))
	subSync(t, gone, "z")
	flush(t, gone)
	gone.Close()
	waitFor(t, readTimeout, s.name+" to list the closed connection", func() bool {
		_, body := monGet(t, s.mon+"/connz?state=closed")
		var cz struct {
			Total int `json:"total"`
		}
		return json.Unmarshal(body, &cz) == nil && cz.Total >= 1
	})
}

// monGet fetches a monitoring URL.
func monGet(t *testing.T, u string) (int, []byte) {
	t.Helper()
	c := http.Client{Timeout: readTimeout}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, b
}

// monKeys fetches u and returns its status and the key paths of its JSON
// body (none for a body that is not a JSON object, such as a 400's text).
func monKeys(t *testing.T, u string) (int, map[string]bool) {
	code, body := monGet(t, u)
	keys := map[string]bool{}
	var v any
	if json.Unmarshal(body, &v) == nil {
		monWalk(v, "$", keys)
	}
	return code, keys
}

// dataMaps are objects whose keys are data (paths, subjects, flags), not
// fields: only their presence is compared.
var dataMaps = map[string]bool{"http_req_stats": true, "metadata": true, "feature_flags": true, "subjects": true, "tiers": true}

func monWalk(v any, path string, keys map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			p := path + "." + k
			keys[p] = true
			if !dataMaps[k] {
				monWalk(child, p, keys)
			}
		}
	case []any:
		for _, child := range x {
			monWalk(child, path+"[]", keys)
		}
	}
}

// monKeyDiff lists the paths only one side has, as "<ep> +<path>" (cairn
// only) or "<ep> -<path>" (nats-server only), sorted.
func monKeyDiff(ep string, cairn, ns map[string]bool) []string {
	var out []string
	for k := range cairn {
		if !ns[k] {
			out = append(out, ep+" +"+k)
		}
	}
	for k := range ns {
		if !cairn[k] {
			out = append(out, ep+" -"+k)
		}
	}
	sort.Strings(out)
	return out
}

// TestMonitorDifferentialRoutes compares /routez and the cluster part of
// /varz between two routed cairn servers and two routed nats-servers, as
// TestMonitorDifferential compares the rest.
func TestMonitorDifferentialRoutes(t *testing.T) {
	diffRequireNatsServer(t)
	base := server.Options{Host: "127.0.0.1", Port: -1, Cluster: server.ClusterOptions{Host: "127.0.0.1", Port: -1, Name: "MON"}}
	var cairnMon, natsMon string
	var cairnURL, natsURL string
	{ // cairn: b routes to a
		a := base
		a.ServerName = "a"
		sa, _ := startCairnServer(t, a)
		monSubscriber(t, sa.ClientURL())
		b := base
		b.ServerName = "b"
		b.Cluster.Routes = []*url.URL{{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", sa.ClusterAddr().Port)}}
		sb, mb := startCairnServer(t, b)
		cairnURL, cairnMon = sb.ClientURL(), mb
	}
	{ // nats-server: b routes to a
		a := base
		a.ServerName = "a"
		pa, _ := startNatsServerExtra(t, a, "")
		monSubscriber(t, pa.Nats[0])
		b := base
		b.ServerName = "b"
		u, err := url.Parse(pa.Cluster[0])
		if err != nil {
			t.Fatal(err)
		}
		b.Cluster.Routes = []*url.URL{u}
		pb, _ := startNatsServerExtra(t, b, "http_port: -1\n")
		natsURL, natsMon = pb.Nats[0], pb.Monitoring[0]
	}
	sides := []*monSide{{name: "cairn", url: cairnURL, mon: cairnMon}, {name: "nats-server", url: natsURL, mon: natsMon}}
	for _, s := range sides {
		nc := connect(t, s.url)
		subSync(t, nc, "r.>")
		flush(t, nc)
		waitFor(t, clusterTimeout, s.name+" to list its route", func() bool {
			_, body := monGet(t, s.mon+"/routez")
			var rz struct {
				NumRoutes int `json:"num_routes"`
			}
			var rz2 struct {
				Routes []struct {
					Subs int `json:"subscriptions"`
				} `json:"routes"`
			}
			if json.Unmarshal(body, &rz) != nil || rz.NumRoutes < 1 || json.Unmarshal(body, &rz2) != nil {
				return false // nats-server pools 3 routes (+1 for $SYS), cairn has one
			}
			for _, r := range rz2.Routes {
				if r.Subs > 0 {
					return true // the peer's interest arrived
				}
			}
			return false
		})
	}
	for _, ep := range []string{"/routez", "/routez?subs=true", "/routez?subs=detail", "/varz"} {
		var keys [2]map[string]bool
		for i, s := range sides {
			_, keys[i] = monKeys(t, s.mon+ep)
		}
		for _, d := range monKeyDiff(ep, keys[0], keys[1]) {
			if _, ok := routeKeyDiffs[d]; !ok && monitorKeyDiffs[d] == "" {
				t.Errorf("%s (not in routeKeyDiffs)", d)
			}
		}
	}
}

// routeKeyDiffs are the documented differences of the routed servers'
// key sets (docs/monitoring.md).
var routeKeyDiffs = map[string]string{
	// One route per peer: nats-server's dedicated route for its system
	// account names the account (docs/compatibility.md "Route connections
	// per peer").
	"/routez -$.routes[].account":             "one route per peer",
	"/routez?subs=true -$.routes[].account":   "one route per peer",
	"/routez?subs=detail -$.routes[].account": "one route per peer",
}

// startCairnServer starts cairn in-process with monitoring on a free port
// and returns it and its monitoring URL.
func startCairnServer(t *testing.T, opts server.Options) (*server.Server, string) {
	t.Helper()
	s, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: -1, Server: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ServeSystemRequests(); err != nil && !errors.Is(err, server.ErrNoSystemAccount) {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Shutdown() })
	return s, m.URL()
}

// monSubscriber connects a client to u with a plain and a queue
// subscription, so that its server's routes carry interest.
func monSubscriber(t *testing.T, u string) {
	nc := connect(t, u)
	subSync(t, nc, "peer.>")
	if _, err := nc.QueueSubscribeSync("peer.q", "workers"); err != nil {
		t.Fatal(err)
	}
	flush(t, nc)
}

// The exporter's generic rule gives each number of nats-server's /varz a
// metric name (gnatsd_varz_<path joined by _>); cairn's /metrics has every
// one of them, except the documented absent keys, so dashboards built on
// nats-server's names find cairn's series.
func TestMetricsNamesCoverNatsServerVarz(t *testing.T) {
	diffRequireNatsServer(t)
	opts := server.Options{Host: "127.0.0.1", Port: -1, JetStream: true}
	co, no := opts, opts
	co.StoreDir = filepath.Join(t.TempDir(), "cairn")
	no.StoreDir = filepath.Join(t.TempDir(), "nats-server")
	_, cairnMon := startCairnServer(t, co)
	ports, _ := startNatsServerExtra(t, no, "http_port: -1\n")
	_, body := monGet(t, ports.Monitoring[0]+"/varz")
	var varz map[string]any
	if err := json.Unmarshal(body, &varz); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	exporterNames("gnatsd_varz", varz, nil, want)
	if len(want) < 40 {
		t.Fatalf("only %d names from nats-server's /varz: %v", len(want), want)
	}
	_, text := monGet(t, cairnMon+"/metrics")
	have := map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		if name, _, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			name, _, _ = strings.Cut(name, "{")
			have[name] = true
		}
	}
	for name, path := range want {
		if !have[name] && monitorKeyDiffs["/varz -$."+path] == "" {
			t.Errorf("%s (from nats-server's /varz %s) is not in cairn's /metrics", name, path)
		}
	}
}

// exporterNames applies prometheus-nats-exporter's generic rule to obj:
// numbers at any depth of objects become <base>_<keys joined by _>, with
// "/" turned into "_" and no doubled "_" (collector.go fqName), skipping
// the exporter's skip list. It records name -> JSON path (a.b.c).
func exporterNames(base string, obj map[string]any, path []string, out map[string]string) {
	skip := map[string]bool{"leaf": true, "cluster_tls_timeout": true, "cluster_cluster_port": true, "cluster_auth_timeout": true,
		"gateway_port": true, "gateway_auth_timeout": true, "gateway_tls_timeout": true, "gateway_connect_retries": true}
	for k, v := range obj {
		p := append(append([]string(nil), path...), k)
		fqn := strings.Trim(strings.ReplaceAll(strings.Join(p, "_"), "/", "_"), "_")
		for strings.Contains(fqn, "__") {
			fqn = strings.ReplaceAll(fqn, "__", "_")
		}
		if skip[fqn] {
			continue
		}
		switch x := v.(type) {
		case float64:
			out[base+"_"+fqn] = strings.Join(p, ".")
		case map[string]any:
			if k != "http_req_stats" { // its keys are the paths requested
				exporterNames(base, x, p, out)
			}
		}
	}
}
