package streamrun

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nuid"

	"github.com/cairnmq/cairn/internal/stream"
)

// Batch publishing on the apply goroutine (ADR-50; nats-server v2.15.2
// processJetStreamAtomicBatchMsg and processJetStreamFastBatchMsg). A
// publish whose reply subject ends in ".$FI" belongs to a fast batch
// (stream.FastBatches); one whose header carries Nats-Batch-Id to an
// atomic batch (stream.AtomicBatches), staged in memory until its commit
// becomes one stream.BatchCommit operation that the state machine
// applies all or nothing. Both batch state machines are the proposer's
// (docs/engine.md): they decide before the log, from the applied state. Every reply goes through the ack queue, in order, and a reply
// that speaks for stored messages (a batch's PubAck, a flow ack) waits
// until they are durable.

// batchPolicy returns what the batch state machines read of the stream,
// with whether a message of size bytes finds no storage (10023) and the
// log's largest entry (EntryLimiter: 10054, 10199).
func (r *Stream) batchPolicy(size int) stream.BatchPolicy {
	p := r.st.BatchPolicy()
	p.Insufficient = r.insufficient(size)
	p.MaxEntryBytes = r.maxEntry
	return p
}

// applyAtomic stages a message of an atomic batch and, at its commit,
// applies the batch.
func (r *Stream) applyAtomic(e stream.Entry, id, reply string) {
	p := r.batchPolicy(len(e.Header) + len(e.Data))
	res := r.atomic.Stage(p, id, e, e.Time)
	r.adviseAbandoned(res.Abandoned)
	respond := reply != "" && !p.NoAck
	switch {
	case res.Err != nil && respond:
		r.queueAck(ack{reply: reply, payload: stream.AppendPubAck(nil, r.name, stream.Result{Err: res.Err}, "")})
	case res.Empty && respond:
		r.queueAck(ack{reply: reply, payload: []byte{}})
	case res.Commit != nil:
		r.propose(res.Commit, waiter{kind: waitCommit, reply: reply, respond: respond})
	}
}

// applyFast proposes a message of a fast batch between the batch state
// machine's two steps: Before decides here, After once it is applied
// (Stream.appliedPublish).
func (r *Stream) applyFast(e stream.Entry, reply string, info *stream.FastInfo) {
	step := r.fast.Before(r.batchPolicy(len(e.Header)+len(e.Data)), info, e, e.Time)
	r.fastReplies(reply, step.Replies)
	if !step.Apply {
		return
	}
	r.fastPub.Entries = append(r.fastPub.Entries[:0], step.Entry)
	r.propose(&r.fastPub, waiter{kind: waitFast, reply: reply, fast: info})
	r.fastPub.Entries[0] = stream.Entry{}
}

func (r *Stream) fastReplies(reply string, out []stream.FastReply) {
	for _, f := range out {
		r.queueAck(ack{reply: reply, payload: f.Payload, waitSeq: f.WaitSeq})
	}
}

// afterStore does the runtime's part for a message the state machine
// stored: interest retention, the expiry timer, the consumers after a
// rollup.
func (r *Stream) afterStore(res stream.Result) {
	r.dropIfUninterested(res.Seq, res.Subject)
	if res.Expires > 0 && res.Expires < r.env.Now().Add(expiryInterval).UnixNano() {
		r.expireBy(res.Expires)
	}
	if res.Rollup != nil {
		r.afterPurge(*res.Rollup, res.Purged)
	}
	if res.SchedulerPurge != nil {
		r.afterPurge(*res.SchedulerPurge, res.SchedulerPurged)
	}
}

// queueAck hands a to the ack goroutine, or, for a memory stream, whose
// messages are as durable as they get once applied, sends it at once.
// For a file stream with persist_mode async the PubAck goes to the reply
// goroutine (sent once written) and the rest to the ack goroutine (the
// durable sequence and the republished copy, once fsynced).
func (r *Stream) queueAck(a ack) {
	switch {
	case r.dir == "":
		r.setDurable(a.waitSeq)
		r.rePublish(a.rp)
		if a.reply != "" {
			r.env.Transport.Publish(a.reply, "", nil, a.payload)
		}
	case r.replies != nil && a.reply != "":
		r.replies.push(ack{reply: a.reply, payload: a.payload, waitSeq: a.waitSeq})
		if a.waitSeq > 0 || a.rp != nil {
			r.acks.push(ack{waitSeq: a.waitSeq, rp: a.rp})
		}
	default:
		r.acks.push(a)
	}
}

// expireBatches abandons the batches idle for the batch timeout (on the
// apply goroutine, from the expiry pass).
func (r *Stream) expireBatches(now int64) {
	r.adviseAbandoned(r.atomic.Expire(now))
	r.fast.Expire(now)
}

// batchesAfterUpdate closes the batches an update disallowed, as
// nats-server deletes them (apply goroutine).
func (r *Stream) batchesAfterUpdate(cfg *stream.Config) {
	if !cfg.AllowAtomicPublish {
		r.atomic.Clear()
	}
	if !cfg.AllowBatchPublish {
		r.fast.Clear()
	}
}

// batchAbandonedAdvisory is nats-server's JSStreamBatchAbandonedAdvisory
// (without account, which cairn does not have).
type batchAbandonedAdvisory struct {
	Type   string               `json:"type"`
	ID     string               `json:"id"`
	Time   time.Time            `json:"timestamp"`
	Stream string               `json:"stream"`
	Domain string               `json:"domain,omitempty"`
	Batch  string               `json:"batch"`
	Reason stream.AbandonReason `json:"reason"`
}

// adviseAbandoned publishes an advisory on
// $JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.<stream> for each abandoned
// atomic batch.
func (r *Stream) adviseAbandoned(list []stream.Abandoned) {
	for _, a := range list {
		b, err := json.Marshal(batchAbandonedAdvisory{
			Type: "io.nats.jetstream.advisory.v1.stream_batch_abandoned", ID: nuid.Next(),
			Time: r.env.Now().UTC(), Stream: r.name, Domain: r.env.Domain, Batch: a.ID, Reason: a.Reason,
		})
		if err == nil {
			r.env.Transport.Publish("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED."+r.name, "", nil, b)
		}
	}
}
