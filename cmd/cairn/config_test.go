package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
)

// syncBuffer collects the log the server writes from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A flag given on the command line overrides the file; what the flags do
// not set comes from the file (nats-server's rule, ConfigureOptions).
func TestFlagsOverrideFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.conf")
	writeFile(t, path, "port: 4333\nserver_name: fromfile\ndebug: true\ntrace: true\nmax_payload: 2MB\njetstream { store_dir: /a, max_file_store: 1GB }\n")
	c := settingsOf(t, "-c", path, "-p", "4444", "-D=false", "-sd", "/b", "--max_file_store", "0")
	if c.Port != 4444 || c.ServerName != "fromfile" || c.Log.Debug || !c.Log.Trace || c.Limits.MaxPayload != 2<<20 {
		t.Fatalf("got %+v", *c)
	}
	if !c.JetStream.Enabled || c.JetStream.StoreDir != "/b" || c.JetStream.MaxFileStore != 0 {
		t.Fatalf("jetstream %+v", c.JetStream)
	}
	if c.File != path || !strings.HasPrefix(c.Digest, "sha256:") {
		t.Fatalf("file %q digest %q", c.File, c.Digest)
	}
}

// dialInfo connects to addr and returns the INFO it sends.
func dialInfo(t *testing.T, addr string) map[string]any {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "INFO "))), &info); err != nil {
		t.Fatalf("INFO %q: %v", line, err)
	}
	return info
}

// listenAddr finds the client address in the log.
func listenAddr(t *testing.T, log string) string {
	t.Helper()
	const marker = "Listening for client connections on "
	i := strings.Index(log, marker)
	if i < 0 {
		t.Fatalf("no listen line in:\n%s", log)
	}
	addr, _, _ := strings.Cut(log[i+len(marker):], "\n")
	return addr
}

// A server starts from its file: the settings reach INFO, the log names
// the file and its digest, the PID file is written.
func TestServerStartsFromFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.conf")
	pid := filepath.Join(dir, "cairn.pid")
	writeFile(t, path, "listen: 127.0.0.1:-1\nserver_name: from-file\nmax_payload: 64KB\npid_file: \""+pid+"\"\nserver_metadata: {a: b}\nhttp_port: -1\nserver_tags: [\" AZ:1\", ssd]\n")
	var out, log syncBuffer
	code := run([]string{"-c", path}, &out, &log, func(ctl controls) {
		info := dialInfo(t, listenAddr(t, log.String()))
		if info["server_name"] != "from-file" || info["max_payload"] != float64(64<<10) {
			t.Errorf("INFO %v", info)
		}
		data, err := os.ReadFile(pid)
		if err != nil || string(data) != strconv.Itoa(os.Getpid()) {
			t.Errorf("pid file %q, %v", data, err)
		}
		varz := getJSON(t, "http://"+monitorAddr(t, log.String())+"/varz")
		if varz["server_name"] != "from-file" || varz["max_payload"] != float64(64<<10) || fmt.Sprint(varz["tags"]) != "[az:1 ssd]" {
			t.Errorf("/varz %v", varz)
		}
	})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, log.String())
	}
	for _, want := range []string{"[INF] Using configuration file: " + path + " (sha256:", `[WRN] ` + path + `:5:1: field "server_metadata" is ignored`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// A bad file stops the start with exit 1 and every problem, each naming
// the file, line and column, then a blank line, as nats-server v2.15.2
// prints them.
func TestBadFileExitsOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.conf")
	writeFile(t, path, "port: 4222\nleafnodes { port: 7422 }\n  bogus: 1\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"-c", path}, &out, &errOut, noWait); code != 1 {
		t.Fatalf("exit %d", code)
	}
	want := "cairn: " + path + `:2:1: field "leafnodes" is not supported by cairn` + "\n" + path + `:3:3: unknown field "bogus"` + "\n\n"
	if errOut.String() != want {
		t.Fatalf("stderr %q, want %q", errOut.String(), want)
	}
	errOut.Reset()
	if code := run([]string{"-c", filepath.Join(t.TempDir(), "none.conf")}, &out, &errOut, noWait); code != 1 || !strings.Contains(errOut.String(), "no such file or directory") {
		t.Fatalf("missing file: exit %d, %q", code, errOut.String())
	}
}

// -t checks the file and exits: 0 and nats-server's "is valid" line for a
// good file (warnings printed before it), 1 with the problems for a bad
// one, 2 without -c. test/config_test.go runs the binary.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	writeFile(t, good, "port: 4333\nserver_metadata: {a: b}\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"-t", "-c", good}, &out, &errOut, func(controls) { t.Error("-t started the server") }); code != 0 {
		t.Fatalf("good file: exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `good.conf:2:1: field "server_metadata" is ignored`) ||
		!strings.HasPrefix(lines[1], "cairn: configuration file "+good+" is valid (sha256:") {
		t.Fatalf("stderr %q", errOut.String())
	}
	bad := filepath.Join(dir, "bad.conf")
	writeFile(t, bad, "max_payload: 100MB\n")
	errOut.Reset()
	if code := run([]string{"-t", "-c", bad}, &out, &errOut, noWait); code != 1 {
		t.Fatalf("bad file: exit %d", code)
	}
	if !strings.Contains(errOut.String(), "cairn: max_payload (104857600) cannot be higher than max_pending (67108864)") {
		t.Fatalf("stderr %q", errOut.String())
	}
	// A flag that mends the file makes it pass, as it would start.
	errOut.Reset()
	if code := run([]string{"-t", "-c", bad, "--max_pending", "200000000"}, &out, &errOut, noWait); code != 0 {
		t.Fatalf("mended by a flag: exit %d: %s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"-t"}, &out, &errOut, noWait); code != 2 || !strings.Contains(errOut.String(), "must specify [-c, --config]") {
		t.Fatalf("-t alone: exit %d, %q", code, errOut.String())
	}
}

// The defaults the config package checks combinations with are the
// server's.
func TestDefaultsAgree(t *testing.T) {
	if config.DefaultMaxPayload != server.DefaultMaxPayload || config.DefaultMaxPending != server.DefaultMaxPending {
		t.Fatalf("config defaults %d/%d, server defaults %d/%d", config.DefaultMaxPayload, config.DefaultMaxPending,
			server.DefaultMaxPayload, server.DefaultMaxPending)
	}
}

// monitorAddr returns the address of the monitoring listener from the
// log's "Starting http monitor on <addr>" line.
func monitorAddr(t *testing.T, log string) string {
	t.Helper()
	const marker = "Starting http monitor on "
	i := strings.Index(log, marker)
	if i < 0 {
		t.Fatalf("no monitor line in:\n%s", log)
	}
	addr, _, _ := strings.Cut(log[i+len(marker):], "\n")
	return addr
}

// getJSON fetches a monitoring endpoint and decodes its JSON object.
func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return m
}

// A max_payload over 8 MB is warned of when the server starts, without a
// position, and -t does not print it: nats-server v2.15.2 logs it in Start
// and its -t says only that the file is valid.
func TestLargePayloadWarnedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.conf")
	writeFile(t, path, "listen: 127.0.0.1:-1\nmax_payload: 16MB\n")
	const warn = "Maximum payloads over 8.00 MB are generally discouraged and could lead to poor performance"
	var out, errOut bytes.Buffer
	if code := run([]string{"-t", "-c", path}, &out, &errOut, noWait); code != 0 || strings.Contains(errOut.String(), "discouraged") {
		t.Fatalf("-t: exit %d, %q", code, errOut.String())
	}
	var log syncBuffer
	if code := run([]string{"-c", path}, &out, &log, noWait); code != 0 {
		t.Fatalf("exit %d:\n%s", code, log.String())
	}
	if !strings.Contains(log.String(), "[WRN] "+warn+"\n") {
		t.Errorf("log lacks the warning:\n%s", log.String())
	}
}
