package consumerrun

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/nats-io/nuid"
)

// Ack sampling (nats-server v2.15.2 consumer.go shouldSample, sampleAck;
// jetstream_events.go JSConsumerAckMetric). A consumer whose config has
// sample_freq ("30%" or "30": a percentage; above 100 means every ack)
// publishes, for the sampled share of the acknowledgements that
// acknowledge a pending delivery of an explicit-ack consumer (empty,
// +ACK, +OK and +NXT; not +TERM, NAKs, or acks of an ack-all consumer):
//
//	$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>
//	{"type":"io.nats.jetstream.metric.v1.consumer_ack","id":"<nuid>",
//	 "timestamp":"<RFC 3339, UTC>","stream":"S","consumer":"C",
//	 "consumer_seq":<from the ack subject>,"stream_seq":<from the ack subject>,
//	 "ack_time":<ns from the delivery (its last one, or +WPI) to the ack>,
//	 "deliveries":<the delivery count of the ack subject>,
//	 "domain":"<the JetStream domain; left out when none>"}
//
// Which acks: each is drawn as nats-server draws it, a uniform integer
// in [0, 100) at most the frequency (so "30" samples 31 in 100). The
// draw and the metric are the delivering replica's own (where acks are
// processed: the leader of a replicated consumer); nothing of them goes
// into the consumer's state or log. Nothing is built while nobody listens
// on the subject.

// ackMetricPrefix starts the ack metric's subject (nats-server
// JSMetricConsumerAckPre).
const ackMetricPrefix = "$JS.EVENT.METRIC.CONSUMER.ACK."

// ackMetric is nats-server's JSConsumerAckMetric.
type ackMetric struct {
	Type        string    `json:"type"`
	ID          string    `json:"id"`
	Time        time.Time `json:"timestamp"`
	Stream      string    `json:"stream"`
	Consumer    string    `json:"consumer"`
	ConsumerSeq uint64    `json:"consumer_seq"`
	StreamSeq   uint64    `json:"stream_seq"`
	Delay       int64     `json:"ack_time"`
	Deliveries  uint64    `json:"deliveries"`
	Domain      string    `json:"domain,omitempty"`
}

// parseSampleFreq reads sample_freq: its number, without a trailing
// "%"; 0 (no sampling) when empty or not a number (consumer.Validate
// refuses those with 10095).
func parseSampleFreq(s string) int32 {
	n, err := strconv.ParseInt(strings.TrimSuffix(s, "%"), 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// sampled decides whether to sample an ack at frequency freq, drawing
// with draw (rand.Int32N): never at 0, always at 100 and above,
// otherwise when a draw in [0, 100) is at most freq (nats-server
// shouldSample).
func sampled(freq int32, draw func(int32) int32) bool {
	switch {
	case freq <= 0:
		return false
	case freq >= 100:
		return true
	}
	return draw(100) <= freq
}

// sampleFreq returns the consumer's sample frequency, parsed again only
// when its config's sample_freq changed (c.mu held).
func (c *Consumer) sampleFreq() int32 {
	if c.cfg.SampleFrequency != c.sfreqOf {
		c.sfreqOf, c.sfreq = c.cfg.SampleFrequency, parseSampleFreq(c.cfg.SampleFrequency)
	}
	return c.sfreq
}

// sampleAck publishes the ack metric of a, received at now, when the
// consumer samples acks, a is drawn, it acknowledges a pending delivery
// and someone listens (c.mu held; before the ack is applied, since the
// delivery's time goes with it).
func (c *Consumer) sampleAck(a *ackMsg, now time.Time) {
	if c.cfg.AckPolicy != consumer.AckExplicit || !sampled(c.sampleFreq(), c.draw) {
		return
	}
	last, ok := c.st.AckableSince(a.sseq)
	if !ok {
		return
	}
	subj := ackMetricPrefix + c.sr.Name() + "." + c.name
	if !c.env.Transport.HasInterest(subj) {
		return
	}
	b, err := json.Marshal(&ackMetric{
		Type: "io.nats.jetstream.metric.v1.consumer_ack", ID: nuid.Next(), Time: now.UTC(),
		Stream: c.sr.Name(), Consumer: c.name, ConsumerSeq: a.cseq, StreamSeq: a.sseq,
		Delay: now.UnixNano() - last, Deliveries: a.dc, Domain: c.env.Domain,
	})
	if err == nil {
		c.env.Transport.Publish(subj, "", nil, b)
	}
}

// draw is the sampling's random source (rand.Int32N; a test may set
// Consumer.drawFn).
func (c *Consumer) draw(n int32) int32 {
	if c.drawFn != nil {
		return c.drawFn(n)
	}
	return rand.Int32N(n)
}
