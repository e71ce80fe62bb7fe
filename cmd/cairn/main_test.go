package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/logger"
)

func noWait(*logger.Logger, func()) {}

// The log file given with -l is reopened by the reopen function SIGUSR1
// calls, so a rotated log starts a new file.
func TestLogFileReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.log")
	rotated := filepath.Join(dir, "cairn.log.1")
	var out, errOut bytes.Buffer
	code := run([]string{"-a", "127.0.0.1", "-p", "-1", "-l", path}, &out, &errOut, func(log *logger.Logger, reopen func()) {
		if err := os.Rename(path, rotated); err != nil {
			t.Error(err)
		}
		reopen()
		log.Noticef("after rotation")
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

func TestParseFlagsNatsServerNames(t *testing.T) {
	cfg, err := parseFlags([]string{"-a", "127.0.0.1", "-p", "4333", "-n", "n1", "-js", "-sd", "/tmp/x", "-m", "8222", "-DV", "-l", "/tmp/log"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.opts
	if o.Host != "127.0.0.1" || o.Port != 4333 || o.ServerName != "n1" || !o.JetStream || o.StoreDir != "/tmp/x" {
		t.Fatalf("options not parsed: %+v", o)
	}
	if cfg.httpPort != 8222 || !cfg.debug || !cfg.trace || cfg.logFile != "/tmp/log" {
		t.Fatalf("config not parsed: %+v", cfg)
	}
	long, err := parseFlags([]string{"--addr", "::1", "--port", "-1", "--server_name", "x", "--jetstream", "--store_dir", "d", "--http_port", "1", "--debug", "--trace"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if long.opts.Host != "::1" || long.opts.Port != -1 || !long.opts.JetStream || !long.debug || !long.trace {
		t.Fatalf("long flags not parsed: %+v", long)
	}
}

// --max_memory_store and --max_file_store take bytes with nats-server's
// configuration suffixes (k, m, g, t, p: powers of 1000; kb, kib, ki and
// so on: powers of 1024); anything else is a bad flag.
func TestStorageLimitFlags(t *testing.T) {
	cases := map[string]int64{
		"0": 0, "1000": 1000, "64K": 64000, "64KB": 64 << 10, "512mb": 512 << 20, "1G": 1e9,
		"1GB": 1 << 30, "10MiB": 10 << 20, "3gi": 3 << 30, "2TB": 2 << 40, "2t": 2e12, "1p": 1e15,
	}
	for in, want := range cases {
		cfg, err := parseFlags([]string{"--max_file_store", in, "--max_memory_store", in}, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil || cfg.opts.MaxFileStore != want || cfg.opts.MaxMemoryStore != want {
			t.Errorf("%q: got %d/%d %v, want %d", in, cfg.opts.MaxFileStore, cfg.opts.MaxMemoryStore, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1X", "G", "99999999999T", "1kbb", "1 k", "k1"} {
		if _, err := parseFlags([]string{"--max_file_store", bad}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
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
	if code := run([]string{"-c", "x.conf"}, &out, &errOut, noWait); code != 2 {
		t.Fatalf("-c exit code %d, want 2", code)
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
	code := run([]string{"-a", "127.0.0.1", "-p", port}, &out, &errOut, func(*logger.Logger, func()) { t.Error("server started on a port in use") })
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
