package jetstream

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/stream"
)

// A push consumer with rate_limit_bps delivers no faster than the limit
// (nats-server v2.15.2: a token bucket of the stream's max_msg_size): at
// 8,000 bits a second (1,000 bytes a second) and a 300-byte bucket, the
// first three 100-byte messages go at once and the next ones one each
// tenth of a second of the (injected) clock.
func TestPushRateLimit(t *testing.T) {
	js, tr, clk := clockedJS(t)
	if _, err := js.AddStream(stream.Config{Name: "RL", Subjects: []string{"rl"}, MaxMsgSize: 300}); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.rl")
	payload := strings.Repeat("x", 98) // 100 bytes with the subject
	for range 10 {
		tr.Publish("rl", "_INBOX.rl", nil, []byte(payload))
		acks.next(t)
	}
	var got atomic.Int64
	_, _ = tr.Subscribe("deliver.rl", "", func(string, string, []byte, []byte) { got.Add(1) })
	cfg := consumer.Config{Durable: "P", DeliverSubject: "deliver.rl", AckPolicy: consumer.AckNone, RateLimit: 8000}
	if _, err := js.CreateConsumer("RL", cfg, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first burst", func() bool { return got.Load() == 3 })
	c, _ := js.lookupConsumer("RL", "P")
	// Nothing more without time passing (the loop is woken anyway).
	for range 3 {
		c.Signal()
		if n := got.Load(); n != 3 {
			t.Fatalf("%d delivered before any time passed, want 3", n)
		}
	}
	clk.advance(100 * time.Millisecond)
	c.Signal()
	waitUntil(t, "one more after 100 ms", func() bool { return got.Load() == 4 })
	clk.advance(time.Second)
	c.Signal()
	waitUntil(t, "three more after a second (a full bucket)", func() bool { return got.Load() == 7 })
}
