package test

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// The account-scoped $SYS services (docs/monitoring.md): a system account
// user asks $SYS.REQ.ACCOUNT.<acc>.<X>; an account's own user asks
// $SYS.REQ.ACCOUNT.PING.CONNZ|STATZ, $SYS.REQ.SERVER.PING.CONNZ and
// $SYS.REQ.USER.INFO through the imports every account has, and hears
// about its own account only. Keys are compared with nats-server.
func TestSystemAccountScoped(t *testing.T) {
	targets := secTargets(t, sysConf(t), nil)
	reqs := []struct{ user, subj string }{
		{"app", "$SYS.REQ.ACCOUNT.PING.CONNZ"},
		{"app", "$SYS.REQ.ACCOUNT.PING.STATZ"},
		{"app", "$SYS.REQ.SERVER.PING.CONNZ"},
		{"app", "$SYS.REQ.USER.INFO"},
		{"sys", "$SYS.REQ.ACCOUNT.APP.CONNZ"},
		{"sys", "$SYS.REQ.ACCOUNT.APP.SUBSZ"},
		{"sys", "$SYS.REQ.ACCOUNT.APP.JSZ"},
		{"sys", "$SYS.REQ.ACCOUNT.APP.INFO"},
		{"sys", "$SYS.REQ.ACCOUNT.APP.STATZ"},
		{"sys", "$SYS.REQ.ACCOUNT.APP.LEAFZ"},
		{"sys", "$SYS.REQ.ACCOUNT.APP.CONNS"},
	}
	keys := make([]map[string]map[string]bool, len(targets))
	for i, tg := range targets {
		keys[i] = map[string]map[string]bool{}
		conns := map[string]*nats.Conn{}
		for _, u := range []string{"app", "sys"} {
			conns[u] = connect(t, tg.url, nats.UserInfo(u, u))
		}
		for _, r := range reqs {
			msg, err := conns[r.user].Request(r.subj, nil, readTimeout)
			if err != nil {
				t.Fatalf("%s: %s as %s: %v", tg.name, r.subj, r.user, err)
			}
			var v map[string]any
			if err := json.Unmarshal(msg.Data, &v); err != nil {
				t.Fatalf("%s: %s: %v in %s", tg.name, r.subj, err, msg.Data)
			}
			if v["error"] != nil {
				t.Errorf("%s: %s: %s", tg.name, r.subj, msg.Data)
			}
			keys[i][r.subj] = map[string]bool{}
			monWalk(v, "$", keys[i][r.subj])
			// Only the requester's account is described.
			if r.user == "app" && (strings.Contains(string(msg.Data), `"OPS"`) || strings.Contains(string(msg.Data), `"SYS"`)) {
				t.Errorf("%s: %s tells app about another account: %s", tg.name, r.subj, msg.Data)
			}
			if r.subj == "$SYS.REQ.USER.INFO" {
				d, _ := v["data"].(map[string]any)
				if d["user"] != "app" || d["account"] != "APP" {
					t.Errorf("%s: USER.INFO %s", tg.name, msg.Data)
				}
			}
		}
		natsCLI(t)
		out, _ := runCLI(t, tg.url, "--user", "app", "--password", "app", "account", "info")
		if !strings.Contains(out, "Account: APP") && !strings.Contains(out, "Account:") {
			t.Errorf("%s: nats account info:\n%s", tg.name, out)
		}
	}
	if len(targets) < 2 {
		return
	}
	for subj, k := range keys[0] {
		for _, d := range monKeyDiff(subj, k, keys[1][subj]) {
			if allowed, _ := sysKeyDiffAllowed(d); allowed {
				continue
			}
			t.Errorf("%s", d)
		}
	}
}

// $SYS.REQ.USER.INFO tells a user its permissions as nats-server v2.15.2
// lists them (events.go userInfoReq, client.go publicPermissions):
// publish and subscribe allow and deny lists, queue entries as "subject
// queue", allow_responses as responses{max, ttl}; nothing for a user
// without permissions. A system account user asks too (the system
// account imports its own USER.INFO). The data is compared with
// nats-server's (lists as sets: nats-server's order is its index's).
func TestUserInfoPermissions(t *testing.T) {
	conf := `accounts {
  SYS { users [{user: sys, password: sys}] }
  APP { users [
    {user: app, password: app, permissions: {
      publish: {allow: ["a.>", "_INBOX.>", "$SYS.REQ.USER.INFO"], deny: ["a.secret"]},
      subscribe: {allow: ["_INBOX.>", "a.* q1"], deny: ["a.x"]},
      allow_responses: {max: 3, expires: "1m"}}},
    {user: sub, password: sub, permissions: {subscribe: {deny: ["b.>"]}}},
    {user: app2, password: app2}
  ]}
}
system_account: SYS
`
	want := map[string]string{ // keys sorted
		"app": `{"account":"APP","account_name":"APP","permissions":{"publish":{"allow":["$SYS.REQ.USER.INFO","_INBOX.>","a.>"],"deny":["a.secret"]},` +
			`"responses":{"max":3,"ttl":60000000000},"subscribe":{"allow":["_INBOX.>","a.* q1"],"deny":["a.x"]}},"user":"app"}`,
		"sub":  `{"account":"APP","account_name":"APP","permissions":{"publish":{},"subscribe":{"deny":["b.>"]}},"user":"sub"}`,
		"app2": `{"account":"APP","account_name":"APP","user":"app2"}`,
		"sys":  `{"account":"SYS","account_name":"SYS","user":"sys"}`,
	}
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		for _, u := range []string{"app", "sub", "app2", "sys"} {
			nc := connect(t, tg.url, nats.UserInfo(u, u))
			msg, err := nc.Request("$SYS.REQ.USER.INFO", nil, readTimeout)
			if err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			var reply struct {
				Data map[string]any `json:"data"`
			}
			if err := json.Unmarshal(msg.Data, &reply); err != nil {
				t.Fatal(err)
			}
			if got := sortedJSON(t, reply.Data); got != want[u] {
				t.Errorf("%s: USER.INFO data\n got %s\nwant %s", u, got, want[u])
			}
		}
	})
}

// sortedJSON encodes v with every list of strings sorted.
func sortedJSON(t *testing.T, v any) string {
	t.Helper()
	var sortLists func(any) any
	sortLists = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				x[k] = sortLists(c)
			}
		case []any:
			ss := make([]string, 0, len(x))
			for _, c := range x {
				s, ok := c.(string)
				if !ok {
					return x
				}
				ss = append(ss, s)
			}
			sort.Strings(ss)
			return ss
		}
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sortLists(v)); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(buf.String())
}
