package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

func noWait(controls) {}

// The log file given with -l is reopened by the reopen function SIGUSR1
// calls, so a rotated log starts a new file.
func TestLogFileReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.log")
	rotated := filepath.Join(dir, "cairn.log.1")
	var out, errOut bytes.Buffer
	code := run([]string{"-a", "127.0.0.1", "-p", "-1", "-l", path}, &out, &errOut, func(ctl controls) {
		if err := os.Rename(path, rotated); err != nil {
			t.Error(err)
		}
		ctl.reopen()
		ctl.log.Noticef("after rotation")
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	newLog, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(newLog), "after rotation") {
		t.Fatalf("reopened log: %q, %v", newLog, err)
	}
	oldLog, _ := os.ReadFile(rotated)
	if !strings.Contains(string(oldLog), "Server is ready") || strings.Contains(string(oldLog), "after rotation") {
		t.Fatalf("rotated log: %q", oldLog)
	}
}

// settingsOf parses args as the command line and returns the settings.
func settingsOf(t *testing.T, args ...string) *config.Config {
	t.Helper()
	cl, err := parseArgs(args, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := cl.settings()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestParseFlagsNatsServerNames(t *testing.T) {
	c := settingsOf(t, "-a", "127.0.0.1", "-p", "4333", "-n", "n1", "-js", "-sd", "/tmp/x", "-m", "8222", "-DV", "-l", "/tmp/log", "-P", "/tmp/pid")
	if c.Host != "127.0.0.1" || c.Port != 4333 || c.ServerName != "n1" || !c.JetStream.Enabled || c.JetStream.StoreDir != "/tmp/x" {
		t.Fatalf("options not parsed: %+v", *c)
	}
	if c.Monitor.Port != 8222 || !c.Log.Debug || !c.Log.Trace || c.Log.File != "/tmp/log" || c.Process.PidFile != "/tmp/pid" {
		t.Fatalf("config not parsed: %+v", *c)
	}
	long := settingsOf(t, "--addr", "::1", "--port", "-1", "--server_name", "x", "--jetstream", "--store_dir", "d", "--http_port", "1", "--debug", "--trace", "--pid", "p")
	if long.Host != "::1" || long.Port != -1 || !long.JetStream.Enabled || !long.Log.Debug || !long.Log.Trace || long.Process.PidFile != "p" {
		t.Fatalf("long flags not parsed: %+v", *long)
	}
}

// --max_memory_store and --max_file_store take bytes with nats-server's
// configuration suffixes (config.ParseSize); unset they leave the limit
// unset; anything else is a bad flag.
func TestStorageLimitFlags(t *testing.T) {
	c := settingsOf(t, "--max_file_store", "10GB", "--max_memory_store", "0")
	if c.JetStream.MaxFileStore != 10<<30 || c.JetStream.MaxMemoryStore != 0 {
		t.Fatalf("got %+v", c.JetStream)
	}
	if c := settingsOf(t); c.JetStream.MaxFileStore != config.Unset || c.JetStream.MaxMemoryStore != config.Unset {
		t.Fatalf("unset limits: %+v", c.JetStream)
	}
	for _, bad := range []string{"", "-1", "1X", "G", "99999999999T", "1kbb", "1 k", "k1"} {
		if _, err := parseArgs([]string{"--max_file_store", bad}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestBadFlagExitsTwo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--no-such-flag"}, &out, &errOut, noWait); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "no-such-flag") {
		t.Fatalf("stderr does not name the bad flag: %q", errOut.String())
	}
	if code := run([]string{"-p", "notaport"}, &out, &errOut, noWait); code != 2 {
		t.Fatalf("bad port exit code %d, want 2", code)
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut, noWait); code != 0 || !strings.HasPrefix(out.String(), "cairn v") {
		t.Fatalf("--version: code %d out %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"-h"}, &out, &errOut, noWait); code != 0 || !strings.Contains(out.String(), "--store_dir") {
		t.Fatalf("-h: code %d usage on stdout %q", code, out.String())
	}
}

func TestPortInUseExitsOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	var out, errOut bytes.Buffer
	code := run([]string{"-a", "127.0.0.1", "-p", port}, &out, &errOut, func(controls) { t.Error("server started on a port in use") })
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "[FTL]") || !strings.Contains(errOut.String(), "address already in use") {
		t.Fatalf("no clear message: %q", errOut.String())
	}
}

func TestCleanShutdownExitsZero(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-a", "127.0.0.1", "-p", "-1"}, &out, &errOut, noWait)
	if code != 0 {
		t.Fatalf("exit code %d, want 0; log:\n%s", code, errOut.String())
	}
	for _, want := range []string{"[INF] Listening for client connections on 127.0.0.1:", "[INF] Server is ready", "[INF] Server Exiting.."} {
		if !strings.Contains(errOut.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, errOut.String())
		}
	}
}

// A shutdown that hangs does not hold the process: finishWithin gives up
// after its deadline (and the caller exits).
func TestFinishWithin(t *testing.T) {
	if !finishWithin(func() {}, time.Minute) {
		t.Fatal("a shutdown that returned at once was reported as hung")
	}
	block := make(chan struct{})
	defer close(block)
	if finishWithin(func() { <-block }, 20*time.Millisecond) {
		t.Fatal("a hung shutdown was reported as finished")
	}
}

// Every flag nats-server v2.15.2 defines is accepted (a unit file or a
// container's arguments written for it start cairn): the logging ones set
// what the file's keys set; --syslog, --remote_syslog and
// --max_traced_msg_len are ignored with a warning at start.
func TestNatsServerLoggingFlags(t *testing.T) {
	c := settingsOf(t, "-T=false", "--logtime_utc", "--log_size_limit", "1000", "--ports_file_dir", "/tmp/ports", "-VV")
	if c.Log.Time || !c.Log.TimeUTC || c.Log.SizeLimit != 1000 || c.Process.PortsFileDir != "/tmp/ports" || !c.Log.Trace || c.Log.Debug {
		t.Fatalf("logging flags not parsed: %+v %+v", c.Log, c.Process)
	}
	if c := settingsOf(t, "-DVV"); !c.Log.Trace || !c.Log.Debug {
		t.Fatalf("-DVV: %+v", c.Log)
	}
	if c := settingsOf(t, "--logtime=false"); c.Log.Time {
		t.Fatalf("--logtime=false: %+v", c.Log)
	}
	var out, stderr syncBuffer
	code := run([]string{"-a", "127.0.0.1", "-p", "-1", "-s", "-r", "udp://127.0.0.1:514", "--max_traced_msg_len", "10", "-T=false"}, &out, &stderr, noWait)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{`[WRN] command line: flag "syslog" is ignored`, `[WRN] command line: flag "remote_syslog" is ignored`, `[WRN] command line: flag "max_traced_msg_len" is ignored`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if line, _, _ := strings.Cut(log, "\n"); !strings.HasPrefix(line, "[") || strings.Contains(line, "/") {
		t.Errorf("-T=false still timestamps: %q", line)
	}
}
