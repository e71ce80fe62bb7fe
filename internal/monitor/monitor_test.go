package monitor

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/cairnmq/cairn/internal/vfs"
)

// startMonitored starts a server on loopback with mod applied to its
// options, and a monitor on a free port; both stop at the end of the test.
func startMonitored(t *testing.T, mod func(*server.Options)) (*server.Server, *Monitor) {
	t.Helper()
	o := server.Options{Host: "127.0.0.1", Port: server.RandomPort}
	if mod != nil {
		mod(&o)
	}
	if o.JetStream && o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Host: "127.0.0.1", Port: server.RandomPort, Server: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Shutdown() })
	return s, m
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getInto(t *testing.T, u string, v any) {
	t.Helper()
	code, body := get(t, u)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", u, err, body)
	}
}

// rawClient is a connected, handshaken client (CONNECT with a name, then
// PING and its PONG).
func rawClient(t *testing.T, s *server.Server, name string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "CONNECT {\"verbose\":false,\"name\":%q,\"lang\":\"raw\",\"version\":\"1\"}\r\nPING\r\n", name)
	readUntil(t, nc, "PONG\r\n")
	return nc
}

func readUntil(t *testing.T, nc net.Conn, want string) string {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), want) {
		n, err := nc.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("reading for %q: %v (got %q)", want, err, got)
		}
	}
	return string(got)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Bad query strings get 400 with nats-server's message; huge offsets and
// limits are clamped to what exists (no allocation of their size, no
// overflow), never a panic.
func TestBadAndHugeQueries(t *testing.T) {
	s, m := startMonitored(t, nil)
	rawClient(t, s, "a")
	rawClient(t, s, "b")
	bad := map[string]string{
		"/connz?limit=x":                        "Error decoding int for 'limit'",
		"/connz?offset=99999999999999999999999": "Error decoding int for 'offset'",
		"/connz?cid=-1":                         "Error decoding uint64 for 'cid'",
		"/connz?subs=maybe":                     "Error decoding boolean for 'subs'",
		"/connz?state=nope":                     "Error decoding state for nope",
		"/connz?sort=nope":                      "invalid sorting option: nope",
		"/connz?sort=stop":                      "sort by stop only valid on closed connections",
		"/subsz?test=a.*":                       "invalid test subject",
		"/jsz?streams=yes":                      "Error decoding boolean for 'streams'",
		"/healthz?details=2":                    "Error decoding boolean for 'details'",
		"/accountz?acc=NOPE":                    "Account NOPE does not exist",
	}
	for path, want := range bad {
		code, body := get(t, m.URL()+path)
		if code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 400 %q", path, code, body, want)
		}
	}
	huge := []struct {
		path string
		n    int
	}{
		{"/connz?offset=9223372036854775807&limit=9223372036854775807", 0},
		{"/connz?offset=-5&limit=9223372036854775807", 2},
		{"/connz?offset=1&limit=-1", 1},
		{"/connz?limit=1", 1},
	}
	for _, h := range huge {
		var cz Connz
		getInto(t, m.URL()+h.path, &cz)
		if cz.NumConns != h.n || len(cz.Conns) != h.n || cz.Total != 2 {
			t.Errorf("%s: %d connections of %d, want %d of 2", h.path, len(cz.Conns), cz.Total, h.n)
		}
	}
	var sz Subsz
	getInto(t, m.URL()+"/subsz?subs=true&offset=9223372036854775807&limit=9223372036854775807", &sz)
	if len(sz.Subs) != 0 {
		t.Errorf("subsz past the end: %v", sz.Subs)
	}
}

// /connz reports what each client sent and received, sorts and pages as
// nats-server does, and lists subscriptions.
func TestConnzCountsSortsAndLists(t *testing.T) {
	s, m := startMonitored(t, nil)
	sub := rawClient(t, s, "sub")
	fmt.Fprint(sub, "SUB foo 1\r\nSUB bar q 2\r\nPING\r\n")
	readUntil(t, sub, "PONG\r\n")
	pub := rawClient(t, s, "pub")
	fmt.Fprint(pub, "PUB foo 5\r\nhello\r\nPUB foo 3\r\nabc\r\nPING\r\n")
	readUntil(t, pub, "PONG\r\n")
	readUntil(t, sub, "abc\r\n")

	var cz Connz
	getInto(t, m.URL()+"/connz?sort=msgs_from&subs=detail", &cz)
	if cz.Total != 2 || len(cz.Conns) != 2 {
		t.Fatalf("connz %+v", cz)
	}
	p, r := cz.Conns[0], cz.Conns[1]
	if p.Name != "pub" || p.InMsgs != 2 || p.InBytes != 8 || p.Lang != "raw" || p.Version != "1" {
		t.Errorf("publisher %+v", p)
	}
	if r.Name != "sub" || r.OutMsgs != 2 || r.OutBytes != 8 || r.NumSubs != 2 || len(r.SubsDetail) != 2 {
		t.Errorf("subscriber %+v", r)
	}
	if d := r.SubsDetail; d[0].Subject != "foo" || d[0].Msgs != 2 || d[1].Queue != "q" || d[1].Sid != "2" {
		t.Errorf("subscriptions %+v", d)
	}
	if p.RTT == "" || p.Kind != "Client" || p.Type != "nats" || p.Uptime == "" {
		t.Errorf("connection fields %+v", p)
	}
	getInto(t, m.URL()+"/connz?sort=msgs_to&limit=1", &cz)
	if len(cz.Conns) != 1 || cz.Conns[0].Name != "sub" || cz.Limit != 1 {
		t.Errorf("msgs_to, limit 1: %+v", cz)
	}
	getInto(t, m.URL()+"/connz?sort=cid&offset=1", &cz)
	if len(cz.Conns) != 1 || cz.Conns[0].Name != "pub" || cz.Offset != 1 {
		t.Errorf("cid, offset 1: %+v", cz)
	}
	var v Varz
	getInto(t, m.URL()+"/varz", &v)
	if v.InMsgs != 2 || v.OutMsgs != 2 || v.InBytes != 8 || v.Connections != 2 || v.TotalConnections != 2 || v.HTTPReqStats[ConnzPath] != 3 {
		t.Errorf("varz %+v", v)
	}
}

// Closed connections are kept with their reason, at most
// max_closed_clients of them, the newest.
func TestClosedConnectionsBoundedWithReasons(t *testing.T) {
	s, m := startMonitored(t, func(o *server.Options) { o.MaxClosedClients = 3; o.MaxPayload = 16 })
	for i := range 4 {
		name := fmt.Sprintf("gone%d", i)
		nc := rawClient(t, s, name)
		fmt.Fprint(nc, "SUB x 1\r\n")
		nc.Close()
		// The server notices each close on its own goroutine: wait for
		// this one before the next, so that their order is known.
		var cz Connz
		waitUntil(t, name+" closed", func() bool {
			getInto(t, m.URL()+"/connz?state=closed", &cz)
			return len(cz.Conns) > 0 && cz.Conns[len(cz.Conns)-1].Name == name
		})
	}
	big := rawClient(t, s, "too-big")
	fmt.Fprint(big, "PUB x 100\r\n")
	readUntil(t, big, "Maximum Payload Violation")
	var cz Connz
	waitUntil(t, "five closed connections", func() bool {
		getInto(t, m.URL()+"/connz?state=closed&subs=true", &cz)
		return cz.Total == 3 && cz.Conns[2].Name == "too-big"
	})
	names := []string{cz.Conns[0].Name, cz.Conns[1].Name, cz.Conns[2].Name}
	if names[0] != "gone2" || names[1] != "gone3" {
		t.Errorf("kept %v, want the newest three", names)
	}
	if cz.Conns[0].Reason != "Client Closed" || cz.Conns[2].Reason != "Maximum Message Payload Exceeded" {
		t.Errorf("reasons %q, %q", cz.Conns[0].Reason, cz.Conns[2].Reason)
	}
	if cz.Conns[0].Stop == nil || len(cz.Conns[0].Subs) != 1 || cz.Conns[0].Subs[0] != "x" {
		t.Errorf("closed connection %+v", cz.Conns[0])
	}
	getInto(t, m.URL()+"/connz?state=closed&sort=reason", &cz)
	if cz.Conns[0].Reason != "Client Closed" || cz.Conns[2].Reason != "Maximum Message Payload Exceeded" {
		t.Errorf("sorted by reason: %q ... %q", cz.Conns[0].Reason, cz.Conns[2].Reason)
	}
	getInto(t, m.URL()+"/connz?state=all", &cz)
	if cz.Total != 3 {
		t.Errorf("state=all: total %d, want 3 (no open connection)", cz.Total)
	}
}

// More requests than maxInFlight at once get 503 with a message; the
// others are served.
func TestConcurrentScrapesAreBounded(t *testing.T) {
	_, m := startMonitored(t, nil)
	for range maxInFlight {
		m.inflight <- struct{}{} // as if maxInFlight requests were being served
	}
	code, body := get(t, m.URL()+"/varz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "too many monitoring requests") {
		t.Errorf("with every slot taken: %d %q", code, body)
	}
	for range maxInFlight {
		<-m.inflight
	}
	var wg sync.WaitGroup
	for range 4 * maxInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := http.Client{Timeout: 5 * time.Second}
			if resp, err := c.Get(m.URL() + "/connz"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if code, _ := get(t, m.URL()+"/varz"); code != http.StatusOK {
		t.Errorf("after a burst: %d", code)
	}
}

// faultSpaceFS is a FaultFS over a CrashFS that also reports the free
// space a test sets, for the disk guard.
type faultSpaceFS struct {
	*vfs.FaultFS
	mu   sync.Mutex
	free uint64
}

func (f *faultSpaceFS) Space(string) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.free, 1 << 40, nil
}

func (f *faultSpaceFS) setFree(n uint64) {
	f.mu.Lock()
	f.free = n
	f.mu.Unlock()
}

// /healthz is stricter than nats-server's: a stream fenced by a write
// error and the disk guard refusing publishes make it 503 with the
// reason; js-enabled-only and js-server-only stay 200 (liveness and
// readiness probes).
func TestHealthzReportsFencedStoreAndDiskGuard(t *testing.T) {
	fs := &faultSpaceFS{FaultFS: vfs.NewFaultFS(vfs.NewCrashFS()), free: 1 << 40}
	s, m := startMonitored(t, func(o *server.Options) {
		o.JetStream, o.StoreDir, o.JetStreamFS, o.MaxFileStore = true, "/sd", fs, 1<<30
	})
	nc := rawClient(t, s, "js")
	cfg := `{"name":"S","subjects":["s.>"],"storage":"file"}`
	fmt.Fprintf(nc, "SUB _INBOX.r 1\r\nPUB $JS.API.STREAM.CREATE.S _INBOX.r %d\r\n%s\r\n", len(cfg), cfg)
	readUntil(t, nc, "stream_create_response")
	expect := func(path string, code int, substr string) {
		t.Helper()
		got, body := get(t, m.URL()+path)
		if got != code || !strings.Contains(body, substr) {
			t.Errorf("%s: %d %s, want %d with %q", path, got, body, code, substr)
		}
	}
	expect("/healthz", 200, `{"status":"ok"}`)
	expect("/healthz?account=$G&stream=S", 200, `"ok"`)

	fs.setFree(1 << 20) // under the reserve
	waitUntil(t, "the disk guard to look again", func() bool {
		code, _ := get(t, m.URL()+"/healthz")
		return code == http.StatusServiceUnavailable
	})
	expect("/healthz", 503, "JetStream refuses publishes")
	expect("/healthz?js-enabled-only=true", 200, `"ok"`)
	expect("/healthz?js-server-only=true", 200, `"ok"`)
	fs.setFree(1 << 40)
	waitUntil(t, "the disk guard to see room again", func() bool {
		code, _ := get(t, m.URL()+"/healthz")
		return code == http.StatusOK
	})

	fs.Inject(vfs.Rule{Op: vfs.OpSync})
	fmt.Fprint(nc, "PUB s.1 _INBOX.r 2\r\nhi\r\n")
	readUntil(t, nc, `"error"`)
	expect("/healthz", 503, `JetStream stream '$G \u003e S' write error`)
	expect("/healthz?details=true", 503, `"type":"STREAM","account":"$G","stream":"S"`)
	expect("/healthz?account=$G&stream=S", 503, "write error")
	expect("/healthz?js-enabled-only=true", 200, `"ok"`)
}

// /subsz?test=<subject> lists the subscriptions a message published to
// that subject would reach: literal, wildcard and full-wildcard ones, not
// the others (nats-server v2.15.2 Subsz, test).
func TestSubszTestSubject(t *testing.T) {
	s, m := startMonitored(t, nil)
	nc := rawClient(t, s, "subs")
	fmt.Fprint(nc, "SUB orders.new 1\r\nSUB orders.* 2\r\nSUB > 3\r\nSUB orders.old 4\r\nSUB returns.* 5\r\nPING\r\n")
	readUntil(t, nc, "PONG\r\n")
	var sz Subsz
	getInto(t, m.URL()+"/subsz?subs=1&test=orders.new", &sz)
	var got []string
	for _, d := range sz.Subs {
		got = append(got, d.Subject)
	}
	slices.Sort(got)
	if want := []string{">", "orders.*", "orders.new"}; !slices.Equal(got, want) || sz.Total != 3 {
		t.Errorf("test=orders.new: %v (total %d), want %v", got, sz.Total, want)
	}
}
