package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Configuration files (-c), -t and SIGHUP, driven through the binary as
// an operator or a Helm chart drives it. The binary is cairn, or
// nats-server with CAIRN_TEST_TARGET=nats-server where the test is about
// behaviour both share.

// serverBinary builds cairn, or finds nats-server when it is the target.
func serverBinary(t *testing.T) string {
	t.Helper()
	if targetIsNatsServer() {
		return natsServerBinary(t)
	}
	return buildCairn(t)
}

// exitCode runs bin with args and returns its exit status and stderr.
func exitCode(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("run %s: %v", bin, err)
	return 0, ""
}

// importConf is a configuration file whose account B imports imp from
// account A, which exports the service "x.>".
func importConf(imp string) string {
	return "accounts {\n  A { users = [{user: a, password: a}], exports = [{service: \"x.>\"}] }\n" +
		"  B { users = [{user: b, password: b}], imports = [" + imp + "] }\n}\n"
}

// positionRE matches a problem's text from its position on.
var positionRE = regexp.MustCompile(`^:\d+:\d+: `)

var digestRE = regexp.MustCompile(`is valid \((sha256:[0-9a-f]{64})\)`)

// -t checks a file and exits: 0 for a file cairn starts with, 1 with the
// problems otherwise, 2 without -c. Where nats-server v2.15.2 agrees the
// test checks it too, and the digest of a valid file is nats-server's
// (the same parser computes it).
func TestCheckConfigExitCodes(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("compares cairn with nats-server itself")
	}
	cairn := buildCairn(t)
	diffRequireNatsServer(t)
	natsServer := natsServerBinary(t)
	dir := t.TempDir()
	cases := []struct {
		name, text  string
		cairn, nats int    // exit codes
		want        string // in cairn's stderr
	}{
		{"valid", "port: 4222\nmax_payload: 2MB\njetstream { store_dir: /tmp/x, max_memory_store: 0 }\n", 0, 0, "is valid (sha256:"},
		{"unknown field", "port: 4222\nbogus: 1\n", 1, 1, `:2:1: unknown field "bogus"`},
		{"type error", "port: \"x\"\n", 1, 1, ":1:0: interface conversion: interface {} is string, not int64"},
		{"indented type error", "  max_payload: \"x\"\n", 1, 1, ":1:2: interface conversion: interface {} is string, not int64"},
		{"import not authorized", importConf(`{service: {account: A, subject: "q.>"}}`), 1, 1, `:1:0: Error adding service import "q.>": service import not authorized`},
		{"import mapping", importConf(`{service: {account: A, subject: "x.>"}, to: "y.*"}`), 1, 1,
			`:1:0: Error adding service import "x.>": failed to create mapping transform for service import subject from "y.*" to "x.>": invalid subject`},
		{"negative connect_retries", "cluster {\n  port: -1\n  connect_retries: -3\n}\n", 0, 0, "is valid (sha256:"},
		{"syntax error", "port: 4222\nx = [1, 2\n", 1, 1, ": Parse error on line 3:"},
		{"missing variable", "port: $CAIRN_NO_SUCH_VARIABLE\n", 1, 1, "variable reference for 'CAIRN_NO_SUCH_VARIABLE' on line 1 can not be found"},
		// Deliberate differences (docs/compatibility.md): cairn refuses
		// features it lacks, its -t checks the combinations nats-server
		// checks only when it starts, and a warning alone does not fail -t.
		{"max_payload over max_pending", "max_payload: 100MB\n", 1, 0, "max_payload (104857600) cannot be higher than max_pending (67108864)"},
		{"leafnodes", "leafnodes { port: 7422 }\n", 1, 0, `:1:0: field "leafnodes" is not supported by cairn`},
		{"old-style duration", "ping_interval: 60\n", 0, 1, `invalid use of field "ping_interval": ping_interval should be converted to a duration`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".conf")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out := exitCode(t, cairn, nil, "-t", "-c", path)
			if code != tc.cairn || !strings.Contains(out, tc.want) {
				t.Errorf("cairn -t: exit %d, stderr %q; want exit %d and %q", code, out, tc.cairn, tc.want)
			}
			ncode, nout := exitCode(t, natsServer, nil, "-t", "-c", path)
			if ncode != tc.nats {
				t.Errorf("nats-server -t: exit %d (%q), the test expects %d", ncode, nout, tc.nats)
			}
			// A problem with a position, which both report, is printed
			// byte for byte as nats-server prints it but for the
			// program's name (a syntax error is not: cairn names the file).
			if code == 1 && ncode == 1 && positionRE.MatchString(tc.want) && strings.Replace(nout, "nats-server: ", "cairn: ", 1) != out {
				t.Errorf("-t outputs differ:\ncairn       %q\nnats-server %q", out, nout)
			}
			if code == 0 && ncode == 0 {
				if c, n := digestRE.FindStringSubmatch(out), digestRE.FindStringSubmatch(nout); c == nil || n == nil || c[1] != n[1] {
					t.Errorf("digests differ: cairn %q, nats-server %q", out, nout)
				}
			}
		})
	}
	if code, out := exitCode(t, cairn, nil, "-t"); code != 2 || !strings.Contains(out, "must specify [-c, --config] option") {
		t.Errorf("-t without -c: exit %d, %q", code, out)
	}
}

// proc is a server binary running in its own process.
type proc struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
}

// startProc runs bin with args and env and waits for "Server is ready";
// it fails the test if the process exits first.
func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	waitFor(t, startTimeout, "Server is ready", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("%s exited at start:\n%s", bin, p.log.String())
		default:
		}
		return strings.Contains(p.log.String(), "Server is ready")
	})
	return p
}

// clientURL is the URL of the listener the log names.
func (p *proc) clientURL(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`Listening for client connections on (\S+)`).FindStringSubmatch(p.log.String())
	if m == nil {
		t.Fatalf("no listen line in:\n%s", p.log.String())
	}
	return "nats://" + m[1]
}

// SIGHUP reloads the file: a changed max_payload reaches the INFO of new
// connections, and a change that cannot be reloaded is refused and
// logged. The same test passes against nats-server.
func TestReloadOnSIGHUP(t *testing.T) {
	bin := serverBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "server.conf")
	base := "listen: 127.0.0.1:-1\nserver_name: s1\n"
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(base + "max_payload: 1KB\n")
	p := startProc(t, bin, nil, "-c", path)
	u := p.clientURL(t)
	if got := rawConn(t, u).info["max_payload"]; got != 1024.0 {
		t.Fatalf("INFO max_payload %v, want 1024", got)
	}
	reloads := func() int { return strings.Count(p.log.String(), "Reloaded server configuration") }
	write(base + "max_payload: 4KB\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, readTimeout, "the reload", func() bool { return reloads() == 1 })
	if got := rawConn(t, u).info["max_payload"]; got != 4096.0 {
		t.Fatalf("INFO max_payload %v after the reload, want 4096", got)
	}
	write(base + "max_payload: 8KB\nserver_name: s2\n")
	failures := func() int { return strings.Count(p.log.String(), "Failed to reload server configuration") }
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, readTimeout, "the refused reload", func() bool { return failures() == 1 })
	if got := rawConn(t, u).info["max_payload"]; got != 4096.0 {
		t.Fatalf("INFO max_payload %v after a refused reload, want 4096", got)
	}
}

// The configuration the official Helm chart writes with JetStream on
// (internal/config/testdata/helm) starts the server: server_name comes
// from $SERVER_NAME, file streams work, and memory streams are refused
// (max_memory_store: 0 turns them off). Only the paths and the port are
// changed to run outside a pod.
func TestHelmChartConfigStarts(t *testing.T) {
	bin := serverBinary(t)
	data, err := os.ReadFile(filepath.Join("..", "internal", "config", "testdata", "helm", "jetstream.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := string(data)
	httpPort := freePort(t)
	for from, to := range map[string]string{
		`"store_dir": "/data"`:                 `"store_dir": ` + strconv.Quote(filepath.Join(dir, "data")),
		`"pid_file": "/var/run/nats/nats.pid"`: `"pid_file": ` + strconv.Quote(filepath.Join(dir, "nats.pid")),
		`"port": 4222`:                         `"port": -1, "host": "127.0.0.1"`,
		`"http_port": 8222`:                    `"http_port": ` + strconv.Itoa(httpPort),
	} {
		if !strings.Contains(conf, from) {
			t.Fatalf("the chart's config lacks %s", from)
		}
		conf = strings.Replace(conf, from, to, 1)
	}
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, bin, []string{"SERVER_NAME=nats-0"}, "--config", path)
	if pid, err := os.ReadFile(filepath.Join(dir, "nats.pid")); err != nil || string(pid) != strconv.Itoa(p.cmd.Process.Pid) {
		t.Errorf("pid file %q, %v; want %d", pid, err, p.cmd.Process.Pid)
	}
	nc, err := nats.Connect(p.clientURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if name := nc.ConnectedServerName(); name != "nats-0" {
		t.Errorf("server_name %q, want nats-0 from $SERVER_NAME", name)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}}); err != nil {
		t.Fatalf("file stream: %v", err)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: jetstream.MemoryStorage})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10028 {
		t.Fatalf("memory stream: %v, want 10028 insufficient memory resources", err)
	}
	// The chart's startup, readiness and liveness probes.
	for _, probe := range []string{"/healthz", "/healthz?js-server-only=true", "/healthz?js-enabled-only=true"} {
		code, body := monGet(t, fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, probe))
		if code != 200 || !strings.Contains(string(body), `"ok"`) {
			t.Errorf("probe %s: %d %s", probe, code, body)
		}
	}
}

// The chart's clustered configuration (routes to the other pods) is a
// file cairn starts with (docs/configuration.md, the Helm chart).
func TestHelmClusterConfig(t *testing.T) {
	bin := clusterBinary(t)
	code, out := exitCode(t, bin, []string{"SERVER_NAME=nats-0"}, "-t", "-c", filepath.Join("..", "internal", "config", "testdata", "helm", "cluster.conf"))
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, out)
	}
}
