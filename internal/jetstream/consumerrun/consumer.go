package consumerrun

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// saveInterval bounds how often a persisted consumer writes its state: a
// lost ack or delivery only causes a redelivery (at least once), so the
// state is written at most this often rather than on every ack. The
// writes happen on a saver goroutine; the loop only takes a snapshot, and
// a snapshot that takes long (many pending acks) is taken less often: the
// next waits saveFactor times the last one's duration, so snapshots never
// take more than about 1/saveFactor of the consumer's time.
const (
	saveInterval = 100 * time.Millisecond
	saveFactor   = 20
)

// cevent is an event for a consumer's loop, pushed by its subscriptions'
// handlers (which run on clients' read loops and must not block).
type cevent struct {
	ack       *ackMsg
	pull      *pullEvent
	fcSub     string   // a flow control reply arrived on this subject
	fcHdr     []byte   // with this header (a copy; flow_control acks)
	moveReady uint64   // a stored snapshot holds this dead-letter mark
	moveAck   *moveAck // the PubAck of a dead-letter copy
	reset     *resetEvent
	lead      *bool // a replicated consumer's leadership changed (SetLeading)
	// fwd is the message an ack, pull request or reset came in, kept by
	// a replicated consumer to hand it to its next leader when it
	// arrives here after the leadership moved (replicated.go, forward).
	fwd *rawMsg
}

// rawMsg is a message as a consumer's subscription received it.
type rawMsg struct {
	subject, reply string
	hdr, data      []byte
}

type pullEvent struct {
	reply string
	body  []byte
}

// Env is what a consumer's runtime takes from the engine that runs it.
type Env struct {
	Transport streamrun.Transport
	Now       func() time.Time                 // the clock for deliveries, acks and timers
	Logf      func(format string, args ...any) // problems
	FS        vfs.FS                           // a persisted consumer's files
	APILevel  int                              // the JetStream API level (pull requests' Nats-Required-Api-Level, info)
	Version   string                           // the nats-server version advertised (info)
	Domain    string                           // the JetStream domain named in advisories; "" for none
	Account   string                           // the account named in priority group advisories ("$G" for the global one)
	// MaxPayload is the server's max_payload, the rate_limit_bps bucket
	// of a consumer whose stream has no max_msg_size (0: 1 MiB).
	MaxPayload int64
	NewLog     streamrun.NewConsumerLogFunc // nil: streamrun.NewLocalConsumerLog
	// DeadLetterAcks routes the PubAcks of dead-letter copies; CaptureOf
	// finds the stream that captures a subject (nil: none), taking no
	// lock; Ready reports whether every stream was restored (until then
	// no move can tell whether a stream captures its subject).
	DeadLetterAcks *DeadLetterAcks
	CaptureOf      func(subj string) *streamrun.Stream
	Ready          func() bool
	// Expire is called, apart from the consumer's loop, which has
	// returned, when the consumer passed its inactive_threshold: the
	// engine deletes it.
	Expire func(c *Consumer)
	// RemoveInactive, when set (a clustered JetStream), replaces Expire:
	// the loop tells it that the consumer, which it delivers for (it
	// has a local log, or leads its replicated one), passed its
	// inactive_threshold, and runs on; while the consumer stays inactive
	// it tells it again InactiveRetry later, then twice as late each
	// time up to InactiveRetryMax (nats-server v2.15.2 deleteNotActive).
	// created is the consumer's creation time. It must not block.
	RemoveInactive func(stream, consumer string, created time.Time)
}

// How long a consumer that asked for its removal (Env.RemoveInactive)
// waits before it asks again, at first and at most: nats-server v2.15.2's
// consumerNotActiveStartInterval and consumerNotActiveMaxInterval.
const (
	InactiveRetry    = 30 * time.Second
	InactiveRetryMax = 5 * time.Minute
)

// Consumer is the runtime of one consumer: its subscriptions (acks, pull
// requests, flow control replies) queue events, and its loop goroutine
// hands them, and the time, to the consumer's delivery logic
// (consumer.Deliverer), which decides, loads from the stream's store and
// sends; the loop also saves the state, journals confirmed acks and runs
// dead-letter moves. mu guards the state so that API calls (info) can
// read it. It implements streamrun.Consumer for its stream.
type Consumer struct {
	env     Env
	sr      *streamrun.Stream
	name    string
	created time.Time
	dir     string                // "" when not persisted
	cstore  store.ConsumerStore   // nil when not persisted
	saver   *saver                // writes cstore; nil when not persisted
	jr      store.ConsumerJournal // cstore's ack journal; nil when not persisted

	// durDelivered is the delivered stream sequence of the last stored
	// snapshot: a confirmed ack at or below it needs only the journal.
	// Written by the saver, read by the loop.
	durDelivered atomic.Uint64

	// metaMu serializes writes of meta.json (Update, Pause, and an
	// ephemeral's first write in persistLater); taken before mu.
	metaMu sync.Mutex
	// persisting counts persistLater while it runs (a new ephemeral of a
	// file stream being written): Stop waits for it. persistOnStart
	// tells Start to run it.
	persisting     sync.WaitGroup
	persistOnStart bool

	evMu   sync.Mutex
	events []cevent
	wake   chan struct{} // capacity 1
	quit   chan struct{}
	done   sync.WaitGroup
	subs   []streamrun.Subscription

	mu sync.Mutex
	// pulls, on every replica of a replicated consumer, the reply
	// subjects of waiting pull requests its log recorded;
	// pullsProposed, on its leader, those it recorded or found recorded
	// (pulls.go).
	pulls         pullSet
	pullsProposed pullSet
	cfg           consumer.Config
	// d is the delivery logic; st its delivery state, changed only
	// through Commit (the consumer's log); cout the outcome of the last
	// operation applied.
	d          *consumer.Deliverer
	st         *consumer.State
	log        streamrun.Log[consumer.Op]
	cout       consumer.Outcome
	opAck      consumer.Ack // reused by ackSeq
	lastAck    time.Time
	dirty      bool
	lastSave   time.Time
	saveGap    time.Duration // the wait before the next write: saveInterval or more
	stopped    bool
	acked      []uint64           // acknowledged this round, for retention
	ackReplies []string           // double-ack replies of this round, sent after retention
	jops       []store.ConsumerOp // confirmed acks of this round, journaled after retention
	jwait      []confirm          // their confirmations
	snapWait   []confirm          // confirmations that wait for the next stored snapshot
	replayed   []uint64           // acks replayed from the journal at restore, for retention
	saveNow    bool               // take a snapshot at the end of this round (a move completed)
	// resetRetention: a reset this round moved the delivery state, so an
	// interest stream drops what nobody needs any more (loop, after the
	// round).
	resetRetention bool
	sfreqOf        string            // the sample_freq sfreq was parsed from (metric.go)
	sfreq          int32             // the ack sampling frequency, percent
	drawFn         func(int32) int32 // tests: the sampling's draws; nil = rand.Int32N
	dlq            string            // the dead-letter subject ("" for none; refreshDeadLetter)
	moves          map[uint64]*move  // dead-letter moves by stream sequence (deadletter.go)
	moveErr        string            // the last refused copy logged, and when (logMoveErr)
	moveErrAt      time.Time

	// A replicated consumer's (replicated.go): repl is set when its log
	// is a ReplicatedLog; leading while it delivers; cst is the
	// committed state while leading (st then delivers ahead of it);
	// ccout the outcome of the last committed operation applied;
	// capplied the log index last applied; inited once a Reset (the
	// starting position) committed; ckey the key of the last proposal;
	// confirms the double acks waiting for their operation to commit,
	// readyReplies those released; cacked what committed operations
	// acknowledged (retention); stepDown: a proposal was refused.
	repl         bool
	leading      bool
	cst          *consumer.State
	ccout        consumer.Outcome
	capplied     uint64
	inited       bool
	ckey         uint64
	kapplied     uint64 // the key of the last of its own proposals applied while leading
	confirms     []keyedReply
	readyReplies []string
	cacked       []uint64
	stepDown     bool
	unflushed    bool // operations wait in the log's batch (flushReplicated)
	// win bounds the deliveries sent whose operations have not applied
	// (window.go); leading only.
	win window
	// holding: the last round held (replicated.go, holdRound); held are
	// the events kept meanwhile; transferWait a transfer HandOver left
	// to the loop (askTransfer), which takes acks without delivering
	// until drainUntil at the latest.
	holding      bool
	held         []cevent
	transferWait func() error
	drainUntil   time.Time
	// orphansUntil: this replica stopped leading and keeps its
	// subscriptions and the pull requests that waited on it until its
	// successor is known to serve, or by then at the latest (endOrphans;
	// zero: none); late are the acks, pull requests and resets it took
	// meanwhile (and the acks it held during the transfer), handed to the
	// successor then (forward).
	orphansUntil time.Time
	late         []cevent

	// retiring: the consumer retired (retire.go, Retire) and keeps its
	// subscriptions and pull requests for a successor until retireTimer
	// ends them (under mu). pred is the retired runtime this one takes
	// over once it subscribes (Succeed; its loop, takeOver). successor
	// is the runtime that took this retired one over: messages reaching
	// it go there (under evMu).
	retiring    bool
	retireTimer *time.Timer
	pred        atomic.Pointer[Consumer]
	successor   *Consumer

	// removeRetry is how long after its last request for removal
	// (Env.RemoveInactive) an inactive consumer asks again; 0 before the
	// first (loop only).
	removeRetry time.Duration
}

// confirm is a confirmation to send once the ack it answers is durable:
// an empty reply (double ack), or for +NXT the pull request it carries.
type confirm struct {
	reply   string
	next    bool
	body    []byte
	move    uint64 // not a reply: the dead-letter mark of this stream sequence is stored
	payload []byte // the reply's payload (a reset's response); nil: an empty reply
	hdr     []byte // the reply's header block (a reset's Nats-Stream-Identity); nil: none
}

func (c *Consumer) now() time.Time { return c.env.Now() }

// Commit proposes op to the consumer's log and returns its outcome: the
// local log applies it at once (Apply). The outcome is valid until the
// next Commit. The caller holds c.mu (consumer.Committer).
func (c *Consumer) Commit(op consumer.Op) *consumer.Outcome {
	if c.repl {
		return c.commitReplicated(op)
	}
	if err := c.log.Propose(op, 0); err != nil {
		c.env.Logf("consumer %s > %s: operation of kind %d not proposed: %v", c.sr.Name(), c.name, op.Kind(), err)
		c.cout = consumer.Outcome{}
	}
	if c.cout.Dirty {
		c.dirty = true
	}
	return &c.cout
}

// Apply applies a committed operation of the consumer's log to its
// delivery state (Applier): consumer.State.ApplyOp alone decides. For a
// local log it runs with c.mu held, on the goroutine that proposed; a
// replicated log calls it on its own goroutine, without the lock
// (applyCommitted).
func (c *Consumer) Apply(index uint64, op consumer.Op, key uint64) {
	if c.repl {
		c.applyCommitted(index, op, key)
		return
	}
	c.st.ApplyOp(op, &c.cout)
}

// pausedUntil returns when the consumer's pause ends, the zero time when
// it is not paused. The caller holds c.mu.
func (c *Consumer) pausedUntil() time.Time {
	if p := c.st.PausedUntil(); p != 0 {
		return time.Unix(0, p)
	}
	return time.Time{}
}

// push queues an event and wakes the loop.
func (c *Consumer) push(ev cevent) {
	c.evMu.Lock()
	if s := c.successor; s != nil && ev.forwardable() {
		c.evMu.Unlock()
		s.push(ev) // retired and taken over (retire.go)
		return
	}
	c.events = append(c.events, ev)
	c.evMu.Unlock()
	c.Signal()
}

// Signal wakes the loop (new messages, acks, config changes).
func (c *Consumer) Signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Consumer) takeEvents(dst []cevent) []cevent {
	c.evMu.Lock()
	dst = append(dst[:0], c.events...)
	clear(c.events)
	c.events = c.events[:0]
	c.evMu.Unlock()
	return dst
}

// loop is the consumer's goroutine.
func (c *Consumer) loop() {
	defer c.done.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var evs []cevent
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		case <-timer.C:
		}
		c.takeOver() // a retired runtime of the consumer, once subscribed (retire.go)
		evs = c.takeEvents(evs)
		acked, replies, jb, idle := c.round(evs)
		c.maybeStepDown()
		if len(acked) > 0 {
			c.sr.OnAcked(c, acked, len(replies) > 0 || len(jb.waits) > 0 || jb.saveAfter)
		}
		if jb.saveAfter {
			c.saveAfterRetention()
		}
		for _, reply := range replies {
			c.env.Transport.Publish(reply, "", nil, nil) // the double ack
		}
		c.journal(jb)
		if jb.dropUnneeded {
			c.sr.DropUnneeded() // a reset skipped messages an interest stream may hold for it alone
		}
		if idle {
			if c.env.RemoveInactive == nil {
				c.env.Expire(c)
				return
			}
			c.askRemove()
		}
		timer.Reset(c.nextWake())
	}
}

// round handles the queued events, redelivery timers and pull request
// expiry, then delivers what it can. It returns the stream sequences
// acknowledged (for retention), the double-ack replies to send once
// retention has removed them, the confirmed acks to journal after
// retention, and whether the consumer has been inactive past its
// threshold.
func (c *Consumer) round(evs []cevent) (acked []uint64, replies []string, jb journalBatch, idle bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		if c.retiring {
			c.requeue(evs) // taken as it retired: for its successor (retire.go)
		}
		return nil, nil, jb, false
	}
	now := c.now()
	if c.repl {
		for i := range evs {
			if evs[i].lead != nil {
				c.lead(*evs[i].lead)
			}
		}
		if !c.leading {
			if !c.orphansUntil.IsZero() {
				c.keepLate(evs)
			}
			c.endOrphans(false)
			c.keptConfirms()
			clear(evs)
			acked, replies = c.takeCommitted()
			return acked, replies, jb, false
		}
		var hold bool
		if evs, hold = c.holdRound(evs, now); hold {
			acked, replies = c.takeCommitted()
			return acked, replies, jb, false
		}
	}
	c.refreshDeadLetter()
	acks := 0
	for i := range evs {
		if evs[i].ack != nil {
			acks++
		}
		c.handle(&evs[i], now)
		evs[i] = cevent{}
	}
	c.endPause(now)
	c.expireAcks(now)
	c.d.ExpirePulls(now)
	// A consumer handing its leadership over delivers nothing more
	// (replicated.go, HandOver).
	if c.transferWait == nil {
		c.deliver(now)
	}
	c.acked = append(c.acked, c.d.TakeAcked()...)
	c.advisePins(c.d.TakePinEvents())
	c.d.Heartbeats(now)
	c.sweepMoves()
	// Confirmations waiting for a snapshot go out only after retention
	// has removed what this round acknowledged (saveAfterRetention); a
	// completed dead-letter move (saveNow) is saved at once otherwise.
	saveAfter := len(c.acked) > 0 && len(c.snapWait) > 0
	if !saveAfter {
		c.maybeSave(now, len(c.snapWait) > 0 || c.saveNow)
	}
	acked, replies = c.acked, c.ackReplies
	c.acked, c.ackReplies = nil, nil
	jb = journalBatch{ops: c.jops, waits: c.jwait, saveAfter: saveAfter, dropUnneeded: c.resetRetention}
	c.jops, c.jwait, c.resetRetention = nil, nil, false
	idle = c.d.Inactive(now)
	if c.repl {
		// Retention and confirmations follow what committed, not what
		// this leader decided (replicated.go); the leader alone judges
		// inactivity, and the meta group removes the consumer
		// (Env.RemoveInactive).
		c.flushReplicated()
		c.askTransfer(now, acks)
		c.holdReplies(replies)
		acked, replies = c.takeCommitted()
	}
	return acked, replies, jb, idle
}

// deliver has the Deliverer deliver what it can (c.mu held): a
// consumer with a local log up to the Deliverer's bound of a round, the
// leader of a replicated one within the room its window leaves
// (window.go). One stopped by the Deliverer's bound goes on in the next
// round, after the queued acks; one stopped by its window goes on once
// entries apply (applyCommittedLocked wakes it).
func (c *Consumer) deliver(now time.Time) {
	if !c.repl {
		if c.d.Deliver(now, c.sr.DurableSeq()) {
			c.Signal()
		}
		return
	}
	if !c.d.DeliverUpTo(now, c.sr.DurableSeq(), c.win.room()) {
		return
	}
	if c.win.room() == 0 {
		c.win.stop()
		return
	}
	c.Signal()
}

// askRemove tells Env.RemoveInactive that the consumer is inactive, and
// puts off its next inactivity by the retry interval (InactiveRetry,
// doubling up to InactiveRetryMax), so that the loop asks again only
// then if the consumer is still there and still inactive. The time is
// the consumer's clock (Env.Now). Called by the loop, without c.mu.
func (c *Consumer) askRemove() {
	c.mu.Lock()
	if c.removeRetry == 0 {
		c.removeRetry = InactiveRetry
	} else {
		c.removeRetry = min(2*c.removeRetry, InactiveRetryMax)
	}
	c.d.PostponeInactive(c.now().Add(c.removeRetry))
	stream, name, created := c.sr.Name(), c.name, c.created
	c.mu.Unlock()
	c.env.RemoveInactive(stream, name, created)
}

func (c *Consumer) handle(ev *cevent, now time.Time) {
	switch {
	case ev.ack != nil:
		c.processAck(ev.ack, now)
	case ev.pull != nil:
		c.addPull(ev.pull.reply, ev.pull.body, now)
	case ev.fcSub != "":
		if ack, ok := c.d.FlowControlReply(ev.fcSub, ev.fcHdr); ok && ack.Stream <= c.st.Delivered().Stream {
			c.lastAck = now
			c.ackSeq(ack.Stream, ack.Consumer)
		}
	case ev.moveReady != 0:
		c.moveReady(ev.moveReady, now)
	case ev.moveAck != nil:
		c.onMoveAck(ev.moveAck, now)
	case ev.reset != nil:
		c.reset(ev.reset, now)
	}
}

// endPause notes a pause that has run out: the consumer delivers again
// and the pause advisory says so (paused false), as nats-server sends it.
func (c *Consumer) endPause(now time.Time) {
	until := c.pausedUntil()
	if until.IsZero() || until.After(now) {
		return
	}
	c.Commit(&consumer.Pause{})
	c.AdvisePause(false, until.UTC())
}

// expireAcks moves deliveries past their ack wait to the redelivery queue
// and reports those that reached max_deliver; with a dead-letter subject
// it starts their moves, and retries the moves whose time came
// (deadletter.go).
func (c *Consumer) expireAcks(now time.Time) {
	if d, ok := c.st.NextDeadline(); !ok || d > now.UnixNano() {
		return // nothing due: no operation
	}
	for _, ex := range slices.Clone(c.Commit(&consumer.ExpireAcks{Time: now.UnixNano()}).Exhausted) {
		c.dirty = true
		if ex.Retry {
			c.retryMove(ex.Stream, now)
			continue
		}
		c.adviseMaxDeliveries(ex)
		if ex.Kept {
			c.beginMove(ex.Stream, now)
		}
	}
}

// nextWake returns how long the loop may sleep: until the delivery
// logic's next work (consumer.Deliverer.NextWake) or the next state save.
func (c *Consumer) nextWake() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	next := c.d.NextWake(now)
	if c.unflushed || c.holding || c.transferWait != nil || !c.orphansUntil.IsZero() {
		// A batch refused for back-pressure, a hold or a hand-over
		// (replicated.go): look again soon.
		next = now.Add(5 * time.Millisecond)
	}
	if c.repl && !c.leading && len(c.confirms) > 0 {
		// Confirmations kept from a lost leadership (replicated.go,
		// keptConfirms).
		if t := now.Add(keptConfirmLook); t.Before(next) {
			next = t
		}
	}
	if c.dirty && c.saver != nil {
		if t := c.lastSave.Add(c.saveGap); t.Before(next) {
			next = t
		}
	}
	return max(next.Sub(now), time.Millisecond)
}

// saveAfterRetention hands the snapshot whose stored copy confirms this
// round's double acks to the saver, once retention has removed what they
// acknowledged: a confirmed ack means the message is gone, as with
// nats-server.
func (c *Consumer) saveAfterRetention() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.maybeSave(c.now(), true)
	}
}

// maybeSave hands a snapshot of a persisted consumer's state to its saver
// when it changed and the save gap has passed (or always when force is
// set). Taking the snapshot is the loop's only cost; the gap grows with
// it.
func (c *Consumer) maybeSave(now time.Time, force bool) {
	if c.saver == nil || !c.dirty || (!force && now.Sub(c.lastSave) < c.saveGap) {
		return
	}
	var gen uint64
	if c.jr != nil {
		gen = c.jr.JournalGen() // before the snapshot: it holds every op journaled so far
	}
	start := time.Now()
	snap := c.st.Snapshot()
	c.saveGap = max(saveInterval, saveFactor*time.Since(start))
	c.saver.put(snap, gen, c.snapWait)
	c.snapWait = nil
	c.dirty, c.saveNow = false, false
	c.lastSave = now
}
