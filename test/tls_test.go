package test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TLS for clients (docs/security.md, "TLS"): the same file
// against cairn and nats-server v2.15.2.

func tlsConf(p *testPKI, t *testing.T, extra string) string {
	cert, key := p.server(t)
	return fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  timeout: 1\n%s}\n", cert, key, p.caFile, extra)
}

// tlsDial opens a TLS connection the classic way: read the clear INFO,
// then handshake; it returns a rawClient on the TLS connection.
func tlsDial(t *testing.T, u string, cfg *tls.Config) (*rawClient, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", hostPort(u), readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetReadDeadline(time.Now().Add(readTimeout))
	line, err := bufio.NewReader(nc).ReadString('\n') // INFO is one line; nothing follows before the handshake
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("clear INFO: %q %v", line, err)
	}
	tc := tls.Client(nc, cfg)
	_ = tc.SetDeadline(time.Now().Add(readTimeout))
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return &rawClient{t: t, name: nc.LocalAddr().String(), conn: tc, infoLine: line}, nil
}

// INFO says tls_required; nats.go with the CA connects and exchanges
// messages; a client that speaks plain text after the INFO is closed
// without a word.
func TestTLSRequired(t *testing.T) {
	p := newPKI(t)
	forEach(t, secTargets(t, tlsConf(p, t, ""), nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		if c.info["tls_required"] != true || c.info["tls_verify"] != nil {
			t.Fatalf("INFO %s", c.infoLine)
		}
		if !strings.Contains(c.infoLine, `"headers":true,"tls_required":true,"max_payload"`) {
			t.Errorf("key order: %s", c.infoLine)
		}
		c.send("CONNECT {}\r\nPING\r\n")
		c.expectClosed()

		nc, err := nats.Connect(tg.url, nats.Secure(p.clientTLS()))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		sub, _ := nc.SubscribeSync("secure")
		_ = nc.Publish("secure", []byte("hi"))
		if m, err := sub.NextMsg(readTimeout); err != nil || string(m.Data) != "hi" {
			t.Fatalf("%v %v", m, err)
		}
		tc, err := tlsDial(t, tg.url, p.clientTLS())
		if err != nil {
			t.Fatal(err)
		}
		tc.send("CONNECT {\"verbose\":false}\r\nPING\r\n")
		tc.expect("PONG\r\n")
	})
}

// A client that never starts the handshake is closed at tls.timeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	p := newPKI(t)
	forEach(t, secTargets(t, tlsConf(p, t, ""), nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		if got := c.waitClosed(10 * time.Second); got != "" {
			t.Fatalf("got %q before the close", got)
		}
	})
}

// verify: a client without a certificate of the CA fails the handshake.
func TestTLSVerify(t *testing.T) {
	p := newPKI(t)
	cert, _ := p.client(t, "alice", pkix.Name{CommonName: "alice"})
	other := newPKI(t)
	stranger, _ := other.client(t, "mallory", pkix.Name{CommonName: "mallory"})
	forEach(t, secTargets(t, tlsConf(p, t, "  verify: true\n"), nil), func(t *testing.T, tg secTarget) {
		if c := rawConn(t, tg.url); c.info["tls_verify"] != true {
			t.Fatalf("INFO %s", c.infoLine)
		}
		for name, certs := range map[string][]tls.Certificate{"none": nil, "another CA's": {stranger}} {
			if tc, err := tlsDial(t, tg.url, p.clientTLS(certs...)); err == nil {
				tc.send("PING\r\n")
				if err := tc.fill(time.Now().Add(readTimeout)); err == nil {
					t.Errorf("%s certificate: got in (%q)", name, tc.pending)
				}
			}
		}
		nc, err := nats.Connect(tg.url, nats.Secure(p.clientTLS(cert)))
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	})
}

// pinned_certs: only the pinned client certificate gets in.
func TestTLSPinnedCerts(t *testing.T) {
	p := newPKI(t)
	alice, pin := p.client(t, "alice", pkix.Name{CommonName: "alice"})
	bob, _ := p.client(t, "bob", pkix.Name{CommonName: "bob"})
	conf := tlsConf(p, t, fmt.Sprintf("  verify: true\n  pinned_certs: [%q]\n", pin))
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		nc, err := nats.Connect(tg.url, nats.Secure(p.clientTLS(alice)))
		if err != nil {
			t.Fatalf("pinned: %v", err)
		}
		nc.Close()
		if nc, err := nats.Connect(tg.url, nats.Secure(p.clientTLS(bob)), nats.NoReconnect()); err == nil {
			nc.Close()
			t.Fatal("an unpinned certificate got in")
		}
	})
}

// handshake_first: TLS before anything; nats.go's TLSHandshakeFirst
// connects; a plain client gets nothing.
func TestTLSHandshakeFirst(t *testing.T) {
	p := newPKI(t)
	forEach(t, secTargets(t, tlsConf(p, t, "  handshake_first: true\n"), nil), func(t *testing.T, tg secTarget) {
		nc, err := nats.Connect(tg.url, nats.Secure(p.clientTLS()), nats.TLSHandshakeFirst())
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
		raw, err := net.Dial("tcp", hostPort(tg.url))
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		_ = raw.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		var b [16]byte
		if n, err := raw.Read(b[:]); n > 0 || !errors.Is(err, errTimeout(err)) {
			t.Fatalf("handshake_first server sent %q before TLS (%v)", b[:n], err)
		}
	})
}

// errTimeout returns err when it is a timeout, for errors.Is.
func errTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return errors.New("not a timeout")
}

// allow_non_tls: INFO says tls_available; plain and TLS clients both get
// in.
func TestTLSAllowNonTLS(t *testing.T) {
	p := newPKI(t)
	forEach(t, secTargets(t, tlsConf(p, t, "")+"allow_non_tls: true\n", nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		if c.info["tls_available"] != true || c.info["tls_required"] != nil {
			t.Fatalf("INFO %s", c.infoLine)
		}
		c.send("CONNECT {\"verbose\":false}\r\nPING\r\n")
		c.expect("PONG\r\n")
		tc, err := tlsDial(t, tg.url, p.clientTLS())
		if err != nil {
			t.Fatal(err)
		}
		tc.send("CONNECT {\"verbose\":false}\r\nPING\r\n")
		tc.expect("PONG\r\n")
	})
}

// min_version: 1.3 refuses a TLS 1.2 client.
func TestTLSMinVersion(t *testing.T) {
	p := newPKI(t)
	forEach(t, secTargets(t, tlsConf(p, t, "  min_version: \"1.3\"\n"), nil), func(t *testing.T, tg secTarget) {
		cfg := p.clientTLS()
		cfg.MaxVersion = tls.VersionTLS12
		if _, err := tlsDial(t, tg.url, cfg); err == nil {
			t.Fatal("a TLS 1.2 client got in")
		}
		if _, err := tlsDial(t, tg.url, p.clientTLS()); err != nil {
			t.Fatal(err)
		}
	})
}

// verify_and_map: the certificate names the user (an e-mail SAN, or the
// subject DN compared attribute by attribute, in any order), who gets its
// permissions; a certificate naming nobody is an authorization violation.
func TestTLSVerifyAndMap(t *testing.T) {
	p := newPKI(t)
	alice, _ := p.client(t, "alice", pkix.Name{CommonName: "alice"}, "alice@example.com")
	bob, _ := p.client(t, "bob", pkix.Name{CommonName: "bob", Organization: []string{"Acme"}})
	eve, _ := p.client(t, "eve", pkix.Name{CommonName: "eve"})
	conf := tlsConf(p, t, "  verify_and_map: true\n") + `
authorization { users = [
  { user: "alice@example.com", permissions: { publish: "alice.>" } }
  { user: "O=Acme,CN=bob" }
] }`
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		a, err := tlsDial(t, tg.url, p.clientTLS(alice))
		if err != nil {
			t.Fatal(err)
		}
		a.send("CONNECT {\"verbose\":false}\r\nPUB alice.x 0\r\n\r\nPUB bob.x 0\r\n\r\nPING\r\n")
		a.expect(`-ERR 'Permissions Violation for Publish to "bob.x"'` + "\r\nPONG\r\n")
		b, err := tlsDial(t, tg.url, p.clientTLS(bob))
		if err != nil {
			t.Fatal(err)
		}
		b.send("CONNECT {\"verbose\":false}\r\nPUB bob.x 0\r\n\r\nPING\r\n")
		b.expect("PONG\r\n")
		e, err := tlsDial(t, tg.url, p.clientTLS(eve))
		if err != nil {
			t.Fatal(err)
		}
		e.send("CONNECT {\"verbose\":false,\"user\":\"alice@example.com\"}\r\nPING\r\n")
		e.expectAuthViolation()
	})
}
