package test

import (
	"encoding/json"
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
			// docs/compatibility.md: /accountz does not list the system imports yet.
			if allowed, _ := sysKeyDiffAllowed(d); allowed || strings.Contains(d, "INFO -$.data.imports") {
				continue
			}
			t.Errorf("%s", d)
		}
	}
}
