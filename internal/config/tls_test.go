package config

import (
	"strings"
	"testing"
	"time"
)

func TestTLSBlockErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{"tls { cert_file: 5 }", `F:1:7: error parsing tls config, expected 'cert_file' to be filename`},
		{"tls { verify: 5 }", `F:1:7: error parsing tls config, expected 'verify' to be a boolean`},
		{"tls { cert_file: /nonexistent/c.pem, key_file: /nonexistent/k.pem }", `F:1:1: error parsing X509 certificate/key pair: open /nonexistent/c.pem: no such file or directory`},
		{"tls { cert_file: c.pem }", `F:1:1: missing 'key_file' in TLS configuration`},
		{`tls { min_version: "1.1" }`, `F:1:7: unsupported TLS version: TLS 1.1`},
		{`tls { cipher_suites: ["NOPE"] }`, `F:1:7: unrecognized cipher NOPE`},
		{`tls { curve_preferences: [] }`, `F:1:7: error parsing tls config, 'curve_preferences' cannot be empty`},
		{`tls { pinned_certs: ["abc"] }`, `F:1:7: error parsing tls config, 'pinned_certs' key abc does not look like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo`},
		{`tls { handshake_first: "sometimes" }`, `F:1:7: field "handshake_first"'s value "sometimes" is invalid`},
		{`tls { ocsp_peer: true }`, `F:1:7: field "ocsp_peer" is not supported by cairn yet`},
		{`tls { timeout: "x" }`, `F:1:7: error parsing tls config, 'timeout' time: invalid duration "x"`},
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
