package consumerrun

import (
	"encoding/json"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/nats-io/nuid"
)

// Dead-letter subjects (docs/dead-letter.md). When a delivery of a
// consumer with a dead-letter subject (stream.MetaDeadLetterSubject)
// reaches max_deliver, or a client terminates it with +TERM, the
// consumer publishes a copy of the message to that subject.
//
// When no stream captures the subject, the copy is a core publish and
// the original is treated as it is without a dead-letter subject (after
// max_deliver it leaves pending and is held, consumer.State, until an
// explicit ack, a +TERM or its removal; +TERM acknowledges it).
//
// When a stream captures it, the copy is a move, done in this order:
//
//  1. The delivery stays pending with a dead-letter mark
//     (consumer.State: never redelivered, client acks ignored) whose
//     After is the capturing stream's last sequence. For a persisted
//     consumer the mark goes into a state snapshot, and nothing more
//     happens until the saver has stored it (confirm.move): from then
//     on a restart resumes the move.
//  2. The copy is published to the subject with a reply subject that
//     routes the PubAck back (deadLetterAcks), with Nats-Msg-Id
//     <stream>.<consumer>.<seq>.
//  3. Once a PubAck from the capturing stream says the copy is stored
//     (the stream answers only once it is durable), the mark ends
//     (consumer.State.DeadLettered): the delivery counts as acknowledged
//     and retention runs, so interest and workqueue streams release the
//     original. A +TERM with a reply is answered then. The next snapshot
//     is taken at once.
//
// An error PubAck, or none within moveAnswerWait, is retried with a
// growing wait (moveRetryWait); so is a mark found in a restored state.
// A retry after a copy may have been published first looks for it in
// the capturing stream, above After (copyStored), so that a copy stored
// before a crash is found even when the restart came after the stream's
// duplicate window; within the window, the Nats-Msg-Id also makes the
// stream answer a retry as a duplicate. The crash windows are in
// docs/dead-letter.md.

// Waits of a move.
const (
	moveAnswerWait = 5 * time.Second        // for the PubAck of a copy, then it is published again
	moveRetryFirst = time.Second            // after the first error PubAck; doubles each time
	moveRetryMax   = 30 * time.Second       // the longest wait between attempts
	moveStartWait  = 100 * time.Millisecond // while the server restores its streams
)

// moveRetryWait returns the wait after the tries-th failed attempt.
func moveRetryWait(tries int) time.Duration {
	if tries > 5 {
		return moveRetryMax
	}
	return min(moveRetryFirst<<max(tries-1, 0), moveRetryMax)
}

// move is the consumer's bookkeeping of one dead-letter mark (the mark
// itself is in consumer.State); guarded by Consumer.mu.
type move struct {
	// ready: a stored snapshot holds the mark with its After (or the
	// consumer is not persisted), so copies may be published.
	ready bool
	// sent: a copy may have been published (by this process or before a
	// restart); an attempt first looks for it (copyStored).
	sent bool
	// scanned is the capturing stream's sequence copyStored looked up
	// to, so that a retry looks only at what came since.
	scanned uint64
	token   string   // the reply token of the copy waiting for its PubAck; "" when none
	target  string   // the capturing stream the copy went to
	tries   int      // failed attempts since the last publish that was answered
	replies []string // replies of +TERM to send once the move is complete
}

// moveAck is the PubAck of a dead-letter copy, for the consumer's loop.
type moveAck struct {
	sseq  uint64
	token string
	res   pubAckResult
}

// pubAckResult is what a PubAck says: the stream and sequence, or an
// error description.
type pubAckResult struct {
	stream    string
	seq       uint64
	duplicate bool
	err       string
}

// parsePubAck reads a PubAck; ok is false for anything else (a
// core subscriber of the subject may answer the request too).
func parsePubAck(b []byte) (pubAckResult, bool) {
	var pa struct {
		Stream    string `json:"stream"`
		Seq       uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate"`
		Error     *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &pa) != nil {
		return pubAckResult{}, false
	}
	switch {
	case pa.Error != nil:
		return pubAckResult{stream: pa.Stream, err: pa.Error.Description + " (" + strconv.Itoa(pa.Error.ErrCode) + ")"}, true
	case pa.Stream != "" && pa.Seq > 0:
		return pubAckResult{stream: pa.Stream, seq: pa.Seq, duplicate: pa.Duplicate}, true
	}
	return pubAckResult{}, false
}

// DeadLetterAcks routes the PubAcks of dead-letter copies to the
// consumers waiting for them: one internal subscription on
// prefix + "*", a reply subject per copy. mu is a leaf lock. The engine
// makes one (NewDeadLetterAcks) for all its consumers.
type DeadLetterAcks struct {
	prefix string // "$CAIRN.DLQ.<nuid>."
	sub    streamrun.Subscription
	mu     sync.Mutex
	next   uint64
	waits  map[string]func(token string, res pubAckResult)
}

// NewDeadLetterAcks subscribes the router of the PubAcks of dead-letter
// copies on tr; a failure is logged with logf (the moves then never
// complete, and are retried).
func NewDeadLetterAcks(tr streamrun.Transport, logf func(string, ...any)) *DeadLetterAcks {
	d := &DeadLetterAcks{prefix: "$CAIRN.DLQ." + nuid.Next() + ".", waits: map[string]func(string, pubAckResult){}}
	sub, err := tr.Subscribe(d.prefix+"*", "", d.deliver)
	if err != nil {
		logf("jetstream: subscribe %s*: %v (dead-letter moves will not complete)", d.prefix, err)
		return d
	}
	d.sub = sub
	return d
}

// register returns a token and the reply subject on which a PubAck is
// handed to cb with the token (on the publisher's goroutine; cb must not
// block), until cancel(token).
func (d *DeadLetterAcks) register(cb func(token string, res pubAckResult)) (token, reply string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	token = strconv.FormatUint(d.next, 36)
	d.waits[token] = cb
	return token, d.prefix + token
}

// cancel forgets token ("" is ignored).
func (d *DeadLetterAcks) cancel(token string) {
	if token == "" {
		return
	}
	d.mu.Lock()
	delete(d.waits, token)
	d.mu.Unlock()
}

// deliver is the subscription's handler.
func (d *DeadLetterAcks) deliver(subject, _ string, _, data []byte) {
	token := strings.TrimPrefix(subject, d.prefix)
	res, ok := parsePubAck(data)
	if !ok {
		return
	}
	d.mu.Lock()
	cb := d.waits[token]
	d.mu.Unlock()
	if cb != nil {
		cb(token, res)
	}
}

// Close ends the router's subscription.
func (d *DeadLetterAcks) Close() {
	if d.sub != nil {
		d.sub.Unsubscribe()
	}
}

// refreshDeadLetter reads the consumer's dead-letter subject: its own
// metadata's, else its stream's. Marks are kept only with explicit or
// all acks (a consumer with ack none has nothing pending).
func (c *Consumer) refreshDeadLetter() {
	subj, ok := stream.DeadLetterSubject(c.cfg.Metadata)
	if !ok {
		subj = c.sr.DeadLetter()
	}
	c.dlq = subj
	if on := subj != "" && c.cfg.AckPolicy != consumer.AckNone; on != c.st.DeadLetterOn() {
		c.Commit(&consumer.UpdatePolicy{Policy: consumer.PolicyOf(&c.cfg), DeadLetter: on})
	}
}

// captured reports whether the consumer's dead-letter subject is stored
// by a stream, assuming so while the server is still restoring its
// streams.
func (c *Consumer) captured() bool {
	return c.dlq != "" && (!c.env.Ready() || c.env.CaptureOf(c.dlq) != nil)
}

// restoreMoves takes over the marks of a restored state: each may have
// had a copy published before the restart.
func (c *Consumer) restoreMoves() {
	for _, mv := range c.st.Moves() {
		c.moves[mv.Stream] = &move{ready: true, sent: true, scanned: mv.After}
	}
}

// termToDeadLetter handles a +TERM of the pending delivery, or of the
// message out of deliveries (held, consumer.State), a.sseq for a
// consumer with a dead-letter subject, and reports whether the move
// took it over (then the reply is sent when the move completes). A
// +TERM of a message being moved joins the move. When no stream
// captures the subject, the copy of a pending delivery is published
// and false is returned: the +TERM then acknowledges (releases) as it
// does without a dead-letter subject; a held message's copy went out
// when it ran out of deliveries, so it gets none. A held message is
// moved like a pending delivery when a stream captures the subject (it
// was never moved); with ack policy all, what the +TERM acknowledges
// besides it is acknowledged at once, before the mark, and so is stored
// with it.
func (c *Consumer) termToDeadLetter(a *ackMsg, now time.Time) bool {
	if mv := c.moves[a.sseq]; mv != nil {
		if a.reply != "" {
			mv.replies = append(mv.replies, a.reply)
		}
		return true
	}
	if c.dlq == "" || c.cfg.AckPolicy == consumer.AckNone {
		return false
	}
	held := c.st.IsExhausted(a.sseq)
	if !c.captured() {
		if m, err := c.sr.Store().Load(a.sseq); err == nil && !held {
			c.publishCopy(m, store.DeadLetterTerm, a.dc, "")
		}
		return false
	}
	if held && c.cfg.AckPolicy != consumer.AckExplicit {
		c.ackSeq(a.sseq, a.cseq) // (ack all leaves the held message itself)
	}
	if !c.Commit(&consumer.DeadLetter{Step: consumer.DeadLetterMark, Stream: a.sseq, Reason: store.DeadLetterTerm, Value: now.UnixNano()}).Changed {
		return false
	}
	c.dirty = true
	c.advise("MSG_TERMINATED", "io.nats.jetstream.advisory.v1.terminated", a, a.reason)
	mv := &move{}
	if a.reply != "" {
		mv.replies = []string{a.reply}
	}
	c.moves[a.sseq] = mv
	c.prepareMove(a.sseq, mv, now)
	return true
}

// beginMove starts the move of a delivery the state just marked
// (max_deliver reached).
func (c *Consumer) beginMove(sseq uint64, now time.Time) {
	mv := &move{}
	c.moves[sseq] = mv
	c.prepareMove(sseq, mv, now)
}

// retryMove runs the next attempt of a mark whose retry time came.
func (c *Consumer) retryMove(sseq uint64, now time.Time) {
	mv := c.moves[sseq]
	if mv == nil {
		mv = &move{ready: true, sent: true} // not expected: assume the worst
		c.moves[sseq] = mv
	}
	c.env.DeadLetterAcks.cancel(mv.token)
	mv.token = ""
	c.prepareMove(sseq, mv, now)
}

// moveReady notes that a stored snapshot holds the mark of sseq; the
// copy may go.
func (c *Consumer) moveReady(sseq uint64, now time.Time) {
	mv := c.moves[sseq]
	if mv == nil || mv.ready {
		return
	}
	if _, ok := c.st.Move(sseq); !ok {
		c.endMove(sseq, mv)
		return
	}
	mv.ready = true
	c.prepareMove(sseq, mv, now)
}

// prepareMove takes the move of sseq one step: it waits for the server
// to finish restoring its streams; without a capturing stream it ends
// the mark as if there were none (finishUncaptured); before the first
// copy it records After and, for a persisted consumer, waits for a
// snapshot holding the mark; then it publishes the copy (sendMove).
func (c *Consumer) prepareMove(sseq uint64, mv *move, now time.Time) {
	if _, ok := c.st.Move(sseq); !ok {
		c.endMove(sseq, mv)
		return
	}
	if !c.env.Ready() {
		c.retryMoveAt(sseq, now.Add(moveStartWait))
		return
	}
	target := c.env.CaptureOf(c.dlq)
	if target == nil {
		c.finishUncaptured(sseq, mv)
		return
	}
	if !mv.sent {
		last := target.Store().State(false).LastSeq
		c.Commit(&consumer.DeadLetter{Step: consumer.DeadLetterAfter, Stream: sseq, Value: int64(last)})
		mv.scanned = last
	}
	if !mv.ready {
		if c.saver == nil {
			mv.ready = true
		} else {
			c.snapWait = append(c.snapWait, confirm{move: sseq})
			c.dirty = true
			c.retryMoveAt(sseq, now.Add(moveAnswerWait))
			return
		}
	}
	c.sendMove(sseq, mv, target, now)
}

// sendMove publishes the copy of sseq to the dead-letter subject with a
// reply for its PubAck, unless an earlier copy is already stored in the
// target stream, and arms the next attempt.
func (c *Consumer) sendMove(sseq uint64, mv *move, target *streamrun.Stream, now time.Time) {
	m, err := c.sr.Store().Load(sseq)
	if err != nil {
		m = nil
	}
	if mv.sent && c.copyStored(target, sseq, mv, m) {
		// (Its original may be gone already: the move completed before
		// a crash, but the consumer's state did not record it.)
		c.completeMove(sseq, mv)
		return
	}
	if m == nil {
		// Gone from the stream (a limit, a purge): nothing to copy.
		if ds := c.Commit(&consumer.Drop{Seqs: []uint64{sseq}}).Dropped; len(ds) > 0 {
			d := ds[0]
			c.dirty = true
			if !d.Exhausted { // (a held message's +TERM was advised)
				c.adviseDropped(d)
			}
		}
		c.endMove(sseq, mv)
		return
	}
	info, _ := c.st.Move(sseq)
	token, reply := c.env.DeadLetterAcks.register(func(token string, res pubAckResult) {
		c.push(cevent{moveAck: &moveAck{sseq: sseq, token: token, res: res}})
	})
	mv.token, mv.target, mv.sent = token, target.Name(), true
	c.retryMoveAt(sseq, now.Add(moveAnswerWait))
	c.publishCopy(m, info.Reason, info.Deliveries, reply)
}

// publishCopy publishes the dead-letter copy of m (docs/dead-letter.md,
// stream.DeadLetterHeader) to the consumer's dead-letter subject.
func (c *Consumer) publishCopy(m *store.StoredMsg, reason store.DeadLetterReason, deliveries uint64, reply string) {
	hdr := stream.DeadLetterHeader(m.Header, stream.DeadLetterOrigin{
		Stream: c.sr.Name(), Consumer: c.name, Seq: m.Seq, Subject: m.Subject, Time: m.Time,
		Deliveries: deliveries, Reason: reason.String(),
	})
	c.env.Transport.Publish(c.dlq, reply, hdr, m.Data)
}

// copyStored reports whether target holds the copy of sseq above the
// last sequence looked at (After at first), and notes how far it looked.
// orig is the original message, nil when it is gone.
func (c *Consumer) copyStored(target *streamrun.Stream, sseq uint64, mv *move, orig *store.StoredMsg) bool {
	for seq := mv.scanned + 1; ; {
		m, err := target.Store().LoadNext(nil, seq)
		if err != nil {
			return false
		}
		mv.scanned = m.Seq
		if c.isCopy(m.Header, sseq, orig) {
			return true
		}
		seq = m.Seq + 1
	}
}

// isCopy reports whether a message with header hdr is the dead-letter
// copy of sseq by this consumer: its Nats-Msg-Id, and the original's
// time stamp when the original (orig) is known. A stream or consumer
// deleted and made again under its name reuses Nats-Msg-Ids; the time
// stamp tells their copies apart.
func (c *Consumer) isCopy(hdr []byte, sseq uint64, orig *store.StoredMsg) bool {
	if stream.MsgID(hdr) != stream.DeadLetterMsgID(c.sr.Name(), c.name, sseq) {
		return false
	}
	return orig == nil || stream.DeadLetterTime(hdr) == orig.Time
}

// duplicateIsCopy checks a PubAck that reports a duplicate: the message
// the capturing stream holds under the copy's Nats-Msg-Id must be this
// copy, not one of a message of an earlier stream or consumer of the
// same name still in the duplicate window. When either message is gone,
// it cannot tell, and says yes.
func (c *Consumer) duplicateIsCopy(sseq uint64, res pubAckResult) bool {
	target := c.env.CaptureOf(c.dlq)
	if target == nil || target.Name() != res.stream {
		return true
	}
	m, err := target.Store().Load(res.seq)
	if err != nil {
		return true
	}
	orig, err := c.sr.Store().Load(sseq)
	if err != nil {
		orig = nil
	}
	return c.isCopy(m.Header, sseq, orig)
}

// onMoveAck handles the PubAck of a copy: the move completes when the
// capturing stream stored it; an error is retried after moveRetryWait.
// A PubAck of an earlier attempt (or after the move ended) is ignored.
func (c *Consumer) onMoveAck(ev *moveAck, now time.Time) {
	mv := c.moves[ev.sseq]
	if mv == nil || mv.token == "" || mv.token != ev.token {
		return
	}
	if ev.res.err == "" && ev.res.stream != mv.target {
		return // another party answered; wait for the stream
	}
	if ev.res.err == "" && (!ev.res.duplicate || c.duplicateIsCopy(ev.sseq, ev.res)) {
		c.completeMove(ev.sseq, mv)
		return
	}
	if ev.res.err == "" {
		// Its Nats-Msg-Id names another message's copy: try again
		// once that has left the duplicate window.
		ev.res.err = "an earlier message's copy with the same Nats-Msg-Id is in the duplicate window"
	}
	c.env.DeadLetterAcks.cancel(mv.token)
	mv.token = ""
	mv.tries++
	wait := moveRetryWait(mv.tries)
	c.logMoveErr(ev.sseq, mv.target, ev.res.err, wait, now)
	c.retryMoveAt(ev.sseq, now.Add(wait))
}

// logMoveErr logs a refused copy: when the error changed, else at most
// every streamrun.RefusalLogEvery.
func (c *Consumer) logMoveErr(sseq uint64, target, msg string, wait time.Duration, now time.Time) {
	if msg == c.moveErr && now.Sub(c.moveErrAt) < streamrun.RefusalLogEvery {
		return
	}
	c.moveErr, c.moveErrAt = msg, now
	c.env.Logf("consumer %s > %s: stream %s refused the dead-letter copy of message %d: %s (retried in %v; logged at most every %v)",
		c.sr.Name(), c.name, target, sseq, msg, wait, streamrun.RefusalLogEvery)
}

// completeMove ends the mark of sseq once its copy is durable: the
// delivery counts as acknowledged (retention runs after the round), the
// +TERM replies go after retention, and a snapshot is taken at once.
func (c *Consumer) completeMove(sseq uint64, mv *move) {
	c.acked = append(c.acked, c.Commit(&consumer.DeadLetter{Step: consumer.DeadLetterMoved, Stream: sseq}).Acked...)
	c.ackReplies = append(c.ackReplies, mv.replies...)
	mv.replies = nil
	c.dirty, c.saveNow = true, true
	c.endMove(sseq, mv)
}

// finishUncaptured ends a mark when no stream captures the dead-letter
// subject (any more): the copy is a core publish (except for a held
// message, as in termToDeadLetter), and the message is treated as
// without a dead-letter subject (consumer.State.Unmark): after
// max_deliver it leaves pending and is held in the stream until an
// explicit ack, a +TERM or its removal; after +TERM it is acknowledged.
func (c *Consumer) finishUncaptured(sseq uint64, mv *move) {
	info, _ := c.st.Move(sseq)
	if m, err := c.sr.Store().Load(sseq); err == nil && c.dlq != "" && !c.st.IsExhausted(sseq) {
		c.publishCopy(m, info.Reason, info.Deliveries, "")
	}
	c.dirty = true
	c.acked = append(c.acked, c.Commit(&consumer.DeadLetter{Step: consumer.DeadLetterUnmark, Stream: sseq}).Acked...)
	c.ackReplies = append(c.ackReplies, mv.replies...)
	mv.replies = nil
	c.endMove(sseq, mv)
}

// retryMoveAt arms the next attempt of the move of sseq at at.
func (c *Consumer) retryMoveAt(sseq uint64, at time.Time) {
	c.Commit(&consumer.DeadLetter{Step: consumer.DeadLetterRetryAt, Stream: sseq, Value: at.UnixNano()})
}

// endMove forgets the move of sseq; its +TERM replies, if any are left,
// are sent (the delivery is no longer pending).
func (c *Consumer) endMove(sseq uint64, mv *move) {
	c.env.DeadLetterAcks.cancel(mv.token)
	mv.token = ""
	c.ackReplies = append(c.ackReplies, mv.replies...)
	mv.replies = nil
	delete(c.moves, sseq)
}

// sweepMoves ends the moves whose mark is gone without them (its message
// was removed from the stream: the delivery was dropped).
func (c *Consumer) sweepMoves() {
	for sseq, mv := range c.moves {
		if _, ok := c.st.Move(sseq); !ok {
			c.endMove(sseq, mv)
		}
	}
}

// cancelMoves forgets the reply tokens of the consumer's moves (it
// stops; the marks stay in its stored state).
func (c *Consumer) cancelMoves() {
	for _, mv := range c.moves {
		c.env.DeadLetterAcks.cancel(mv.token)
		mv.token = ""
	}
}
