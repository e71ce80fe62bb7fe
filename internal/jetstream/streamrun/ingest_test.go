package streamrun

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// The ingest queue's bounds come from the Env as nats-server v2.15.2
// takes its max_buffered_msgs and max_buffered_size: unset is 100,000
// publishes and 128 MiB, negative no bound.
func TestIngestBounds(t *testing.T) {
	for _, c := range []struct {
		msgs       int
		bytes      int64
		wantMsgs   int
		wantBytes  int
		whatIsThis string
	}{
		{0, 0, 100_000, 128 << 20, "unset: nats-server's defaults"},
		{10, 4096, 10, 4096, "set"},
		{-1, -1, 0, 0, "negative: no bound"},
	} {
		q := newIngest(Env{MaxBufferedMsgs: c.msgs, MaxBufferedBytes: c.bytes})
		if q.limit != c.wantMsgs || q.byteLimit != c.wantBytes {
			t.Errorf("%s: Env %d msgs, %d bytes: queue bounds %d msgs, %d bytes; want %d, %d",
				c.whatIsThis, c.msgs, c.bytes, q.limit, q.byteLimit, c.wantMsgs, c.wantBytes)
		}
	}
}

// logClock is a settable clock.
type logClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *logClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *logClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A stream whose ingest queue refuses publishes logs nats-server
// v2.15.2's warning (stream.go queueInbound), once per second per cause
// as its RateLimitWarnf does, not once per refused publish; every refused
// publish with a reply is still answered 429.
func TestIngestDropLogged(t *testing.T) {
	var out []answer
	var lines []string
	clk := &logClock{t: time.Unix(1_700_000_000, 0)}
	cfg := stream.Config{Name: "ORDERS", Subjects: []string{"o.>"}, Storage: stream.MemoryStorage}
	cfg.SetDefaults()
	env := Env{Transport: recordingTransport{out: &out}, Now: clk.now, Account: "ACME",
		Logf:    func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) },
		Storage: NewStorage(nil, "", NewUsage(), clk.now, t.Logf, t.Logf),
		// 2 publishes; "o.x" + "_INBOX.r" + 10 bytes = 21 bytes each.
		MaxBufferedMsgs: 2, MaxBufferedBytes: 50}
	r := New(env, cfg, clk.now(), "", memstore.New(cfg.StoreConfig()))
	data := make([]byte, 10)
	for range 5 { // not served: the first 2 stay queued, 3 refused
		r.handlePublish("o.x", "_INBOX.r", nil, data)
	}
	lenLine := "Dropping messages due to excessive stream ingest rate on 'ACME' > 'ORDERS': IPQ len limit reached"
	sizeLine := "Dropping messages due to excessive stream ingest rate on 'ACME' > 'ORDERS': IPQ size limit reached"
	if len(out) != 3 || !slices.Equal(lines, []string{lenLine}) {
		t.Fatalf("3 publishes refused: %d answers, log %q", len(out), lines)
	}
	clk.add(ingestDropLogEvery - time.Millisecond)
	r.handlePublish("o.x", "_INBOX.r", nil, data)
	r.handlePublish("o.x", "_INBOX.r", nil, data)
	if len(out) != 5 || len(lines) != 1 {
		t.Fatalf("within the second: %d answers, log %q", len(out), lines)
	}
	clk.add(time.Millisecond)
	r.handlePublish("o.x", "_INBOX.r", nil, data)
	if len(out) != 6 || !slices.Equal(lines, []string{lenLine, lenLine}) {
		t.Fatalf("a second later: %d answers, log %q", len(out), lines)
	}

	// The byte bound is a cause of its own, logged on its own schedule.
	r2 := New(Env{Transport: recordingTransport{out: &out}, Now: clk.now, Account: "ACME",
		Logf:            func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) },
		Storage:         env.Storage,
		MaxBufferedMsgs: 100, MaxBufferedBytes: 50}, cfg, clk.now(), "", memstore.New(cfg.StoreConfig()))
	lines = lines[:0]
	for range 4 { // 2 of 21 bytes fit in 50, the next 2 would not
		r2.handlePublish("o.x", "_INBOX.r", nil, data)
	}
	if !slices.Equal(lines, []string{sizeLine}) {
		t.Fatalf("byte bound: log %q", lines)
	}
}
