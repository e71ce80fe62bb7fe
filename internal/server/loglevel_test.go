package server

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/logger"
)

// syncWriter collects log output from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A protocol error that closes a client is logged at [ERR], as
// nats-server logs its parser errors, without -D.
func TestProtocolErrorLoggedAsError(t *testing.T) {
	var out syncWriter
	s, err := New(Options{Host: "127.0.0.1", Port: RandomPort, Logger: logger.New(&out, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("FOO BAR\r\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(out.String(), "[ERR]") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "[ERR]") || !strings.Contains(out.String(), "Unknown Protocol Operation") {
		t.Errorf("log:\n%s\nwant an [ERR] line naming the protocol error", out.String())
	}
}

// Listening beyond loopback without authentication is logged as a warning
// at start; on a loopback address, or with authentication configured, it
// is not (the latter logs that clients must authenticate, and warns of
// plain-text passwords as nats-server does).
func TestOpenListenerWarning(t *testing.T) {
	for host, warn := range map[string]bool{"127.0.0.1": false, "localhost": false, "0.0.0.0": true, "0.0.0.0 auth": false, "0.0.0.0 js": true} {
		var out syncWriter
		opts := Options{Host: host, Port: RandomPort, Logger: logger.New(&out, false, false)}
		if h, ok := strings.CutSuffix(host, " js"); ok {
			opts.Host, host = h, h
			opts.JetStream, opts.StoreDir = true, t.TempDir()
		}
		if h, ok := strings.CutSuffix(host, " auth"); ok {
			opts.Host, host = h, h
			opts.Auth.Users = []config.User{{Name: "u", Password: "plain"}}
		}
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		s.Shutdown()
		got := strings.Contains(out.String(), "[WRN] No authentication is configured: any client that can reach "+net.JoinHostPort(host, ""))
		if got != warn {
			t.Errorf("host %s: warning %v, want %v; log:\n%s", host, got, warn, out.String())
		}
		if js := strings.Contains(out.String(), "use JetStream"); warn && js != opts.JetStream {
			t.Errorf("host %s: the warning mentions JetStream: %v, JetStream on: %v", host, js, opts.JetStream)
		}
		if opts.Auth.Users != nil && (!strings.Contains(out.String(), "[INF] Clients must authenticate") ||
			!strings.Contains(out.String(), "[WRN] Plaintext passwords detected, use nkeys or bcrypt")) {
			t.Errorf("with users: log:\n%s", out.String())
		}
	}
}
