package test

import (
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
)

// The security tests run one configuration file against cairn (in
// process, the file read by internal/config as cmd/cairn reads it) and,
// when it is installed, nats-server v2.15.2 (its binary, the same file),
// and expect the same bytes from both: who may connect, the -ERR texts,
// what is delivered. CAIRN_REQUIRE_CLI=1 (scripts/test.sh) makes a
// missing nats-server a failure instead of a skip of its half.

// secTarget is one server under test.
type secTarget struct {
	name     string // "cairn" or "nats-server"
	url      string
	proc     *proc          // nats-server only
	storeDir string         // its JetStream store directory, when the file sets one
	mon      string         // its monitoring URL, when the file sets http_port
	stop     func()         // stops it (cairn only; the test's cleanup does too)
	srv      *server.Server // cairn only
}

// secTargets starts cairn and nats-server with the configuration text
// (host and port are added: 127.0.0.1 and a free port) and returns both,
// cairn first; nats-server is left out when it is not installed. mod, if
// not nil, changes cairn's options after the file is applied.
func secTargets(t *testing.T, conf string, mod func(*server.Options)) []secTarget {
	t.Helper()
	out := []secTarget{startCairnConf(t, conf, mod)}
	if natsServerAvailable(t) {
		dir := t.TempDir()
		store := ""
		if s := out[0].storeDir; s != "" {
			// The same file, but never the same store as cairn's.
			store = t.TempDir()
			conf = strings.ReplaceAll(conf, s, store)
		}
		path := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf+"\nlisten: 127.0.0.1:-1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, natsServerBinary(t), nil, "-c", path)
		tg := secTarget{name: "nats-server", url: p.clientURL(t), proc: p, storeDir: store}
		if m := regexp.MustCompile(`Starting http monitor on (\S+)`).FindStringSubmatch(p.log.String()); m != nil {
			tg.mon = "http://" + m[1]
		}
		out = append(out, tg)
	}
	return out
}

// natsServerAvailable reports whether nats-server can run beside cairn;
// with CAIRN_REQUIRE_CLI=1 its absence fails the test.
func natsServerAvailable(t *testing.T) bool {
	t.Helper()
	if targetIsNatsServer() {
		return false // cairn is compared with it; the target switch does not apply
	}
	if _, err := exec.LookPath("nats-server"); err == nil {
		return true
	}
	if home, err := os.UserHomeDir(); err == nil {
		if _, err := os.Stat(filepath.Join(home, "go", "bin", "nats-server")); err == nil {
			return true
		}
	}
	if os.Getenv("CAIRN_REQUIRE_CLI") == "1" {
		t.Fatal("nats-server not found; install it with go install github.com/nats-io/nats-server/v2@v2.15.2")
	}
	return false
}

// startCairnConf starts cairn in process from a configuration file, with
// its monitor as cmd/cairn makes it: answering the system account's $SYS
// requests, and serving HTTP on a free port when the file sets
// http_port.
func startCairnConf(t *testing.T, conf string, mod func(*server.Options)) secTarget {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cairn.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config.Validate: %v", err)
	}
	opts := server.Options{Host: "127.0.0.1", Port: -1, ServerName: cfg.ServerName, Auth: cfg.Auth, TLS: cfg.TLS, Operator: cfg.Operator,
		MaxPayload: cfg.Limits.MaxPayload, MaxSubs: cfg.Limits.MaxSubs}
	if cfg.JetStream.Enabled {
		opts.JetStream, opts.StoreDir = true, cfg.JetStream.StoreDir
		if opts.StoreDir == "" {
			opts.StoreDir = t.TempDir()
		}
	}
	if mod != nil {
		mod(&opts)
	}
	s, err := server.New(opts)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	tg := secTarget{name: "cairn", url: s.ClientURL(), storeDir: cfg.JetStream.StoreDir, srv: s}
	port := 0
	if cfg.Monitor.Port != 0 {
		port = server.RandomPort
	}
	m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: port, Server: s, ConfigDigest: cfg.Digest, Auth: cfg.Monitor.Auth})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ServeSystemRequests(); err != nil && !errors.Is(err, server.ErrNoSystemAccount) {
		t.Fatal(err)
	}
	if port != 0 {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		tg.mon = m.URL()
	}
	tg.stop = func() { m.Close(); s.Shutdown() }
	return tg
}

// forEach runs f as a subtest for each target.
func forEach(t *testing.T, targets []secTarget, f func(t *testing.T, tg secTarget)) {
	t.Helper()
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { f(t, tg) })
	}
}

var (
	hashMu    sync.Mutex
	hashCache = map[string]string{}
)

// bcryptOf hashes a password with bcrypt's minimum cost (the tests need
// the format, not the strength).
func bcryptOf(t *testing.T, pw string) string {
	t.Helper()
	hashMu.Lock()
	defer hashMu.Unlock()
	if h, ok := hashCache[pw]; ok {
		return h
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hashCache[pw] = string(h)
	return string(h)
}

// nkeyUser is a user key pair for nkey authentication.
type nkeyUser struct {
	kp  nkeys.KeyPair
	pub string
}

func newNkeyUser(t *testing.T) nkeyUser {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return nkeyUser{kp: kp, pub: pub}
}

// sign signs the nonce of an INFO, base64 raw-URL, as clients do.
func (u nkeyUser) sign(t *testing.T, nonce string) string {
	t.Helper()
	sig, err := u.kp.Sign([]byte(nonce))
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(sig)
}

// expectAuthViolation consumes -ERR 'Authorization Violation' and the
// close that follows it.
func (c *rawClient) expectAuthViolation() {
	c.t.Helper()
	c.expectErr("Authorization Violation")
	c.expectClosed()
}

// waitClosed waits (up to d) for the server to close the connection and
// returns everything it sent before.
func (c *rawClient) waitClosed(d time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := c.fill(deadline)
		if err != nil {
			if isClosedErr(err) {
				return string(c.pending)
			}
			c.t.Fatalf("%s: want close within %v; got %v after %q", c.name, d, err, c.pending)
		}
	}
}

// writeTemp writes a configuration file and returns its path.
func writeTemp(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadConf loads and validates a configuration file.
func loadConf(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
