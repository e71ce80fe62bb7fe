package test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
			m := regexp.MustCompile(`Starting https monitor on (\S+)`).FindStringSubmatch(p.log.String())
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
