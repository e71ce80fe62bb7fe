package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// envTarget selects the server under test: unset (or "cairn") runs cairn
// in-process; "nats-server" starts the nats-server binary from PATH (or
// ~/go/bin), which turns every test into a check of the test itself.
const envTarget = "CAIRN_TEST_TARGET"

// Timeouts. Nothing waits this long when the server behaves; they only
// bound how long a failing test hangs.
const (
	readTimeout  = 5 * time.Second
	startTimeout = 10 * time.Second
)

// startServer starts the server under test on 127.0.0.1 and a random port,
// applies mod to the options first, registers its shutdown with t.Cleanup
// and returns its client URL ("nats://127.0.0.1:<port>").
func startServer(t testing.TB, mod func(*server.Options)) string {
	t.Helper()
	u, _ := startServerStoppable(t, mod)
	return u
}

// startServerStoppable is startServer that also returns a function that
// stops the server (a clean shutdown, SIGTERM for nats-server) and waits
// for it to exit; calling it more than once is harmless. With JetStream on
// and no StoreDir, the store goes into a fresh t.TempDir(); pass the same
// StoreDir to a second server to restart on the same data.
func startServerStoppable(t testing.TB, mod func(*server.Options)) (string, func()) {
	t.Helper()
	opts := server.Options{Host: "127.0.0.1", Port: -1}
	if mod != nil {
		mod(&opts)
	}
	if opts.JetStream && opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	switch target := os.Getenv(envTarget); target {
	case "", "cairn":
		return startCairn(t, opts)
	case "nats-server":
		return startNatsServer(t, opts)
	default:
		t.Fatalf("%s=%q: want unset, \"cairn\" or \"nats-server\"", envTarget, target)
		return "", nil
	}
}

// targetIsNatsServer reports whether the tests run against nats-server.
func targetIsNatsServer() bool { return os.Getenv(envTarget) == "nats-server" }

func startCairn(t testing.TB, opts server.Options) (string, func()) {
	t.Helper()
	s, err := server.New(opts)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	var once sync.Once
	stop := func() { once.Do(s.Shutdown) }
	t.Cleanup(stop)
	return s.ClientURL(), stop
}

// natsServerBinary finds nats-server on PATH or in ~/go/bin.
func natsServerBinary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, "go", "bin", "nats-server")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s=nats-server but no nats-server binary found; install it with "+
		"go install github.com/nats-io/nats-server/v2@v2.15.2", envTarget)
	return ""
}

// natsServerConfig translates Options into a nats-server config file.
// quoteList writes ss as the quoted elements of a configuration list.
func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func natsServerConfig(opts server.Options, portsDir string) string {
	var b strings.Builder
	host := opts.Host
	if host == "" {
		host = "0.0.0.0"
	}
	fmt.Fprintf(&b, "host: %q\nport: %d\nports_file_dir: %q\n", host, opts.Port, portsDir)
	if opts.ServerName != "" {
		fmt.Fprintf(&b, "server_name: %q\n", opts.ServerName)
	}
	if opts.MaxPayload > 0 {
		fmt.Fprintf(&b, "max_payload: %d\n", opts.MaxPayload)
	}
	if opts.MaxControlLine > 0 {
		fmt.Fprintf(&b, "max_control_line: %d\n", opts.MaxControlLine)
	}
	if opts.MaxPending > 0 {
		fmt.Fprintf(&b, "max_pending: %d\n", opts.MaxPending)
	}
	if opts.MaxConnections > 0 {
		fmt.Fprintf(&b, "max_connections: %d\n", opts.MaxConnections)
	}
	if opts.PingInterval > 0 {
		fmt.Fprintf(&b, "ping_interval: %q\n", opts.PingInterval.String())
	}
	if opts.MaxPingsOut > 0 {
		fmt.Fprintf(&b, "ping_max: %d\n", opts.MaxPingsOut)
	}
	if opts.WriteDeadline > 0 {
		fmt.Fprintf(&b, "write_deadline: %q\n", opts.WriteDeadline.String())
	}
	if len(opts.Tags) > 0 {
		fmt.Fprintf(&b, "server_tags: [%s]\n", quoteList(opts.Tags))
	}
	if opts.JetStream {
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n", opts.StoreDir)
		if opts.JetStreamDomain != "" {
			fmt.Fprintf(&b, "  domain: %q\n", opts.JetStreamDomain)
		}
		if opts.JetStreamUniqueTag != "" {
			fmt.Fprintf(&b, "  unique_tag: %q\n", opts.JetStreamUniqueTag)
		}
		if opts.StreamMaxBufferedSize != 0 {
			fmt.Fprintf(&b, "  max_buffered_size: %d\n", opts.StreamMaxBufferedSize)
		}
		if opts.StreamMaxBufferedMsgs != 0 {
			fmt.Fprintf(&b, "  max_buffered_msgs: %d\n", opts.StreamMaxBufferedMsgs)
		}
		for key, v := range map[string]int64{"max_memory_store": opts.MaxMemoryStore, "max_file_store": opts.MaxFileStore} {
			switch {
			case v == server.NoStorage:
				fmt.Fprintf(&b, "  %s: 0\n", key)
			case v > 0:
				fmt.Fprintf(&b, "  %s: %d\n", key, v)
			}
		}
		b.WriteString("}\n")
	}
	if c := opts.Cluster; c.Port != 0 {
		fmt.Fprintf(&b, "cluster {\n  host: %q\n  port: %d\n", c.Host, c.Port)
		if c.Name != "" {
			fmt.Fprintf(&b, "  name: %q\n", c.Name)
		}
		if c.NoAdvertise {
			b.WriteString("  no_advertise: true\n")
		}
		if len(c.Routes) > 0 {
			b.WriteString("  routes: [\n")
			for _, u := range c.Routes {
				fmt.Fprintf(&b, "    %q\n", u.String())
			}
			b.WriteString("  ]\n")
		}
		if tl := c.TLS; tl.CertFile != "" {
			fmt.Fprintf(&b, "  tls {\n    cert_file: %q\n    key_file: %q\n", tl.CertFile, tl.KeyFile)
			if tl.CAFile != "" {
				fmt.Fprintf(&b, "    ca_file: %q\n", tl.CAFile)
			}
			if tl.Timeout > 0 {
				fmt.Fprintf(&b, "    timeout: %g\n", tl.Timeout.Seconds())
			}
			if tl.Insecure {
				b.WriteString("    insecure: true\n")
			}
			b.WriteString("  }\n")
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func startNatsServer(t testing.TB, opts server.Options) (string, func()) {
	t.Helper()
	ports, stop := startNatsServerPorts(t, opts)
	return ports.Nats[0], stop
}

// natsPorts is nats-server's ports file: its listeners' URLs.
type natsPorts struct {
	Nats       []string `json:"nats"`
	Cluster    []string `json:"cluster"`
	Monitoring []string `json:"monitoring"`
}

// startNatsServerPorts starts nats-server with opts (translated by
// natsServerConfig) and returns the URLs of its listeners once it accepts
// clients, and a function that stops it.
func startNatsServerPorts(t testing.TB, opts server.Options) (natsPorts, func()) {
	t.Helper()
	return startNatsServerExtra(t, opts, "")
}

// startNatsServerExtra is startNatsServerPorts with extra lines appended
// to the configuration file (for example "http_port: -1").
func startNatsServerExtra(t testing.TB, opts server.Options, extra string) (natsPorts, func()) {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	portsDir := filepath.Join(dir, "ports")
	if err := os.Mkdir(portsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(conf, []byte(natsServerConfig(opts, portsDir)+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	var logBuf syncBuffer
	cmd := exec.Command(bin, "-c", conf)
	cmd.Stdout = &logBuf
	cmd.Stderr = &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(stop)

	// nats-server writes <exe>_<pid>.ports once its listeners are up.
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			t.Fatalf("nats-server exited early:\n%s", logBuf.String())
		default:
		}
		matches, _ := filepath.Glob(filepath.Join(portsDir, "*.ports"))
		if len(matches) > 0 {
			data, err := os.ReadFile(matches[0])
			var ports natsPorts
			if err == nil && json.Unmarshal(data, &ports) == nil && len(ports.Nats) > 0 &&
				(opts.Cluster.Port == 0 || len(ports.Cluster) > 0) {
				u := ports.Nats[0]
				if waitAccepting(u, time.Until(deadline)) {
					return ports, stop
				}
				t.Fatalf("nats-server at %s does not accept connections:\n%s", u, logBuf.String())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not start within %v:\n%s", startTimeout, logBuf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitAccepting(u string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", hostPort(u), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hostPort turns "nats://h:p" into "h:p".
func hostPort(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return strings.TrimPrefix(u, "nats://")
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// reset empties the buffer.
func (b *syncBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Raw TCP client, in the style of nats-server's test/ helpers.

// rawClient is a plain TCP connection to the server with helpers that read
// with a deadline and compare exact bytes.
type rawClient struct {
	t        testing.TB
	name     string
	conn     net.Conn
	pending  []byte // received, not yet consumed
	infoLine string // the first INFO line, as received (with CRLF)
	info     map[string]any
	// answerPings makes fill answer and drop the server's keep-alive
	// PINGs (complete "PING\r\n" lines where a line starts), for tests
	// whose clients outlive the first PING (2 s).
	answerPings bool
}

// rawConn dials url and consumes the INFO line the server sends first.
func rawConn(t testing.TB, u string) *rawClient {
	t.Helper()
	return rawConnDialer(t, u, &net.Dialer{Timeout: readTimeout})
}

func rawConnDialer(t testing.TB, u string, d *net.Dialer) *rawClient {
	t.Helper()
	c, err := d.Dial("tcp", hostPort(u))
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawClient{t: t, name: c.LocalAddr().String(), conn: c}
	rc.infoLine, rc.info = rc.expectInfo()
	return rc
}

// defaultConnect is what a modern client sends, with verbose and pedantic
// off.
const defaultConnect = `{"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true}`

// rawConnect dials, sends CONNECT <connectJSON> and PING, and consumes the
// PONG and (for protocol 1) the asynchronous INFO that follows it.
func rawConnect(t testing.TB, u, connectJSON string) *rawClient {
	t.Helper()
	c := rawConn(t, u)
	c.handshake(connectJSON)
	return c
}

func (c *rawClient) handshake(connectJSON string) {
	c.t.Helper()
	var ci struct {
		Verbose  *bool `json:"verbose"`
		Protocol int   `json:"protocol"`
	}
	if err := json.Unmarshal([]byte(connectJSON), &ci); err != nil {
		c.t.Fatalf("bad CONNECT json %q: %v", connectJSON, err)
	}
	c.send("CONNECT " + connectJSON + "\r\nPING\r\n")
	if ci.Verbose == nil || *ci.Verbose { // absent verbose keeps the default: true
		c.expect("+OK\r\n")
	}
	c.expect("PONG\r\n")
	if ci.Protocol >= 1 {
		_, info := c.expectInfo()
		if info["connect_info"] != true {
			c.t.Fatalf("%s: async INFO after first PONG lacks connect_info:true: %v", c.name, info)
		}
	}
}

func (c *rawClient) send(s string) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(readTimeout))
	if _, err := c.conn.Write([]byte(s)); err != nil {
		c.t.Fatalf("%s: write %s: %v", c.name, trunc(s), err)
	}
}

// fill reads once more from the socket, appending to pending. It returns
// the read error (nil, a timeout, io.EOF or a reset).
func (c *rawClient) fill(deadline time.Time) error {
	c.conn.SetReadDeadline(deadline)
	var buf [64 * 1024]byte
	n, err := c.conn.Read(buf[:])
	c.pending = append(c.pending, buf[:n]...)
	if c.answerPings {
		c.pending = c.takePings(c.pending)
	}
	return err
}

// takePings returns b without its complete "PING\r\n" lines that start a
// line, answering each with PONG. A MSG's payload is skipped over by its
// size, so a payload line is never taken for a PING.
func (c *rawClient) takePings(b []byte) []byte {
	out := b[:0:0]
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 0 {
			return append(out, b...)
		}
		line := b[:i+2]
		if string(line) == "PING\r\n" {
			c.send("PONG\r\n")
			b = b[i+2:]
			continue
		}
		n := i + 2
		if f := strings.Fields(string(line)); len(f) >= 4 && (f[0] == "MSG" || f[0] == "HMSG") {
			size, err := strconv.Atoi(f[len(f)-1])
			if err != nil || len(b) < n+size+2 {
				return append(out, b...) // a payload not read in full yet
			}
			n += size + 2
		}
		out = append(out, b[:n]...)
		b = b[n:]
	}
	return out
}

// expect consumes exactly want from the stream and fails if anything else
// arrives first or nothing arrives in time.
func (c *rawClient) expect(want string) {
	c.t.Helper()
	deadline := time.Now().Add(readTimeout)
	for len(c.pending) < len(want) {
		if !bytes.HasPrefix([]byte(want), c.pending) {
			break
		}
		if err := c.fill(deadline); err != nil {
			c.t.Fatalf("%s: want %q; got %q then %v", c.name, trunc(want), trunc(string(c.pending)), err)
		}
	}
	if !bytes.HasPrefix(c.pending, []byte(want)) {
		c.t.Fatalf("%s: want %q\n got %q", c.name, trunc(want), trunc(string(c.pending)))
	}
	c.pending = c.pending[len(want):]
}

// expectRe consumes a match of pattern (anchored at the current position)
// and returns its submatches. The pattern should end in \r\n so that a
// partial read cannot match.
func (c *rawClient) expectRe(pattern string) []string {
	c.t.Helper()
	re := regexp.MustCompile(`^(?s:` + pattern + `)`)
	deadline := time.Now().Add(readTimeout)
	for {
		if m := re.FindSubmatch(c.pending); m != nil {
			c.pending = c.pending[len(m[0]):]
			out := make([]string, len(m))
			for i := range m {
				out[i] = string(m[i])
			}
			return out
		}
		if err := c.fill(deadline); err != nil {
			c.t.Fatalf("%s: want match of %q; got %q then %v", c.name, pattern, trunc(string(c.pending)), err)
		}
	}
}

// readLine consumes one CRLF-terminated line (returned with its CRLF).
func (c *rawClient) readLine() string {
	c.t.Helper()
	deadline := time.Now().Add(readTimeout)
	for {
		if i := bytes.Index(c.pending, []byte("\r\n")); i >= 0 {
			line := string(c.pending[:i+2])
			c.pending = c.pending[i+2:]
			return line
		}
		if err := c.fill(deadline); err != nil {
			c.t.Fatalf("%s: want a line; got %q then %v", c.name, trunc(string(c.pending)), err)
		}
	}
}

// expectInfo consumes an INFO line and returns it with its JSON decoded.
func (c *rawClient) expectInfo() (string, map[string]any) {
	c.t.Helper()
	line := c.readLine()
	if !strings.HasPrefix(line, "INFO {") {
		c.t.Fatalf("%s: want INFO line, got %q", c.name, trunc(line))
	}
	js := strings.TrimSuffix(strings.TrimPrefix(line, "INFO "), "\r\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		c.t.Fatalf("%s: INFO JSON %q: %v", c.name, js, err)
	}
	return line, m
}

// expectErr consumes "-ERR '<text>'\r\n".
func (c *rawClient) expectErr(text string) {
	c.t.Helper()
	c.expect("-ERR '" + text + "'\r\n")
}

// expectClosed asserts that the server closes the connection without
// sending anything more.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	deadline := time.Now().Add(readTimeout)
	for {
		if len(c.pending) > 0 {
			c.t.Fatalf("%s: want close, got %q", c.name, trunc(string(c.pending)))
		}
		err := c.fill(deadline)
		if len(c.pending) > 0 {
			continue
		}
		if err == nil {
			continue
		}
		if isClosedErr(err) {
			return
		}
		c.t.Fatalf("%s: want the server to close the connection; got %v", c.name, err)
	}
}

// drainUntilClosed reads and discards everything until the server closes
// the connection, and returns the number of bytes discarded.
func (c *rawClient) drainUntilClosed(within time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(within)
	total := len(c.pending)
	c.pending = nil
	for {
		err := c.fill(deadline)
		total += len(c.pending)
		c.pending = c.pending[:0]
		if err == nil {
			continue
		}
		if isClosedErr(err) {
			return total
		}
		c.t.Fatalf("%s: want the server to close the connection within %v; got %v after %d bytes", c.name, within, err, total)
	}
}

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// sync sends PING and expects PONG as the very next bytes: it proves the
// server sent nothing else in between and that the connection is open.
func (c *rawClient) sync() {
	c.t.Helper()
	c.send("PING\r\n")
	c.expect("PONG\r\n")
}

func trunc(s string) string {
	const max = 600
	if len(s) > max {
		return s[:max] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}
