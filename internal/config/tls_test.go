package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTLSBlockErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{"tls { cert_file: 5 }", `F:1:6: error parsing tls config, expected 'cert_file' to be filename`},
		{"tls { verify: 5 }", `F:1:6: error parsing tls config, expected 'verify' to be a boolean`},
		{"tls { cert_file: /nonexistent/c.pem, key_file: /nonexistent/k.pem }", `F:1:0: error parsing X509 certificate/key pair: open /nonexistent/c.pem: no such file or directory`},
		{"tls { cert_file: c.pem }", `F:1:0: missing 'key_file' in TLS configuration`},
		{`tls { min_version: "1.1" }`, `F:1:6: unsupported TLS version: TLS 1.1`},
		{`tls { cipher_suites: ["NOPE"] }`, `F:1:6: unrecognized cipher NOPE`},
		{`tls { curve_preferences: [] }`, `F:1:6: error parsing tls config, 'curve_preferences' cannot be empty`},
		{`tls { pinned_certs: ["abc"] }`, `F:1:6: error parsing tls config, 'pinned_certs' key abc does not look like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo`},
		{`tls { handshake_first: "sometimes" }`, `F:1:6: field "handshake_first"'s value "sometimes" is invalid`},
		{`tls { ocsp_peer: true }`, `F:1:6: field "ocsp_peer" is not supported by cairn yet`},
		{`tls { timeout: "x" }`, `F:1:6: error parsing tls config, 'timeout' time: invalid duration "x"`},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			wantLines(t, problemTexts(t, tc.text), tc.want)
		})
	}
}

func TestTLSBlockValues(t *testing.T) {
	_, _, err := loadText(t, `tls { handshake_first: auto, timeout: 0.5, pinned_certs: ["`+strings.Repeat("AB", 32)+`"], min_version: "1.3" }`)
	// No certificate: nothing to load, the values are kept.
	if err != nil {
		t.Fatal(err)
	}
	c, _ := mustLoad(t, `tls { handshake_first: "300ms", timeout: 0.5, pinned_certs: ["`+strings.Repeat("AB", 32)+`"] }
allow_non_tls: true`)
	tl := c.TLS
	if !tl.HandshakeFirst || tl.HandshakeFirstFallback != 300*time.Millisecond || tl.Timeout != 500*time.Millisecond ||
		len(tl.PinnedCerts) != 1 || tl.PinnedCerts[0] != strings.Repeat("ab", 32) || !tl.AllowNonTLS || tl.Enabled() {
		t.Fatalf("TLS %+v", tl)
	}
}

// selfSigned writes a self-signed certificate and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "n1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// The cluster's tls block (docs/routes.md, "TLS"): the client block's keys
// and errors, insecure read, handshake_first ignored with a warning,
// verify_and_map not supported yet, a block without a certificate
// refused; the peer's certificate is always required and verified, and
// ca_file's CAs verify the servers dialed too.
func TestClusterTLS(t *testing.T) {
	cert, key := selfSigned(t, t.TempDir())
	cases := []struct{ text, want string }{
		{"cluster { tls { cert_file: 5 } }", `F:1:16: error parsing tls config, expected 'cert_file' to be filename`},
		{"cluster { tls { insecure: 1 } }", `F:1:16: error parsing tls config, expected 'insecure' to be a boolean`},
		{"cluster { tls { cert_file: c.pem } }", `F:1:10: missing 'key_file' in TLS configuration`},
		{"cluster { tls { ca_file: ca.pem } }", `F:1:10: missing 'cert_file' in TLS configuration`},
		{"cluster { tls { verify_and_map: true } }", `F:1:16: field "verify_and_map" is not supported by cairn yet`},
		{"cluster { tls { cert_file: /nonexistent/c.pem, key_file: /nonexistent/k.pem } }", `F:1:10: error parsing X509 certificate/key pair: open /nonexistent/c.pem: no such file or directory`},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			wantLines(t, problemTexts(t, tc.text), tc.want)
		})
	}
	c, warns := mustLoad(t, fmt.Sprintf(`cluster { port: 6222, tls { cert_file: %q, key_file: %q, ca_file: %q, timeout: 3, insecure: true, verify: false, handshake_first: true } }`, cert, key, cert))
	tl := c.Cluster.TLS
	if !tl.Enabled() || !tl.Insecure || tl.Timeout != 3*time.Second || tl.HandshakeFirst || c.TLS.Enabled() {
		t.Fatalf("cluster TLS %+v, client TLS %+v", tl, c.TLS)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Error(), `field "handshake_first" is ignored: a route always starts with the TLS handshake`) {
		t.Errorf("warnings %v", warns)
	}
	rc, err := tl.RouteConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.ClientAuth != tls.RequireAndVerifyClientCert || rc.RootCAs == nil || rc.RootCAs != rc.ClientCAs || !rc.InsecureSkipVerify {
		t.Errorf("route config: client auth %v, roots %v, insecure %v", rc.ClientAuth, rc.RootCAs, rc.InsecureSkipVerify)
	}
	// A reload sees the block as one setting.
	next := c.Clone()
	next.Cluster.TLS.Timeout = time.Second
	if ch := Changes(c, next); len(ch) != 1 || ch[0].Key != "cluster.tls" {
		t.Errorf("changes %+v", ch)
	}
}
