package test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The nats CLI (natscli v0.5.0) as an acceptance client.

const cliTimeout = 30 * time.Second

// natsCLI finds the nats binary, or skips the test (fails it when
// CAIRN_REQUIRE_CLI=1, as CI sets).
func natsCLI(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, "go", "bin", "nats")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "nats CLI not found on PATH or in ~/go/bin; install it with go install github.com/nats-io/natscli/nats@v0.5.0"
	if os.Getenv("CAIRN_REQUIRE_CLI") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// cliEnv is the environment without NATS_* variables and with a private
// HOME, so that no user context or credentials leak into the test.
func cliEnv(t *testing.T) []string {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "NATS_") || k == "HOME" || k == "XDG_CONFIG_HOME" || k == "XDG_DATA_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "NO_COLOR=1")
}

type cliProc struct {
	t      *testing.T
	args   []string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	err    error
}

// startCLI runs nats --server <u> args... in the background; it is killed
// at the end of the test if still running.
func startCLI(t *testing.T, u string, args ...string) *cliProc {
	t.Helper()
	bin := natsCLI(t)
	full := append([]string{"--server", u}, args...)
	p := &cliProc{t: t, args: full, done: make(chan struct{})}
	p.cmd = exec.Command(bin, full...)
	p.cmd.Env = cliEnv(t)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start nats %v: %v", full, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit successfully.
func (p *cliProc) wait() {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(cliTimeout):
		p.t.Fatalf("nats %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", p.args, cliTimeout, p.stdout.String(), p.stderr.String())
	}
	if p.err != nil {
		p.t.Fatalf("nats %v: %v\nstdout:\n%s\nstderr:\n%s", p.args, p.err, p.stdout.String(), p.stderr.String())
	}
}

func (p *cliProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *cliProc) output() string { return p.stdout.String() + p.stderr.String() }

// runCLI runs nats --server <u> args... to completion and returns stdout
// and stderr.
func runCLI(t *testing.T, u string, args ...string) (string, string) {
	t.Helper()
	p := startCLI(t, u, args...)
	p.wait()
	return p.stdout.String(), p.stderr.String()
}

// waitForInterest sends requests to subject until one is not answered
// with no-responders, i.e. until a subscriber exists. The one request that
// got through was delivered to that subscriber (it counts as a message).
func waitForInterest(t *testing.T, nc *nats.Conn, subject string, p *cliProc) {
	t.Helper()
	deadline := time.Now().Add(cliTimeout)
	for {
		_, err := nc.Request(subject, []byte("probe"), 300*time.Millisecond)
		switch {
		case err == nil, errors.Is(err, nats.ErrTimeout):
			return
		case errors.Is(err, nats.ErrNoResponders):
		default:
			t.Fatalf("probe request on %q: %v", subject, err)
		}
		if p != nil && !p.running() {
			t.Fatalf("nats %v exited early: %v\n%s", p.args, p.err, p.output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no subscriber on %q after %v", subject, cliTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCLIPubSub(t *testing.T) {
	natsCLI(t)
	u := startServer(t, nil)
	nc := connect(t, u)

	// 1 probe + 2 published by nats pub.
	sub := startCLI(t, u, "sub", "--count", "3", "cli.foo")
	waitForInterest(t, nc, "cli.foo", sub)
	_, pubErr := runCLI(t, u, "pub", "cli.foo", "hello {{Count}}", "--count", "2")
	sub.wait()
	out := sub.stdout.String()
	for _, want := range []string{`[#1] Received on "cli.foo"`, "probe", `[#2] Received on "cli.foo"`, "hello 1", `[#3] Received on "cli.foo"`, "hello 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats sub output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(pubErr, `Published 7 bytes to "cli.foo"`) {
		t.Errorf("nats pub output:\n%s", pubErr)
	}

	// nats pub reaches a nats.go subscriber too.
	s := subSync(t, nc, "cli.bar")
	flush(t, nc)
	runCLI(t, u, "pub", "cli.bar", "from the cli")
	if m := nextMsg(t, s); string(m.Data) != "from the cli" {
		t.Fatalf("got %q", m.Data)
	}
}

func TestCLIHeaders(t *testing.T) {
	natsCLI(t)
	u := startServer(t, nil)
	nc := connect(t, u)
	s := subSync(t, nc, "cli.hdr")
	flush(t, nc)
	runCLI(t, u, "pub", "cli.hdr", "body", "-H", "X-Multi:one", "-H", "X-Multi:two", "-H", "lower-Case:v")
	m := nextMsg(t, s)
	if string(m.Data) != "body" {
		t.Fatalf("data %q", m.Data)
	}
	if got := m.Header["X-Multi"]; strings.Join(got, ",") != "one,two" {
		t.Errorf("X-Multi = %q (headers %v)", got, m.Header)
	}
	if got := m.Header["lower-Case"]; strings.Join(got, ",") != "v" {
		t.Errorf("lower-Case = %q (headers %v): the case must be kept", got, m.Header)
	}

	// And the other way: nats sub prints the headers of a nats.go message.
	sub := startCLI(t, u, "sub", "--count", "2", "cli.hdr2")
	waitForInterest(t, nc, "cli.hdr2", sub)
	msg := nats.NewMsg("cli.hdr2")
	msg.Header.Add("X-Trace", "t1")
	msg.Header.Add("Mixed-CASE", "kept")
	msg.Data = []byte("with headers")
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	sub.wait()
	out := sub.stdout.String()
	for _, want := range []string{"X-Trace: t1", "Mixed-CASE: kept", "with headers"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats sub output lacks %q:\n%s", want, out)
		}
	}
}

func TestCLIRequestReply(t *testing.T) {
	natsCLI(t)
	u := startServer(t, nil)
	nc := connect(t, u)

	rep := startCLI(t, u, "reply", "cli.svc", "pong {{Count}}")
	waitFor(t, cliTimeout, "nats reply to listen", func() bool {
		if !rep.running() {
			t.Fatalf("nats reply exited: %v\n%s", rep.err, rep.output())
		}
		return strings.Contains(rep.stderr.String(), `Listening on "cli.svc"`)
	})
	// nats reply counts from 0.
	for i := range 2 {
		out, _ := runCLI(t, u, "request", "cli.svc", "ping")
		if want := "pong " + strconv.Itoa(i); !strings.Contains(out, want) {
			t.Errorf("nats request %d printed %q, want %q", i, out, want)
		}
	}
	// nats.go requester, CLI responder.
	resp, err := nc.Request("cli.svc", []byte("x"), readTimeout)
	if err != nil {
		t.Fatalf("nats.go request: %v", err)
	}
	if string(resp.Data) != "pong 2" {
		t.Fatalf("nats.go request got %q, want pong 2", resp.Data)
	}

	// CLI requester, nats.go responder (muxed inbox on the CLI side).
	if _, err := nc.Subscribe("cli.echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("echo:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	flush(t, nc)
	out, _ := runCLI(t, u, "request", "cli.echo", "abc", "-H", "K:v")
	if !strings.Contains(out, "echo:abc") {
		t.Errorf("nats request printed %q", out)
	}

	// No responders: reported at once.
	start := time.Now()
	_, errOut := runCLI(t, u, "request", "cli.nobody", "x", "--timeout", "20s")
	if !strings.Contains(errOut, "No responders are available") {
		t.Errorf("nats request to nobody printed:\n%s", errOut)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("no-responders took %v with a 20s timeout", took)
	}
}

func TestCLIQueueGroup(t *testing.T) {
	natsCLI(t)
	u := startServer(t, nil)
	nc := connect(t, u)
	plain := subSync(t, nc, "cli.q")
	flush(t, nc)

	members := []*cliProc{
		startCLI(t, u, "sub", "--queue", "workers", "cli.q"),
		startCLI(t, u, "sub", "--queue", "workers", "cli.q"),
	}
	// Probe until each member has received something: both are then
	// subscribed.
	pollBoth := func(prefix string) {
		seq := 0
		waitFor(t, cliTimeout, "both queue members to receive "+prefix, func() bool {
			for _, m := range members {
				if !m.running() {
					t.Fatalf("nats sub exited: %v\n%s", m.err, m.output())
				}
			}
			if strings.Contains(members[0].stdout.String(), prefix) && strings.Contains(members[1].stdout.String(), prefix) {
				return true
			}
			seq++
			publish(t, nc, "cli.q", fmt.Sprintf("%s-%d", prefix, seq))
			flush(t, nc)
			return false
		})
	}
	pollBoth("probe")

	const n = 40
	runCLI(t, u, "pub", "cli.q", "m-{{Count}}", "--count", strconv.Itoa(n))
	// Messages from one publisher arrive in order, so once each member
	// printed an "end" probe published after nats pub finished, it printed
	// all its share.
	pollBoth("end")

	re := regexp.MustCompile(`(?m)^m-(\d+)$`)
	seen := map[string]int{}
	for i, m := range members {
		got := re.FindAllStringSubmatch(m.stdout.String(), -1)
		t.Logf("member %d received %d of %d", i, len(got), n)
		for _, g := range got {
			seen[g[1]]++
		}
	}
	for i := 1; i <= n; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("m-%d delivered %d times to the queue group, want exactly once", i, c)
		}
	}
	if len(seen) != n {
		t.Errorf("queue group received %d distinct messages, want %d", len(seen), n)
	}

	// The plain subscriber got every m-i.
	flush(t, nc)
	count := 0
	for _, p := range drainPending(t, plain) {
		if strings.HasPrefix(p, "m-") {
			count++
		}
	}
	if count != n {
		t.Errorf("plain subscriber got %d of %d messages", count, n)
	}
}

func TestCLIBench(t *testing.T) {
	natsCLI(t)
	u := startServer(t, nil)
	nc := connect(t, u)

	const msgs = 2000
	// The subscriber counts the probe as well.
	sub := startCLI(t, u, "bench", "sub", "cli.bench", "--msgs", strconv.Itoa(msgs+1), "--size", "128", "--no-progress")
	waitForInterest(t, nc, "cli.bench", sub)
	pubOut, pubErr := runCLI(t, u, "bench", "pub", "cli.bench", "--msgs", strconv.Itoa(msgs), "--size", "128", "--no-progress")
	if !strings.Contains(pubOut, "publisher stats") {
		t.Errorf("nats bench pub output:\n%s\n%s", pubOut, pubErr)
	}
	sub.wait()
	if out := sub.stdout.String(); !strings.Contains(out, "subscriber stats") {
		t.Errorf("nats bench sub output:\n%s\n%s", out, sub.stderr.String())
	}

	// Several publishing clients, with headers-free 1 KiB messages.
	pubOut, pubErr = runCLI(t, u, "bench", "pub", "cli.bench2", "--clients", "2", "--msgs", "1000", "--size", "1KB", "--no-progress")
	if !strings.Contains(pubOut, "publisher aggregated stats") || strings.Count(pubOut, "(500 msgs)") != 2 {
		t.Errorf("nats bench pub --clients 2 output:\n%s\n%s", pubOut, pubErr)
	}
}
