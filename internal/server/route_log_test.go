package server

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/logger"
)

// startLoggedClusterServer starts a cluster server whose log goes to the
// returned writer; user and pass, when set, are the credentials routes
// must send.
func startLoggedClusterServer(t *testing.T, name, user, pass string, routes ...string) (*Server, *syncWriter) {
	t.Helper()
	out := &syncWriter{}
	o := clusterTestOptions(t, name, "C", routes...)
	o.Logger = logger.New(out, false, false)
	o.Cluster.Username, o.Cluster.Password = user, pass
	return startServer(t, o), out
}

var (
	ridRE   = regexp.MustCompile(` - (rid:\d+) - `)
	levelRE = regexp.MustCompile(`\[(INF|WRN|ERR|DBG|TRC|FTL)\]`)
)

// connLines returns, for the first route connection whose log line
// contains marker, its log lines from " - rid:N - " on, level included
// ("[ERR] ...: ... - rid:N - text" becomes "[ERR] text").
func connLines(log, marker string) []string {
	rid := ""
	for _, l := range strings.Split(log, "\n") {
		if m := ridRE.FindStringSubmatch(l); m != nil && strings.Contains(l, marker) {
			rid = m[1]
			break
		}
	}
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if rid == "" || !strings.Contains(l, " - "+rid+" - ") {
			continue
		}
		lines = append(lines, levelRE.FindString(l)+" "+l[strings.Index(l, " - "+rid+" - ")+len(" - "+rid+" - "):])
	}
	return lines
}

func wantConnLines(t *testing.T, who, log, marker string, want ...string) {
	t.Helper()
	if got := connLines(log, marker); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s logs\n%s\nwant\n%s\nwhole log:\n%s", who, strings.Join(got, "\n"), strings.Join(want, "\n"), log)
	}
}

// A route refused for its credentials logs what nats-server v2.15.2 logs:
// on the refusing side the credentials' user at [ERR], then the close
// with its reason; on the dialing side the peer's -ERR, then the close.
// Neither adds a "closing" line.
func TestRouteAuthFailureLogLines(t *testing.T) {
	a, aLog := startLoggedClusterServer(t, "a", "ruser", "s3cret")
	_, bLog := startLoggedClusterServer(t, "b", "", "", "nats://ruser:wrong@"+a.ClusterAddr().String())
	waitCond(t, "both sides to log the close", func() bool {
		return strings.Contains(aLog.String(), "Router connection closed: Authentication Failure") &&
			strings.Contains(bLog.String(), "Router connection closed: Parse Error")
	})
	wantConnLines(t, "the refusing side", aLog.String(), "authentication error",
		"[INF] Route connection created",
		`[ERR] authentication error - User "ruser"`,
		"[INF] Router connection closed: Authentication Failure")
	wantConnLines(t, "the dialing side", bLog.String(), "Route Error",
		"[INF] Route connection created",
		"[ERR] Route Error 'Authorization Violation'",
		"[INF] Router connection closed: Parse Error - Remote: a")
	if strings.Contains(aLog.String()+bLog.String(), "wrong") {
		t.Error("a password in the log")
	}
}
