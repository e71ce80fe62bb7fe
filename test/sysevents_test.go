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
