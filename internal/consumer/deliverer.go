package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// Source is what a consumer reads of its stream's store; store.Store
// satisfies it.
type Source interface {
	Load(seq uint64) (*store.StoredMsg, error)
	LoadNext(filters []string, start uint64) (*store.StoredMsg, error)
	LoadLast(filter string) (*store.StoredMsg, error)
	NumPending(filters []string, start, end uint64) uint64
	SubjectsState(filter string) map[string]store.SubjectState
	Removals() uint64
	State(withDeleted bool) store.State
}

// Output is where a consumer's deliveries and status messages go: the
// runtime publishes them (jetstream.Transport satisfies it). The
// methods must not block.
type Output interface {
	// Publish sends a message (here: a status or control message, a
	// header block without payload) to subject.
	Publish(subject, reply string, hdr, data []byte) bool
	// PublishAs sends a stored message to route (a deliver subject or a
	// pull request's inbox), presented under its stored subject.
	PublishAs(route, subject, reply string, hdr, data []byte) bool
	// HasInterest reports whether anything listens on the literal
	// subject.
	HasInterest(subject string) bool
}

// Committer applies an operation to a consumer's State through the
// consumer's log and returns the outcome, valid until the next Commit
// (the runtime's local log applies at once).
type Committer interface {
	Commit(op Op) *Outcome
}

// Flow control window of push consumers (ADR-15 status messages;
// nats-server v2.15.2 consumer.go): it starts at 2 MiB and doubles on
// each confirmation up to 32 MiB.
const (
	fcWindowStart = 2 << 20
	fcWindowMax   = 32 << 20
)

// interestPoll is how often a push consumer without a subscriber on its
// deliver subject looks for one.
const interestPoll = 50 * time.Millisecond

// maxPerRound bounds the deliveries of one Deliver call, so that acks and
// API calls are served between batches of a long backlog.
const maxPerRound = 256

// Deliverer is the delivery logic of one consumer, the part only the
// node that delivers (a consumer's leader) runs: which message goes
// next and where (redeliveries first, then new messages up to the
// stream's durable sequence, within max_ack_pending, flow control and
// pull budgets), the pull request queue with its expiry, byte budgets
// and statuses, push flow control, idle heartbeats, replay_policy
// original pacing, the pause and inactive_threshold. It is a state
// machine with the clock passed in: it starts no goroutine and reads no
// clock. It reads messages from a Source and sends through an Output;
// every change to the delivery state goes as an operation through the
// Committer. It is not safe for concurrent use: the consumer's runtime
// calls it under the consumer's lock.
type Deliverer struct {
	stream, name string
	cfg          Config
	filters      []string
	st           *State
	log          Committer
	src          Source
	out          Output
	logf         func(format string, args ...any)

	lps         []uint64 // last_per_subject sequences still to deliver
	minNext     uint64   // new messages are looked for from here at least
	waiting     []*waiting
	np          pendingCount
	end         uint64 // the stream's durable sequence, read once per Deliver
	lastDeliver time.Time
	lastActive  time.Time // interest or pull activity, for inactive_threshold
	// inactiveFloor: not inactive before it (PostponeInactive).
	inactiveFloor time.Time
	lastHB        time.Time // push heartbeats
	fc            flowControl
	replay        replayState
	pollInterest  bool     // an unbound push consumer with messages waits for a subscriber
	acked         []uint64 // delivered with ack policy none: acknowledged, for retention
	// rl paces a push consumer with rate_limit_bps (nil until needed,
	// dropped by SetConfig), holding rateBurst bytes (SetRateBurst);
	// rateAt is when it lets the next message go, zero when it holds
	// none back.
	rl        *RateLimiter
	rateBurst int
	rateAt    time.Time
	// opDeliver and opRedeliver are reused for every delivery (a Log
	// keeps no operation after Propose returns): no allocation per
	// message.
	opDeliver   Deliver
	opRedeliver Redeliver
	// pin is the pinned client of a pinned_client consumer (priority.go).
	pin pinState
}

// flowControl is the push flow control state.
type flowControl struct {
	window      int
	outstanding int
	reply       string // the latest flow control request's reply subject
	atRequest   int    // outstanding when it was sent
}

// replayState paces replay_policy original.
type replayState struct {
	lastMsgTime int64 // stored time of the last message delivered (ns)
	lastWall    int64 // time it was delivered (ns)
}

// pendingCount caches num_pending: the messages matching the filters
// from next through end, valid while the store's removal count is
// unchanged.
type pendingCount struct {
	valid    bool
	n        uint64
	next     uint64
	end      uint64
	removals uint64
}

// NewDeliverer returns the delivery logic of consumer name of stream
// streamName, with config cfg (SetDefaults applied), created at created:
// it reads src, sends to out, changes the state through log and logs
// damaged messages it skips with logf. Give it its state with Position
// (a new consumer) or SetState (a restored one) before anything else.
func NewDeliverer(streamName, name string, cfg Config, created time.Time, src Source, out Output, log Committer, logf func(string, ...any)) *Deliverer {
	return &Deliverer{
		stream: streamName, name: name, cfg: cfg, filters: cfg.Filters(),
		src: src, out: out, log: log, logf: logf,
		lastActive: created, lastHB: created, fc: flowControl{window: fcWindowStart},
	}
}

// State returns the delivery state.
func (d *Deliverer) State() *State { return d.st }

// SetState makes st (a restored state) the delivery state.
func (d *Deliverer) SetState(st *State) { d.st = st }

// SetConfig takes an updated config (the runtime commits the policy
// with UpdatePolicy); a new rate_limit_bps takes effect at once, and a
// priority_policy other than pinned_client ends a pin.
func (d *Deliverer) SetConfig(cfg Config) {
	if cfg.PriorityPolicy != PriorityPinnedClient {
		d.unpin()
	}
	d.cfg = cfg
	d.filters = cfg.Filters()
	d.np.valid = false
	d.rl = nil
}

// SetRateBurst sets the bucket of the rate_limit_bps limiter, in bytes:
// the stream's max_msg_size, else the server's max_payload (nats-server
// v2.15.2 setRateLimit); 0 or less is 1 MiB. It applies from the next
// limiter on (the next SetConfig).
func (d *Deliverer) SetRateBurst(burst int) {
	if burst <= 0 {
		burst = 1 << 20
	}
	d.rateBurst = burst
}

// Restarted makes now the time of the consumer's last activity and
// heartbeat: a consumer restored at a start counts its
// inactive_threshold from the restart, as nats-server v2.15.2 starts its
// delete timer when it restores a consumer (switchToEphemeral,
// updateDeliveryInterest): a client had no chance to show interest while
// the server was down.
func (d *Deliverer) Restarted(now time.Time) {
	d.lastActive, d.lastHB = now, now
}

// Reset forgets where delivery stood, after a Reset operation moved the
// state: the last_per_subject list, the cached num_pending, replay
// pacing and the last delivery time.
func (d *Deliverer) Reset() {
	d.lps, d.minNext = nil, 0
	d.np.valid = false
	d.replay = replayState{}
	d.lastDeliver = time.Time{}
}

// Invalidate forgets the cached num_pending (after the state's
// delivered sequence moved other than by a delivery: SkipTo).
func (d *Deliverer) Invalidate() { d.np.valid = false }

// LastDelivered returns when the last message was delivered, the zero
// time before the first.
func (d *Deliverer) LastDelivered() time.Time { return d.lastDeliver }

// NoteDelivered records a delivery made elsewhere at t (a replicated
// consumer's follower applying its leader's Deliver or Redeliver, whose
// Time is the leader's), so that LastDelivered, the info's
// delivered.last_active, survives a change of leader as nats-server
// v2.15.2's does (its followers set it from the replicated delivery's
// timestamp). An earlier t than the last one recorded changes nothing.
func (d *Deliverer) NoteDelivered(t time.Time) {
	if t.After(d.lastDeliver) {
		d.lastDeliver = t
	}
}

// TakeAcked returns, and forgets, the stream sequences delivered with
// ack policy none since the last call: they count as acknowledged (for
// retention).
func (d *Deliverer) TakeAcked() []uint64 {
	a := d.acked
	d.acked = nil
	return a
}

// paused reports whether deliveries are paused at now.
func (d *Deliverer) paused(now time.Time) bool {
	p := d.st.PausedUntil()
	return p != 0 && p > now.UnixNano()
}

// pick is the message chosen for the next delivery.
type pick struct {
	m     *store.StoredMsg
	redel bool // a redelivery (from the redelivery queue)
	lps   bool // from the last_per_subject list
	start uint64
}

// Deliver hands out messages at now while there is a target and a
// message: redeliveries first, then new messages up to end, the stream's
// durable sequence (never beyond: an unacknowledged tail may be
// rewritten after a crash), within max_ack_pending, flow control and
// pull budgets. It reports more when it stopped at maxPerRound with
// more to deliver: the caller should call again after serving what is
// queued. No_wait pull requests that cannot get more are then ended
// (404).
func (d *Deliverer) Deliver(now time.Time, end uint64) (more bool) {
	return d.DeliverUpTo(now, end, maxPerRound)
}

// DeliverUpTo is Deliver handing out at most n messages (at most
// maxPerRound whatever n; none for n of 0 or less): the leader of a
// replicated consumer passes the room its window of deliveries not yet
// committed leaves (consumerrun, window.go). Stopped at n, it reports
// more, as at maxPerRound, and ends no no_wait pull request: the
// messages are there, only the room is not, and the request is served
// once the caller has room again.
func (d *Deliverer) DeliverUpTo(now time.Time, end uint64, n int) (more bool) {
	if d.paused(now) {
		d.pollInterest = false // nothing to deliver while paused
		d.endNoWait()
		return false
	}
	d.end = end
	d.rateAt = time.Time{}
	pushBound := d.cfg.IsPush() && d.out.HasInterest(d.cfg.DeliverSubject)
	// An unbound push consumer with something to deliver polls for a
	// subscriber; with nothing, the next message wakes it anyway.
	d.pollInterest = d.cfg.IsPush() && !pushBound && (d.NumPending(d.end) > 0 || d.st.NumAckPending() > 0)
	n = min(n, maxPerRound)
	for i := 0; ; i++ {
		if i >= n {
			return true
		}
		target, w := d.target(pushBound, now)
		if target == "" {
			break
		}
		p, ok := d.peek(now)
		if !ok {
			break
		}
		if w == nil && !d.rateAllows(p, now) {
			break
		}
		d.send(target, w, p, now)
	}
	d.endNoWait()
	return false
}

// rateAllows reports whether a push consumer's rate_limit_bps lets p go
// at now; when not, it notes when it will (rateAt, for NextWake).
func (d *Deliverer) rateAllows(p pick, now time.Time) bool {
	if d.cfg.RateLimit == 0 {
		d.rl = nil
		return true
	}
	if d.rl == nil {
		burst := d.rateBurst
		if burst <= 0 {
			burst = 1 << 20
		}
		d.rl = NewRateLimiter(d.cfg.RateLimit, burst, now.UnixNano())
	}
	ok, wait := d.rl.Take(len(p.m.Subject)+len(p.m.Header)+len(p.m.Data), now.UnixNano())
	if !ok {
		d.rateAt = now.Add(wait)
	}
	return ok
}

// target returns where the next message goes: the deliver subject of a
// bound push consumer with flow control room, or the reply subject of
// the pull request to serve (pullTarget: the first whose requester is
// still listening, by the consumer's priority policy).
func (d *Deliverer) target(pushBound bool, now time.Time) (string, *waiting) {
	if d.cfg.IsPush() {
		if !pushBound || (d.cfg.FlowControl && d.fc.outstanding >= d.fc.window) {
			return "", nil
		}
		return d.cfg.DeliverSubject, nil
	}
	return d.pullTarget(now)
}

// peek finds the next message to deliver; it changes the state only to
// drop a redelivery whose message is gone.
func (d *Deliverer) peek(now time.Time) (pick, bool) {
	for {
		sseq, ok := d.st.NextRedelivery()
		if !ok {
			break
		}
		m, err := d.src.Load(sseq)
		if err == nil {
			return pick{m: m, redel: true}, true
		}
		d.log.Commit(&Drop{Seqs: []uint64{sseq}}) // gone from the stream
	}
	for len(d.lps) > 0 {
		m, err := d.src.Load(d.lps[0])
		if err == nil {
			return pick{m: m, lps: true}, true
		}
		d.lps = d.lps[1:]
	}
	if d.st.AtAckLimit() {
		return pick{}, false
	}
	return d.peekNew(now)
}

// peekNew loads the next new message matching the filters, at or below
// the durable sequence, paced by replay_policy original.
func (d *Deliverer) peekNew(now time.Time) (pick, bool) {
	start := max(d.st.NextSeq(), d.minNext)
	for start <= d.end {
		m, err := d.src.LoadNext(d.filters, start)
		var ce *store.CorruptError
		switch {
		case errors.As(err, &ce):
			d.logf("consumer %s > %s: skipping damaged %s: %v", d.stream, d.name, store.SeqRange(ce.First, ce.Last), err)
			d.minNext = ce.Last + 1
			start = d.minNext
			continue
		case err != nil || m.Seq > d.end:
			return pick{}, false
		}
		if !d.replayDue(m, now) {
			return pick{}, false
		}
		return pick{m: m, start: start}, true
	}
	return pick{}, false
}

// replayDue reports whether m may go now under replay_policy original:
// messages are spaced as they were published.
func (d *Deliverer) replayDue(m *store.StoredMsg, now time.Time) bool {
	if d.cfg.ReplayPolicy != ReplayOriginal || d.replay.lastWall == 0 {
		return true
	}
	due := d.replay.lastWall + (m.Time - d.replay.lastMsgTime)
	return now.UnixNano() >= due
}

// send records and publishes one delivery, or ends the pull request
// whose byte budget the message would exceed (409).
func (d *Deliverer) send(target string, w *waiting, p pick, now time.Time) {
	hdr, data := p.m.Header, p.m.Data
	if d.cfg.HeadersOnly {
		hdr, data = headersOnly(hdr, len(data)), nil
	}
	pending := d.NumPending(d.end)
	if w != nil && w.maxBytes {
		// The size as nats-server counts it, with the reply of a first
		// delivery (a redelivery's count may add a digit).
		est := AckSubject(d.stream, d.name, 1, p.m.Seq, d.st.Delivered().Consumer+1, p.m.Time, pending)
		if len(p.m.Subject)+len(est)+len(hdr)+len(data) > w.bytes {
			if d.pin.fresh {
				d.unpin() // as nats-server releases a pin just claimed
			}
			d.endPull(w, pendingHeader(409, "Message Size Exceeds MaxBytes", w.n, w.bytes))
			return
		}
	}
	dl := d.record(p, now)
	if !p.redel && pending > 0 {
		pending--
	}
	reply := AckSubject(d.stream, d.name, dl.Deliveries, p.m.Seq, dl.ConsumerSeq, p.m.Time, pending)
	// The byte budget counts the message without its Nats-Pin-Id, as
	// nats-server's does.
	size := len(p.m.Subject) + len(reply) + len(hdr) + len(data)
	if w != nil {
		hdr = d.pinHeader(hdr)
	}
	d.out.PublishAs(target, p.m.Subject, reply, hdr, data)
	d.lastDeliver = now
	d.lastHB = now
	if w != nil {
		d.pulled(w, size, now)
	} else {
		d.pushed(size)
	}
}

// record commits a delivery of p.
func (d *Deliverer) record(p pick, now time.Time) Delivery {
	d.replay = replayState{lastMsgTime: p.m.Time, lastWall: now.UnixNano()}
	if d.cfg.ReplayPolicy != ReplayOriginal {
		d.replay.lastWall = 0
	}
	if p.redel {
		d.opRedeliver = Redeliver{Stream: p.m.Seq, Time: now.UnixNano()}
		return d.log.Commit(&d.opRedeliver).Delivery
	}
	if p.lps {
		d.lps = d.lps[1:]
		d.np.valid = false
	} else if d.np.valid && d.np.next == p.start && d.np.n > 0 {
		d.np.n--
		d.np.next = p.m.Seq + 1
	} else {
		d.np.valid = false
	}
	d.opDeliver = Deliver{Stream: p.m.Seq, Time: now.UnixNano()}
	out := d.log.Commit(&d.opDeliver)
	d.acked = append(d.acked, out.Acked...) // ack none: delivered is acknowledged
	return out.Delivery
}

// NumPending is num_pending: the messages matching the filters that are
// not yet delivered, up to end (the durable sequence), plus those left in
// the last_per_subject list (nats-server v2.15.2 ConsumerInfo).
func (d *Deliverer) NumPending(end uint64) uint64 {
	next := max(d.st.NextSeq(), d.minNext)
	rem := d.src.Removals()
	p := &d.np
	switch {
	case next > end:
		*p = pendingCount{valid: true, next: next, end: end, removals: rem}
	case !p.valid || p.removals != rem || p.next != next || end < p.end:
		*p = pendingCount{valid: true, n: d.src.NumPending(d.filters, next, end), next: next, end: end, removals: rem}
	case end > p.end:
		p.n += d.src.NumPending(d.filters, max(p.end+1, next), end)
		p.end = end
	}
	return p.n + uint64(len(d.lps))
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

// AckSubject formats the v1 ack reply subject of a delivery,
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
// (ADR-15), with one allocation (the strings.Builder's, which String
// does not copy).
func AckSubject(stream, consumer string, dc, sseq, cseq uint64, ts int64, pending uint64) string {
	var sb strings.Builder
	sb.Grow(len("$JS.ACK...") + len(stream) + len(consumer) + 5*20 + 4)
	var num [20]byte
	sb.WriteString("$JS.ACK.")
	sb.WriteString(stream)
	sb.WriteByte('.')
	sb.WriteString(consumer)
	for _, n := range [...]uint64{dc, sseq, cseq} {
		sb.WriteByte('.')
		sb.Write(strconv.AppendUint(num[:0], n, 10))
	}
	sb.WriteByte('.')
	sb.Write(strconv.AppendInt(num[:0], ts, 10))
	sb.WriteByte('.')
	sb.Write(strconv.AppendUint(num[:0], pending, 10))
	return sb.String()
}

// NextWake returns when the delivery logic has work next, after now: an
// ack deadline, a pull request's expiry or heartbeat, a push heartbeat,
// the end of a pause, the inactive_threshold check, a look for a push
// subscriber, a replay_policy original delivery, the end of a pin's
// priority_timeout; the zero time when
// none comes within a minute.
func (d *Deliverer) NextWake(now time.Time) time.Time {
	next := now.Add(time.Minute)
	at := func(t time.Time) {
		if !t.IsZero() && t.Before(next) {
			next = t
		}
	}
	if dl, ok := d.st.NextDeadline(); ok {
		at(time.Unix(0, dl))
	}
	for _, w := range d.waiting {
		if w.expires > 0 {
			at(time.Unix(0, w.expires))
		}
		if w.heartbeat > 0 {
			at(time.Unix(0, w.lastHB).Add(w.heartbeat))
		}
	}
	if d.cfg.Heartbeat > 0 {
		at(d.lastHB.Add(d.cfg.Heartbeat))
	}
	if p := d.st.PausedUntil(); p > now.UnixNano() {
		at(time.Unix(0, p))
	}
	at(d.inactiveAt())
	if d.pollInterest {
		// Nothing tells the consumer when a subscriber arrives on its
		// deliver subject: look again soon.
		at(now.Add(interestPoll))
	}
	if !d.rateAt.IsZero() {
		at(d.rateAt)
	}
	at(d.pin.deadline)
	if d.replay.lastWall > 0 {
		at(now.Add(10 * time.Millisecond))
	}
	return next
}

// Inactive reports whether the consumer passed its inactive_threshold at
// now: a pull consumer without pull requests (and past the ack wait of
// its last delivery while acks are pending), a push consumer without
// interest on its deliver subject (nats-server v2.15.2 deleteNotActive).
func (d *Deliverer) Inactive(now time.Time) bool {
	if d.cfg.InactiveThreshold <= 0 {
		return false
	}
	if d.cfg.IsPush() {
		if d.out.HasInterest(d.cfg.DeliverSubject) {
			d.lastActive = now
		}
	} else if len(d.waiting) > 0 {
		d.lastActive = now
	}
	return !now.Before(d.inactiveAt())
}

// inactiveAt is when the consumer passes its inactive_threshold unless
// something happens first. While acks are pending, the client may still
// be working on what it was given: a pull consumer counts from when the
// last delivery's ack wait runs out, and an ack of everything pending
// brings the time back to the threshold after its last pull request, as
// nats-server v2.15.2 deleteNotActive does. Zero when the consumer has no
// threshold.
func (d *Deliverer) inactiveAt() time.Time {
	t := d.cfg.InactiveThreshold
	if t <= 0 {
		return time.Time{}
	}
	from := d.lastActive
	if !d.cfg.IsPush() && d.st.NumAckPending() > 0 {
		if end := d.lastDeliver.Add(d.longestWait()); end.After(from) {
			from = end
		}
	}
	if at := from.Add(t); at.After(d.inactiveFloor) {
		return at
	}
	return d.inactiveFloor
}

// PostponeInactive makes the consumer count as active until at least
// until: a clustered consumer that asked its meta group to remove it
// judges its inactivity again only then (nats-server v2.15.2
// deleteNotActive's retry).
func (d *Deliverer) PostponeInactive(until time.Time) { d.inactiveFloor = until }

// longestWait is the longest ack wait a delivery can get: ack_wait, or
// the largest backoff step.
func (d *Deliverer) longestWait() time.Duration {
	w := d.cfg.AckWait
	for _, b := range d.cfg.BackOff {
		w = max(w, b)
	}
	return w
}

// pushed accounts a push delivery of size bytes against the flow
// control window and asks for a confirmation once half of the window is
// outstanding.
func (d *Deliverer) pushed(size int) {
	if !d.cfg.FlowControl {
		return
	}
	d.fc.outstanding += size
	// With ack policy flow_control the replies are the acks: a consumer
	// that reached max_ack_pending asks at once rather than wait for
	// half the window (nats-server v2.15.2 needFlowControl).
	if d.fc.reply == "" && (d.fc.outstanding >= d.fc.window/2 || d.cfg.AckPolicy == AckFlowControl && d.st.AtAckLimit()) {
		d.requestFlowControl()
	}
}

// requestFlowControl publishes a flow control request to the deliver
// subject, its reply subject $JS.FC.<stream>.<consumer>.<random>
// (nats-server v2.15.2 sendFlowControl).
func (d *Deliverer) requestFlowControl() {
	d.fc.reply = "$JS.FC." + d.stream + "." + d.name + "." + flowID()
	d.fc.atRequest = d.fc.outstanding
	d.out.Publish(d.cfg.DeliverSubject, d.fc.reply, hdrFlowControlReq, nil)
}

// FlowControlReply takes the client's confirmation, on subject subj, of
// the latest flow control request: what was outstanding then is
// confirmed and the window doubles. A reply to an older request is
// ignored.
//
// With ack policy flow_control the reply is also the acknowledgement
// (ADR-60; nats-server v2.15.2 processFlowControl): its header's
// Nats-Last-Stream (above 0) and Nats-Last-Consumer (0 when absent or
// below 0) are returned, as an ack of everything through them, with ok
// set; the caller commits it. A reply to an older request, or one of
// another ack policy, acknowledges nothing.
func (d *Deliverer) FlowControlReply(subj string, hdr []byte) (ack store.SequencePair, ok bool) {
	if subj != d.fc.reply {
		return ack, false
	}
	d.fc.outstanding = max(d.fc.outstanding-d.fc.atRequest, 0)
	d.fc.reply = ""
	d.fc.window = min(d.fc.window*2, fcWindowMax)
	if d.cfg.AckPolicy != AckFlowControl || len(hdr) == 0 {
		return ack, false
	}
	sseq, _ := strconv.ParseInt(stream.HeaderString(hdr, "Nats-Last-Stream"), 10, 64)
	if sseq <= 0 {
		return ack, false
	}
	cseq, _ := strconv.ParseInt(stream.HeaderString(hdr, "Nats-Last-Consumer"), 10, 64)
	return store.SequencePair{Stream: uint64(sseq), Consumer: uint64(max(cseq, 0))}, true
}

// Heartbeats sends a push consumer's idle heartbeat after idle_heartbeat
// without a delivery, naming the outstanding flow control request as
// Nats-Consumer-Stalled.
func (d *Deliverer) Heartbeats(now time.Time) {
	if !d.cfg.IsPush() || d.cfg.Heartbeat <= 0 || now.Sub(d.lastHB) < d.cfg.Heartbeat {
		return
	}
	d.lastHB = now
	dl := d.st.Delivered()
	d.out.Publish(d.cfg.DeliverSubject, "", heartbeatHeader(dl.Consumer, dl.Stream, d.fc.reply), nil)
	// An idle flow_control consumer asks for the acks of what is pending
	// with every heartbeat (nats-server v2.15.2 loopAndGatherMsgs).
	if d.cfg.AckPolicy == AckFlowControl && d.fc.reply == "" && d.st.NumAckPending() > 0 {
		d.requestFlowControl()
	}
}

// NeedAck reports whether the consumer still needs stream sequence sseq
// on subject subj (interest retention): it matches the filters and is
// not yet delivered, or is delivered and awaiting an ack, or ran out of
// deliveries unacknowledged (nats-server v2.15.2 needAck keeps those
// too, so that they can be read after the MAX_DELIVERIES advisory).
func (d *Deliverer) NeedAck(sseq uint64, subj string) bool {
	if len(d.filters) > 0 && !store.MatchFilters(subj, d.filters) {
		return false
	}
	if sseq > d.st.Delivered().Stream {
		return true
	}
	if d.cfg.AckPolicy == AckNone {
		return false
	}
	return d.st.IsPending(sseq) || d.st.IsExhausted(sseq)
}

// NeedsAllAbove reports whether the consumer has no filter, and so
// needs (NeedAck) every message above floor, its delivered stream
// sequence.
func (d *Deliverer) NeedsAllAbove() (floor uint64, all bool) {
	return d.st.Delivered().Stream, len(d.filters) == 0
}

// Matches reports whether the consumer's filters match subj.
func (d *Deliverer) Matches(subj string) bool {
	return len(d.filters) == 0 || store.MatchFilters(subj, d.filters)
}

// Filters returns the consumer's filters (nil: all); the caller must not
// change them.
func (d *Deliverer) Filters() []string { return d.filters }

// lastPerSubject returns, in stream order, the last sequence of every
// subject matching the filters.
func (d *Deliverer) lastPerSubject() []uint64 {
	filters := d.filters
	if len(filters) == 0 {
		filters = []string{">"}
	}
	seen := map[string]bool{}
	var seqs []uint64
	for _, f := range filters {
		for subj, ss := range d.src.SubjectsState(f) {
			if !seen[subj] {
				seen[subj] = true
				seqs = append(seqs, ss.Last)
			}
		}
	}
	slices.Sort(seqs)
	return seqs
}
