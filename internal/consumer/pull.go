package consumer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// JSApiConsumerGetNextRequest is a request on
// $JS.API.CONSUMER.MSG.NEXT.<S>.<C> (nats-server v2.15.2; ADR-13 pull
// requests). Expires and Heartbeat are nanoseconds in JSON. The type has
// nats-server's name because a decoding error names it in the 400
// status a client sees.
//
// The priority group fields (ADR-42) are nats-server's PriorityGroup,
// embedded as there.
type JSApiConsumerGetNextRequest struct {
	Batch     int           `json:"batch,omitempty"`
	Expires   time.Duration `json:"expires,omitempty"`
	MaxBytes  int           `json:"max_bytes,omitempty"`
	NoWait    bool          `json:"no_wait,omitempty"`
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
	PriorityGroup
	isJSON bool // the body was JSON: the priority group fields count
}

// PriorityGroup is the priority group part of a pull request (ADR-42;
// nats-server v2.15.2 PriorityGroup): the group it belongs to; for the
// overflow policy the num_pending and num_ack_pending from which it is
// served; for pinned_client the pin id the server handed out
// (Nats-Pin-Id); for prioritized its priority, 0 (first) to 9.
type PriorityGroup struct {
	Group         string `json:"group,omitempty"`
	MinPending    int64  `json:"min_pending,omitempty"`
	MinAckPending int64  `json:"min_ack_pending,omitempty"`
	Id            string `json:"id,omitempty"` // nats-server's name
	Priority      int    `json:"priority,omitempty"`
}

// parsePull reads a pull request body as nats-server v2.15.2
// nextReqFromMsg does: empty (batch 1), a number as text (the batch), or
// JSON; anything else is a request for one message. It returns the text
// of a 400 Bad Request status for bad JSON or an idle_heartbeat above
// half of expires (no expires counts as 0).
func parsePull(body []byte) (pullRequest, string) {
	req := pullRequest{Batch: 1}
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return req, ""
	case body[0] == '{':
		if err := json.Unmarshal(body, &req); err != nil {
			return req, err.Error()
		}
		req.isJSON = true
	default:
		if n, err := strconv.Atoi(string(body)); err == nil {
			req.Batch = n
		}
	}
	if req.Batch <= 0 {
		req.Batch = 1
	}
	if req.Heartbeat > 0 && req.Heartbeat*2 > req.Expires {
		return req, "heartbeat value too large"
	}
	return req, ""
}

// pullRequest is the short name of the request type.
type pullRequest = JSApiConsumerGetNextRequest

// waiting is a queued pull request.
type waiting struct {
	reply     string
	n         int   // messages still owed
	bytes     int   // byte budget left; 0 = no budget
	maxBytes  bool  // the request set max_bytes
	noWait    bool  // end with 404 when nothing (more) is available
	expires   int64 // unix ns; 0 = never
	heartbeat time.Duration
	lastHB    int64 // last delivery or heartbeat (unix ns)
	delivered int   // messages delivered to it
	// pg is the request's priority group fields, nil when its body was
	// not JSON (nats-server then applies none of the group rules).
	pg *PriorityGroup
}

// Status frames of pull and push delivery, written exactly as nats-server
// v2.15.2 writes them (consumer.go: the 100, 404, 408 and 409 statuses).
func statusHeader(code int, text string, kv ...string) []byte {
	b := fmt.Appendf(nil, "NATS/1.0 %d %s\r\n", code, text)
	for i := 0; i+1 < len(kv); i += 2 {
		b = fmt.Appendf(b, "%s: %s\r\n", kv[i], kv[i+1])
	}
	return append(b, '\r', '\n')
}

func pendingHeader(code int, text string, msgs, bytes int) []byte {
	return statusHeader(code, text, "Nats-Pending-Messages", strconv.Itoa(msgs), "Nats-Pending-Bytes", strconv.Itoa(bytes))
}

func heartbeatHeader(lastConsumer, lastStream uint64, stalled string) []byte {
	kv := []string{"Nats-Last-Consumer", strconv.FormatUint(lastConsumer, 10), "Nats-Last-Stream", strconv.FormatUint(lastStream, 10)}
	if stalled != "" {
		kv = append(kv, "Nats-Consumer-Stalled", stalled)
	}
	return statusHeader(100, "Idle Heartbeat", kv...)
}

var (
	hdrNoMessages = statusHeader(404, "No Messages")
	// hdrRequestsPending ends a no_wait request that the requests
	// already waiting would leave nothing for.
	hdrRequestsPending = statusHeader(408, "Requests Pending")
	hdrPushBased       = statusHeader(409, "Consumer is push based")
	hdrMaxWaiting      = statusHeader(409, "Exceeded MaxWaiting")
	hdrFlowControlReq  = statusHeader(100, "FlowControl Request")
)

// StatusDeleted is the status a waiting pull request gets when its
// consumer or stream is deleted: "NATS/1.0 409 Consumer Deleted".
var StatusDeleted = statusHeader(409, "Consumer Deleted")

// AddPull queues a pull request that arrived at now with reply subject
// reply and body body, the stream's durable sequence being end, after
// nats-server v2.15.2's checks (ADR-13; processNextMsgRequest): a push
// consumer answers 409 "Consumer is push based"; a bad body 400; batch,
// expires and max_bytes over the consumer's limits 409; a no_wait
// request that the waiting ones would leave nothing for 408 "Requests
// Pending", one without expires when there is nothing to deliver 404 (at
// once, before it could be served by a priority policy); a full queue
// 409 "Exceeded MaxWaiting" (no answer to a
// request with a heartbeat); an expiry already past 408. It reports
// whether the request was queued to wait, with its expiry (unix ns, 0:
// none) and whether it is no_wait (a replicated consumer's leader records
// the reply subjects of the requests that wait: consumerrun pulls.go).
func (d *Deliverer) AddPull(reply string, body []byte, now time.Time, end uint64) (queued bool, expires int64, noWait bool) {
	d.lastActive = now
	if reply == "" {
		return false, 0, false
	}
	if d.cfg.IsPush() {
		d.out.Publish(reply, "", hdrPushBased, nil)
		return false, 0, false
	}
	req, bad := parsePull(body)
	if bad != "" {
		d.out.Publish(reply, "", statusHeader(400, "Bad Request - "+bad), nil)
		return false, 0, false
	}
	if status := d.pullLimits(req); status != nil {
		d.out.Publish(reply, "", status, nil)
		return false, 0, false
	}
	if status := d.checkGroup(&req, now); status != nil {
		d.out.Publish(reply, "", status, nil)
		return false, 0, false
	}
	if req.NoWait && req.Expires == 0 && d.NumPending(end)+uint64(d.st.NumRedeliveryQueued()) == 0 {
		d.out.Publish(reply, "", hdrNoMessages, nil)
		return false, 0, false
	}
	if req.NoWait && d.requestsPending(now, end) {
		d.out.Publish(reply, "", hdrRequestsPending, nil)
		return false, 0, false
	}
	if d.cfg.MaxWaiting > 0 && len(d.waiting) >= d.cfg.MaxWaiting {
		if req.Heartbeat == 0 {
			d.out.Publish(reply, "", hdrMaxWaiting, nil)
		}
		return false, 0, false
	}
	if req.Expires < 0 {
		// Already expired: nats-server answers at once.
		d.out.Publish(reply, "", pendingHeader(408, "Request Timeout", req.Batch, max(req.MaxBytes, 0)), nil)
		return false, 0, false
	}
	w := &waiting{reply: reply, n: req.Batch, bytes: req.MaxBytes, maxBytes: req.MaxBytes > 0, noWait: req.NoWait, heartbeat: req.Heartbeat, lastHB: now.UnixNano()}
	if req.isJSON {
		pg := req.PriorityGroup
		w.pg = &pg
	}
	if req.Expires > 0 {
		w.expires = now.Add(req.Expires).UnixNano()
	}
	if d.cfg.PriorityPolicy == PriorityPrioritized {
		d.insertByPriority(w)
		return true, w.expires, w.noWait
	}
	d.waiting = append(d.waiting, w)
	return true, w.expires, w.noWait
}

// requestsPending reports whether a new no_wait request should get 408
// Requests Pending (nats-server v2.15.2 processNextMsgRequest): there
// are messages to deliver up to end (new ones and redeliveries), but
// fewer than the waiting requests still ask for.
func (d *Deliverer) requestsPending(now time.Time, end uint64) bool {
	avail := d.NumPending(end) + uint64(d.st.NumRedeliveryQueued())
	if avail == 0 {
		return false
	}
	var asked uint64
	ns := now.UnixNano()
	for _, w := range d.waiting {
		if (w.expires == 0 || ns < w.expires) && d.out.HasInterest(w.reply) {
			asked += uint64(w.n)
		}
	}
	return avail < asked
}

// pullLimits checks a request against max_batch, max_expires and
// max_bytes.
func (d *Deliverer) pullLimits(req pullRequest) []byte {
	switch {
	case d.cfg.MaxRequestBatch > 0 && req.Batch > d.cfg.MaxRequestBatch:
		return statusHeader(409, "Exceeded MaxRequestBatch of "+strconv.Itoa(d.cfg.MaxRequestBatch))
	case d.cfg.MaxRequestExpires > 0 && req.Expires > d.cfg.MaxRequestExpires:
		return statusHeader(409, "Exceeded MaxRequestExpires of "+d.cfg.MaxRequestExpires.String())
	case d.cfg.MaxRequestMaxBytes > 0 && req.MaxBytes > d.cfg.MaxRequestMaxBytes:
		return statusHeader(409, "Exceeded MaxRequestMaxBytes of "+strconv.Itoa(d.cfg.MaxRequestMaxBytes))
	}
	return nil
}

// ExpirePulls ends a pinned client's pin when its priority_timeout ran
// out at now (priority.go), ends the pull requests past their expiry with
// 408 Request Timeout, drops those whose requester stopped listening (as
// nats-server's num_waiting does), and sends idle heartbeats to the
// waiting ones that are due.
func (d *Deliverer) ExpirePulls(now time.Time) {
	d.expirePin(now)
	ns := now.UnixNano()
	kept := d.waiting[:0]
	for _, w := range d.waiting {
		if w.expires > 0 && ns >= w.expires {
			d.out.Publish(w.reply, "", pendingHeader(408, "Request Timeout", w.n, max(w.bytes, 0)), nil)
			continue
		}
		if !d.out.HasInterest(w.reply) {
			continue
		}
		if w.heartbeat > 0 && ns-w.lastHB >= int64(w.heartbeat) {
			dl := d.st.Delivered()
			d.out.Publish(w.reply, "", heartbeatHeader(dl.Consumer, dl.Stream, ""), nil)
			w.lastHB = ns
		}
		kept = append(kept, w)
	}
	clear(d.waiting[len(kept):])
	d.waiting = kept
}

// pulled accounts a delivery to a pull request and ends it when its batch
// or byte budget is used up; a request that wants more goes behind the
// others (of its priority, for the prioritized policy), as nats-server
// v2.15.2's wait queue pops it, so that waiting requests share the
// messages one by one.
func (d *Deliverer) pulled(w *waiting, size int, now time.Time) {
	w.n--
	w.delivered++
	w.lastHB = now.UnixNano()
	if w.maxBytes {
		w.bytes -= size
	}
	switch {
	case w.maxBytes && w.bytes <= 0:
		d.endPull(w, nil)
	case w.n <= 0 && w.maxBytes:
		d.endPull(w, pendingHeader(409, "Batch Completed", 0, w.bytes))
	case w.n <= 0:
		d.endPull(w, nil)
	case len(d.waiting) > 1 && d.waiting[0] == w:
		d.waiting = append(d.waiting[:0], d.waiting[1:]...)
		if d.cfg.PriorityPolicy == PriorityPrioritized {
			d.insertByPriority(w)
		} else {
			d.waiting = append(d.waiting, w)
		}
	}
}

// endPull removes w from the queue, sending status when not nil.
func (d *Deliverer) endPull(w *waiting, status []byte) {
	for i, x := range d.waiting {
		if x == w {
			d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
			break
		}
	}
	if status != nil {
		d.out.Publish(w.reply, "", status, nil)
	}
}

// endNoWait ends the no_wait requests that cannot get more now with 404
// No Messages; with expires, only once something was delivered.
func (d *Deliverer) endNoWait() {
	kept := d.waiting[:0]
	for _, w := range d.waiting {
		if w.noWait && (w.expires == 0 || w.delivered > 0) {
			d.out.Publish(w.reply, "", hdrNoMessages, nil)
			continue
		}
		kept = append(kept, w)
	}
	clear(d.waiting[len(kept):])
	d.waiting = kept
}

// EndPulls ends every waiting pull request, each answered with status
// (StatusDeleted when the consumer or its stream is deleted); nil means
// the server shuts down: each gets 409 Server Shutdown with what it was
// still owed, as nats-server v2.15.2 signalPullConsumers sends it. A
// pinned client's pin goes with them, without an advisory.
func (d *Deliverer) EndPulls(status []byte) {
	d.unpin()
	for _, w := range d.waiting {
		if status != nil {
			d.out.Publish(w.reply, "", status, nil)
		} else {
			d.out.Publish(w.reply, "", pendingHeader(409, "Server Shutdown", w.n, max(w.bytes, 0)), nil)
		}
	}
	d.waiting = nil
}

// EndPullsOnce ends every waiting pull request as EndPulls(status) does,
// but sends status once per reply subject: a change of leader's 409
// Leadership Change. nats-server v2.15.2's new leader answers the reply
// subjects its group recorded, a set (consumer.go checkPendingRequests,
// o.prm), and nats.go's Consume, which sends every request of one
// subscription with one reply subject, asks again on each 409 it gets:
// one per request multiplied its requests at every step-down (four
// step-downs under a Consume: 28 errors and 14 requests waiting, where
// nats-server's gave 4 and 3; bench/consumerkill -signal STEPDOWN).
// It returns the reply subjects it sent status to (nil for none).
func (d *Deliverer) EndPullsOnce(status []byte) (sent map[string]bool) {
	d.unpin()
	for _, w := range d.waiting {
		if !sent[w.reply] {
			if sent == nil {
				sent = make(map[string]bool, len(d.waiting))
			}
			sent[w.reply] = true
			d.out.Publish(w.reply, "", status, nil)
		}
	}
	d.waiting = nil
	return sent
}

// NumWaiting counts the queued pull requests whose requester still
// listens (ExpirePulls drops the others).
func (d *Deliverer) NumWaiting() int {
	n := 0
	for _, w := range d.waiting {
		if d.out.HasInterest(w.reply) {
			n++
		}
	}
	return n
}

// WaitingPulls are the pull requests a Deliverer had queued, taken by
// TakePulls for another Deliverer of the same consumer (AdoptPulls):
// the consumer's runtime replaced by another on the same server, as
// when its replica count changes (docs/cluster.md, "Scaling
// consumers"). Each keeps what it is still owed and its expiry.
type WaitingPulls struct{ ws []*waiting }

// Len returns the number of requests.
func (p WaitingPulls) Len() int { return len(p.ws) }

// TakePulls returns and forgets the queued pull requests, unanswered.
// A pinned client's pin stays with this Deliverer (the adopting one
// pins a client again).
func (d *Deliverer) TakePulls() WaitingPulls {
	p := WaitingPulls{ws: d.waiting}
	d.waiting = nil
	return p
}

// AdoptPulls queues the pull requests another Deliverer of the consumer
// held (TakePulls) after those queued here, a request of a priority
// group in its priority's place; they are served as if they had come
// here, at their own expiry.
func (d *Deliverer) AdoptPulls(p WaitingPulls) {
	for _, w := range p.ws {
		if w.pg != nil && d.cfg.PriorityPolicy == PriorityPrioritized {
			d.insertByPriority(w)
			continue
		}
		d.waiting = append(d.waiting, w)
	}
}
