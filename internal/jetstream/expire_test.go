package jetstream

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
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

// passAt runs an expiry pass of stream name at the clock's time and
// returns how long after that time the next pass is set for.
func passAt(t *testing.T, js *JetStream, clk *fakeClock, name string) time.Duration {
	t.Helper()
	r, jerr := js.lookup(name)
	if jerr != nil {
		t.Fatal(jerr)
	}
	now := clk.now()
	r.ExpireAt(now.UnixNano())
	return time.Duration(r.NextExpiry() - now.UnixNano())
}

// The next expiry pass comes when the oldest Nats-Msg-Id leaves the
// duplicate window, or the first message reaches max_age, not up to a
// second later: an id republished just after the window is stored, as
// nats-server (purgeMsgIds) stores it.
func TestExpiryFollowsDedupeWindowAndMaxAge(t *testing.T) {
	js, tr, clk := clockedJS(t)
	dd := ordersConfig(stream.FileStorage)
	dd.DuplicateWindow = 2 * time.Second
	if _, err := js.AddStream(dd); err != nil {
		t.Fatal(err)
	}
	age := stream.Config{Name: "AGE", Subjects: []string{"age.>"}, Storage: stream.FileStorage, MaxAge: 3 * time.Second, DuplicateWindow: time.Second}
	if _, err := js.AddStream(age); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.e")
	tr.Publish("events.orders.1", "_INBOX.e", []byte("NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n"), []byte("x"))
	tr.Publish("age.1", "_INBOX.e", nil, []byte("x"))
	acks.next(t)
	acks.next(t)

	clk.advance(1500 * time.Millisecond)
	if got := passAt(t, js, clk, "ORDERS"); got != 500*time.Millisecond {
		t.Fatalf("1.5 s into a 2 s window the next pass is in %v, want 500ms", got)
	}
	if got := passAt(t, js, clk, "AGE"); got != time.Second {
		t.Fatalf("1.5 s into a 3 s max_age the next pass is in %v, want 1s (the regular pass)", got)
	}
	clk.advance(time.Second)
	if got := passAt(t, js, clk, "AGE"); got != 500*time.Millisecond {
		t.Fatalf("2.5 s into a 3 s max_age the next pass is in %v, want 500ms", got)
	}
	clk.advance(30 * time.Millisecond) // 2.53 s: a pass at the deadline forgot the id
	passAt(t, js, clk, "ORDERS")
	tr.Publish("events.orders.1", "_INBOX.e", []byte("NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n"), []byte("again"))
	if got := acks.next(t); got != `{"stream":"ORDERS","seq":2}` {
		t.Fatalf("id republished after the window: %s", got)
	}
}

// A store that fails every expiry pass (fenced after a failed write) is
// logged once, not at every pass.
func TestExpiryFailureLoggedOnce(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	fs := vfs.NewFaultFS(vfs.NewCrashFS())
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	tr := newMemTransport()
	js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: clk.now, Logf: logf}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	cfg := ordersConfig(stream.FileStorage)
	cfg.MaxAge = time.Second
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.f")
	tr.Publish("events.orders.1", "_INBOX.f", nil, []byte("x"))
	acks.next(t)
	fs.Inject(vfs.Rule{Op: vfs.OpWrite})
	tr.Publish("events.orders.2", "_INBOX.f", nil, []byte("y")) // fences the store
	acks.next(t)
	clk.advance(2 * time.Second)
	for range 3 {
		passAt(t, js, clk, "ORDERS")
		clk.advance(time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, l := range lines {
		if strings.Contains(l, "expire") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d expiry failures logged over 3 passes, want 1: %q", n, lines)
	}
}

// A message with a Nats-Msg-Id in a window shorter than the regular pass,
// or in a stream whose max_age is, brings the next pass forward to when it
// is due: a 300 ms window is not a second long.
func TestShortWindowsBringThePassForward(t *testing.T) {
	js, tr, clk := clockedJS(t)
	dd := ordersConfig(stream.FileStorage)
	dd.DuplicateWindow = 300 * time.Millisecond
	age := stream.Config{Name: "AGE", Subjects: []string{"age.>"}, Storage: stream.MemoryStorage, MaxAge: 200 * time.Millisecond, DuplicateWindow: 100 * time.Millisecond}
	for _, cfg := range []stream.Config{dd, age} {
		if _, err := js.AddStream(cfg); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(100 * time.Millisecond)
	acks := tr.inbox("_INBOX.w")
	tr.Publish("events.orders.1", "_INBOX.w", []byte("NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n"), []byte("x"))
	tr.Publish("age.1", "_INBOX.w", nil, []byte("x"))
	acks.next(t)
	acks.next(t)
	for name, want := range map[string]time.Duration{"ORDERS": 300 * time.Millisecond, "AGE": 200 * time.Millisecond} {
		r, _ := js.lookup(name)
		got := time.Duration(r.NextExpiry() - clk.now().UnixNano())
		if got != want {
			t.Errorf("%s: next pass in %v after the publish, want %v", name, got, want)
		}
	}
}

// A pass that removed nothing sets the next one at the first message's
// max_age deadline however near (the message after an idle spell goes on
// time); a pass that removed messages keeps the next one minExpiryWait
// away, as nats-server's age check does, so that a loaded stream is not
// swept more often.
func TestMaxAgeFloorOnlyAfterRemoval(t *testing.T) {
	js, clk, publish := ageStream(t, stream.Config{Storage: stream.MemoryStorage, MaxAge: 2 * time.Second})
	publish("age.1", nil)
	clk.advance(100 * time.Millisecond)
	publish("age.2", nil)

	clk.advance(1850 * time.Millisecond) // 50 ms before the first deadline
	if got := passAt(t, js, clk, "AGE"); got != 50*time.Millisecond {
		t.Fatalf("a pass that removed nothing, 50 ms before max_age: next in %v, want 50ms", got)
	}
	clk.advance(50 * time.Millisecond)                                 // the first message's deadline; the second's is 100 ms on
	if got := passAt(t, js, clk, "AGE"); got != 250*time.Millisecond { // streamrun's minExpiryWait
		t.Fatalf("a pass that removed a message: next in %v, want 250ms", got)
	}
}

// Messages that expire while delivered and unacknowledged stop counting
// against max_ack_pending and the ack floor moves past them, with a
// MSG_TERMINATED advisory each, as nats-server does (decStreamPending);
// they blocked the consumer until ack_wait before.
func TestExpiryDropsPendingDeliveries(t *testing.T) {
	for _, storage := range []stream.StorageType{stream.FileStorage, stream.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			js, clk, publish := ageStream(t, stream.Config{Storage: storage, MaxAge: 2 * time.Second})
			publish("age.1", nil)
			publish("age.2", nil)
			advisories := fetchUnacked(t, js, 2)
			clk.advance(2100 * time.Millisecond)
			passAt(t, js, clk, "AGE")
			for seq := 1; seq <= 2; seq++ {
				a := advisories.next(t)
				for _, want := range []string{fmt.Sprintf(`"stream_seq":%d,`, seq), fmt.Sprintf(`"consumer_seq":%d,`, seq),
					`"deliveries":1,`, `"reason":"Unacknowledged message was deleted"`} {
					if !strings.Contains(a, want) {
						t.Errorf("MSG_TERMINATED advisory %d lacks %s: %s", seq, want, a)
					}
				}
			}
			info, jerr := js.ConsumerInfo("AGE", "C")
			if jerr != nil {
				t.Fatal(jerr)
			}
			if info.NumAckPending != 0 || info.AckFloor.Stream != 2 || info.AckFloor.Consumer != 2 {
				t.Fatalf("after both delivered messages expired: ack pending %d, ack floor %d/%d; want 0, 2/2",
					info.NumAckPending, info.AckFloor.Stream, info.AckFloor.Consumer)
			}
		})
	}
}

// Deleting a delivered, unacknowledged message terminates its delivery
// with the same advisory (nats-server decStreamPending).
func TestDeleteMsgAdvisesPendingDelivery(t *testing.T) {
	js, _, publish := ageStream(t, stream.Config{Storage: stream.FileStorage})
	publish("age.1", nil)
	advisories := fetchUnacked(t, js, 1)
	if jerr := js.DeleteMsg("AGE", 1); jerr != nil {
		t.Fatal(jerr)
	}
	if a := advisories.next(t); !strings.Contains(a, `"stream_seq":1,`) || !strings.Contains(a, `"reason":"Unacknowledged message was deleted"`) {
		t.Errorf("MSG_TERMINATED advisory after the delete: %s", a)
	}
}

// A delivered, unacknowledged message that max_msgs pushes out on
// publish leaves pending at once with the same advisory, rather than
// counting against max_ack_pending until its ack wait.
func TestLimitRemovalDropsPendingDelivery(t *testing.T) {
	js, _, publish := ageStream(t, stream.Config{Storage: stream.FileStorage, MaxMsgs: 2})
	publish("age.1", nil)
	advisories := fetchUnacked(t, js, 1)
	publish("age.2", nil)
	publish("age.3", nil) // pushes seq 1 out
	if a := advisories.next(t); !strings.Contains(a, `"stream_seq":1,`) || !strings.Contains(a, `"reason":"Unacknowledged message was deleted"`) {
		t.Errorf("MSG_TERMINATED advisory after max_msgs removed seq 1: %s", a)
	}
	info, jerr := js.ConsumerInfo("AGE", "C")
	if jerr != nil {
		t.Fatal(jerr)
	}
	if info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Errorf("after max_msgs removed the pending seq 1: ack pending %d, ack floor %+v; want 0, stream 1", info.NumAckPending, info.AckFloor)
	}
}

// Lowering max_age removes the messages now too old at once, not at the
// next regular pass (nats-server removes them when its store's config
// is updated).
func TestLoweredMaxAgeExpiresAtOnce(t *testing.T) {
	js, clk, publish := ageStream(t, stream.Config{Storage: stream.FileStorage, MaxAge: time.Hour})
	publish("age.1", nil)
	clk.advance(3 * time.Second)
	r, _ := js.lookup("AGE")
	cfg := r.Config()
	cfg.MaxAge, cfg.DuplicateWindow = time.Second, time.Second
	info, jerr := js.UpdateStream(cfg)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("%d messages right after max_age was lowered below their age, want 0", info.State.Msgs)
	}
}

// A first message that never expires (Nats-TTL: never) does not hide the
// max_age deadline of the message behind it: the pass is set for that
// deadline, not for the next regular pass up to a second later.
func TestMaxAgeBehindNeverExpiringHead(t *testing.T) {
	js, clk, publish := ageStream(t, stream.Config{Storage: stream.FileStorage, MaxAge: 2 * time.Second, AllowMsgTTL: true})
	publish("age.keep", []byte("NATS/1.0\r\nNats-TTL: never\r\n\r\n"))
	clk.advance(500 * time.Millisecond)
	publish("age.go", nil)

	clk.advance(1900 * time.Millisecond) // the second message's deadline is 100 ms on
	if got := passAt(t, js, clk, "AGE"); got != 100*time.Millisecond {
		t.Fatalf("next pass in %v, want 100ms (the second message's max_age)", got)
	}
}

// fetchUnacked creates durable consumer C of stream AGE (explicit acks,
// max_ack_pending n, an hour's ack wait), fetches its first n messages
// without acknowledging them, and returns an inbox of its MSG_TERMINATED
// advisories.
func fetchUnacked(t *testing.T, js *JetStream, n int) *inbox {
	t.Helper()
	ccfg := consumer.Config{Durable: "C", AckPolicy: consumer.AckExplicit, MaxAckPending: n, AckWait: time.Hour}
	if _, err := js.CreateConsumer("AGE", ccfg, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	tr := js.tr.(*memTransport)
	msgs := tr.inbox("_INBOX.fetch")
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.AGE.C", "_INBOX.fetch", nil, fmt.Appendf(nil, `{"batch":%d,"no_wait":true}`, n))
	for range n {
		msgs.next(t)
	}
	return tr.inbox("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.AGE.C")
}

// ageStream starts a clocked JetStream (clockedJS) with stream AGE on
// age.> and the rest of cfg, and returns a publish to it that waits for
// the PubAck.
func ageStream(t *testing.T, cfg stream.Config) (*JetStream, *fakeClock, func(subj string, hdr []byte)) {
	t.Helper()
	js, tr, clk := clockedJS(t)
	cfg.Name, cfg.Subjects = "AGE", []string{"age.>"}
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.age")
	return js, clk, func(subj string, hdr []byte) {
		t.Helper()
		tr.Publish(subj, "_INBOX.age", hdr, []byte("x"))
		acks.next(t)
	}
}

// clockedJS starts a JetStream on a CrashFS with a fake clock; it shuts
// down with the test.
func clockedJS(t *testing.T) (*JetStream, *memTransport, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	tr := newMemTransport()
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1", Now: clk.now}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Shutdown)
	return js, tr, clk
}
