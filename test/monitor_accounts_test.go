package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Monitoring of every account (docs/monitoring.md): with two accounts
// having JetStream, /jsz totals over both and details each, /healthz
// checks the streams of each, /accountz lists them with the system
// account, as nats-server v2.15.2 answers for the same file; /metrics
// (cairn's) labels each series with its account.
func TestMonitorAccountsJetStream(t *testing.T) {
	targets := secTargets(t, sysConf(t), nil)
	for _, tg := range targets {
		sysPopulate(t, tg.url)
	}
	type jsz struct {
		Accounts  int    `json:"accounts"`
		Total     int    `json:"total"`
		Streams   int    `json:"streams"`
		Consumers int    `json:"consumers"`
		Messages  uint64 `json:"messages"`
		Memory    uint64 `json:"memory"`
		Details   []struct {
			Name    string `json:"name"`
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
				Consumers []struct {
					Name string `json:"name"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	names := func(j jsz) string {
		var out []string
		for _, d := range j.Details {
			var ss []string
			for _, s := range d.Streams {
				cs := ""
				for _, c := range s.Consumers {
					cs += "+" + c.Name
				}
				ss = append(ss, fmt.Sprintf("%s=%d%s", s.Name, s.State.Msgs, cs))
			}
			out = append(out, d.Name+"["+strings.Join(ss, ",")+"]")
		}
		return strings.Join(out, " ")
	}
	forEach(t, targets, func(t *testing.T, tg secTarget) {
		var j jsz
		monJSON(t, tg.mon+"/jsz", &j)
		if j.Accounts != 2 || j.Total != 2 || j.Streams != 3 || j.Consumers != 2 || j.Messages != 6 || j.Memory == 0 || j.Details != nil {
			t.Errorf("/jsz: %+v, want 2 accounts, 3 streams, 2 consumers, 6 messages, memory used, no details", j)
		}
		for _, tc := range []struct{ query, want string }{
			{"accounts=true", "APP[] OPS[]"},
			{"accounts=true&offset=1&limit=1", "OPS[]"},
			{"streams=true", "APP[S=3] OPS[M=1,S=2]"},
			{"acc=OPS&streams=true&consumers=true", "OPS[M=1,S=2+D]"},
			{"acc=APP&consumers=true", "APP[S=3+C]"},
			{"acc=SYS&accounts=true", "APP[] OPS[]"}, // no JetStream: not selected
		} {
			var j jsz
			monJSON(t, tg.mon+"/jsz?"+tc.query, &j)
			for i := range j.Details {
				slices.SortFunc(j.Details[i].Streams, func(a, b struct {
					Name  string `json:"name"`
					State struct {
						Msgs uint64 `json:"messages"`
					} `json:"state"`
					Consumers []struct {
						Name string `json:"name"`
					} `json:"consumer_detail"`
				}) int {
					return strings.Compare(a.Name, b.Name)
				})
			}
			if got := names(j); got != tc.want {
				t.Errorf("/jsz?%s: %q, want %q", tc.query, got, tc.want)
			}
		}
		for _, tc := range []struct {
			query string
			code  int
		}{
			{"", 200}, {"details=true", 200},
			{"account=APP&stream=S&consumer=C", 200}, {"account=OPS&stream=S&consumer=D", 200},
			{"account=OPS&stream=S&consumer=C", 404}, {"account=APP&stream=NOPE", 404},
			{"account=NOPE", 404}, {"account=SYS", 404},
		} {
			if code, body := monGet(t, tg.mon+"/healthz?"+tc.query); code != tc.code {
				t.Errorf("/healthz?%s: %d %s, want %d", tc.query, code, body, tc.code)
			}
		}
		var az struct {
			System   string   `json:"system_account"`
			Accounts []string `json:"accounts"`
		}
		monJSON(t, tg.mon+"/accountz", &az)
		slices.Sort(az.Accounts)
		if az.System != "SYS" || strings.Join(az.Accounts, " ") != "$G APP OPS SYS" {
			t.Errorf("/accountz: %+v", az)
		}
		for acc, want := range map[string][2]bool{"SYS": {true, false}, "OPS": {false, true}, "$G": {false, false}} {
			var d struct {
				Detail struct {
					System    bool `json:"is_system"`
					JetStream bool `json:"jetstream_enabled"`
				} `json:"account_detail"`
			}
			monJSON(t, tg.mon+"/accountz?acc="+acc, &d)
			if got := [2]bool{d.Detail.System, d.Detail.JetStream}; got != want {
				t.Errorf("/accountz?acc=%s: is_system, jetstream_enabled %v, want %v", acc, got, want)
			}
		}
	})

	// The key sets of both servers' answers are the same, but for the
	// documented differences (monitorKeyDiffs).
	if len(targets) == 2 {
		for _, ep := range []string{
			"/jsz", "/jsz?accounts=true", "/jsz?acc=OPS&streams=true&consumers=true&config=true",
			"/healthz?account=OPS&stream=S&consumer=D", "/healthz?account=APP&stream=NOPE&details=true",
			"/accountz", "/accountz?acc=SYS", "/varz",
		} {
			var keys [2]map[string]bool
			for i, tg := range targets {
				_, keys[i] = monKeys(t, tg.mon+ep)
			}
			for _, d := range monKeyDiff(ep, keys[0], keys[1]) {
				if !accountsKeyDiffAllowed(d) {
					t.Errorf("%s", d)
				}
			}
		}
	}

	// cairn's /metrics: the exporter's series and cairn's own, each with
	// its account; the two streams named S stay apart.
	cairn := targets[0]
	_, text := monGet(t, cairn.mon+"/metrics")
	for _, re := range []string{
		`jetstream_server_total_streams\{[^}]*\} 3`,
		`jetstream_account_memory_used\{[^}]*account="OPS"[^}]*\} [1-9]`,
		`jetstream_stream_total_messages\{[^}]*account="APP"[^}]*stream_name="S"[^}]*\} 3`,
		`jetstream_stream_total_messages\{[^}]*account="OPS"[^}]*stream_name="S"[^}]*\} 2`,
		`jetstream_consumer_num_pending\{[^}]*account="OPS"[^}]*consumer_name="D"[^}]*\} 2`,
		`cairn_stream_stored_bytes\{account="APP",[^}]*stream="S"\} [1-9]`,
		`cairn_stream_stored_bytes\{account="OPS",[^}]*stream="S"\} [1-9]`,
		`cairn_consumer_lag_messages\{account="OPS",consumer="D",[^}]*stream="S"\} 2`,
	} {
		if !regexp.MustCompile(re).Match(text) {
			t.Errorf("/metrics has no line matching %s", re)
		}
	}
}

// accountsKeyDiffAllowed reports a documented difference of the two
// servers' key sets: one of monitorKeyDiffs for the same path under any
// request, or the exports and imports /accountz shows of accounts
// (docs/compatibility.md "Monitoring differences").
func accountsKeyDiffAllowed(d string) bool {
	i := max(strings.LastIndex(d, " +$"), strings.LastIndex(d, " -$"))
	if i < 0 {
		return false
	}
	signed := d[i+1:]
	if strings.HasPrefix(signed, "-$.account_detail.exports") || strings.HasPrefix(signed, "-$.account_detail.imports") {
		return true
	}
	for k := range monitorKeyDiffs {
		if strings.HasSuffix(k, " "+signed) {
			return true
		}
	}
	return false
}

// monJSON fetches a monitoring URL and decodes its 200 answer.
func monJSON(t *testing.T, u string, v any) {
	t.Helper()
	code, body := monGet(t, u)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", u, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", u, err, body)
	}
}

// /healthz reports a problem of a stream in any account, naming the
// account: here damaged data in OPS's stream S, found at start, while
// APP's stream S is healthy (cairn's stricter /healthz: nats-server
// reports such a server healthy).
func TestHealthzNamesTheAccount(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("cairn's stricter /healthz")
	}
	conf := sysConf(t)
	tg := startCairnConf(t, conf, nil)
	for _, user := range []string{"app", "ops"} {
		nc := connect(t, tg.url, nats.UserInfo(user, user))
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
			t.Fatal(err)
		}
		for i := range 20 { // one fsync each: the damage is never in the last batch
			if _, err := js.Publish(ctx, "s.x", []byte(strings.Repeat(fmt.Sprint(i%10), 100))); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		nc.Close()
	}
	if code, body := monGet(t, tg.mon+"/healthz"); code != 200 {
		t.Fatalf("before the damage: %d %s", code, body)
	}
	tg.stop()

	segs, _ := filepath.Glob(filepath.Join(tg.storeDir, "jetstream", "OPS", "streams", "S", "msgs", "*", "*.blk"))
	if len(segs) == 0 {
		t.Fatal("no segment file of OPS > S found")
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/4] ^= 0x40
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	tg = startCairnConf(t, conf, nil)
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"", 503, `JetStream stream 'OPS \u003e S' has damaged data`},
		{"details=true", 503, `"type":"STREAM","account":"OPS","stream":"S"`},
		{"account=OPS&stream=S", 503, "has damaged data"},
		{"account=APP&stream=S", 200, `"ok"`},
		{"account=APP", 200, `"ok"`},
	} {
		code, body := monGet(t, tg.mon+"/healthz?"+tc.query)
		if code != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("/healthz?%s: %d %s, want %d with %q", tc.query, code, body, tc.code, tc.want)
		}
	}
}

// /accountz?acc=<name> lists the account's exports and imports as
// nats-server v2.15.2 lists them (monitor.go accountInfo): the configured
// ones (a private export with its approved accounts, a stream import
// with its prefix) and the system account's services: every account
// imports $SYS.REQ.ACCOUNT.PING.CONNZ, $SYS.REQ.SERVER.PING.CONNZ,
// $SYS.REQ.ACCOUNT.PING.STATZ and $SYS.REQ.USER.INFO (shared) mapped to
// its own name; the system account exports them and imports its own
// USER.INFO. The lists are compared entry by entry with nats-server's,
// as sets (its order is its maps'), less the documented difference
// (docs/compatibility.md): nats-server routes $JS.API.> through the
// system account and exports $SYS.DEBUG.SUBSCRIBERS, cairn does neither.
func TestAccountzImportsExports(t *testing.T) {
	conf := fmt.Sprintf(`http_port: -1
jetstream { store_dir: %q }
accounts {
  SYS { users [{user: sys, password: sys}] }
  APP { jetstream: enabled, users [{user: app, password: app}],
        imports [{service: {account: OPS, subject: "ops.svc"}, to: "app.svc"},
                 {stream: {account: OPS, subject: "ops.ev.>"}, prefix: "from_ops"}] }
  OPS { users [{user: ops, password: ops}],
        exports [{service: "ops.svc", response_type: stream}, {stream: "ops.ev.>", accounts: [APP]}] }
}
system_account: SYS
authorization { users [{user: g, password: g}] }
`, t.TempDir())
	targets := secTargets(t, conf, nil)
	accounts := []string{"SYS", "APP", "OPS", "$G"}
	lists := make([]map[string][]string, len(targets))
	for i, tg := range targets {
		lists[i] = map[string][]string{}
		for _, acc := range accounts {
			var az struct {
				Detail struct {
					Exports []map[string]any `json:"exports"`
					Imports []map[string]any `json:"imports"`
				} `json:"account_detail"`
			}
			monJSON(t, tg.mon+"/accountz?acc="+url.QueryEscape(acc), &az)
			for kind, entries := range map[string][]map[string]any{"export": az.Detail.Exports, "import": az.Detail.Imports} {
				for _, e := range entries {
					s := sortedJSON(t, e)
					if strings.Contains(s, `"$JS.API.>"`) || strings.Contains(s, `"$SYS.DEBUG.SUBSCRIBERS"`) {
						continue // nats-server only (above)
					}
					lists[i][acc+" "+kind] = append(lists[i][acc+" "+kind], s)
				}
			}
		}
	}
	// What cairn lists, checked by value (nats-server's, when it runs,
	// must be the same).
	imp := func(acc, subj, to string, share bool) string {
		return fmt.Sprintf(`{"account":"SYS","invalid":false,"local_subject":%q,"share":%t,"subject":"$SYS.REQ.%s","to":%q,"tracking":false,"type":"service"}`,
			to, share, subj, to)
	}
	sysImports := func(acc string) []string {
		return []string{
			imp(acc, "ACCOUNT."+acc+".CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ", false),
			imp(acc, "ACCOUNT."+acc+".CONNZ", "$SYS.REQ.SERVER.PING.CONNZ", false),
			imp(acc, "ACCOUNT."+acc+".STATZ", "$SYS.REQ.ACCOUNT.PING.STATZ", false),
			imp(acc, "USER."+acc+".INFO", "$SYS.REQ.USER.INFO", true),
		}
	}
	want := map[string][]string{
		"SYS export": {
			`{"response_type":"Streamed","subject":"$SYS.REQ.ACCOUNT.*.CONNZ","type":"service"}`,
			`{"response_type":"Streamed","subject":"$SYS.REQ.ACCOUNT.*.STATZ","type":"service"}`,
			`{"response_type":"Singleton","subject":"$SYS.REQ.USER.*.INFO","type":"service"}`,
		},
		"SYS import": {imp("SYS", "USER.SYS.INFO", "$SYS.REQ.USER.INFO", true)},
		"APP import": append([]string{
			`{"account":"OPS","invalid":false,"local_subject":"app.svc","share":false,"subject":"ops.svc","to":"app.svc","tracking":false,"type":"service"}`,
			`{"account":"OPS","invalid":false,"local_subject":"from_ops.ops.ev.>","share":false,"subject":"ops.ev.>","tracking":false,"type":"stream"}`,
		}, sysImports("APP")...),
		"OPS export": {
			`{"response_type":"Streamed","subject":"ops.svc","type":"service"}`,
			`{"approved_accounts":["APP"],"subject":"ops.ev.>","type":"stream"}`,
		},
		"OPS import": sysImports("OPS"),
		"$G import":  sysImports("$G"),
	}
	for i, tg := range targets {
		for k, w := range want {
			got := slices.Clone(lists[i][k])
			slices.Sort(got)
			w = slices.Clone(w)
			slices.Sort(w)
			if !slices.Equal(got, w) {
				t.Errorf("%s: /accountz %s:\n got %s\nwant %s", tg.name, k, strings.Join(got, "\n     "), strings.Join(w, "\n     "))
			}
		}
		for k := range lists[i] {
			if want[k] == nil {
				t.Errorf("%s: /accountz %s: %v, want none", tg.name, k, lists[i][k])
			}
		}
	}
}
