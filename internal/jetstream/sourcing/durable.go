package sourcing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// Durable sourcing (ADR-60; nats-server v2.15.2 setupMirrorConsumer,
// trySetupSourceConsumer, processInboundMirrorMsg,
// processInboundSourceMsg; docs/durable-sourcing.md). A mirror or
// source with a consumer reads its origin through that durable push
// consumer, which the user created with ack policy flow_control, over
// the messaging layer as nats-server does:
//
//	setup:   PUB $JS.API.CONSUMER.RESET.<origin>.<consumer>  reply $JSC.R.<id>  (empty body;
//	         a source adds Nats-Required-Api-Level: 5 and Nats-Stream-Identity: <ident>)
//	answer:  consumer_reset_response: error, or the consumer's info (ack policy must be
//	         flow_control: else 10214 mirror / 10217 source) [+ Nats-Stream-Identity]
//	deliver: <deliver subject> messages, reply $JS.ACK.<origin>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>
//	         100 Idle Heartbeat (Nats-Last-Consumer, Nats-Last-Stream[, Nats-Consumer-Stalled])
//	         100 FlowControl Request, reply $JS.FC.<origin>.<consumer>.<id>
//	ack:     PUB <fc reply> header Nats-Last-Consumer: <dseq>, Nats-Last-Stream: <sseq>
//
// The deliver subject is subscribed for the sourcer's whole life (before
// the first reset, so that nothing the consumer delivers after a reset is
// missed; anything before it is sorted out by the sequence checks). The
// sourcer copies in order: a message whose delivery sequence is not the
// next, or a heartbeat naming another last delivery, makes it reset the
// consumer (empty body: back to just above its ack floor) and skip what
// it already copied. A flow control request is answered, acknowledging
// everything copied, only once the copies are durable here, so that a
// work-queue or interest origin never removes a message this stream
// could still lose. The consumer is the user's: the sourcer never creates
// or deletes it and keeps no interest in the origin itself.

// Durable sourcing timings (nats-server v2.15.2 stream.go).
const (
	durableResetWait     = 5 * time.Second        // srcDurableConsumerWaitTime
	durableRetryMin      = 2 * time.Second        // sourceConsumerRetryThreshold
	durableRetryJitter   = 100 * time.Millisecond // the least of nats-server's jitter
	durableRetryBackoff  = 5 * time.Second        // retryBackOff, × 2 × failures
	durableRetryMax      = 2 * time.Minute        // retryMaximum
	durableHealthCheck   = 10 * time.Second       // sourceHealthCheckInterval
	durableStallsToError = 3                      // sourceFCStalledThreshold
	resetSubjectPrefix   = "$JS.API.CONSUMER.RESET."
	inboxPrefix          = "$JSC.R."
)

// inbound is a message received on the deliver subject or the reset
// reply subject (copied: handlers must not keep the publisher's bytes).
type inbound struct {
	subject, reply string
	hdr, data      []byte
	answer         bool // on the reply subject of the pending reset
	gen            int  // the deliver subscription it came on (external.go)
}

// inbox queues what the subscriptions receive for the sourcer's
// goroutine; it never blocks the publisher. The consumer's flow control
// (its window and max_ack_pending) bounds what is outstanding.
type inbox struct {
	mu   sync.Mutex
	msgs []inbound
	sig  chan struct{} // buffered 1
}

func (in *inbox) put(m inbound) {
	in.mu.Lock()
	in.msgs = append(in.msgs, m)
	in.mu.Unlock()
	select {
	case in.sig <- struct{}{}:
	default:
	}
}

func (in *inbox) take() []inbound {
	in.mu.Lock()
	defer in.mu.Unlock()
	msgs := in.msgs
	in.msgs = nil
	return msgs
}

// resetAnswer is the part of a consumer_reset_response the sourcer reads.
type resetAnswer struct {
	Error  *jserr.Error `json:"error,omitempty"`
	Name   string       `json:"name"`
	Config *struct {
		AckPolicy consumer.AckPolicy `json:"ack_policy"`
	} `json:"config"`
	Delivered store.SequencePair `json:"delivered"`
}

// durableRun is the goroutine state of a durable sourcer.
type durableRun struct {
	s     *sourcer
	in    *inbox
	reply string // the reset reply subject
	cname string // the consumer whose deliveries are taken
	gen   int    // the current deliver subscription (subscribeDeliver)
	// dsub and rsub are an external sourcer's deliver and reply
	// subscriptions of its last setup; recreated is set once it learned
	// that its origin was recreated (external.go).
	dsub, rsub streamrun.Subscription
	recreated  bool
	// remote is set for a sourcer reading an origin of another server of
	// the cluster (remote.go): it stops when a replica of the origin
	// runs here (moved).
	remote bool
	sseq   uint64 // last origin sequence copied (or skipped as copied)
	dseq   uint64 // last delivery sequence taken
	fails  int    // setups failed in a row (the retry backoff)
	// timedOut is set when the last reset got no answer; lastReq is
	// when it was sent.
	timedOut bool
	lastReq  time.Time
	// fcid and fcStalls count the heartbeats naming the same stalled
	// flow control reply (10228 at durableStallsToError).
	fcid      string
	fcStalls  int
	own       uint64    // highest sequence of this stream a copy was stored at
	lastHeard time.Time // the last message on the deliver subject (health check)
}

// after is the sourcer's timer source (Env.After, else time.After).
func (s *sourcer) after(d time.Duration) <-chan time.Time {
	if s.env.After != nil {
		return s.env.After(d)
	}
	return time.After(d)
}

// runDurable is the goroutine of a durable sourcer: while its stream
// leads here (runLeading) it listens on the consumer's deliver subject
// and on a reply subject of its own (subscribed by the first setup of
// each leadership, before its reset) and runs.
func (s *sourcer) runDurable() {
	defer close(s.done)
	d := &durableRun{s: s, in: &inbox{sig: make(chan struct{}, 1)}, cname: s.src.Consumer.Name}
	s.runLeading(d, d.setup)
}

// start finds what the stream already holds from this source: a
// mirror's last sequence, or the origin sequence and identity of the
// last message that came through this source (its Nats-Stream-Source
// header), so that what the consumer delivers again is not copied twice
// (nats-server v2.15.2 startingSequenceForSources).
func (d *durableRun) start() {
	s := d.s
	st := s.r.Store().State(false)
	if s.mirror {
		d.sseq = st.LastSeq
		return
	}
	for n := st.LastSeq; n >= st.FirstSeq && n > 0; n-- {
		sm, err := s.r.Store().Load(n)
		if err != nil {
			continue
		}
		if iname, oseq, ident, ok := stream.SourcedFrom(sm.Header); ok && iname == s.iname {
			d.sseq, s.ident = oseq, ident
			s.mu.Lock()
			s.seq = oseq
			s.mu.Unlock()
			return
		}
	}
}

// backoff waits before the next setup, nats-server's way
// (setupSourceConsumer): what is left of 2 s since the last reset
// request, plus 5 s × 2 × failures (at most 2 min), plus 100 ms (the
// least of nats-server's random jitter); after a reset nobody answered,
// a message on the deliver subject (the consumer is there and
// delivering or beating) ends the wait at once, as nats-server's probe
// subscription does. A change of leadership that ends the exchange
// (moved) ends the wait too. It reports false when stopped.
func (d *durableRun) backoff() bool {
	wait := durableRetryJitter
	if since := d.s.env.Now().Sub(d.lastReq); since < durableRetryMin {
		wait += durableRetryMin - since
	}
	if d.fails > 0 {
		wait += min(durableRetryBackoff*time.Duration(2*d.fails), durableRetryMax)
	}
	timer := d.s.after(wait)
	for {
		select {
		case <-d.s.quit:
			return false
		case <-timer:
			return true
		case <-d.s.wake: // Set.Lead
			if d.moved() {
				return true
			}
		case <-d.in.sig:
			for _, m := range d.in.take() {
				if !m.answer {
					d.heard()
					if d.fails > 0 && d.timedOut {
						return true
					}
				}
			}
		}
	}
}

// heard records a message from the consumer (info's active).
func (d *durableRun) heard() {
	d.lastHeard = d.s.env.Now()
	d.s.heard()
}

// setup resets the consumer and reads the answer; it reports whether
// copying can start. Messages that arrive meanwhile are kept for
// receive. The first setup of a leadership subscribes the deliver and
// reply subjects, kept until the leadership ends (release).
func (d *durableRun) setup() bool {
	s := d.s
	if d.dsub == nil && !d.subscribeDeliver(s.src.Consumer.DeliverSubject) || d.rsub == nil && !d.listen() {
		return false
	}
	// A source asks for API level 5 (the origin's identity in the
	// answer), then 4 without the identity, then no level, as the
	// origin's server refuses each with 10185 or 10025 (nats-server
	// v2.15.2 trySetupSourceConsumer); a mirror asks for none.
	level := 0
	if !s.mirror {
		level = 5
	}
	d.lastReq, d.timedOut = s.env.Now(), false
	d.requestReset(level)
	ans, ident, ok := d.awaitAnswer(durableResetWait, func() (bool, bool) {
		if level == 0 {
			return false, true
		}
		if level--; level < 4 {
			level = 0
		}
		d.requestReset(level)
		return true, true
	})
	return ok && d.answered(ans, ident)
}

// awaitAnswer waits up to wait for the answer to the request last sent
// on d.reply, keeping the messages that arrive meanwhile for receive
// (hold). An answer that refuses the API level asked for (10185, or
// 10025 from an older server) is given to resend, which sends the
// request again with less (again true; ok false if it could not) or
// lets the refusal stand (again false). ok is false when the sourcer
// stops, a resend failed, or nobody answered in time (timedOut set);
// otherwise it returns the answer and its stream identity header.
func (d *durableRun) awaitAnswer(wait time.Duration, resend func() (again, ok bool)) (ans *resetAnswer, ident string, ok bool) {
	s := d.s
	timer := s.after(wait)
	var held []inbound
	defer func() { d.hold(held) }()
	for {
		select {
		case <-s.quit:
			return nil, "", false
		case <-timer:
			d.timedOut = true
			return nil, "", false // nobody answered: retried
		case <-d.in.sig:
		}
		msgs := d.in.take()
		for i, m := range msgs {
			if !m.answer {
				held = append(held, m)
				continue
			}
			if m.subject != d.reply {
				continue // an answer to an earlier request
			}
			var a resetAnswer
			if err := json.Unmarshal(m.data, &a); err != nil {
				continue // a no-responders status or garbage: keep waiting
			}
			if e := a.Error; e != nil && (e.ErrCode == uint16(jserr.RequiredApiLevel) || e.ErrCode == uint16(jserr.InvalidJSON)) {
				again, sent := resend()
				if !sent {
					return nil, "", false
				}
				if again {
					continue
				}
			}
			held = append(held, msgs[i+1:]...) // for receive, after the answer
			return &a, stream.HeaderString(m.hdr, stream.HdrStreamIdentity), true
		}
	}
}

// requestReset publishes the reset request of the consumer, asking for
// API level level (0: none) and, at level 5, the origin's identity.
func (d *durableRun) requestReset(level int) {
	s := d.s
	var hdr []byte
	if level > 0 {
		hdr = stream.SetHeader(nil, "Nats-Required-Api-Level", strconv.Itoa(level))
	}
	if level >= 5 {
		hdr = stream.SetHeader(hdr, stream.HdrStreamIdentity, s.ident)
	}
	s.env.Transport.Publish(s.apiSubject(resetSubjectPrefix+s.src.Name+"."+s.src.Consumer.Name), d.reply, hdr, nil)
}

// hold puts messages back in front of the inbox for receive.
func (d *durableRun) hold(msgs []inbound) {
	if len(msgs) == 0 {
		return
	}
	d.in.mu.Lock()
	d.in.msgs = append(msgs, d.in.msgs...)
	d.in.mu.Unlock()
	select {
	case d.in.sig <- struct{}{}:
	default:
	}
}

// refused reports a consumer set-up that failed: err, the origin's
// error, or nil for an answer that is not a consumer (then the sourcer's
// setup error, 10029 for a mirror, 10045 for a source: nats-server
// v2.15.2's "invalid consumer create response") is logged with what and
// becomes the error the stream's info shows. It returns false.
func (d *durableRun) refused(err *jserr.Error, what string) bool {
	s := d.s
	if err == nil {
		code := jserr.SourceConsumerSetupFailed
		if s.mirror {
			code = jserr.MirrorConsumerSetupFailed
		}
		err = jserr.New(code, jserr.Sub("err", "invalid consumer create response"))
	}
	s.env.Logf("stream %s: %s: %s", s.r.Name(), what, err.Description)
	s.setError(err)
	return false
}

// answered takes the reset's answer (nats-server v2.15.2
// trySetupSourceConsumer, setupMirrorConsumer).
func (d *durableRun) answered(ans *resetAnswer, ident string) bool {
	s := d.s
	if ans.Error != nil || ans.Config == nil {
		if ans.Error != nil && ans.Error.ErrCode == uint16(jserr.ConsumerStreamIdentityMismatch) && !s.mirror {
			s.ident, d.sseq = "", 0 // the origin was recreated: start over
			return false
		}
		return d.refused(ans.Error, fmt.Sprintf("%s consumer %s of %s", s.kind(), s.src.Consumer.Name, s.src.Name))
	}
	if ans.Config.AckPolicy != consumer.AckFlowControl {
		code := jserr.SourceConsumerRequiresAckFC
		if s.mirror {
			code = jserr.MirrorConsumerRequiresAckFC
		}
		s.setError(jserr.New(code))
		return false
	}
	if !s.mirror {
		if d.s.ident != "" && ident != "" && d.s.ident != ident {
			s.env.Logf("stream %s: source stream %s was recreated, resetting source state", s.r.Name(), s.src.Name)
			d.sseq = 0
		}
		if ident == "" && s.src.External == nil {
			// An origin on this server answered without its identity
			// (below API level 5): read it from the origin itself, so
			// that the copies' Nats-Stream-Source names it as
			// nats-server's do.
			if o := s.env.Lookup(s.src.Name); o != nil {
				ident = stream.Identity(o.Created())
			}
		}
		s.ident = ident
	} else if last := s.r.Store().State(false).LastSeq; last > d.sseq {
		d.sseq = last
	}
	d.sseq = max(d.sseq, ans.Delivered.Stream)
	d.dseq, d.fcid, d.fcStalls = 0, "", 0
	s.setError(nil)
	d.heard()
	return true
}

// kind names the sourcer in the log.
func (s *sourcer) kind() string {
	if s.mirror {
		return "mirror"
	}
	return "source"
}

// setError sets the error info reports (nil: none).
func (s *sourcer) setError(err *jserr.Error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// receive copies what the consumer delivers until a gap, a refusal or a
// silent consumer asks for a new setup (true), or the sourcer stops
// (false).
func (d *durableRun) receive() bool {
	s := d.s
	health := s.after(durableHealthCheck)
	for {
		select {
		case <-s.quit:
			return false
		case <-health:
			if s.env.Now().Sub(d.lastHeard) > durableHealthCheck {
				return true // nothing for 10 s: set up again
			}
			health = s.after(durableHealthCheck)
			continue
		case <-s.wake: // Set.Lead
			if d.moved() {
				return true
			}
			continue
		case <-d.in.sig:
		}
		if !d.process(d.in.take()) {
			return true
		}
	}
}

// accepted is a delivered message taken for copying.
type accepted struct {
	sm         *store.StoredMsg
	sseq, dseq uint64 // the sourcer's sequences before it
	lag        uint64
}

// process handles a run of inbound messages in order; it reports false
// when the consumer must be set up again. Data messages are copied in
// batches, flushed before any control message is answered.
func (d *durableRun) process(msgs []inbound) bool {
	var batch []accepted
	flush := func() bool {
		ok := d.copy(batch)
		batch = batch[:0]
		return ok
	}
	for _, m := range msgs {
		if m.answer || m.gen != d.gen {
			continue // a late answer to an earlier setup, or its consumer's
		}
		d.heard()
		if len(m.data) == 0 && bytes.HasPrefix(m.hdr, []byte("NATS/1.0 100 ")) {
			if !flush() || !d.control(m) {
				return false
			}
			continue
		}
		a, ok, retry := d.take(m)
		if retry {
			flush()
			return false
		}
		if ok {
			batch = append(batch, a)
			if len(batch) >= sourceBatchMsgs {
				if !flush() {
					return false
				}
			}
		}
	}
	return flush()
}

// control handles a flow control request or an idle heartbeat; false
// asks for a new setup.
func (d *durableRun) control(m inbound) bool {
	s := d.s
	if m.reply != "" { // flow control: the acknowledgement
		if d.own > 0 {
			if err := s.r.Store().WaitDurable(d.own); err != nil {
				return false // not durable here: the origin keeps them
			}
		}
		var hdr []byte
		if d.sseq > 0 {
			hdr = stream.SetHeader(nil, "Nats-Last-Consumer", strconv.FormatUint(d.dseq, 10))
			hdr = stream.SetHeader(hdr, "Nats-Last-Stream", strconv.FormatUint(d.sseq, 10))
		}
		s.env.Transport.Publish(m.reply, "", hdr, nil)
		return true
	}
	if last, _ := strconv.ParseInt(stream.HeaderString(m.hdr, "Nats-Last-Consumer"), 10, 64); last > 0 && uint64(last) != d.dseq {
		return false // missed a delivery
	}
	if fc := stream.HeaderString(m.hdr, "Nats-Consumer-Stalled"); fc != "" {
		if fc != d.fcid {
			d.fcid, d.fcStalls = fc, 0
		}
		d.fcStalls++
		if d.fcStalls == durableStallsToError {
			s.setError(jserr.New(jserr.SourceConsumerFlowControlStalled))
			s.env.Logf("stream %s: %s %s is stalled on flow control, replies are not reaching the consumer", s.r.Name(), s.kind(), s.src.Name)
		}
		s.env.Transport.Publish(fc, "", nil, nil)
		return true
	}
	d.clearStall()
	return true
}

// clearStall ends a flow control stall (and its error).
func (d *durableRun) clearStall() {
	if d.fcid == "" {
		return
	}
	d.fcid, d.fcStalls = "", 0
	d.s.mu.Lock()
	if d.s.err != nil && d.s.err.ErrCode == uint16(jserr.SourceConsumerFlowControlStalled) {
		d.s.err = nil
	}
	d.s.mu.Unlock()
}

// take checks a delivered message's sequences (nats-server v2.15.2
// processInboundSourceMsg, processInboundMirrorMsg): ok when it is to be
// copied, retry when a delivery was missed.
func (d *durableRun) take(m inbound) (a accepted, ok, retry bool) {
	s := d.s
	cname, dc, sseq, dseq, ts, pending, parsed := parseAckReply(m.reply)
	if !parsed || cname != d.cname || dc > 1 {
		return a, false, false // another consumer's, or a redelivery
	}
	a = accepted{sseq: d.sseq, dseq: d.dseq}
	switch {
	case sseq <= d.sseq: // copied already
		if dseq == d.dseq+1 {
			d.dseq++
		}
		return a, false, false
	case s.mirror && (sseq == d.sseq+1 || dseq == d.dseq+1):
		// The next message, or the next delivery over a gap in the
		// origin (deleted, expired or filtered out): the mirror skips it.
	case !s.mirror && dseq == d.dseq+1:
	case !s.mirror && dseq <= d.dseq:
		return a, false, false
	default:
		return a, false, true
	}
	d.sseq, d.dseq = sseq, dseq
	if pending > 0 {
		pending--
	}
	a.lag = pending
	d.clearStall()
	a.sm = &store.StoredMsg{Seq: sseq, Subject: m.subject, Header: m.hdr, Data: m.data, Time: ts}
	return a, true, false
}

// copy proposes a batch as one Copy operation; on a refusal it rewinds
// to the refused message and reports false (a new setup redelivers it,
// as nats-server's retrySourceConsumerAtSeq).
func (d *durableRun) copy(batch []accepted) bool {
	if len(batch) == 0 {
		return true
	}
	s := d.s
	msgs := make([]*store.StoredMsg, len(batch))
	for i, a := range batch {
		msgs[i] = a.sm
	}
	applied, top := s.apply(msgs, s.ident)
	d.own = max(d.own, top)
	s.mu.Lock()
	if applied > 0 && !s.mirror {
		s.seq = msgs[applied-1].Seq
	}
	s.lag = batch[len(batch)-1].lag
	if applied > 0 {
		s.lag = batch[applied-1].lag
	}
	s.mu.Unlock()
	if applied < len(batch) {
		d.sseq, d.dseq = batch[applied].sseq, batch[applied].dseq
		return false
	}
	return true
}

// parseAckReply reads a delivery's ack reply subject, v1
// ($JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>) or v2
// (with domain and account hash first; nats-server v2.15.2
// ackReplyInfo).
func parseAckReply(reply string) (cname string, dc, sseq, dseq uint64, ts int64, pending uint64, ok bool) {
	t := strings.Split(reply, ".")
	if len(t) < 9 || t[0] != "$JS" || t[1] != "ACK" {
		return "", 0, 0, 0, 0, 0, false
	}
	if len(t) > 9 {
		if len(t) < 12 {
			return "", 0, 0, 0, 0, 0, false
		}
		t = t[4:]
	} else {
		t = t[2:]
	}
	// t: stream, consumer, dc, sseq, dseq, ts, pending
	var err [5]error
	dc, err[0] = strconv.ParseUint(t[2], 10, 64)
	sseq, err[1] = strconv.ParseUint(t[3], 10, 64)
	dseq, err[2] = strconv.ParseUint(t[4], 10, 64)
	ts, err[3] = strconv.ParseInt(t[5], 10, 64)
	pending, err[4] = strconv.ParseUint(t[6], 10, 64)
	for _, e := range err {
		if e != nil {
			return "", 0, 0, 0, 0, 0, false
		}
	}
	return t[1], dc, sseq, dseq, ts, pending, true
}
