package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reloadNode is a server binary started from a file it can rewrite and
// reload (SIGHUP).
type reloadNode struct {
	p           *proc
	path, mon   string
	clusterPort int
}

func startReloadNode(t *testing.T, bin, conf string) *reloadNode {
	t.Helper()
	n := &reloadNode{path: filepath.Join(t.TempDir(), "server.conf")}
	n.write(t, conf)
	n.p = startProc(t, bin, nil, "-c", n.path)
	if m := n.p.waitLog(t, regexp.MustCompile(`Starting http monitor on (\S+)`)); m != nil {
		n.mon = "http://" + m[1]
	}
	return n
}

func (n *reloadNode) write(t *testing.T, conf string) {
	t.Helper()
	if err := os.WriteFile(n.path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload rewrites the file and sends SIGHUP, then waits for the reload's
// outcome in the log: "Reloaded server configuration" (both servers log
// it) or an error, returned.
func (n *reloadNode) reload(t *testing.T, conf string) string {
	t.Helper()
	counts := func(out string) (int, int) {
		return strings.Count(out, "Reloaded server configuration"), strings.Count(out, "Failed to reload")
	}
	ok0, failed0 := counts(n.p.log.String())
	n.write(t, conf)
	if err := n.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var out string
	waitFor(t, startTimeout, "the reload's outcome", func() bool {
		out = n.p.log.String()
		ok, failed := counts(out)
		return ok > ok0 || failed > failed0
	})
	if _, failed := counts(out); failed > failed0 {
		line, _, _ := strings.Cut(out[strings.LastIndex(out, "Failed to reload"):], "\n")
		return line
	}
	return ""
}

// numRoutes is /routez num_routes.
func (n *reloadNode) numRoutes(t *testing.T) int {
	t.Helper()
	var rz struct {
		N int `json:"num_routes"`
	}
	_, body := httpGet(t, n.mon+"/routez")
	if err := json.Unmarshal(body, &rz); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	return rz.N
}

// TestClusterReloadDifferential: a reload (SIGHUP) of the cluster block
// applies the routes, the cluster's authorization, no_advertise and
// connect_retries, as nats-server v2.15.2 applies them, and refuses a new
// cluster name with the reason (docs/configuration.md, "Reloading"). The
// same files go to cairn and to nats-server: a route added by a reload is
// dialed; new cluster credentials close the accepted route whose
// credentials they refuse, and the redials with them fail; a route with
// the new ones comes up; a route removed by a reload is closed ("Removed
// route" in the log) and not dialed again. Each closed route is logged
// with nats-server's reason ("Router connection closed: Route Removed").
func TestClusterReloadDifferential(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("compares cairn with nats-server itself")
	}
	diffRequireNatsServer(t)
	bins := map[string]string{"cairn": buildCairn(t), "nats-server": natsServerBinary(t)}
	for _, name := range []string{"cairn", "nats-server"} {
		bp, ap := freePort(t), freePort(t)
		bConf := func(pass string) string {
			return fmt.Sprintf("server_name: b\nlisten: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\ncluster { name: C, listen: 127.0.0.1:%d, authorization { user: r, password: %s } }\n", bp, pass)
		}
		aConf := func(routes string, extra string) string {
			return fmt.Sprintf("server_name: a\nlisten: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\ncluster { name: C, listen: 127.0.0.1:%d, routes: [%s]\n%s }\n", ap, routes, extra)
		}
		route := func(pass string) string { return fmt.Sprintf("nats://r:%s@127.0.0.1:%d", pass, bp) }
		b := startReloadNode(t, bins[name], bConf("one"))
		a := startReloadNode(t, bins[name], aConf("", ""))
		// nats-server pools 4 connections per peer, cairn has one.
		routesWithin := func(up bool) error {
			deadline := time.Now().Add(clusterTimeout)
			for {
				na, nb := a.numRoutes(t), b.numRoutes(t)
				if (na > 0) == up && (nb > 0) == up {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s: routes up %v on both: a %d, b %d", name, up, na, nb)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		routesAre := func(up bool) {
			t.Helper()
			if err := routesWithin(up); err != nil {
				t.Fatal(err)
			}
		}

		// A route added by a reload, with no_advertise and connect_retries.
		if e := a.reload(t, aConf(route("one"), "no_advertise: true\nconnect_retries: 3")); e != "" {
			t.Fatalf("%s: %s", name, e)
		}
		routesAre(true)

		// New cluster credentials on b: the route a dialed with the old
		// ones is closed as an authorization violation, and a's redials
		// fail.
		if e := b.reload(t, bConf("two")); e != "" {
			t.Fatalf("%s: %s", name, e)
		}
		if err := routesWithin(false); err != nil {
			if name == "nats-server" {
				// The reference itself kept one pooled route with the old
				// credentials once in a loaded CI run: noted, not failed.
				t.Logf("reference run ends here: %v", err)
				continue
			}
			t.Fatal(err)
		}
		eventually(t, name+": b closed the route for its credentials", func() error {
			if !strings.Contains(b.p.log.String(), "Router connection closed: Authentication Failure") {
				return fmt.Errorf("no 'Router connection closed: Authentication Failure' in b's log")
			}
			return nil
		})

		// The route with the new credentials.
		if e := a.reload(t, aConf(route("two"), "")); e != "" {
			t.Fatalf("%s: %s", name, e)
		}
		routesAre(true)

		// The route removed: closed, and not dialed again.
		if e := a.reload(t, aConf("", "")); e != "" {
			t.Fatalf("%s: %s", name, e)
		}
		if err := routesWithin(false); err != nil {
			if name == "nats-server" {
				// The reference kept its routes past the wait once in a
				// CI run beside load (a 1, b 1): noted, not failed.
				t.Logf("reference run ends here: %v", err)
				continue
			}
			t.Fatal(err)
		}
		eventually(t, name+": a logs why the route closed", func() error {
			if !strings.Contains(a.p.log.String(), "Router connection closed: Route Removed") {
				return fmt.Errorf("no 'Router connection closed: Route Removed' in a's log")
			}
			return nil
		})
		// nats-server logs the route's password; cairn masks it.
		if m := a.p.waitLog(t, regexp.MustCompile(`Removed route (\S+)`)); m == nil || (name == "cairn" && strings.Contains(m[1], ":two@")) {
			t.Errorf("%s: no 'Removed route' (cairn: with the password masked): %v", name, m)
		}

		// A new cluster name: cairn refuses it, nats-server applies it.
		e := a.reload(t, strings.Replace(aConf("", ""), "name: C", "name: D", 1))
		if name == "cairn" && !strings.Contains(e, "config reload not supported for cluster.name") {
			t.Errorf("cairn: a new cluster name: %q", e)
		}
		if name == "nats-server" && e != "" {
			t.Errorf("nats-server: a new cluster name: %q", e)
		}
		// The removed route was not dialed again meanwhile.
		if na, nb := a.numRoutes(t), b.numRoutes(t); na != 0 || nb != 0 {
			t.Errorf("%s: routes a %d, b %d after the route was removed", name, na, nb)
		}
	}
}
