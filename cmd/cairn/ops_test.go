package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ports_file_dir: the ports file lists the client and monitoring URLs as
// nats-server's does while the server runs, and is removed at exit.
func TestPortsFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "cairn.conf")
	writeFile(t, conf, fmt.Sprintf("listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\nports_file_dir: %q\n", dir))
	want := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(os.Args[0]), os.Getpid()))
	var out, errOut bytes.Buffer
	code := run([]string{"-c", conf}, &out, &errOut, func(controls) {
		data, err := os.ReadFile(want)
		if err != nil {
			t.Errorf("ports file: %v", err)
			return
		}
		var p ports
		if err := json.Unmarshal(data, &p); err != nil || len(p.Nats) != 1 || len(p.Monitoring) != 1 ||
			!strings.HasPrefix(p.Nats[0], "nats://127.0.0.1:") || !strings.HasPrefix(p.Monitoring[0], "http://127.0.0.1:") {
			t.Errorf("ports file %s: %v", data, err)
		}
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Fatalf("ports file left behind: %v", err)
	}
}

// SIGUSR2's lame duck mode: with no client, the server shuts down at once
// and the process exits 0 without another signal (the wait returns when
// the server is done).
func TestLameDuckExits(t *testing.T) {
	var out, errOut bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- run([]string{"-a", "127.0.0.1", "-p", "-1"}, &out, &errOut, func(ctl controls) {
			ctl.lameDuck()
			<-ctl.done
		})
	}()
	select {
	case code := <-exited:
		if code != 0 || !strings.Contains(errOut.String(), "Entering lame duck mode") {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lame duck mode did not end the server")
	}
}

// logfile_size_limit rotates the log file once it passes the limit, and
// logfile_max_num keeps that many files, the current one included.
func TestLogRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.log")
	f, err := openLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := newRotator(path, f, 100, 3)
	defer r.close()
	line := []byte(strings.Repeat("x", 59) + "\n")
	for range 20 {
		if _, err := r.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	matches, _ := filepath.Glob(path + ".*")
	if len(matches) != 2 {
		t.Fatalf("rotated files %v, want 2 (3 files with the current one)", matches)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() > 120 {
		t.Fatalf("current file: %v, %v", st, err)
	}
	r.setLimits(0, 0)
	for range 5 {
		_, _ = r.Write(line)
	}
	if after, _ := filepath.Glob(path + ".*"); len(after) != 2 {
		t.Fatalf("rotated with the limit off: %v", after)
	}
}
