package test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// https_port serves the monitoring endpoints over TLS with the server's
// tls block, asking no client certificate even when the block verifies
// clients; http_port with https_port, or https_port without a tls block,
// stops the start with nats-server v2.15.2's texts. The binary of each
// server runs the same files.
func TestHTTPSMonitoring(t *testing.T) {
	pki := newPKI(t)
	cert, key := pki.server(t)
	tlsBlock := fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }\n", cert, key, pki.caFile)
	bins := map[string]string{"cairn": buildCairn(t)}
	if natsServerAvailable(t) {
		bins["nats-server"] = natsServerBinary(t)
	}
	for name, bin := range bins {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.conf")
			if err := os.WriteFile(path, []byte("listen: 127.0.0.1:-1\nhttps_port: -1\n"+tlsBlock), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startProc(t, bin, nil, "-c", path)
			m := p.waitLog(t, regexp.MustCompile(`Starting https monitor on (\S+)`))
			if m == nil {
				t.Fatalf("no https monitor line in:\n%s", p.log.String())
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}, Timeout: readTimeout}
			defer hc.CloseIdleConnections()
			resp, err := hc.Get("https://" + m[1] + "/varz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var varz map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&varz); err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET /varz: %d %v", resp.StatusCode, err)
			}
			// With https_port -1, cairn reports the bound port, nats-server
			// the configured -1 (docs/compatibility.md).
			_, port, _ := strings.Cut(m[1], ":")
			if name == "nats-server" {
				port = "-1"
			}
			if fmt.Sprint(varz["https_port"]) != port || varz["http_port"] != 0.0 {
				t.Errorf("/varz https_port %v http_port %v, want %s and 0", varz["https_port"], varz["http_port"], port)
			}
			if resp, err := http.Get("http://" + m[1] + "/varz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("plain HTTP on the https port: %s", resp.Status)
				}
			}

			for _, tc := range []struct{ conf, want string }{
				{"https_port: 8443\nhttp_port: 8222\n" + tlsBlock, "can't specify both HTTP (8222) and HTTPs (8443) ports"},
				{"https_port: 8443\n", "TLS cert and key required for HTTPS"},
			} {
				bad := filepath.Join(t.TempDir(), "bad.conf")
				if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:-1\n"+tc.conf), 0o600); err != nil {
					t.Fatal(err)
				}
				if code, out := exitCode(t, bin, nil, "-c", bad); code != 1 || !strings.Contains(out, tc.want) {
					t.Errorf("%q: exit %d, %q; want %q", tc.conf, code, out, tc.want)
				}
			}
		})
	}
}

// http_auth (cairn's own; docs/monitoring.md "Authentication") protects
// every monitoring endpoint of the binary started from a file: 401 with
// WWW-Authenticate without credentials, the data with the user and
// password (bcrypt) or the token; /healthz open with healthz_no_auth.
// No secret of the file (the monitoring ones, the clients' passwords and
// token) shows in /varz, /connz, the $SYS VARZ or the log.
func TestMonitorAuthBinary(t *testing.T) {
	const monPass, monToken, userPass = "mon-pw-3c1f", "mon-tok-a90e", "user-pw-77d4"
	conf := fmt.Sprintf(`listen: 127.0.0.1:-1
http: 127.0.0.1:-1
http_auth { user: scraper, password: %q, token: %s, healthz_no_auth: true }
accounts {
  SYS { users [{user: sys, password: %q}] }
  APP { users [{user: app, password: %q}] }
}
system_account: SYS
`, bcryptOf(t, monPass), monToken, userPass, userPass)
	path := filepath.Join(t.TempDir(), "s.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, buildCairn(t), nil, "-c", path)
	m := p.waitLog(t, regexp.MustCompile(`Starting http monitor on (\S+)`))
	if m == nil {
		t.Fatalf("no http monitor line in:\n%s", p.log.String())
	}
	base := "http://" + m[1]
	get := func(path, user, pass, token string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: readTimeout}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	secrets := []string{monPass, monToken, userPass, "$2a$"}
	noSecret := func(where, s string) {
		t.Helper()
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				t.Errorf("%s shows %q:\n%s", where, sec, s)
			}
		}
	}
	nc := connect(t, p.clientURL(t), nats.UserInfo("app", userPass))
	defer nc.Close()
	for _, ep := range []string{"/varz", "/connz?auth=true", "/metrics", "/accountz?acc=APP", "/"} {
		code, h, body := get(ep, "", "", "")
		if code != http.StatusUnauthorized || len(h.Values("WWW-Authenticate")) != 2 {
			t.Errorf("%s without credentials: %d %v %s", ep, code, h.Values("WWW-Authenticate"), body)
		}
		if code, _, _ := get(ep, "scraper", "wrong", ""); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d", ep, code)
		}
		code, _, body = get(ep, "scraper", monPass, "")
		if code != http.StatusOK {
			t.Errorf("%s with the password: %d %s", ep, code, body)
		}
		noSecret(ep, body)
		if code, _, _ := get(ep, "", "", monToken); code != http.StatusOK {
			t.Errorf("%s with the token: %d", ep, code)
		}
	}
	if code, _, body := get("/healthz", "", "", ""); code != http.StatusOK {
		t.Errorf("/healthz with healthz_no_auth: %d %s", code, body)
	}
	sys := connect(t, p.clientURL(t), nats.UserInfo("sys", userPass))
	defer sys.Close()
	msg, err := sys.Request("$SYS.REQ.SERVER.PING.VARZ", nil, readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	noSecret("$SYS.REQ.SERVER.PING.VARZ", string(msg.Data))
	noSecret("the log", p.log.String())
}

// waitLog waits (startTimeout) for a line of p's log matching re and
// returns its submatches, nil when none came: the monitor may log its
// address after "Server is ready", which startProc waits for.
func (p *proc) waitLog(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	deadline := time.Now().Add(startTimeout)
	for m = re.FindStringSubmatch(p.log.String()); m == nil && time.Now().Before(deadline); m = re.FindStringSubmatch(p.log.String()) {
		time.Sleep(10 * time.Millisecond)
	}
	return m
}
