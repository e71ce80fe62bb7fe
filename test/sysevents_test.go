package test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The system account's events (docs/monitoring.md "Events"): a system
// account user subscribed to $SYS.> sees the STATSZ heartbeat, an
// account's client CONNECT and DISCONNECT advisories and its SERVER.CONNS
// count, and SHUTDOWN when the server stops; the key sets are those of
// nats-server v2.15.2 (less documented differences), and the values
// describe the client.
func TestSystemEvents(t *testing.T) {
	targets := secTargets(t, sysConf(t), nil)
	keys := make([]map[string]map[string]bool, len(targets))
	for i, tg := range targets {
		sys := connect(t, tg.url, nats.UserInfo("sys", "sys"))
		msgs := make(chan *nats.Msg, 256)
		if _, err := sys.ChanSubscribe("$SYS.>", msgs); err != nil {
			t.Fatal(err)
		}
		if err := sys.Flush(); err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]any{} // kind -> event
		keys[i] = map[string]map[string]bool{}
		wait := func(kinds ...string) {
			t.Helper()
			deadline := time.After(15 * time.Second) // the STATSZ heartbeat is at 250ms, 500ms, 1s, ...
			for {
				missing := ""
				for _, k := range kinds {
					if got[k] == nil {
						missing = k
					}
				}
				if missing == "" {
					return
				}
				select {
				case m := <-msgs:
					kind := eventKind(m.Subject)
					if kind == "" || got[kind] != nil || strings.Contains(m.Subject, ".SYS.") {
						continue
					}
					var v map[string]any
					if err := json.Unmarshal(m.Data, &v); err != nil {
						t.Fatalf("%s: %s: %v in %s", tg.name, m.Subject, err, m.Data)
					}
					got[kind] = v
					keys[i][kind] = map[string]bool{}
					monWalk(v, "$", keys[i][kind])
				case <-deadline:
					t.Fatalf("%s: no %s event", tg.name, missing)
				}
			}
		}
		app, err := nats.Connect(tg.url, nats.UserInfo("app", "app"), nats.Name("ev-client"))
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Publish("x", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := app.Flush(); err != nil {
			t.Fatal(err)
		}
		app.Close()
		wait("STATSZ", "CONNECT", "DISCONNECT", "CONNS", "CONNS_OLD")

		c := got["CONNECT"]
		client, _ := c["client"].(map[string]any)
		if c["type"] != "io.nats.server.advisory.v1.client_connect" || client["acc"] != "APP" || client["user"] != "app" || client["name"] != "ev-client" || client["kind"] != "Client" {
			t.Errorf("%s: CONNECT %v", tg.name, c)
		}
		d := got["DISCONNECT"]
		client, _ = d["client"].(map[string]any)
		sent, _ := d["sent"].(map[string]any)
		if d["type"] != "io.nats.server.advisory.v1.client_disconnect" || client["acc"] != "APP" || d["reason"] != "Client Closed" || sent["msgs"] != 1.0 {
			t.Errorf("%s: DISCONNECT %v", tg.name, d)
		}
		if s, _ := got["STATSZ"]["statsz"].(map[string]any); s == nil || s["connections"] == nil {
			t.Errorf("%s: STATSZ %v", tg.name, got["STATSZ"])
		}
		if n := got["CONNS"]; n["acc"] != "APP" || n["conns"] != 1.0 { // the first: at the connect
			t.Errorf("%s: SERVER.CONNS %v", tg.name, n)
		}

		if tg.proc != nil {
			if err := tg.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		} else {
			go tg.stop()
		}
		wait("SHUTDOWN")
		if id, _ := got["SHUTDOWN"]["id"].(string); len(id) != 56 {
			t.Errorf("%s: SHUTDOWN %v", tg.name, got["SHUTDOWN"])
		}
	}
	if len(targets) < 2 {
		return
	}
	for kind, k := range keys[0] {
		for _, d := range monKeyDiff(kind, k, keys[1][kind]) {
			if allowed, _ := sysKeyDiffAllowed(d); allowed {
				continue
			}
			t.Errorf("%s", d)
		}
	}
}

// eventKind names an event by its subject: STATSZ, CONNECT, DISCONNECT,
// CONNS ($SYS.ACCOUNT.<acc>.SERVER.CONNS), CONNS_OLD
// ($SYS.SERVER.ACCOUNT.<acc>.CONNS) or SHUTDOWN; "" for others. The
// test skips the events of the system account's own clients.
func eventKind(subj string) string {
	t := strings.Split(subj, ".")
	switch {
	case len(t) == 4 && t[1] == "SERVER" && (t[3] == "STATSZ" || t[3] == "SHUTDOWN"):
		return t[3]
	case len(t) == 4 && t[1] == "ACCOUNT" && (t[3] == "CONNECT" || t[3] == "DISCONNECT"):
		return t[3]
	case len(t) == 5 && t[1] == "ACCOUNT" && t[3] == "SERVER" && t[4] == "CONNS":
		return "CONNS"
	case len(t) == 5 && t[1] == "SERVER" && t[2] == "ACCOUNT" && t[4] == "CONNS":
		return "CONNS_OLD"
	}
	return ""
}

// A failed login is published as nats-server v2.15.2 publishes it
// (events.go sendAuthErrorEvent, sendAccountAuthErrorEvent): on
// $SYS.SERVER.<id>.CLIENT.AUTH.ERR in the system account, on
// $SYS.ACCOUNT.CLIENT.AUTH.ERR in the account the client was in ($G),
// then as the $G DISCONNECT of the closed connection, each a
// client_disconnect advisory with the reason "Authentication Failure",
// the user the client claimed and never its password or token. Lame duck
// mode is announced on $SYS.SERVER.<id>.LAMEDUCK. Keys compared with
// nats-server.
func TestAuthErrorAndLameDuckEvents(t *testing.T) {
	const badPass, badToken = "wrong-pass-9f3a", "tok-secret-77c1"
	conf := sysConf(t) + "authorization { users [{user: g, password: g}] }\n"
	targets := secTargets(t, conf, nil)
	keys := make([]map[string]map[string]bool, len(targets))
	for i, tg := range targets {
		keys[i] = map[string]map[string]bool{}
		sysMsgs := make(chan *nats.Msg, 256)
		sys := connect(t, tg.url, nats.UserInfo("sys", "sys"))
		if _, err := sys.ChanSubscribe("$SYS.>", sysMsgs); err != nil {
			t.Fatal(err)
		}
		flush(t, sys)
		gMsgs := make(chan *nats.Msg, 256)
		g := connect(t, tg.url, nats.UserInfo("g", "g"))
		if _, err := g.ChanSubscribe("$SYS.ACCOUNT.CLIENT.AUTH.ERR", gMsgs); err != nil {
			t.Fatal(err)
		}
		flush(t, g)

		for _, opt := range []nats.Option{nats.UserInfo("app", badPass), nats.Token(badToken)} {
			nc, err := nats.Connect(tg.url, opt, nats.Name("bad-login"))
			if err == nil {
				nc.Close()
				t.Fatalf("%s: a bad login connected", tg.name)
			}
		}
		// next returns an event of a kind (a subject pattern) whose
		// client is user ("": any), keeping the others it reads for
		// later (the events of two failed logins may interleave), and
		// checks that no secret is in any of them.
		pending := map[string][]map[string]any{}
		next := func(ch chan *nats.Msg, kind, user string) map[string]any {
			t.Helper()
			deadline := time.After(readTimeout)
			for {
				for j, v := range pending[kind] {
					c, _ := v["client"].(map[string]any)
					if u, _ := c["user"].(string); user == "" || u == user {
						pending[kind] = append(pending[kind][:j], pending[kind][j+1:]...)
						return v
					}
				}
				select {
				case m := <-ch:
					k := authEventKind(m.Subject)
					if k == "" {
						continue
					}
					if strings.Contains(string(m.Data), badPass) || strings.Contains(string(m.Data), badToken) {
						t.Errorf("%s: %s shows a secret: %s", tg.name, m.Subject, m.Data)
					}
					var v map[string]any
					if err := json.Unmarshal(m.Data, &v); err != nil {
						t.Fatalf("%s: %s: %v in %s", tg.name, m.Subject, err, m.Data)
					}
					if keys[i][k] == nil {
						keys[i][k] = map[string]bool{}
					}
					monWalk(v, "$", keys[i][k])
					pending[k] = append(pending[k], v)
				case <-deadline:
					t.Fatalf("%s: no %s event of user %q", tg.name, kind, user)
				}
			}
		}
		check := func(ev map[string]any, user, what string) {
			t.Helper()
			c, _ := ev["client"].(map[string]any)
			u, _ := c["user"].(string)
			if ev["type"] != "io.nats.server.advisory.v1.client_disconnect" || ev["reason"] != "Authentication Failure" ||
				c["acc"] != "$G" || u != user || c["name"] != "bad-login" || c["kind"] != "Client" {
				t.Errorf("%s: %s: %v", tg.name, what, ev)
			}
		}
		for _, user := range []string{"app", "[REDACTED]"} {
			check(next(gMsgs, "ACCOUNT_AUTH_ERR", user), user, "$SYS.ACCOUNT.CLIENT.AUTH.ERR")
			check(next(sysMsgs, "SERVER_AUTH_ERR", user), user, "$SYS.SERVER.<id>.CLIENT.AUTH.ERR")
			check(next(sysMsgs, "G_DISCONNECT", user), user, "$SYS.ACCOUNT.$G.DISCONNECT")
		}

		// /connz keeps them with nats-server's reason and claimed user.
		_, body := monGet(t, tg.mon+"/connz?state=closed&auth=true")
		var cz struct {
			Conns []struct {
				Reason string `json:"reason"`
				User   string `json:"authorized_user"`
			} `json:"connections"`
		}
		if err := json.Unmarshal(body, &cz); err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, c := range cz.Conns {
			if c.Reason == "Authentication Failure" && (c.User == "app" || c.User == "[REDACTED]") {
				failed++
			}
		}
		if failed != 2 || strings.Contains(string(body), badPass) || strings.Contains(string(body), badToken) {
			t.Errorf("%s: /connz?state=closed: %s", tg.name, body)
		}

		if tg.proc != nil {
			if err := tg.proc.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
				t.Fatal(err)
			}
		} else {
			go tg.srv.LameDuck(time.Minute, 30*time.Second)
		}
		if id, _ := next(sysMsgs, "LAMEDUCK", "")["id"].(string); len(id) != 56 {
			t.Errorf("%s: LAMEDUCK without the server's id", tg.name)
		}
		if tg.proc != nil {
			_ = tg.proc.cmd.Process.Kill() // in lame duck mode it would wait out its grace period
		}
	}
	if len(targets) < 2 {
		return
	}
	for kind, k := range keys[0] {
		for _, d := range monKeyDiff(kind, k, keys[1][kind]) {
			if allowed, _ := sysKeyDiffAllowed(d); !allowed {
				t.Errorf("%s", d)
			}
		}
	}
}

// authEventKind names the events TestAuthErrorAndLameDuckEvents waits
// for by their subjects; "" for others.
func authEventKind(subj string) string {
	t := strings.Split(subj, ".")
	switch {
	case subj == "$SYS.ACCOUNT.CLIENT.AUTH.ERR":
		return "ACCOUNT_AUTH_ERR"
	case len(t) == 6 && t[1] == "SERVER" && t[3] == "CLIENT" && t[4] == "AUTH" && t[5] == "ERR":
		return "SERVER_AUTH_ERR"
	case subj == "$SYS.ACCOUNT.$G.DISCONNECT":
		return "G_DISCONNECT"
	case len(t) == 4 && t[1] == "SERVER" && t[3] == "LAMEDUCK":
		return "LAMEDUCK"
	}
	return ""
}
