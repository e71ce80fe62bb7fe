package jetstream

import (
	"path"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// An ephemeral consumer of a file stream survives a restart with its
// delivery state, as in nats-server v2.15.2 (jetstream.go restores it and
// switches it back to ephemeral), and its inactive_threshold counts from
// the restart, not from its creation; a mem_storage consumer of the same
// stream ends with the server (nats-server keeps it in a consumerMemStore,
// which writes nothing).
func TestEphemeralSurvivesRestart(t *testing.T) {
	fs := vfs.NewCrashFS()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	open := func(tr Transport) *JetStream {
		js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: clk.now}, tr)
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
	eph := consumer.Config{AckPolicy: consumer.AckExplicit, AckWait: time.Hour, InactiveThreshold: time.Minute}
	info, jerr := js.CreateConsumer("ORDERS", eph, CreateOrUpdate, false)
	if jerr != nil {
		t.Fatal(jerr)
	}
	name := info.Name
	mem := consumer.Config{Durable: "MEM", AckPolicy: consumer.AckExplicit, MemoryStorage: true}
	if _, jerr := js.CreateConsumer("ORDERS", mem, CreateOrUpdate, false); jerr != nil {
		t.Fatal(jerr)
	}
	pubAcks := tr.inbox("_INBOX.pub")
	for range 2 {
		tr.Publish("events.orders.x", "_INBOX.pub", nil, []byte("o"))
		pubAcks.next(t)
	}
	d := collectDeliveries(tr, "_INBOX.pull")
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS."+name, "_INBOX.pull", nil, []byte(`{"batch":1}`))
	d.wait(t, 1)
	js.Shutdown()

	// Ten minutes later: far past the threshold counted from the creation.
	clk.advance(10 * time.Minute)
	tr2 := newMemTransport()
	js2 := open(tr2)
	defer js2.Shutdown()
	expectErr(t, second(js2.ConsumerInfo("ORDERS", "MEM")), jserr.ConsumerNotFound)
	d2 := collectDeliveries(tr2, "_INBOX.pull")
	tr2.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS."+name, "_INBOX.pull", nil, []byte(`{"batch":1,"no_wait":true}`))
	d2.wait(t, 1)
	d2.mu.Lock()
	_, second2 := d2.subj[2]
	d2.mu.Unlock()
	if !second2 {
		t.Fatalf("after the restart the consumer delivered %v, want stream sequence 2 (1 is pending)", d2.subj)
	}
	got, jerr := js2.ConsumerInfo("ORDERS", name)
	if jerr != nil {
		t.Fatalf("restored ephemeral: %v", jerr)
	}
	if got.Config.Durable != "" || got.Config.Name != name || got.NumAckPending != 2 || got.Delivered.Stream != 2 {
		t.Fatalf("restored ephemeral: durable %q name %q pending %d delivered %d; want ephemeral %q, 2 pending, delivered 2",
			got.Config.Durable, got.Config.Name, got.NumAckPending, got.Delivered.Stream, name)
	}

	// Both deliveries acknowledged (the one made before the restart
	// too) and past the threshold since its last pull request: the next
	// round deletes it and its files.
	clk.advance(time.Minute + time.Second)
	d.mu.Lock()
	ack1 := d.subj[1]
	d.mu.Unlock()
	d2.mu.Lock()
	ack2 := d2.subj[2]
	d2.mu.Unlock()
	tr2.Publish(ack1, "", nil, []byte("+ACK"))
	tr2.Publish(ack2, "", nil, []byte("+ACK"))
	waitUntil(t, "the restored ephemeral to pass its inactive_threshold", func() bool {
		_, err := js2.ConsumerInfo("ORDERS", name)
		return err != nil && err.ErrCode == uint16(jserr.ConsumerNotFound)
	})
	// The consumer leaves the table first, then its files go.
	r, _ := js2.lookup("ORDERS")
	waitUntil(t, "the expired ephemeral's directory to go", func() bool {
		names, _ := fs.ReadDir(path.Join(r.Dir(), "obs"))
		return len(names) == 0
	})
}
