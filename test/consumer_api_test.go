package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Consumer reset (ADR-60) through nats.go's ResetConsumer and
// ResetConsumerToSequence: back to just above the ack floor (unacked
// deliveries come again, with consumer sequences from 1), to a sequence
// ahead, refused for a deliver policy that allows no sequence, and no
// responders for a consumer that does not exist. The reset state
// survives a restart.
func TestConsumerReset(t *testing.T) {
	dir := t.TempDir()
	u, stop := startServerStoppable(t, func(o *server.Options) { o.JetStream = true; o.StoreDir = dir })
	nc := connect(t, u)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RS", Subjects: []string{"rs.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if _, err := js.Publish(ctx, "rs.x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(n int) []string {
		t.Helper()
		b, err := c.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range b.Messages() {
			md, _ := m.Metadata()
			got = append(got, fmt.Sprintf("%d/%d", md.Sequence.Stream, md.Sequence.Consumer))
			if md.Sequence.Stream == 1 {
				_ = m.DoubleAck(ctx)
			}
		}
		return got
	}
	if got := fmt.Sprint(fetch(3)); got != "[1/1 2/2 3/3]" {
		t.Fatalf("first fetch %s", got)
	}
	r, err := js.ResetConsumer(ctx, "RS", "C")
	if err != nil {
		t.Fatal(err)
	}
	if r.ResetSeq != 2 || r.Delivered.Stream != 1 || r.Delivered.Consumer != 0 || r.NumAckPending != 0 || r.NumPending != 5 {
		t.Fatalf("reset to the ack floor: reset_seq %d delivered %+v, %d ack pending, %d pending; want 2, {0 1}, 0, 5",
			r.ResetSeq, r.Delivered, r.NumAckPending, r.NumPending)
	}
	if got := fmt.Sprint(fetch(2)); got != "[2/1 3/2]" {
		t.Fatalf("after the reset %s, want 2 and 3 again from consumer sequence 1", got)
	}
	if r, err = js.ResetConsumerToSequence(ctx, "RS", "C", 5); err != nil || r.ResetSeq != 5 {
		t.Fatalf("reset to 5: %+v %v", r, err)
	}

	stop()
	u, _ = startServerStoppable(t, func(o *server.Options) { o.JetStream = true; o.StoreDir = dir })
	nc = connect(t, u)
	js, _ = jetstream.New(nc)
	c, err = js.Consumer(ctx, "RS", "C")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(fetch(2)); got != "[5/1 6/2]" {
		t.Fatalf("after a reset to 5 and a restart %s, want 5/1 6/2", got)
	}

	if _, err := js.CreateOrUpdateConsumer(ctx, "RS", jetstream.ConsumerConfig{Durable: "LAST", DeliverPolicy: jetstream.DeliverLastPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.ResetConsumerToSequence(ctx, "RS", "LAST", 2); !errors.Is(err, jetstream.ErrConsumerInvalidReset) {
		t.Fatalf("reset of a deliver last consumer to a sequence: %v, want ErrConsumerInvalidReset", err)
	}
	// A missing consumer: nats-server does not answer (its API
	// subscription takes the request and drops it); cairn answers 503
	// (docs/compatibility.md).
	want := nats.ErrNoResponders
	if targetIsNatsServer() {
		want = nats.ErrTimeout
	}
	if _, err := nc.Request("$JS.API.CONSUMER.RESET.RS.NOPE", nil, 300*time.Millisecond); !errors.Is(err, want) {
		t.Fatalf("reset of a missing consumer: %v, want %v", err, want)
	}
}

// A pull request waiting when the server shuts down gets 409 Server
// Shutdown with what it was still owed (nats-server v2.15.2
// signalPullConsumers), before the connection closes.
func TestPullServerShutdown(t *testing.T) {
	u, stop := startServerStoppable(t, func(o *server.Options) { o.JetStream = true })
	nc := connect(t, u)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SD", Subjects: []string{"sd"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "SD", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	raw := rawConnect(t, u, defaultConnect)
	raw.send("SUB _pull 1\r\n")
	raw.sync()
	body := `{"batch":7,"max_bytes":5000,"expires":30000000000}`
	raw.send(fmt.Sprintf("PUB $JS.API.CONSUMER.MSG.NEXT.SD.C _pull %d\r\n%s\r\n", len(body), body))
	raw.sync()
	waitFor(t, 5*time.Second, "the pull request to wait", func() bool {
		info, err := js.Consumer(ctx, "SD", "C")
		return err == nil && info.CachedInfo().NumWaiting == 1
	})
	go stop()
	f, err := diffReadFrame(raw, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := "HMSG _pull 1 84 84\r\nNATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 7\r\nNats-Pending-Bytes: 5000\r\n\r\n\r\n"
	if f != want {
		t.Fatalf("got %q\nwant %q", f, want)
	}
}
