package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestParseFlagsNatsServerNames(t *testing.T) {
	cfg, err := parseFlags([]string{"-a", "127.0.0.1", "-p", "4333", "-n", "n1", "-js", "-sd", "/tmp/x", "-m", "8222", "-DV", "-l", "/tmp/log"}, &bytes.Buffer{})
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
	long, err := parseFlags([]string{"--addr", "::1", "--port", "-1", "--server_name", "x", "--jetstream", "--store_dir", "d", "--http_port", "1", "--debug", "--trace"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if long.opts.Host != "::1" || long.opts.Port != -1 || !long.opts.JetStream || !long.debug || !long.trace {
		t.Fatalf("long flags not parsed: %+v", long)
	}
}

func TestBadFlagExitsTwo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--no-such-flag"}, &out, &errOut, func() {}); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "no-such-flag") {
		t.Fatalf("stderr does not name the bad flag: %q", errOut.String())
	}
	if code := run([]string{"-c", "x.conf"}, &out, &errOut, func() {}); code != 2 {
		t.Fatalf("-c exit code %d, want 2", code)
	}
	if code := run([]string{"-p", "notaport"}, &out, &errOut, func() {}); code != 2 {
		t.Fatalf("bad port exit code %d, want 2", code)
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut, func() {}); code != 0 || !strings.HasPrefix(out.String(), "cairn v") {
		t.Fatalf("--version: code %d out %q", code, out.String())
	}
	errOut.Reset()
	if code := run([]string{"-h"}, &out, &errOut, func() {}); code != 0 || !strings.Contains(errOut.String(), "--store_dir") {
		t.Fatalf("-h: code %d usage %q", code, errOut.String())
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
	code := run([]string{"-a", "127.0.0.1", "-p", port}, &out, &errOut, func() { t.Error("server started on a port in use") })
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "[FTL]") || !strings.Contains(errOut.String(), "address already in use") {
		t.Fatalf("no clear message: %q", errOut.String())
	}
}

func TestCleanShutdownExitsZero(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-a", "127.0.0.1", "-p", "-1"}, &out, &errOut, func() {})
	if code != 0 {
		t.Fatalf("exit code %d, want 0; log:\n%s", code, errOut.String())
	}
	for _, want := range []string{"[INF] Listening for client connections on 127.0.0.1:", "[INF] Server is ready", "[INF] Server Exiting.."} {
		if !strings.Contains(errOut.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, errOut.String())
		}
	}
}
