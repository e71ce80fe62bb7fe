package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"
)

// TLS is a tls block (docs/security.md, "TLS"; nats-server v2.15.2
// parseTLS, GenTLSConfig): the client listener's, with allow_non_tls and
// the flags --tls, --tlscert, --tlskey, --tlscacert, --tlsverify
// (Config.TLS), or the cluster's (Cluster.TLS, read by clusterTLSKey; the
// key tags name the client listener's keys). TLS is on when CertFile is
// set.
type TLS struct {
	CertFile string `key:"tls.cert_file"`
	KeyFile  string `key:"tls.key_file"`
	CAFile   string `key:"tls.ca_file"` // the CAs client certificates must chain to
	// Verify requires a client certificate signed by CAFile's CAs;
	// VerifyAndMap also makes the certificate's identity the user
	// (docs/security.md).
	Verify       bool `key:"tls.verify"`
	VerifyAndMap bool `key:"tls.verify_and_map"`
	// Timeout bounds the TLS handshake; 0 is nats-server's 2 s.
	Timeout time.Duration `key:"tls.timeout"`
	// MinVersion is the oldest TLS version accepted: "1.2" (the default)
	// or "1.3".
	MinVersion   string   `key:"tls.min_version"`
	CipherSuites []string `key:"tls.cipher_suites"` // Go's names; nil: Go's defaults
	Curves       []string `key:"tls.curve_preferences"`
	// HandshakeFirst makes the server start the TLS handshake before its
	// INFO; with HandshakeFirstFallback, a client that sent nothing
	// within that delay gets the INFO in clear and the usual flow.
	HandshakeFirst         bool          `key:"tls.handshake_first"`
	HandshakeFirstFallback time.Duration `key:"tls.handshake_first_fallback"`
	// PinnedCerts are the hex SHA-256 of the DER SubjectPublicKeyInfo of
	// the client certificates allowed (lower case); nil allows any.
	PinnedCerts []string `key:"tls.pinned_certs"`
	// Insecure skips the verification of the certificate of the servers
	// this server dials (nats-server tls.insecure): the cluster's tls
	// block only (Cluster.TLS). The client listener's block ignores it.
	Insecure bool `key:"tls.insecure"`
	// AllowNonTLS lets clients connect without TLS beside those with it
	// (INFO says tls_available instead of tls_required).
	AllowNonTLS bool `key:"allow_non_tls"`
}

// DefaultTLSTimeout bounds a TLS handshake (nats-server TLS_TIMEOUT).
const DefaultTLSTimeout = 2 * time.Second

// defaultHandshakeFirstFallback is handshake_first: auto's delay
// (nats-server DEFAULT_TLS_HANDSHAKE_FIRST_FALLBACK_DELAY).
const defaultHandshakeFirstFallback = 50 * time.Millisecond

// Enabled reports whether the client listener speaks TLS.
func (t *TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// tlsKeys are the top-level TLS keys.
var tlsKeys = keyTable{
	"tls":           tlsKey,
	"allow_non_tls": func(c *Config, it item, r *report) { setBool(&c.TLS.AllowNonTLS, it, r) },
}

// tlsKey reads the tls block and checks that the server can use it.
func tlsKey(c *Config, it item, r *report) {
	t := &c.TLS
	if !tlsBlock(t, it, r, keyTable{
		"insecure": ignoredKey("it applies to connections the server makes, and clients connect to cairn"),
	}) {
		return
	}
	if _, err := t.ServerConfig(); err != nil {
		r.errorf(it, "%v", err)
	}
}

// tlsBlock reads a tls block into t: the keys every tls block has
// (nats-server v2.15.2 parseTLS), with those of extra added or replacing
// them. It reports whether the block was read without error.
func tlsBlock(t *TLS, it item, r *report, extra keyTable) bool {
	m, ok := r.mapOf(it, "tls")
	if !ok {
		return false
	}
	before := len(r.errs)
	keys := keyTable{
		"cert_file":                        tlsFile(&t.CertFile, "cert_file"),
		"key_file":                         tlsFile(&t.KeyFile, "key_file"),
		"ca_file":                          tlsFile(&t.CAFile, "ca_file"),
		"verify":                           tlsFlag(&t.Verify, "verify"),
		"verify_and_map":                   tlsFlag(&t.VerifyAndMap, "verify_and_map"),
		"timeout":                          func(_ *Config, e item, r *report) { tlsTimeoutKey(t, e, r) },
		"min_version":                      func(_ *Config, e item, r *report) { minVersionKey(t, e, r) },
		"cipher_suites":                    func(_ *Config, e item, r *report) { t.CipherSuites = tlsNames(e, r, "cipher_suites", cipherSuite) },
		"curve_preferences":                func(_ *Config, e item, r *report) { t.Curves = tlsNames(e, r, "curve_preferences", curve) },
		"handshake_first":                  func(_ *Config, e item, r *report) { handshakeFirstKey(t, e, r) },
		"first":                            func(_ *Config, e item, r *report) { handshakeFirstKey(t, e, r) },
		"immediate":                        func(_ *Config, e item, r *report) { handshakeFirstKey(t, e, r) },
		"pinned_certs":                     func(_ *Config, e item, r *report) { pinnedCertsKey(t, e, r) },
		"allow_insecure_cipher_suites":     unsupportedYet,
		"verify_cert_and_check_known_urls": unsupportedYet,
		"connection_rate_limit":            unsupportedYet,
		"certs":                            unsupportedYet,
		"certificates":                     unsupportedYet,
		"cert_store":                       unsupportedYet,
		"cert_match_by":                    unsupportedYet,
		"cert_match":                       unsupportedYet,
		"ca_certs_match":                   unsupportedYet,
		"cert_match_skip_invalid":          unsupportedYet,
		"ocsp_peer":                        unsupportedYet,
	}
	maps.Copy(keys, extra)
	var tmp Config
	block(&tmp, m, it, keys, r)
	return len(r.errs) == before
}

// tlsFile reads a file name of a tls block into dst.
func tlsFile(dst *string, name string) keyFunc {
	return func(_ *Config, e item, r *report) {
		s, ok := e.val.(string)
		if !ok {
			r.errorf(e, "error parsing tls config, expected '%s' to be filename", name)
			return
		}
		*dst = s
	}
}

// tlsFlag reads a boolean of a tls block into dst.
func tlsFlag(dst *bool, name string) keyFunc {
	return func(_ *Config, e item, r *report) {
		b, ok := e.val.(bool)
		if !ok {
			r.errorf(e, "error parsing tls config, expected '%s' to be a boolean", name)
			return
		}
		*dst = b
	}
}

// tlsTimeoutKey reads tls.timeout: seconds (integer or float) or a
// duration string.
func tlsTimeoutKey(t *TLS, e item, r *report) {
	switch v := e.val.(type) {
	case int64:
		t.Timeout = time.Duration(v) * time.Second
	case float64:
		t.Timeout = time.Duration(v * float64(time.Second))
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			r.errorf(e, "error parsing tls config, 'timeout' %s", err)
			return
		}
		t.Timeout = d
	default:
		r.errorf(e, "error parsing tls config, 'timeout' wrong type")
	}
}

func minVersionKey(t *TLS, e item, r *report) {
	s, ok := e.val.(string)
	if !ok {
		r.errorf(e, "'min_version' wrong type: %v", e.val)
		return
	}
	if _, err := tlsVersion(s); err != nil {
		r.errorf(e, "%v", err)
		return
	}
	t.MinVersion = s
}

// tlsVersion maps "1.2" and "1.3" to Go's constants (nats-server
// tlsVersionFromString, which refuses anything below 1.2).
func tlsVersion(s string) (uint16, error) {
	switch s {
	case "", "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	case "1.0", "1.1":
		return 0, fmt.Errorf("unsupported TLS version: TLS %s", s)
	}
	return 0, fmt.Errorf("unknown version: %v", s)
}

func handshakeFirstKey(t *TLS, e item, r *report) {
	switch v := e.val.(type) {
	case bool:
		t.HandshakeFirst = v
	case string:
		switch strings.ToLower(v) {
		case "true", "on":
			t.HandshakeFirst = true
		case "false", "off":
			t.HandshakeFirst = false
		case "auto", "auto_fallback":
			t.HandshakeFirst, t.HandshakeFirstFallback = true, defaultHandshakeFirstFallback
		default:
			d, err := time.ParseDuration(v)
			if err != nil {
				r.errorf(e, "field %q's value %q is invalid", e.key, v)
				return
			}
			t.HandshakeFirst, t.HandshakeFirstFallback = true, d
		}
	default:
		r.errorf(e, "field %q should be a boolean or a string, got %T", e.key, e.val)
	}
}

func pinnedCertsKey(t *TLS, e item, r *report) {
	list, ok := e.val.([]any)
	if !ok {
		r.errorf(e, "error parsing tls config, expected 'pinned_certs' to be a list of hex-encoded sha256 of DER encoded SubjectPublicKeyInfo")
		return
	}
	t.PinnedCerts = []string{}
	for _, v := range list {
		s, _ := unwrap(e.key, v, e).val.(string)
		s = strings.ToLower(s)
		if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
			r.errorf(e, "error parsing tls config, 'pinned_certs' key %s does not look like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo", s)
			return
		}
		t.PinnedCerts = append(t.PinnedCerts, s)
	}
}

// tlsNames reads a non-empty list of cipher suite or curve names, each
// checked by lookup.
func tlsNames(e item, r *report, what string, lookup func(string) (uint16, bool)) []string {
	list, ok := e.val.([]any)
	if !ok || len(list) == 0 {
		r.errorf(e, "error parsing tls config, '%s' cannot be empty", what)
		return nil
	}
	var out []string
	for _, v := range list {
		s, _ := unwrap(e.key, v, e).val.(string)
		if _, ok := lookup(s); !ok {
			if what == "cipher_suites" {
				r.errorf(e, "unrecognized cipher %s", s)
			} else {
				r.errorf(e, "unrecognized curve preference %s", s)
			}
			return nil
		}
		out = append(out, s)
	}
	return out
}

// cipherSuite finds a cipher suite by Go's name (nats-server cipherMap,
// which also accepts the insecure ones only with their own option).
func cipherSuite(name string) (uint16, bool) {
	for _, cs := range tls.CipherSuites() {
		if cs.Name == name {
			return cs.ID, true
		}
	}
	return 0, false
}

// curve finds a curve by nats-server's name (curvePreferenceMap).
func curve(name string) (uint16, bool) {
	id, ok := map[string]tls.CurveID{
		"SecP384r1MLKEM1024": tls.SecP384r1MLKEM1024, "SecP256r1MLKEM768": tls.SecP256r1MLKEM768,
		"X25519MLKEM768": tls.X25519MLKEM768, "X25519": tls.X25519,
		"CurveP256": tls.CurveP256, "CurveP384": tls.CurveP384, "CurveP521": tls.CurveP521,
	}[name]
	return uint16(id), ok
}

// ServerConfig builds the crypto/tls configuration of the client
// listener, reading the certificate, key and CA files (nats-server
// GenTLSConfig, with its errors). It returns nil, nil when TLS is off.
func (t *TLS) ServerConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	switch {
	case t.KeyFile == "":
		return nil, fmt.Errorf("missing 'key_file' in TLS configuration")
	case t.CertFile == "":
		return nil, fmt.Errorf("missing 'cert_file' in TLS configuration")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("error parsing X509 certificate/key pair: %v", err)
	}
	if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
		return nil, fmt.Errorf("error parsing certificate: %v", err)
	}
	minVersion, err := tlsVersion(t.MinVersion)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: minVersion, Certificates: []tls.Certificate{cert}}
	for _, n := range t.CipherSuites {
		id, _ := cipherSuite(n)
		cfg.CipherSuites = append(cfg.CipherSuites, id)
	}
	for _, n := range t.Curves {
		id, _ := curve(n)
		cfg.CurvePreferences = append(cfg.CurvePreferences, tls.CurveID(id))
	}
	if t.Verify || t.VerifyAndMap {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("failed to parse root ca certificate")
		}
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

// RouteConfig builds the crypto/tls configuration of the cluster port
// from the cluster's tls block (nats-server v2.15.2 opts.go getTLSConfig):
// ServerConfig's, with the peer's certificate always required and
// verified, whatever verify says (routes are mutual: each server is the
// other's client), ca_file's CAs trusted for the certificates of the
// servers dialed too, and Insecure skipping that check on the dialing
// side only. It returns nil, nil when TLS is off, and ServerConfig's
// errors.
func (t *TLS) RouteConfig() (*tls.Config, error) {
	cfg, err := t.ServerConfig()
	if err != nil || cfg == nil {
		return nil, err
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.RootCAs = cfg.ClientCAs
	cfg.InsecureSkipVerify = t.Insecure
	return cfg, nil
}
