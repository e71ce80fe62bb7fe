package jetstream

import (
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// In a cluster (Config.RemoveInactive set), a consumer past its
// inactive_threshold is not deleted where it runs: the engine tells the
// cluster layer, naming it with its created time, and keeps it; while it
// stays inactive it tells it again consumerrun.InactiveRetry later on its
// clock, then twice as late (nats-server v2.15.2 deleteNotActive). The
// time is the engine's clock, never a timer of its own.
func TestRemoveInactiveAsksTheCluster(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	type ask struct {
		stream, name string
		created, at  time.Time
	}
	var mu sync.Mutex
	var asks []ask
	tr := newMemTransport()
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1", Now: clk.now,
		RemoveInactive: func(stream, name string, created time.Time) {
			mu.Lock()
			asks = append(asks, ask{stream, name, created, clk.now()})
			mu.Unlock()
		}}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	info, jerr := js.CreateConsumer("ORDERS", consumer.Config{Durable: "D", AckPolicy: consumer.AckExplicit, InactiveThreshold: time.Minute}, CreateOrUpdate, false)
	if jerr != nil {
		t.Fatal(jerr)
	}
	start := clk.now()
	wake := func() { tr.Publish("events.orders.x", "", nil, []byte("o")) } // a new message wakes the consumer's loop
	waitAsks := func(n int) []ask {
		t.Helper()
		waitUntil(t, "the request for removal", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(asks) >= n
		})
		mu.Lock()
		defer mu.Unlock()
		return append([]ask(nil), asks...)
	}

	clk.advance(time.Minute + time.Second)
	wake()
	got := waitAsks(1)
	if a := got[0]; a.stream != "ORDERS" || a.name != "D" || !a.created.Equal(info.Created) || a.at.Before(start.Add(time.Minute)) {
		t.Fatalf("asked %+v, want ORDERS > D created %v, past the threshold", a, info.Created)
	}
	if _, jerr := js.ConsumerInfo("ORDERS", "D"); jerr != nil {
		t.Fatalf("the consumer was deleted here: %v", jerr)
	}
	wake()
	wake()
	clk.advance(consumerrun.InactiveRetry)
	wake()
	got = waitAsks(2)
	if d := got[1].at.Sub(got[0].at); d < consumerrun.InactiveRetry {
		t.Fatalf("asked again after %v, want %v", d, consumerrun.InactiveRetry)
	}
	clk.advance(consumerrun.InactiveRetry)
	wake()
	clk.advance(consumerrun.InactiveRetry)
	wake()
	got = waitAsks(3)
	if d := got[2].at.Sub(got[1].at); d < 2*consumerrun.InactiveRetry {
		t.Fatalf("asked a third time after %v, want %v", d, 2*consumerrun.InactiveRetry)
	}
	if _, jerr := js.ConsumerInfo("ORDERS", "D"); jerr != nil {
		t.Fatalf("the consumer was deleted here: %v", jerr)
	}
}

// In a cluster a stream's start restores only the consumers
// Config.RestoreConsumer keeps (those its meta group assigns to the
// server, created at the time their files record); RestoreConsumer then
// restores one with its delivery state, and only the consumer created at
// the time named: files of an earlier consumer of the name (removed
// while the server was down) are not taken for it.
func TestRestoreConsumerByAssignment(t *testing.T) {
	fs := vfs.NewCrashFS()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var keep func(stream, name string, created time.Time) bool
	open := func(tr Transport) *JetStream {
		js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: clk.now, RestoreConsumer: keep}, tr)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	tr := newMemTransport()
	js := open(tr)
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	created := time.Unix(1_700_000_000, 123).UTC()
	cfg := consumer.Config{Durable: "C", AckPolicy: consumer.AckExplicit, AckWait: time.Hour}
	if _, jerr := js.CreateConsumerAt("ORDERS", "C", cfg, CreateOrUpdate, created); jerr != nil {
		t.Fatal(jerr)
	}
	pubAcks := tr.inbox("_INBOX.pub")
	tr.Publish("events.orders.x", "_INBOX.pub", nil, []byte("o"))
	pubAcks.next(t)
	d := collectDeliveries(tr, "_INBOX.pull")
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C", "_INBOX.pull", nil, []byte(`{"batch":1}`))
	d.wait(t, 1)
	js.Shutdown()

	var asked []time.Time
	keep = func(stream, name string, at time.Time) bool {
		asked = append(asked, at)
		return false
	}
	js2 := open(newMemTransport())
	defer js2.Shutdown()
	if len(asked) != 1 || !asked[0].Equal(created) {
		t.Fatalf("the start asked about %v, want the created time %v", asked, created)
	}
	expectErr(t, second(js2.ConsumerInfo("ORDERS", "C")), jserr.ConsumerNotFound)
	if found, jerr := js2.RestoreConsumer("ORDERS", "C", created.Add(time.Second)); found || jerr != nil {
		t.Fatalf("restore of another consumer of the name: found %v, %v", found, jerr)
	}
	expectErr(t, second(js2.ConsumerInfo("ORDERS", "C")), jserr.ConsumerNotFound)
	if found, jerr := js2.RestoreConsumer("ORDERS", "C", created); !found || jerr != nil {
		t.Fatalf("restore: found %v, %v", found, jerr)
	}
	info, jerr := js2.ConsumerInfo("ORDERS", "C")
	if jerr != nil || info.Delivered.Stream != 1 || info.NumAckPending != 1 || !info.Created.Equal(created) {
		t.Fatalf("restored: %+v %v", info, jerr)
	}
	if found, jerr := js2.RestoreConsumer("ORDERS", "C", created); !found || jerr != nil {
		t.Fatalf("restore of a running consumer: found %v, %v", found, jerr)
	}
}
