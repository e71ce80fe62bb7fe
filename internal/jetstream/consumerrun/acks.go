package consumerrun

import (
	"encoding/json"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/nats-io/nuid"
)

// processAck applies an acknowledgement (the ack kinds of nats-server v2.15.2's processAck) and
// answers a double ack with an empty message.
func (c *Consumer) processAck(a *ackMsg, now time.Time) {
	if a.sseq > c.st.Delivered().Stream || a.sseq == 0 {
		return // beyond anything delivered: no reply
	}
	c.lastAck = now
	switch a.kind {
	case ackAck:
		c.sampleAck(a, now)
		c.ackSeq(a.sseq, a.cseq)
	case ackNak:
		c.nak(a, now)
	case ackWPI:
		if c.Commit(&consumer.Progress{Stream: a.sseq, Time: now.UnixNano()}).Changed {
			c.dirty = true
		}
	case ackTerm:
		if c.st.IsPending(a.sseq) || c.st.IsExhausted(a.sseq) {
			if c.termToDeadLetter(a, now) {
				return // the move answers the reply once the copy is durable
			}
			c.ack(&consumer.Term{Stream: a.sseq, Consumer: a.cseq})
			c.advise("MSG_TERMINATED", "io.nats.jetstream.advisory.v1.terminated", a, a.reason)
		}
	case ackNext:
		c.sampleAck(a, now)
		c.ackSeq(a.sseq, a.cseq)
		if c.jr != nil && a.reply != "" && c.cfg.AckPolicy != consumer.AckNone {
			c.confirmLater(a, confirm{reply: a.reply, next: true, body: a.next}, now)
			return
		}
		c.addPull(a.reply, a.next, now)
		return
	}
	if a.reply == "" || (c.cfg.AckPolicy == consumer.AckNone && c.sr.Retention() == stream.LimitsPolicy) {
		return
	}
	if c.jr == nil || a.kind == ackWPI || c.cfg.AckPolicy == consumer.AckNone {
		c.ackReplies = append(c.ackReplies, a.reply) // after retention has run
		return
	}
	c.confirmLater(a, confirm{reply: a.reply}, now)
}

// confirmLater holds the confirmation of a double ack (or the pull
// request of a +NXT) until the ack is durable (docs/engine.md,
// "Durability"): when the stored state already holds the delivery, the ack
// goes to the ack journal, which confirms it after its next fsync;
// otherwise the confirmation waits for a snapshot of the state, taken at
// the end of this round, to be stored.
func (c *Consumer) confirmLater(a *ackMsg, cf confirm, now time.Time) {
	if a.sseq > c.durDelivered.Load() {
		c.snapWait = append(c.snapWait, cf)
		c.dirty = true
		return
	}
	op := store.ConsumerOp{Kind: store.OpAck, Stream: a.sseq, Consumer: a.cseq}
	switch a.kind {
	case ackNak:
		op.Kind, op.Time = store.OpNak, now.Add(a.delay).UnixNano()
	case ackTerm:
		op.Kind = store.OpTerm
	}
	c.jops = append(c.jops, op)
	c.jwait = append(c.jwait, cf)
}

// journalBatch is one round's confirmed acks and their confirmations.
type journalBatch struct {
	ops       []store.ConsumerOp
	waits     []confirm
	saveAfter bool // a snapshot confirms acks: store it after retention
	// dropUnneeded: a reset moved the consumer (interest retention may
	// remove what it skipped).
	dropUnneeded bool
}

// journal appends a round's confirmed acks to the ack journal; their
// confirmations go out once the journal has fsynced them. A journal that
// failed confirms nothing: the client's request times out, and the ack
// is at least once.
func (c *Consumer) journal(jb journalBatch) {
	if len(jb.ops) == 0 {
		return
	}
	c.jr.Journal(jb.ops, func(err error) {
		if err == nil {
			c.sendConfirms(jb.waits)
		}
	})
}

// sendConfirms sends the confirmations of durable acks: an empty reply,
// or for +NXT its pull request, queued to the loop.
func (c *Consumer) sendConfirms(cfs []confirm) {
	for _, cf := range cfs {
		if cf.move != 0 {
			c.push(cevent{moveReady: cf.move})
			continue
		}
		if cf.next {
			c.push(cevent{pull: &pullEvent{reply: cf.reply, body: cf.body}})
			continue
		}
		c.env.Transport.Publish(cf.reply, "", cf.hdr, cf.payload)
	}
}

// ackSeq commits an Ack of sseq (consumer sequence cseq), with the
// consumer's scratch operation: acks are the hot path, and a Log keeps
// no operation after Propose returns.
func (c *Consumer) ackSeq(sseq, cseq uint64) {
	c.opAck = consumer.Ack{Stream: sseq, Consumer: cseq}
	c.ack(&c.opAck)
}

// ack commits an acknowledgement (an Ack or a Term) and keeps what it
// acknowledged for retention.
func (c *Consumer) ack(op consumer.Op) {
	if c.cfg.AckPolicy == consumer.AckNone {
		return
	}
	if out := c.Commit(op); len(out.Acked) > 0 {
		c.dirty = true
		c.acked = append(c.acked, out.Acked...)
	}
}

func (c *Consumer) nak(a *ackMsg, now time.Time) {
	out := c.Commit(&consumer.Nak{Stream: a.sseq, Delay: a.delay, Time: now.UnixNano()})
	if len(out.Exhausted) > 0 {
		ex := out.Exhausted[0]
		c.dirty = true
		c.adviseMaxDeliveries(ex)
		if ex.Kept {
			c.beginMove(ex.Stream, now)
		}
		return
	}
	if out.Changed {
		c.dirty = true
		c.advise("MSG_NAKED", "io.nats.jetstream.advisory.v1.nak", a, "")
	}
}

// ackAdvisory is nats-server's JSConsumerDeliveryNakAdvisory and
// JSConsumerDeliveryTerminatedAdvisory (nats-server v2.15.2's advisories, jetstream_events.go).
type ackAdvisory struct {
	Type        string    `json:"type"`
	ID          string    `json:"id"`
	Time        time.Time `json:"timestamp"`
	Stream      string    `json:"stream"`
	Consumer    string    `json:"consumer"`
	ConsumerSeq uint64    `json:"consumer_seq"`
	StreamSeq   uint64    `json:"stream_seq"`
	Deliveries  uint64    `json:"deliveries"`
	Reason      string    `json:"reason,omitempty"`
	Domain      string    `json:"domain,omitempty"`
}

// maxDeliverAdvisory is nats-server's JSConsumerDeliveryExceededAdvisory.
type maxDeliverAdvisory struct {
	Type       string    `json:"type"`
	ID         string    `json:"id"`
	Time       time.Time `json:"timestamp"`
	Stream     string    `json:"stream"`
	Consumer   string    `json:"consumer"`
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries uint64    `json:"deliveries"`
	Domain     string    `json:"domain,omitempty"`
}

func (c *Consumer) advise(kind, typ string, a *ackMsg, reason string) {
	c.publishAdvisory(kind, ackAdvisory{
		Type: typ, ID: nuid.Next(), Time: c.now().UTC(), Stream: c.sr.Name(), Consumer: c.name,
		ConsumerSeq: a.cseq, StreamSeq: a.sseq, Deliveries: a.dc, Reason: reason, Domain: c.env.Domain,
	})
}

// ackTermUnackedReason is the reason of the MSG_TERMINATED advisory for a
// pending delivery whose message was removed (nats-server v2.15.2
// ackTermUnackedLimitsReason).
const ackTermUnackedReason = "Unacknowledged message was deleted"

// adviseDropped sends the MSG_TERMINATED advisory for a pending delivery
// dropped because its message was removed.
func (c *Consumer) adviseDropped(d consumer.Dropped) {
	c.advise("MSG_TERMINATED", "io.nats.jetstream.advisory.v1.terminated",
		&ackMsg{sseq: d.Stream, cseq: d.Consumer, dc: d.Deliveries}, ackTermUnackedReason)
}

func (c *Consumer) adviseMaxDeliveries(ex consumer.Exhausted) {
	c.publishAdvisory("MAX_DELIVERIES", maxDeliverAdvisory{
		Type: "io.nats.jetstream.advisory.v1.max_deliver", ID: nuid.Next(), Time: c.now().UTC(),
		Stream: c.sr.Name(), Consumer: c.name, StreamSeq: ex.Stream, Deliveries: ex.Deliveries, Domain: c.env.Domain,
	})
}

// publishAdvisory publishes on $JS.EVENT.ADVISORY.CONSUMER.<kind>.<S>.<C>.
func (c *Consumer) publishAdvisory(kind string, v any) {
	subj := "$JS.EVENT.ADVISORY.CONSUMER." + kind + "." + c.sr.Name() + "." + c.name
	if !c.env.Transport.HasInterest(subj) {
		return
	}
	if b, err := json.Marshal(v); err == nil {
		c.env.Transport.Publish(subj, "", nil, b)
	}
}
