package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestConsumerAckSampling: a consumer with sample_freq 100% publishes
// the consumer_ack metric for each ack of a pending delivery (a plain
// ack, a double ack, the ack of a redelivery), and none for a NAK or a
// +TERM; a consumer without sample_freq publishes none. Against cairn
// and nats-server v2.15.2 alike.
func TestConsumerAckSampling(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	metrics := subSync(t, nc, "$JS.EVENT.METRIC.CONSUMER.ACK.>")
	flush(t, nc)
	cxPubN(t, js, "events.orders.%d", 4)
	plain := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "plain", AckPolicy: jetstream.AckExplicitPolicy})
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "samp", AckPolicy: jetstream.AckExplicitPolicy, SampleFrequency: "100%"})
	for _, cons := range []jetstream.Consumer{plain, c} {
		b, err := cons.Fetch(4, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			switch md.Sequence.Stream {
			case 3:
				err = m.Nak()
			case 4:
				err = m.Term()
			case 2:
				err = m.DoubleAck(tctx(t))
			default:
				err = m.Ack()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if n != 4 {
			t.Fatalf("fetched %d", n)
		}
		b, err = cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			if err := m.DoubleAck(tctx(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	type metric struct {
		subj, keys                             string
		cseq, sseq, deliveries                 uint64
		ackTime                                int64
		typ, stream, consumer, domain, stamped string
	}
	var got []metric
	for {
		m, err := metrics.NextMsg(500 * time.Millisecond)
		if err != nil {
			break
		}
		var v struct {
			Type        string `json:"type"`
			Timestamp   string `json:"timestamp"`
			Stream      string `json:"stream"`
			Consumer    string `json:"consumer"`
			ConsumerSeq uint64 `json:"consumer_seq"`
			StreamSeq   uint64 `json:"stream_seq"`
			AckTime     int64  `json:"ack_time"`
			Deliveries  uint64 `json:"deliveries"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatalf("%v: %s", err, m.Data)
		}
		got = append(got, metric{subj: m.Subject, keys: strings.Join(diffTopKeys(m.Data), ","), cseq: v.ConsumerSeq, sseq: v.StreamSeq,
			deliveries: v.Deliveries, ackTime: v.AckTime, typ: v.Type, stream: v.Stream, consumer: v.Consumer, stamped: v.Timestamp})
	}
	// seq 1 (ack), 2 (double ack), 3 redelivered as consumer seq 5.
	want := [][3]uint64{{1, 1, 1}, {2, 2, 1}, {5, 3, 2}}
	if len(got) != len(want) {
		t.Fatalf("%d metrics, want %d: %+v", len(got), len(want), got)
	}
	for i, m := range got {
		if m.subj != "$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.samp" || m.typ != "io.nats.jetstream.metric.v1.consumer_ack" ||
			m.stream != "ORDERS" || m.consumer != "samp" || m.keys != "type,id,timestamp,stream,consumer,consumer_seq,stream_seq,ack_time,deliveries" ||
			[3]uint64{m.cseq, m.sseq, m.deliveries} != want[i] || m.ackTime <= 0 || m.ackTime > int64(time.Minute) ||
			!strings.HasSuffix(m.stamped, "Z") {
			t.Errorf("metric %d: %s", i+1, fmt.Sprintf("%+v", m))
		}
	}
}
