package test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// Regression tests for nats-server's security advisories of 2022-2026
// (https://github.com/nats-io/advisories; docs/security.md, "Hostile
// clients"): each attacks the seam the advisory found,
// against cairn and, where the configuration is shared, nats-server
// v2.15.2 (which has the fixes).

// 2026-24: no_auth_user reached through the pre-CONNECT path skipped the
// user's allowed_connection_types. A client that sends anything but
// CONNECT first is authenticated exactly as a CONNECT would be: refused
// here, since the user may only connect over websockets.
func TestAdvisoryNoAuthUserConnectionTypes(t *testing.T) {
	conf := `authorization { users = [ { user: ws, password: p, allowed_connection_types: ["WEBSOCKET"] }, { user: u, password: p } ] }
no_auth_user: ws`
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		for _, first := range []string{"PING\r\n", "SUB > 1\r\n", `CONNECT {"verbose":false}` + "\r\n"} {
			c := rawConn(t, tg.url)
			c.send(first)
			c.expectAuthViolation()
		}
	})
}

// 2026-16: with no_auth_user, the client fast path applied to the route
// listener, letting anyone in as a route. On the cluster port, a client
// CONNECT, or a route without the cluster's credentials, is refused
// whatever the client authentication says. cairn only (the cluster
// harness writes no accounts or users for nats-server).
func TestAdvisoryNoAuthUserRoutePort(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("cairn's cluster harness")
	}
	path := writeTemp(t, `authorization { users = [ { user: guest, password: p } ] }
no_auth_user: guest`)
	cfg := loadConf(t, path)
	tc := startCluster(t, 1, func(_ int, o *server.Options) {
		o.Auth = cfg.Auth
		o.Cluster.Username, o.Cluster.Password = "route", "s3cr3t"
	})
	before := tc.nodes[0].srv.NumSubscriptions() // the system account's own
	for _, first := range []string{
		"PING\r\n",
		"SUB > 1\r\n",
		`CONNECT {"verbose":false,"lang":"go"}` + "\r\n",
		`CONNECT {"echo":true,"headers":true,"name":"NEVIL","cluster":"` + clusterName + `"}` + "\r\n",
	} {
		nc, err := net.Dial("tcp", hostPort(tc.nodes[0].routeURL))
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(readTimeout))
		_, _ = nc.Write([]byte(first + "RS+ $G > \r\nPING\r\n"))
		var buf [4096]byte
		got := ""
		for {
			n, err := nc.Read(buf[:])
			got += string(buf[:n])
			if err != nil {
				break
			}
		}
		nc.Close()
		if strings.Contains(got, "PONG") || strings.Contains(got, "RMSG") {
			t.Errorf("cluster port after %q: %q", first, got)
		}
	}
	if n := tc.nodes[0].srv.NumSubscriptions(); n != before {
		t.Fatalf("an unauthenticated peer left %d subscriptions (%d before, the server's own)", n-before, before)
	}
}

// CVE-2023-47090: a configuration with users and a system account must
// not let a client in without credentials (nats-server once made an
// implicit no-auth user).
func TestAdvisoryNoImplicitUser(t *testing.T) {
	conf := `accounts { SYS { users = [ { user: sys, password: p } ] } }
system_account: SYS
authorization { users = [ { user: u, password: p } ] }`
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		if c.info["auth_required"] != true {
			t.Fatalf("INFO %s", c.infoLine)
		}
		c.send(`CONNECT {"verbose":false}` + "\r\nPING\r\n")
		c.expectAuthViolation()
	})
}

// CVE-2026-33223: a client could put its own Nats-Request-Info on a
// service request and speak for another account. The server's replaces
// it.
func TestAdvisoryRequestInfoSpoofing(t *testing.T) {
	forEach(t, secTargets(t, accountsConf(t.TempDir()), nil), func(t *testing.T, tg secTarget) {
		a := login(t, tg.url, "a")
		a.send("SUB help 1\r\n")
		a.sync()
		b := login(t, tg.url, "b")
		hdr := "NATS/1.0\r\nNats-Request-Info: {\"acc\":\"SYS\"}\r\nX: y\r\n\r\n"
		b.send(fmt.Sprintf("HPUB ask _INBOX.b %d %d\r\n%shi\r\n", len(hdr), len(hdr)+2, hdr))
		b.sync()
		m := a.expectRe(`HMSG help 1 \S+ \d+ \d+\r\n(NATS/1.0\r\n.*?\r\n\r\n)hi\r\n`)
		if strings.Contains(m[1], `"SYS"`) || !strings.Contains(m[1], `Nats-Request-Info: {"acc":"B"`) || !strings.Contains(m[1], "X: y\r\n") {
			t.Fatalf("headers the exporter saw: %q", m[1])
		}
	})
}

// Pre-authentication costs are bounded: a CONNECT longer than
// max_control_line is refused before it is buffered whole, with
// nats-server's error.
func TestAdvisoryHugeConnect(t *testing.T) {
	forEach(t, secTargets(t, "authorization { token: t }\nmax_control_line: 1024", nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		c.send("CONNECT {\"auth_token\":\"" + strings.Repeat("x", 4096))
		c.expectErr("maximum control line exceeded")
		c.expectClosed()
	})
}

// 2026-18: a queue-specific deny must not lift a plain deny of the same
// subject.
func TestAdvisoryQueueDenyKeepsPlainDeny(t *testing.T) {
	conf := `authorization { users = [ { user: u, password: p, permissions: { subscribe: { deny: ["secret", "> *.prod"] } } } ] }`
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		c := rawConnect(t, tg.url, `{"verbose":false,"protocol":1,"user":"u","pass":"p"}`)
		c.send("SUB secret dev 1\r\nSUB secret 2\r\nSUB other x.prod 3\r\nPING\r\n")
		c.expect(`-ERR 'Permissions Violation for Subscription to "secret" using queue "dev"'` + "\r\n" +
			`-ERR 'Permissions Violation for Subscription to "secret"'` + "\r\n" +
			`-ERR 'Permissions Violation for Subscription to "other" using queue "x.prod"'` + "\r\nPONG\r\n")
	})
}
