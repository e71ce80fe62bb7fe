package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// TestAckSampleMetric: a consumer with sample_freq 100% publishes
// $JS.EVENT.METRIC.CONSUMER.ACK.<S>.<C> for each ack (+ACK, +NXT) of a
// pending delivery, with the delivery's consumer and stream sequences
// and count from the ack subject and ack_time measured on the consumer's
// clock from the delivery (or its +WPI); a NAK, a +TERM, an ack of
// something not pending, a consumer without sample_freq and an ack-all
// consumer publish none (nats-server v2.15.2 sampleAck).
func TestAckSampleMetric(t *testing.T) {
	tr := newMemTransport()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1", Domain: "D", Now: clk.now}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	if _, err := js.AddStream(ordersConfig(stream.MemoryStorage)); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]consumer.Config{
		"proc":  {Durable: "proc", AckPolicy: consumer.AckExplicit, AckWait: time.Hour, SampleFrequency: "100%"},
		"plain": {Durable: "plain", AckPolicy: consumer.AckExplicit, AckWait: time.Hour},
		"all":   {Durable: "all", AckPolicy: consumer.AckAll, AckWait: time.Hour, SampleFrequency: "100"},
	} {
		if _, err := js.CreateConsumer("ORDERS", cfg, CreateOrUpdate, false); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	metrics := make(chan [2]string, 64)
	_, _ = tr.Subscribe("$JS.EVENT.METRIC.CONSUMER.ACK.>", "", func(subj, _ string, _, data []byte) {
		metrics <- [2]string{subj, string(data)}
	})
	acks := tr.inbox("_INBOX.pub")
	for i := range 5 {
		tr.Publish("events.orders.new", "_INBOX.pub", nil, fmt.Appendf(nil, "order-%d", i+1))
		acks.next(t)
	}
	d := collectDeliveries(tr, "_INBOX.pull")
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS.proc", "_INBOX.pull", nil, []byte(`{"batch":5}`))
	d.wait(t, 5)

	clk.advance(250 * time.Millisecond)
	ackWith(tr, d, 1, "+ACK", "")
	m := nextMetric(t, metrics)
	if m.Subject != "$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.proc" || m.Type != "io.nats.jetstream.metric.v1.consumer_ack" || m.Stream != "ORDERS" ||
		m.Consumer != "proc" || m.StreamSeq != 1 || m.ConsumerSeq != 1 || m.Deliveries != 1 ||
		m.AckTime != int64(250*time.Millisecond) || m.Domain != "D" || !m.Time.Equal(clk.now()) {
		t.Fatalf("metric of +ACK: %+v", m)
	}
	if m.Keys != "type,id,timestamp,stream,consumer,consumer_seq,stream_seq,ack_time,deliveries,domain" {
		t.Fatalf("keys %s", m.Keys)
	}

	wpi := tr.inbox("_INBOX.wpi")
	ackWith(tr, d, 2, "+WPI", "_INBOX.wpi")
	wpi.next(t) // applied before the clock moves
	ackWith(tr, d, 3, "-NAK", "")
	ackWith(tr, d, 4, "+TERM", "")
	ackWith(tr, d, 1, "+ACK", "") // no longer pending
	clk.advance(time.Second)
	ackWith(tr, d, 2, "+ACK", "")
	if m := nextMetric(t, metrics); m.StreamSeq != 2 || m.AckTime != int64(time.Second) {
		t.Fatalf("metric after +WPI: %+v, want seq 2, ack_time 1s", m)
	}
	ackWith(tr, d, 5, "+NXT", "_INBOX.pull") // pulls the NAKed 3 again
	if m := nextMetric(t, metrics); m.StreamSeq != 5 || m.AckTime != int64(1250*time.Millisecond) {
		t.Fatalf("metric of +NXT: %+v", m)
	}
	d.wait(t, 1)
	clk.advance(100 * time.Millisecond)
	ackWith(tr, d, 3, "+ACK", "")
	if m := nextMetric(t, metrics); m.StreamSeq != 3 || m.Deliveries != 2 || m.ConsumerSeq != 6 || m.AckTime != int64(100*time.Millisecond) {
		t.Fatalf("metric of a redelivery's ack: %+v", m)
	}

	for _, name := range []string{"plain", "all"} {
		dn := collectDeliveries(tr, "_INBOX.pull."+name)
		tr.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS."+name, "_INBOX.pull."+name, nil, []byte(`{"batch":2}`))
		dn.wait(t, 2)
		ackWith(tr, dn, 1, "+ACK", "")
		ackWith(tr, dn, 2, "+ACK", "")
	}
	// The acks above went in order to each consumer's loop; one more
	// sampled ack shows that none of them published.
	tr.Publish("events.orders.new", "_INBOX.pub", nil, []byte("order-6"))
	acks.next(t)
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS.proc", "_INBOX.pull", nil, []byte(`{"batch":1}`))
	d.wait(t, 1)
	ackWith(tr, d, 6, "+ACK", "")
	if m := nextMetric(t, metrics); m.Consumer != "proc" || m.StreamSeq != 6 {
		t.Fatalf("an unsampled consumer's ack published %+v", m)
	}
}

type ackMetricMsg struct {
	Subject     string    `json:"-"`
	Keys        string    `json:"-"`
	Type        string    `json:"type"`
	Time        time.Time `json:"timestamp"`
	Stream      string    `json:"stream"`
	Consumer    string    `json:"consumer"`
	ConsumerSeq uint64    `json:"consumer_seq"`
	StreamSeq   uint64    `json:"stream_seq"`
	AckTime     int64     `json:"ack_time"`
	Deliveries  uint64    `json:"deliveries"`
	Domain      string    `json:"domain"`
}

func nextMetric(t *testing.T, in chan [2]string) ackMetricMsg {
	t.Helper()
	var got [2]string
	select {
	case got = <-in:
	case <-time.After(5 * time.Second):
		t.Fatal("no ack metric within 5s")
	}
	b := []byte(got[1])
	var m ackMetricMsg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	_, _ = dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, fmt.Sprint(k))
		var skip json.RawMessage
		_ = dec.Decode(&skip)
	}
	m.Keys, m.Subject = strings.Join(keys, ","), got[0]
	return m
}
