package jetstream

import (
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A message whose Nats-TTL ran out while the server was down is gone
// before the restarted server serves anything (nats-server
// expireMsgsOnRecover), not on the first timer pass.
func TestExpiredWhileDownIsGoneAtStart(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	open := func(tr Transport) *JetStream {
		js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: clk.now}, tr)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	js := open(tr)
	cfg := ordersConfig(stream.FileStorage)
	cfg.AllowMsgTTL = true
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.a")
	tr.Publish("events.orders.1", "_INBOX.a", []byte("NATS/1.0\r\nNats-TTL: 5s\r\n\r\n"), []byte("x"))
	tr.Publish("events.orders.2", "_INBOX.a", nil, []byte("kept"))
	acks.next(t)
	acks.next(t)
	js.Shutdown()

	clk.advance(time.Minute)
	js2 := open(newMemTransport())
	defer js2.Shutdown()
	info, jerr := js2.StreamInfo("ORDERS", InfoOptions{})
	if jerr != nil {
		t.Fatal(jerr)
	}
	if info.State.Msgs != 1 || info.State.FirstSeq != 2 {
		t.Fatalf("right after restart: %+v, want only the message without a TTL", info.State)
	}
}

// The next expiry pass comes at the next TTL deadline, not up to 250 ms
// after it; a marker that failed is retried after 250 ms.
func TestExpiryWait(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, c := range []struct {
		pass, now, next int64
		want            time.Duration
	}{
		{1000 * ms, 1000 * ms, 0, time.Second},
		{1000 * ms, 1001 * ms, 1050 * ms, 49 * time.Millisecond},
		{1000 * ms, 1001 * ms, 1003 * ms, 10 * time.Millisecond},
		{1000 * ms, 1001 * ms, 5000 * ms, time.Second},
		{1000 * ms, 1001 * ms, 900 * ms, 250 * time.Millisecond},
		{1000 * ms, 1001 * ms, 1000 * ms, 250 * time.Millisecond},
	} {
		if got := expiryWait(c.pass, c.now, c.next); got != c.want {
			t.Errorf("expiryWait(%d, %d, %d) = %v, want %v", c.pass, c.now, c.next, got, c.want)
		}
	}
}
