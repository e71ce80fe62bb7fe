package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// tcpClient is a raw client connection that has read the server's INFO.
type tcpClient struct {
	t    *testing.T
	nc   net.Conn
	r    *bufio.Reader
	info map[string]any
}

func dialClient(t *testing.T, s *Server) *tcpClient {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &tcpClient{t: t, nc: nc, r: bufio.NewReader(nc)}
	line := c.line()
	if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(line, "INFO "), " \r\n")), &c.info); err != nil {
		t.Fatalf("INFO %q: %v", line, err)
	}
	c.send("CONNECT {\"verbose\":false,\"protocol\":1}\r\nPING\r\n")
	c.expect("PONG\r\n")
	return c
}

func (c *tcpClient) send(s string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *tcpClient) line() string {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, line)
	}
	return line
}

// expect reads lines until want, skipping the INFO sent after the first
// PONG.
func (c *tcpClient) expect(want string) {
	c.t.Helper()
	for {
		line := c.line()
		if line == want {
			return
		}
		if !strings.HasPrefix(line, "INFO ") {
			c.t.Fatalf("read %q, want %q", line, want)
		}
	}
}

func (c *tcpClient) expectClosed() {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, err := c.r.ReadString('\n'); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("connection still open")
			}
			return
		}
	}
}

func startServer(t *testing.T, o Options) *Server {
	t.Helper()
	o.Host, o.Port = "127.0.0.1", RandomPort
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// After SetLimits (a reload), new connections get the new max_payload in
// INFO and connected clients are held to it from their next operation, as
// nats-server v2.15.2 applies a reloaded max_payload (reload.go
// maxPayloadOption).
func TestSetLimitsMaxPayload(t *testing.T) {
	s := startServer(t, Options{MaxPayload: 1024})
	old := dialClient(t, s)
	if old.info["max_payload"] != 1024.0 {
		t.Fatalf("INFO max_payload %v", old.info["max_payload"])
	}
	if err := s.SetLimits(Limits{MaxPayload: 100}); err != nil {
		t.Fatal(err)
	}
	if got := dialClient(t, s).info["max_payload"]; got != 100.0 {
		t.Fatalf("INFO max_payload after SetLimits %v, want 100", got)
	}
	old.send("PUB a 200\r\n" + strings.Repeat("x", 200) + "\r\n")
	old.expect("-ERR 'Maximum Payload Violation'\r\n")
	old.expectClosed()
}

// Lowering max_connections closes the newest clients beyond it with
// nats-server's -ERR (reload.go maxConnOption); the oldest stays.
func TestSetLimitsLowersMaxConnections(t *testing.T) {
	s := startServer(t, Options{})
	first := dialClient(t, s)
	second, third := dialClient(t, s), dialClient(t, s)
	if err := s.SetLimits(Limits{MaxConnections: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*tcpClient{second, third} {
		c.expect("-ERR 'maximum connections exceeded'\r\n")
		c.expectClosed()
	}
	first.send("PING\r\n")
	first.expect("PONG\r\n")
}

// A negative max_connections (the file's max_connections: 0) refuses
// every client, as in nats-server.
func TestNegativeMaxConnectionsRefusesAll(t *testing.T) {
	s := startServer(t, Options{MaxConnections: -1})
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &tcpClient{t: t, nc: nc, r: bufio.NewReader(nc)}
	if line := c.line(); !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("read %q", line)
	}
	c.expect("-ERR 'maximum connections exceeded'\r\n")
	c.expectClosed()
}

// client_advertise replaces the host and port of INFO; a missing port is
// the bound one (nats-server setInfoHostPort).
func TestClientAdvertise(t *testing.T) {
	s := startServer(t, Options{ClientAdvertise: "nats.example.com:4333"})
	c := dialClient(t, s)
	if c.info["host"] != "nats.example.com" || c.info["port"] != 4333.0 {
		t.Fatalf("INFO host %v port %v", c.info["host"], c.info["port"])
	}
	if err := s.SetLimits(Limits{ClientAdvertise: "other.example.com"}); err != nil {
		t.Fatal(err)
	}
	c = dialClient(t, s)
	if c.info["host"] != "other.example.com" || c.info["port"] != float64(s.Addr().Port) {
		t.Fatalf("INFO host %v port %v", c.info["host"], c.info["port"])
	}
	if _, err := New(Options{ClientAdvertise: "[::1"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad client_advertise: %v", err)
	}
}

// SetLimits refuses invalid limits and keeps the old ones; a valid
// max_pending reaches connected clients too.
func TestSetLimitsValidatesAndReachesClients(t *testing.T) {
	s := startServer(t, Options{MaxPending: 1 << 20})
	dialClient(t, s)
	c := onlyClient(t, s)
	if err := s.SetLimits(Limits{MaxPayload: 2 << 20, MaxPending: 1 << 20}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("max_payload over max_pending: %v", err)
	}
	if s.limits().MaxPending != 1<<20 {
		t.Fatalf("limits changed by a refused SetLimits: %+v", *s.limits())
	}
	if err := s.SetLimits(Limits{MaxPending: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := c.out.maxPending(); got != 4<<20 {
		t.Fatalf("connected client's max_pending %d, want %d", got, 4<<20)
	}
	if l := s.limits(); l.MaxPayload != DefaultMaxPayload || l.PingInterval != DefaultPingInterval {
		t.Fatalf("zero limits did not take defaults: %+v", *l)
	}
}
