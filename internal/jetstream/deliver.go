package jetstream

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
)

// pick is the message chosen for the next delivery.
type pick struct {
	m     *store.StoredMsg
	redel bool // a redelivery (from the redelivery queue)
	lps   bool // from the last_per_subject list
	start uint64
}

// deliver hands out messages while there is a target and a message:
// redeliveries first, then new messages up to the stream's durable
// sequence (never beyond: an unacknowledged tail may be rewritten after a
// crash), within max_ack_pending, flow control and pull budgets.
func (c *cons) deliver(now time.Time) {
	if c.pausedUntil().After(now) {
		c.pollInterest = false // nothing to deliver while paused
		c.endNoWait()
		return
	}
	c.end = c.sr.durableSeq() // one look per round: it only grows
	pushBound := c.cfg.IsPush() && c.js.tr.HasInterest(c.cfg.DeliverSubject)
	// An unbound push consumer with something to deliver polls for a
	// subscriber; with nothing, the next message wakes it anyway.
	c.pollInterest = c.cfg.IsPush() && !pushBound && (c.numPending(c.end) > 0 || c.st.NumAckPending() > 0)
	for n := 0; ; n++ {
		if n == maxPerRound {
			c.signal() // go on in the next round, after the queued acks
			return
		}
		target, w := c.target(pushBound)
		if target == "" {
			break
		}
		p, ok := c.peek(now)
		if !ok {
			break
		}
		c.send(target, w, p, now)
	}
	c.endNoWait()
}

// maxPerRound bounds the deliveries of one round, so that acks and API
// calls are served between batches of a long backlog.
const maxPerRound = 256

// target returns where the next message goes: the deliver subject of a
// bound push consumer with flow control room, or the reply subject of
// the first pull request whose requester is still listening.
func (c *cons) target(pushBound bool) (string, *waiting) {
	if c.cfg.IsPush() {
		if !pushBound || (c.cfg.FlowControl && c.fc.outstanding >= c.fc.window) {
			return "", nil
		}
		return c.cfg.DeliverSubject, nil
	}
	for len(c.waiting) > 0 {
		w := c.waiting[0]
		if c.js.tr.HasInterest(w.reply) {
			return w.reply, w
		}
		c.waiting = c.waiting[1:]
	}
	return "", nil
}

// peek finds the next message to deliver without recording anything.
func (c *cons) peek(now time.Time) (pick, bool) {
	for {
		sseq, ok := c.st.NextRedelivery()
		if !ok {
			break
		}
		m, err := c.sr.store.Load(sseq)
		if err == nil {
			return pick{m: m, redel: true}, true
		}
		c.commit(&consumer.Drop{Seqs: []uint64{sseq}}) // gone from the stream
		c.dirty = true
	}
	for len(c.lps) > 0 {
		m, err := c.sr.store.Load(c.lps[0])
		if err == nil {
			return pick{m: m, lps: true}, true
		}
		c.lps = c.lps[1:]
	}
	if c.st.AtAckLimit() {
		return pick{}, false
	}
	return c.peekNew(now)
}

// peekNew loads the next new message matching the filters, at or below
// the durable sequence, paced by replay_policy original.
func (c *cons) peekNew(now time.Time) (pick, bool) {
	start := max(c.st.NextSeq(), c.minNext)
	end := c.end
	for start <= end {
		m, err := c.sr.store.LoadNext(c.filters, start)
		var ce *store.CorruptError
		switch {
		case errors.As(err, &ce):
			c.js.logf("consumer %s > %s: skipping damaged %s: %v", c.sr.name, c.name, store.SeqRange(ce.First, ce.Last), err)
			c.minNext = ce.Last + 1
			start = c.minNext
			continue
		case err != nil || m.Seq > end:
			return pick{}, false
		}
		if !c.replayDue(m, now) {
			return pick{}, false
		}
		return pick{m: m, start: start}, true
	}
	return pick{}, false
}

// replayDue reports whether m may go now under replay_policy original:
// messages are spaced as they were published.
func (c *cons) replayDue(m *store.StoredMsg, now time.Time) bool {
	if c.cfg.ReplayPolicy != consumer.ReplayOriginal || c.replay.lastWall == 0 {
		return true
	}
	due := c.replay.lastWall + (m.Time - c.replay.lastMsgTime)
	return now.UnixNano() >= due
}

// send records and publishes one delivery, or ends the pull request
// whose byte budget the message would exceed (409).
func (c *cons) send(target string, w *waiting, p pick, now time.Time) {
	hdr, data := p.m.Header, p.m.Data
	if c.cfg.HeadersOnly {
		hdr, data = headersOnly(hdr, len(data)), nil
	}
	pending := c.numPending(c.end)
	if w != nil && w.maxBytes {
		// The size as nats-server counts it, with the reply of a first
		// delivery (a redelivery's count may add a digit).
		est := ackSubject(c.sr.name, c.name, 1, p.m.Seq, c.st.Delivered().Consumer+1, p.m.Time, pending)
		if len(p.m.Subject)+len(est)+len(hdr)+len(data) > w.bytes {
			c.endPull(w, pendingHeader(409, "Message Size Exceeds MaxBytes", w.n, w.bytes))
			return
		}
	}
	d := c.record(p, now)
	if !p.redel && pending > 0 {
		pending--
	}
	reply := ackSubject(c.sr.name, c.name, d.Deliveries, p.m.Seq, d.ConsumerSeq, p.m.Time, pending)
	c.js.tr.PublishAs(target, p.m.Subject, reply, hdr, data)
	size := len(p.m.Subject) + len(reply) + len(hdr) + len(data)
	c.lastDeliver = now
	c.lastHB = now
	if w != nil {
		c.pulled(w, size, now)
	} else {
		c.pushed(size)
	}
}

// record updates the state for a delivery of p.
func (c *cons) record(p pick, now time.Time) consumer.Delivery {
	c.dirty = true
	c.replay = replayState{lastMsgTime: p.m.Time, lastWall: now.UnixNano()}
	if c.cfg.ReplayPolicy != consumer.ReplayOriginal {
		c.replay.lastWall = 0
	}
	if p.redel {
		return c.commit(&consumer.Redeliver{Stream: p.m.Seq, Time: now.UnixNano()}).Delivery
	}
	if p.lps {
		c.lps = c.lps[1:]
		c.np.valid = false
	} else if c.np.valid && c.np.next == p.start && c.np.n > 0 {
		c.np.n--
		c.np.next = p.m.Seq + 1
	} else {
		c.np.valid = false
	}
	out := c.commit(&consumer.Deliver{Stream: p.m.Seq, Time: now.UnixNano()})
	c.acked = append(c.acked, out.Acked...) // ack none: delivered is acknowledged
	return out.Delivery
}

// numPending is num_pending: the messages matching the filters that are
// not yet delivered, up to end (the durable sequence), plus those left in
// the last_per_subject list (protocol.md section 3.5).
func (c *cons) numPending(end uint64) uint64 {
	next := max(c.st.NextSeq(), c.minNext)
	rem := c.sr.store.Removals()
	p := &c.np
	switch {
	case next > end:
		*p = pendingCount{valid: true, next: next, end: end, removals: rem}
	case !p.valid || p.removals != rem || p.next != next || end < p.end:
		*p = pendingCount{valid: true, n: c.sr.store.NumPending(c.filters, next, end), next: next, end: end, removals: rem}
	case end > p.end:
		p.n += c.sr.store.NumPending(c.filters, max(p.end+1, next), end)
		p.end = end
	}
	return p.n + uint64(len(c.lps))
}

// headersOnly returns the header block of a headers_only delivery: the
// stored headers (or a bare NATS/1.0 block) plus Nats-Msg-Size.
func headersOnly(hdr []byte, size int) []byte {
	if len(hdr) < 4 {
		hdr = []byte("NATS/1.0\r\n\r\n")
	}
	out := make([]byte, 0, len(hdr)+32)
	out = append(out, hdr[:len(hdr)-2]...)
	out = fmt.Appendf(out, "Nats-Msg-Size: %d\r\n\r\n", size)
	return out
}

// pulled accounts a delivery to a pull request and ends it when its batch
// or byte budget is used up.
func (c *cons) pulled(w *waiting, size int, now time.Time) {
	w.n--
	w.delivered++
	w.lastHB = now.UnixNano()
	if w.maxBytes {
		w.bytes -= size
	}
	switch {
	case w.maxBytes && w.bytes <= 0:
		c.endPull(w, nil)
	case w.n <= 0 && w.maxBytes:
		c.endPull(w, pendingHeader(409, "Batch Completed", 0, w.bytes))
	case w.n <= 0:
		c.endPull(w, nil)
	}
}

// endPull removes w from the queue, sending status when not nil.
func (c *cons) endPull(w *waiting, status []byte) {
	for i, x := range c.waiting {
		if x == w {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			break
		}
	}
	if status != nil {
		c.js.tr.Publish(w.reply, "", status, nil)
	}
}

// endNoWait ends the no_wait requests that cannot get more now with
// 404 No Messages; with expires, only once something was delivered.
func (c *cons) endNoWait() {
	kept := c.waiting[:0]
	for _, w := range c.waiting {
		if w.noWait && (w.expires == 0 || w.delivered > 0) {
			c.js.tr.Publish(w.reply, "", hdrNoMessages, nil)
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waiting[len(kept):])
	c.waiting = kept
}

// expirePulls ends the pull requests past their expiry with 408 Request
// Timeout and sends idle heartbeats to the waiting ones.
func (c *cons) expirePulls(now time.Time) {
	ns := now.UnixNano()
	kept := c.waiting[:0]
	for _, w := range c.waiting {
		if w.expires > 0 && ns >= w.expires {
			c.js.tr.Publish(w.reply, "", pendingHeader(408, "Request Timeout", w.n, max(w.bytes, 0)), nil)
			continue
		}
		if !c.js.tr.HasInterest(w.reply) {
			continue // the requester is gone (num_waiting drops it, as in nats-server)
		}
		if w.heartbeat > 0 && ns-w.lastHB >= int64(w.heartbeat) {
			d := c.st.Delivered()
			c.js.tr.Publish(w.reply, "", heartbeatHeader(d.Consumer, d.Stream, ""), nil)
			w.lastHB = ns
		}
		kept = append(kept, w)
	}
	clear(c.waiting[len(kept):])
	c.waiting = kept
}

// addPull queues a pull request after nats-server's checks (protocol.md
// section 5.6).
func (c *cons) addPull(reply string, body []byte, now time.Time) {
	c.lastActive = now
	if reply == "" {
		return
	}
	if c.cfg.IsPush() {
		c.js.tr.Publish(reply, "", hdrPushBased, nil)
		return
	}
	req, bad := parsePull(body)
	if bad != "" {
		c.js.tr.Publish(reply, "", statusHeader(400, "Bad Request - "+bad), nil)
		return
	}
	if status := c.pullLimits(req); status != nil {
		c.js.tr.Publish(reply, "", status, nil)
		return
	}
	if c.cfg.MaxWaiting > 0 && len(c.waiting) >= c.cfg.MaxWaiting {
		if req.Heartbeat == 0 {
			c.js.tr.Publish(reply, "", hdrMaxWaiting, nil)
		}
		return
	}
	if req.Expires < 0 {
		// Already expired: nats-server answers at once.
		c.js.tr.Publish(reply, "", pendingHeader(408, "Request Timeout", req.Batch, max(req.MaxBytes, 0)), nil)
		return
	}
	w := &waiting{reply: reply, n: req.Batch, bytes: req.MaxBytes, maxBytes: req.MaxBytes > 0, noWait: req.NoWait, heartbeat: req.Heartbeat, lastHB: now.UnixNano()}
	if req.Expires > 0 {
		w.expires = now.Add(req.Expires).UnixNano()
	}
	c.waiting = append(c.waiting, w)
}

// pullLimits checks a request against max_batch, max_expires and
// max_bytes.
func (c *cons) pullLimits(req pullRequest) []byte {
	switch {
	case c.cfg.MaxRequestBatch > 0 && req.Batch > c.cfg.MaxRequestBatch:
		return statusHeader(409, "Exceeded MaxRequestBatch of "+strconv.Itoa(c.cfg.MaxRequestBatch))
	case c.cfg.MaxRequestExpires > 0 && req.Expires > c.cfg.MaxRequestExpires:
		return statusHeader(409, "Exceeded MaxRequestExpires of "+c.cfg.MaxRequestExpires.String())
	case c.cfg.MaxRequestMaxBytes > 0 && req.MaxBytes > c.cfg.MaxRequestMaxBytes:
		return statusHeader(409, "Exceeded MaxRequestMaxBytes of "+strconv.Itoa(c.cfg.MaxRequestMaxBytes))
	}
	return nil
}
