package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

// The system account (docs/monitoring.md "The system account's request
// API"): its users send $SYS.REQ.SERVER.* requests, which `nats server
// ls|info|report|check|ping` are made of, and cairn answers them as
// nats-server v2.15.2 does. Every test here runs one configuration file
// against cairn and nats-server (secTargets) and expects the same.

// sysConf is a server with a system account SYS (user sys), and two
// accounts with JetStream, APP and OPS, each with a user of its name.
func sysConf(t *testing.T) string {
	return fmt.Sprintf(`server_name: sysa
http_port: -1
jetstream { store_dir: %q }
accounts {
  SYS { users [{user: sys, password: sys}] }
  APP { jetstream: enabled, users [{user: app, password: app}] }
  OPS { jetstream: enabled, users [{user: ops, password: ops}] }
}
system_account: SYS
`, t.TempDir())
}

// sysUser is the nats CLI's system account credentials.
var sysUser = []string{"--user", "sys", "--password", "sys"}

// sysPopulate gives APP a file stream S (a.>) with 3 messages and a
// consumer C; OPS a file stream of the same name S (o.>) with 2 messages
// and a consumer D, and a memory stream M (m.>) with 1 message: two
// accounts, a stream name in both, both storage types.
func sysPopulate(t *testing.T, u string) {
	t.Helper()
	for _, a := range []struct {
		user, stream, subj string
		storage            jetstream.StorageType
		consumer           string
		msgs               int
	}{
		{"app", "S", "a.>", jetstream.FileStorage, "C", 3},
		{"ops", "S", "o.>", jetstream.FileStorage, "D", 2},
		{"ops", "M", "m.>", jetstream.MemoryStorage, "", 1},
	} {
		nc := connect(t, u, nats.UserInfo(a.user, a.user))
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: a.stream, Subjects: []string{a.subj}, Storage: a.storage}); err != nil {
			t.Fatalf("%s: create stream: %v", a.user, err)
		}
		if a.consumer != "" {
			if _, err := js.CreateOrUpdateConsumer(ctx, a.stream, jetstream.ConsumerConfig{Durable: a.consumer, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				t.Fatalf("%s: create consumer: %v", a.user, err)
			}
		}
		for i := range a.msgs {
			if _, err := js.Publish(ctx, strings.TrimSuffix(a.subj, ">")+"x", []byte(fmt.Sprint(i))); err != nil {
				t.Fatalf("%s: publish: %v", a.user, err)
			}
		}
		cancel()
		nc.Close()
	}
}

// `nats server ls|info|ping|report jetstream|check` as a system account
// user, and `nats server check jetstream` as an account's user, give the
// same answers from cairn and nats-server; an account without system
// privileges gets the CLI's "ensure the account used has system
// privileges" from both.
func TestSystemAccountCLI(t *testing.T) {
	natsCLI(t)
	forEach(t, secTargets(t, sysConf(t), nil), func(t *testing.T, tg secTarget) {
		sysPopulate(t, tg.url)

		var ls []struct {
			Server struct {
				Name      string `json:"name"`
				ID        string `json:"id"`
				JetStream bool   `json:"jetstream"`
			} `json:"server"`
			Statsz struct {
				Connections int `json:"connections"`
				JetStream   *struct {
					Stats struct {
						Accounts int `json:"accounts"`
					} `json:"stats"`
				} `json:"jetstream"`
			} `json:"statsz"`
		}
		cliJSON(t, tg.url, &ls, append(sysUser, "server", "ls")...)
		if len(ls) != 1 || ls[0].Server.Name != "sysa" || !ls[0].Server.JetStream || len(ls[0].Server.ID) != 56 {
			t.Fatalf("server ls: %+v", ls)
		}
		if js := ls[0].Statsz.JetStream; js == nil || js.Stats.Accounts != 2 {
			t.Fatalf("server ls: statsz.jetstream %+v, want the 2 accounts with JetStream", js)
		}

		out, _ := runCLI(t, tg.url, append(sysUser, "server", "info", "sysa")...)
		for _, want := range []string{"Server information for sysa", "Auth Required: true", "Storage Directory:", "Active Accounts: 2"} {
			if !strings.Contains(out, want) {
				t.Errorf("server info: no %q in\n%s", want, out)
			}
		}
		out, _ = runCLI(t, tg.url, append(sysUser, "server", "info", ls[0].Server.ID)...)
		if !strings.Contains(out, "Server information for sysa") {
			t.Errorf("server info <id>:\n%s", out)
		}

		out, _ = runCLI(t, tg.url, append(sysUser, "server", "ping", "1")...)
		if !strings.Contains(out, "1 replies") {
			t.Errorf("server ping:\n%s", out)
		}

		// The JetStream summary: streams, consumers and messages of both
		// accounts, or of the one asked for.
		for _, tc := range []struct {
			args []string
			want [3]string
		}{
			{nil, [3]string{"3", "2", "6"}},
			{[]string{"--account", "OPS"}, [3]string{"2", "1", "3"}},
			{[]string{"--account", "APP"}, [3]string{"1", "1", "3"}},
		} {
			out, _ = runCLI(t, tg.url, append(append(sysUser, "server", "report", "jetstream"), tc.args...)...)
			row := tableRow(out, "sysa")
			if len(row) < 5 || [3]string{row[2], row[3], row[4]} != tc.want {
				t.Errorf("server report jetstream %v: row %q, want streams, consumers, messages %v\n%s", tc.args, row, tc.want, out)
			}
		}

		for _, user := range []string{"app", "ops"} {
			out, _ = runCLI(t, tg.url, "--user", user, "--password", user, "server", "check", "jetstream")
			streams := map[string]string{"app": " streams=1 ", "ops": " streams=2 "}[user]
			if !strings.HasPrefix(out, "OK JetStream") || !strings.Contains(out, streams) || !strings.Contains(out, " consumers=1 ") {
				t.Errorf("server check jetstream as %s:\n%s", user, out)
			}
		}
		out, _ = runCLI(t, tg.url, append(sysUser, "server", "check", "server", "--name", "sysa", "--js-required", "--auth-required")...)
		if !strings.HasPrefix(out, "OK sysa") {
			t.Errorf("server check server:\n%s", out)
		}

		out = runCLIFail(t, tg.url, "--user", "app", "--password", "app", "server", "ls")
		if !strings.Contains(out, "ensure the account used has system privileges") {
			t.Errorf("server ls without system privileges:\n%s", out)
		}
	})
}

// tableRow returns the cells of the first row of a CLI table whose first
// cell is first.
func tableRow(out, first string) []string {
	for _, line := range strings.Split(out, "\n") {
		cells := strings.Split(line, "│")
		if len(cells) < 3 {
			continue
		}
		cells = cells[1 : len(cells)-1]
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == first {
			return cells
		}
	}
	return nil
}

// The $SYS replies over the wire, as a system account user asks them,
// have the keys of nats-server's (values are each server's own), except
// the documented differences in sysKeyDiffs; an entry that no longer
// matches fails the test too.
func TestSysRequestDifferential(t *testing.T) {
	diffRequireNatsServer(t)
	targets := secTargets(t, sysConf(t), nil)
	if len(targets) != 2 {
		t.Fatal("nats-server is needed")
	}
	var conns [2]*nats.Conn
	var ids [2]string
	for i, tg := range targets {
		sysPopulate(t, tg.url)
		conns[i] = connect(t, tg.url, nats.UserInfo("sys", "sys"))
		msg, err := conns[i].Request("$SYS.REQ.SERVER.PING.IDZ", nil, readTimeout)
		if err != nil {
			t.Fatalf("%s: IDZ: %v", tg.name, err)
		}
		var idz struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(msg.Data, &idz); err != nil || len(idz.ID) != 56 {
			t.Fatalf("%s: IDZ %s: %v", tg.name, msg.Data, err)
		}
		ids[i] = idz.ID
		// The server's capability flags (nats-server v2.15.2 events.go
		// ServerCapability): nats-server with JetStream sends 7 (JetStream,
		// binary stream snapshots, Raft traffic outside the system
		// account); cairn 1, JetStream alone, its Raft being its own
		// (docs/compatibility.md).
		var env struct {
			Server struct {
				Flags        uint64          `json:"flags"`
				FeatureFlags map[string]bool `json:"feature_flags"`
			} `json:"server"`
		}
		if msg, err = conns[i].Request("$SYS.REQ.SERVER.PING.STATSZ", nil, readTimeout); err != nil {
			t.Fatalf("%s: STATSZ: %v", tg.name, err)
		}
		if err := json.Unmarshal(msg.Data, &env); err != nil {
			t.Fatal(err)
		}
		if want := map[string]uint64{"cairn": 1, "nats-server": 7}[tg.name]; env.Server.Flags != want {
			t.Errorf("%s: server.flags %d, want %d", tg.name, env.Server.Flags, want)
		}
		if len(env.Server.FeatureFlags) != 4 {
			t.Errorf("%s: server.feature_flags %v", tg.name, env.Server.FeatureFlags)
		}
	}
	seen := map[string]bool{}
	for _, req := range sysRequests {
		var keys [2]map[string]bool
		for i := range targets {
			subj := strings.ReplaceAll(req.subject, "<id>", ids[i])
			msg, err := conns[i].Request(subj, []byte(req.body), readTimeout)
			if err != nil {
				t.Fatalf("%s %s %s: %v", targets[i].name, subj, req.body, err)
			}
			var v any
			if err := json.Unmarshal(msg.Data, &v); err != nil {
				t.Fatalf("%s %s: %v in %s", targets[i].name, subj, err, msg.Data)
			}
			keys[i] = map[string]bool{}
			monWalk(v, "$", keys[i])
		}
		for _, d := range monKeyDiff(req.subject+" "+req.body, keys[0], keys[1]) {
			if allowed, pattern := sysKeyDiffAllowed(d); allowed {
				seen[pattern] = true
				continue
			}
			t.Errorf("%s", d)
		}
	}
	for p := range sysKeyDiffs {
		if !seen[p] {
			t.Errorf("sysKeyDiffs entry %q matched no difference: remove it", p)
		}
	}
	// A server that does not match a filter stays silent; a direct
	// request to another id finds no responder.
	for i, tg := range targets {
		if _, err := conns[i].Request("$SYS.REQ.SERVER.PING.VARZ", []byte(`{"server_name":"other","exact_match":true}`), 500*time.Millisecond); err != nats.ErrTimeout {
			t.Errorf("%s: a filter naming another server: %v, want a timeout", tg.name, err)
		}
		if _, err := conns[i].Request("$SYS.REQ.SERVER.NOPE.VARZ", nil, readTimeout); err != nats.ErrNoResponders {
			t.Errorf("%s: another server's id: %v, want no responders", tg.name, err)
		}
	}
}

// sysRequests are the requests compared: those the nats CLI and Surveyor
// send, with their options.
var sysRequests = []struct{ subject, body string }{
	{"$SYS.REQ.SERVER.PING", ""},
	{"$SYS.REQ.SERVER.PING.STATSZ", ""},
	{"$SYS.REQ.SERVER.<id>.STATSZ", ""},
	{"$SYS.REQ.SERVER.PING.IDZ", ""},
	{"$SYS.REQ.SERVER.PING.VARZ", ""},
	{"$SYS.REQ.SERVER.<id>.VARZ", ""},
	{"$SYS.REQ.SERVER.PING.VARZ", `{"server_name":"sysa","exact_match":true}`},
	{"$SYS.REQ.SERVER.PING.CONNZ", `{"subscriptions":true,"auth":true,"limit":1024}`},
	{"$SYS.REQ.SERVER.PING.CONNZ", `{"auth":true,"acc":"SYS"}`},
	{"$SYS.REQ.SERVER.PING.JSZ", `{"raft":true}`},
	{"$SYS.REQ.SERVER.PING.JSZ", `{"accounts":true,"streams":true,"consumer":true,"config":true}`},
	{"$SYS.REQ.SERVER.<id>.JSZ", `{"account":"OPS","streams":true,"consumer":true,"limit":10000,"raft":true}`},
	{"$SYS.REQ.SERVER.PING.HEALTHZ", ""},
	{"$SYS.REQ.SERVER.PING.HEALTHZ", `{"account":"APP","stream":"S","consumer":"C","details":true}`},
	{"$SYS.REQ.SERVER.PING.SUBSZ", ""},
	{"$SYS.REQ.SERVER.PING.ROUTEZ", ""},
	{"$SYS.REQ.SERVER.PING.ACCOUNTZ", ""},
	{"$SYS.REQ.SERVER.PING.ACCOUNTZ", `{"account":"APP"}`},
	{"$SYS.REQ.SERVER.PING.LEAFZ", ""},
	{"$SYS.REQ.SERVER.PING.GATEWAYZ", ""},
	{"$SYS.REQ.SERVER.PING.RAFTZ", ""},
	{"$SYS.REQ.SERVER.PING.CONNZ", `{"sort":`},
}

// sysKeyDiffs are the documented differences of the $SYS replies' key
// sets, as "<path>" patterns with the sign (+ cairn only, - nats-server
// only), matched at the end of a difference; beyond them, those of the
// HTTP endpoints (monitorKeyDiffs) apply under the data key.
var sysKeyDiffs = map[string]string{
	// The sync policy, as in /varz (monitorKeyDiffs).
	"+$.statsz.jetstream.config.sync_always": "sync policy",
}

// sysKeyDiffAllowed reports whether a difference is documented, and by
// which entry of sysKeyDiffs or monitorKeyDiffs.
func sysKeyDiffAllowed(d string) (bool, string) {
	i := max(strings.LastIndex(d, " +$"), strings.LastIndex(d, " -$"))
	if i < 0 {
		return false, ""
	}
	signed := d[i+1:] // "+$.a.b"
	for p := range sysKeyDiffs {
		if signed == p {
			return true, p
		}
	}
	sign, path := signed[:1], strings.TrimPrefix(signed[2:], ".data")
	for k := range monitorKeyDiffs {
		if strings.HasSuffix(k, sign+"$"+path) {
			return true, "" // counted by the HTTP tests
		}
	}
	return false, ""
}

// In a cluster, a PING from a system account user reaches every server
// over the routes and each answers (the request subscriptions are
// announced like a client's), so `nats server ls` lists them all; a
// request to one server's id reaches that server only.
func TestClusterSystemRequests(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("wires cairn's monitor into each node")
	}
	natsCLI(t)
	tc := startCluster(t, 3, func(_ int, o *server.Options) {
		o.Auth = config.Auth{
			Users:    []config.User{{Name: "sys", Password: "sys", Account: "SYS"}, {Name: "app", Password: "app", Account: "APP"}},
			Accounts: []config.Account{{Name: "SYS"}, {Name: "APP"}},
		}
		o.Operator.SystemAccount = "SYS"
	})
	for _, nd := range tc.nodes {
		m, err := monitor.New(monitor.Options{Server: nd.srv})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ServeSystemRequests(); err != nil {
			t.Fatal(err)
		}
	}
	nc := tc.nodes[0].connect(nats.UserInfo("sys", "sys"))
	ids := map[string]string{}
	waitFor(t, clusterTimeout, "every server to answer a PING", func() bool {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.PublishRequest("$SYS.REQ.SERVER.PING", inbox, nil); err != nil {
			t.Fatal(err)
		}
		for len(ids) < 3 {
			m, err := sub.NextMsg(readTimeout)
			if err != nil {
				return false
			}
			var r struct {
				Server struct{ Name, ID string } `json:"server"`
			}
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Fatalf("PING reply %s: %v", m.Data, err)
			}
			ids[r.Server.Name] = r.Server.ID
		}
		return true
	})
	msg, err := nc.Request("$SYS.REQ.SERVER."+ids["n3"]+".VARZ", nil, readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg.Data), `"server_name":"n3"`) {
		t.Fatalf("n3's VARZ asked on n1: %s", msg.Data)
	}
	var ls []struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
	}
	cliJSON(t, tc.nodes[0].url, &ls, append(sysUser, "server", "ls")...)
	var names []string
	for _, r := range ls {
		names = append(names, r.Server.Name)
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "n1 n2 n3" {
		t.Fatalf("server ls: %v", names)
	}

	// An account's own CONNZ, through its import of the system account's
	// streamed export: every server answers, and every answer reaches
	// the requester (nats-server's Streamed response type).
	app := tc.nodes[0].connect(nats.UserInfo("app", "app"))
	inbox := nats.NewInbox()
	sub, err := app.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.PublishRequest("$SYS.REQ.ACCOUNT.PING.CONNZ", inbox, nil); err != nil {
		t.Fatal(err)
	}
	answered := map[string]bool{}
	for len(answered) < 3 {
		m, err := sub.NextMsg(readTimeout)
		if err != nil {
			t.Fatalf("account CONNZ answered by %v only: %v", answered, err)
		}
		var r struct {
			Server struct{ Name string } `json:"server"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		answered[r.Server.Name] = true
	}
}

// The binary answers $SYS requests without an HTTP port (no -m), as
// nats-server does, and refuses a system_account that names no account
// with nats-server's error. serverBinary is cairn, or nats-server when
// the tests target it.
func TestSystemAccountBinary(t *testing.T) {
	bin := serverBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "sys.conf")
	conf := "listen: 127.0.0.1:-1\nserver_name: bin\naccounts { SYS { users [{user: sys, password: sys}] } }\nsystem_account: SYS\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, bin, nil, "-c", path)
	nc := connect(t, p.clientURL(t), nats.UserInfo("sys", "sys"))
	m, err := nc.Request("$SYS.REQ.SERVER.PING.VARZ", nil, readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), `"server_name":"bin"`) || !strings.Contains(string(m.Data), `"system_account":"SYS"`) {
		t.Fatalf("VARZ: %s", m.Data)
	}
	// The system account is the only account: a client without
	// credentials joins $G.
	anon := connect(t, p.clientURL(t))
	if _, err := anon.Request("$SYS.REQ.SERVER.PING", nil, readTimeout); err != nats.ErrNoResponders {
		t.Fatalf("PING from $G: %v, want no responders", err)
	}

	if err := os.WriteFile(path, []byte("system_account: NOPE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := exitCode(t, bin, nil, "-c", path)
	if code == 0 || !strings.Contains(stderr, "error resolving system account: account missing") {
		t.Fatalf("system_account naming no account: exit %d, %q", code, stderr)
	}
}
