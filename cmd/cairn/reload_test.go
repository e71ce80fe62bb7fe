package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A reload (SIGHUP; waitForSignal calls ctl.reload) applies the changed
// settings that can change at run time and logs each; a change that
// cannot, a broken file, or a reload without a file change nothing and
// log why; flags keep overriding the file (nats-server v2.15.2
// server/reload.go; docs/configuration.md, "Reload").
func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.conf")
	logPath := filepath.Join(dir, "cairn.log")
	pidPath := filepath.Join(dir, "cairn.pid")
	base := "listen: 127.0.0.1:-1\nserver_name: s1\n"
	writeFile(t, path, base+"max_payload: 1KB\nmax_pending: 4MB\n")
	var out, stderr syncBuffer
	code := run([]string{"-c", path, "--max_pending", "8MB"}, &out, &stderr, func(ctl controls) {
		addr := listenAddr(t, stderr.String())
		reload := func(text string) string {
			t.Helper()
			writeFile(t, path, text)
			before := len(stderr.String())
			ctl.reload()
			return stderr.String()[before:]
		}

		// Reloadable settings apply, each logged; the flag keeps max_pending.
		got := reload(base + "max_payload: 2KB\nmax_pending: 16MB\ndebug: true\nlogtime: false\npid_file: '" + pidPath + "'\n")
		for _, want := range []string{"[INF] Reloaded: max_payload = 2048\n", "[INF] Reloaded: debug = true\n",
			"[INF] Reloaded: logtime = false\n", "[INF] Reloaded: pid_file = " + pidPath + "\n", "[INF] Reloaded server configuration (sha256:"} {
			if !strings.Contains(got, want) {
				t.Errorf("reload log lacks %q:\n%s", want, got)
			}
		}
		if strings.Contains(got, "max_pending") {
			t.Errorf("max_pending changed though --max_pending overrides the file:\n%s", got)
		}
		if info := dialInfo(t, addr); info["max_payload"] != 2048.0 {
			t.Errorf("INFO max_payload %v after reload, want 2048", info["max_payload"])
		}
		if !strings.Contains(stderr.String(), "[DBG] ") {
			t.Errorf("no [DBG] line after debug was reloaded on:\n%s", stderr.String())
		}
		if _, err := os.Stat(pidPath); err != nil {
			t.Errorf("pid file not written by the reload: %v", err)
		}

		// A setting that cannot change refuses the whole reload.
		got = reload(base + "max_payload: 4KB\nserver_name: s2\n")
		if !strings.Contains(got, "[ERR] Failed to reload server configuration: config reload not supported for server_name: old=s1, new=s2") {
			t.Errorf("refusal not logged:\n%s", got)
		}
		if info := dialInfo(t, addr); info["max_payload"] != 2048.0 {
			t.Errorf("INFO max_payload %v after a refused reload, want 2048", info["max_payload"])
		}
		got = reload(base + "jetstream: enabled\n")
		if !strings.Contains(got, "config reload not supported for jetstream: old=false, new=true (cairn starts or stops JetStream only at start)") {
			t.Errorf("JetStream refusal not logged:\n%s", got)
		}
		got = reload(base + "server_tags: [AZ:1]\n")
		if !strings.Contains(got, "config reload not supported for server_tags: old=[], new=[az:1] (a cluster's servers learn each other's tags when they connect; cairn sets them at start only)") {
			t.Errorf("server_tags refusal not logged:\n%s", got)
		}

		// A broken file is reported with its position.
		got = reload(base + "max_payload: 2KB\nbogus: 1\n")
		if !strings.Contains(got, "Failed to reload server configuration: "+path+`:4:1: unknown field "bogus"`) {
			t.Errorf("bad file not reported:\n%s", got)
		}

		// The log file follows log_file; going back to no file is stderr.
		reload(base + "max_payload: 2KB\nlog_file: '" + logPath + "'\n")
		ctl.log.Noticef("in the file")
		if data, _ := os.ReadFile(logPath); !strings.Contains(string(data), "in the file") {
			t.Errorf("log file %q lacks the line logged after the reload", data)
		}
		reload(base + "max_payload: 2KB\n")
		ctl.log.Noticef("back on stderr")
		if !strings.Contains(stderr.String(), "back on stderr") {
			t.Errorf("log did not return to stderr")
		}
	})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
}

// A server named by -n and --cluster_name whose file names neither keeps
// reloading: every flag is applied again over the reloaded file. nats-server
// v2.15.2 merges only some flags (server/opts.go MergeOptions, without
// ServerName or Cluster.Name), so its JetStream cluster member named by -n
// refuses every reload (docs/compatibility.md, "Flags at a reload").
func TestReloadKeepsNameFlags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.conf")
	writeFile(t, path, "listen: 127.0.0.1:-1\n")
	var out, stderr syncBuffer
	code := run([]string{"-c", path, "-n", "n1", "--cluster_name", "c1", "--cluster", "nats://127.0.0.1:-1"}, &out, &stderr, func(ctl controls) {
		addr := listenAddr(t, stderr.String())
		writeFile(t, path, "listen: 127.0.0.1:-1\nmax_payload: 2KB\n")
		before := len(stderr.String())
		ctl.reload()
		got := stderr.String()[before:]
		if strings.Contains(got, "[ERR]") || !strings.Contains(got, "[INF] Reloaded server configuration (sha256:") {
			t.Errorf("reload of a server named by flags:\n%s", got)
		}
		if info := dialInfo(t, addr); info["server_name"] != "n1" || info["max_payload"] != 2048.0 {
			t.Errorf("INFO server_name %v max_payload %v after reload, want n1 and 2048", info["server_name"], info["max_payload"])
		}
	})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
}

// Without -c a reload has nothing to read: nats-server's error.
func TestReloadWithoutFile(t *testing.T) {
	var out, stderr syncBuffer
	run([]string{"-a", "127.0.0.1", "-p", "-1"}, &out, &stderr, func(ctl controls) { ctl.reload() })
	if !strings.Contains(stderr.String(), "[ERR] Failed to reload server configuration: can only reload config when a file is provided using -c or --config") {
		t.Fatalf("log:\n%s", stderr.String())
	}
}

// The binary protects its monitoring endpoints with the file's http_auth;
// a reload changes the token (logged without its value) and the next
// request needs the new one.
func TestReloadHTTPAuth(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.conf")
	base := "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\n"
	writeFile(t, path, base+"http_auth { token: tok-old-4411 }\n")
	var out, stderr syncBuffer
	code := run([]string{"-c", path}, &out, &stderr, func(ctl controls) {
		log := stderr.String()
		const marker = "Starting http monitor on "
		i := strings.Index(log, marker)
		if i < 0 {
			t.Fatalf("no monitor line in:\n%s", log)
		}
		addr, _, _ := strings.Cut(log[i+len(marker):], "\n")
		status := func(token string) int {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/varz", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if a, b := status(""), status("tok-old-4411"); a != http.StatusUnauthorized || b != http.StatusOK {
			t.Fatalf("before the reload: %d without the token, %d with it", a, b)
		}
		writeFile(t, path, base+"http_auth { token: tok-new-9922 }\n")
		ctl.reload()
		if !strings.Contains(stderr.String(), "[INF] Reloaded: http_auth.token (value not shown)\n") {
			t.Errorf("reload log:\n%s", stderr.String())
		}
		if a, b := status("tok-old-4411"), status("tok-new-9922"); a != http.StatusUnauthorized || b != http.StatusOK {
			t.Errorf("after the reload: %d with the old token, %d with the new one", a, b)
		}
	})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "tok-old") || strings.Contains(stderr.String(), "tok-new") {
		t.Errorf("a token in the log:\n%s", stderr.String())
	}
}

// A reload of the security settings is applied and logged without the
// values of secrets; a change cairn cannot make (here a new
// no_auth_user, as nats-server refuses it) is refused with the setting
// named, and the file's passwords never reach the log.
func TestReloadSecurityLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.conf")
	base := "listen: 127.0.0.1:-1\n"
	users := func(pw string) string {
		return "authorization { users: [{user: a, password: " + pw + "}, {user: b, password: pb-8812}] }\n"
	}
	writeFile(t, path, base+users("pw-old-5521"))
	var out, stderr syncBuffer
	code := run([]string{"-c", path}, &out, &stderr, func(ctl controls) {
		reload := func(text string) string {
			t.Helper()
			writeFile(t, path, text)
			before := len(stderr.String())
			ctl.reload()
			return stderr.String()[before:]
		}
		got := reload(base + users("pw-new-7734"))
		if !strings.Contains(got, "[INF] Reloaded: authorization.users (value not shown)\n") || !strings.Contains(got, "Reloaded server configuration") {
			t.Errorf("reload log:\n%s", got)
		}
		got = reload(base + users("pw-new-7734") + "no_auth_user: b\n")
		if !strings.Contains(got, "[ERR] Failed to reload server configuration: config reload not supported for no_auth_user: old=, new=b") {
			t.Errorf("no_auth_user refusal:\n%s", got)
		}
		got = reload(base + users("pw-new-7734") + "cluster { listen: 127.0.0.1:-1, tls { cert_file: x, key_file: y } }\n")
		if !strings.Contains(got, "Failed to reload server configuration") {
			t.Errorf("cluster refusal:\n%s", got)
		}
	})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	for _, secret := range []string{"pw-old-5521", "pw-new-7734", "pb-8812"} {
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("password %q in the log:\n%s", secret, stderr.String())
		}
	}
}

// A user of the system account reloads the configuration file with
// $SYS.REQ.SERVER.<id>.RELOAD (`nats server config reload`): the answer
// carries no error and the new settings apply; a refused reload answers
// with the refusal, code 500, as nats-server v2.15.2 does.
func TestReloadBySystemRequest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.conf")
	base := "listen: 127.0.0.1:-1\nserver_name: s1\nsystem_account: SYS\naccounts { SYS { users [ {user: admin, password: pw} ] } }\n"
	writeFile(t, path, base+"max_payload: 1KB\n")
	var out, stderr syncBuffer
	code := run([]string{"-c", path}, &out, &stderr, func(ctl controls) {
		addr := listenAddr(t, stderr.String())
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(nc)
		line, _ := r.ReadString('\n')
		var info map[string]any
		_ = json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info)
		id, _ := info["server_id"].(string)
		fmt.Fprint(nc, "CONNECT {\"verbose\":false,\"user\":\"admin\",\"pass\":\"pw\"}\r\nSUB _INBOX.r 1\r\nPING\r\n")
		request := func() map[string]any {
			t.Helper()
			fmt.Fprintf(nc, "PUB $SYS.REQ.SERVER.%s.RELOAD _INBOX.r 0\r\n\r\n", id)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("waiting for the RELOAD answer: %v", err)
				}
				if strings.HasPrefix(line, "MSG _INBOX.r ") {
					body, _ := r.ReadString('\n')
					var v map[string]any
					if err := json.Unmarshal([]byte(body), &v); err != nil {
						t.Fatalf("answer %q: %v", body, err)
					}
					return v
				}
			}
		}
		writeFile(t, path, base+"max_payload: 2KB\n")
		if v := request(); v["error"] != nil || v["server"] == nil {
			t.Errorf("RELOAD answered %v", v)
		}
		if info := dialInfo(t, addr); info["max_payload"] != 2048.0 {
			t.Errorf("INFO max_payload %v after the RELOAD request, want 2048", info["max_payload"])
		}
		writeFile(t, path, strings.Replace(base, "s1", "s2", 1))
		v := request()
		e, _ := v["error"].(map[string]any)
		if e["code"] != 500.0 || !strings.Contains(fmt.Sprint(e["description"]), "config reload not supported for server_name") {
			t.Errorf("refused RELOAD answered %v", v)
		}
	})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
}
