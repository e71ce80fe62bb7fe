package jetstream

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// Ingest bounds: a stream queues at most this many publishes before it
// answers 429 / 10167 "too many requests" (nats-server's ingest queue
// limit is of the same order).
const maxIngest = 64 * 1024

// expiryInterval is how often a stream applies max_age and forgets
// expired Nats-Msg-Ids; a per-message TTL due sooner brings the next pass
// forward (runner.expire).
const expiryInterval = time.Second

// ack is a PubAck waiting to be sent once waitSeq is durable (0 = send
// at once).
type ack struct {
	reply   string
	payload []byte
	waitSeq uint64
	rp      *stream.RePublished // published, before the PubAck, once durable
}

// runner owns one stream: its state machine (through the apply
// goroutine), its subscriptions and its ack goroutine.
type runner struct {
	js      *JetStream
	name    string
	created time.Time
	dir     string // the stream directory (metadata and messages); "" for memory streams

	st     *stream.Stream // owned by the apply goroutine after start
	store  store.Store
	in     *queue[item]
	acks   *queue[ack]
	direct *queue[directJob]

	// log orders the stream's operations (log.go); the apply goroutine
	// proposes to it and applies what it commits. waiting holds the
	// waiters of proposed operations by key (propose.go); out, pub,
	// fastPub, pubReplies and dropped are the apply goroutine's scratch.
	log        Log[stream.Op]
	waiting    waiters
	out        stream.Outcome
	pub        stream.Publish
	fastPub    stream.Publish
	pubReplies []string
	dropped    []waiter

	mu    sync.Mutex // guards cfg, subs, timer, expireAt, stopped
	cfg   stream.Config
	subs  []Subscription
	timer *time.Timer
	// expireAt is when the timer fires next (unix ns).
	expireAt int64
	// expireErr and expireErrLogged are the last expiry failure logged
	// and when (owned by the apply goroutine; logExpireErr).
	expireErr       string
	expireErrLogged time.Time
	stopped         bool
	done            sync.WaitGroup

	storage   stream.StorageType // fixed at creation
	usedBytes int64              // stored bytes last added to js.used; apply goroutine
	// drops are the messages of an interest stream stored without
	// interest, to remove before the next op and at the end of the
	// batch (dropIfUninterested); apply goroutine.
	drops []uint64
	// seenRemovals is the store's Removals when the apply goroutine last
	// looked for messages a limit removed (dropLimitRemoved).
	seenRemovals uint64
	// rm holds the acknowledged or copied messages queued for removal
	// (removeMsgs), for the apply goroutine to remove together.
	rm struct {
		mu   sync.Mutex
		seqs []uint64
	}

	cmu       sync.Mutex       // guards consumers
	consumers map[string]*cons // by name
	// consumersDone is set under cmu when the stream stops: no consumer
	// is created after it, so none writes into a directory being removed
	// (or into the directory of a new stream of the same name).
	consumersDone bool
	deleting      map[string]bool // consumers being deleted (files not yet removed)
	// unrestored names the consumers whose directories a start could not
	// restore (a damaged meta.json, an unreadable state): their files stay
	// and, while any is left, interest retention removes nothing, since
	// nobody knows what they still need (held). Under cmu.
	unrestored map[string]bool
	held       atomic.Bool   // len(unrestored) > 0
	durable    atomic.Uint64 // highest sequence durable in the store

	srcs sourcing // the mirror's or sources' sourcers, and who reads this stream (source.go)

	// atomic and fast are the stream's open batches (batch.go); apply
	// goroutine.
	atomic *stream.AtomicBatches
	fast   *stream.FastBatches

	dlq atomic.Pointer[string] // the stream's own dead-letter subject (deadletter.go)
}

func newRunner(js *JetStream, cfg stream.Config, created time.Time, dir string, st store.Store) *runner {
	r := &runner{
		js: js, name: cfg.Name, created: created, dir: dir,
		st: stream.New(cfg, st), store: st, cfg: cfg,
		in: newQueue[item](maxIngest), acks: newQueue[ack](0), direct: newQueue[directJob](maxDirectQueue),
		consumers: map[string]*cons{}, deleting: map[string]bool{}, unrestored: map[string]bool{}, storage: cfg.Storage,
		atomic: stream.NewAtomicBatches(js.batchLimits(), &js.batches),
		fast:   stream.NewFastBatches(cfg.Name, js.batchLimits(), &js.batches),
	}
	newLog := js.cfg.NewLog
	if newLog == nil {
		newLog = defaultNewLog
	}
	r.log = newLog(cfg.Name, r)
	r.setDeadLetter(&cfg)
	return r
}

// start rebuilds the dedupe window, runs an expiry pass, subscribes to
// the stream's subjects and starts the goroutines; the caller starts the
// sourcers (startSources, or startRestoredSources for a server's
// restored streams).
func (r *runner) start() error {
	if pb, ok, err := r.st.DropPartialBatch(); err != nil {
		return err
	} else if ok {
		r.js.logf("jetstream: stream %s: removed the atomic batch %q (sequences %d to %d) that a crash cut short before its commit was stored; it was never acknowledged", r.name, pb.ID, pb.First, pb.Last)
	}
	if err := r.st.Rebuild(); err != nil {
		return err
	}
	r.st.ExpireDedupe(r.js.now().UnixNano())
	r.durable.Store(r.store.State(false).LastSeq) // recovered means durable
	r.syncUsage()
	r.restoreConsumers()
	// What expired while the server was down goes before anything is
	// served (nats-server expireMsgsOnRecover); the pass arms the timer.
	r.mu.Lock()
	r.timer = time.AfterFunc(expiryInterval, r.expireTick)
	r.expireAt = r.js.now().Add(expiryInterval).UnixNano()
	r.mu.Unlock()
	r.expirePass(r.js.now().UnixNano())
	if err := r.subscribe(r.cfg); err != nil {
		r.mu.Lock()
		r.timer.Stop()
		r.mu.Unlock()
		r.stopConsumers(nil)
		return err
	}
	r.done.Add(3)
	go r.applyLoop()
	go r.ackLoop()
	go r.directLoop()
	return nil
}

// subscribe replaces the stream's subscriptions: its subjects, and the
// direct-get subjects when allow_direct is set.
func (r *runner) subscribe(cfg stream.Config) error {
	subs := make([]Subscription, 0, len(cfg.Subjects)+2)
	fail := func(err error) error {
		for _, s := range subs {
			s.Unsubscribe()
		}
		return err
	}
	for _, subj := range cfg.Subjects {
		sub, err := r.js.tr.Subscribe(subj, "", r.handlePublish)
		if err != nil {
			return fail(err)
		}
		subs = append(subs, sub)
	}
	if cfg.AllowDirect {
		ds, err := r.subscribeDirect()
		if err != nil {
			return fail(err)
		}
		subs = append(subs, ds...)
	}
	r.mu.Lock()
	old := r.subs
	r.subs = subs
	r.mu.Unlock()
	for _, s := range old {
		s.Unsubscribe()
	}
	return nil
}

// handlePublish runs on the publisher's goroutine: it copies the message
// into an entry stamped with the current time and queues it, or answers
// 429 / 10167 at once when the queue is full.
func (r *runner) handlePublish(subject, reply string, hdr, data []byte) {
	buf := make([]byte, len(hdr)+len(data))
	copy(buf, hdr)
	copy(buf[len(hdr):], data)
	e := stream.Entry{Subject: subject, Data: buf[len(hdr):], Time: r.js.now().UnixNano()}
	if len(hdr) > 0 {
		e.Header = buf[:len(hdr):len(hdr)]
	}
	if !r.in.push(item{entry: e, reply: reply}) && reply != "" {
		res := stream.Result{Err: jserr.New(jserr.StreamTooManyRequests)}
		r.js.tr.Publish(reply, "", nil, stream.AppendPubAck(nil, r.name, res, ""))
	}
}

// appendBatcher is a store that writes runs of appends together when
// told where a run begins and ends (filestore.Store.BeginBatch): the
// apply loop brackets each batch it takes, so that the batch is written
// and fsynced once rather than from its first message on.
type appendBatcher interface {
	BeginBatch()
	EndBatch()
}

// applyLoop applies what the ingest queue holds, a batch at a time, on
// the stream's apply goroutine. Nothing on it calls WaitDurable (the ack
// goroutine does), as appendBatcher requires; a store call that waits for
// its own change, such as flushDrops' DeleteMany, wakes the writer
// itself.
func (r *runner) applyLoop() {
	defer r.done.Done()
	defer r.acks.close()
	batcher, _ := r.store.(appendBatcher)
	var batch []item
	for {
		var ok bool
		if batch, ok = r.in.take(batch); !ok {
			return
		}
		if batcher != nil {
			batcher.BeginBatch()
		}
		for i := range batch {
			r.take(&batch[i])
			batch[i] = item{}
		}
		r.flushPublishes()
		r.dropLimitRemoved()
		r.flushDrops()
		r.noteRemovals()
		if batcher != nil {
			batcher.EndBatch()
		}
		r.syncUsage()
	}
}

func (r *runner) noAck() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.NoAck
}

// ackLoop sends PubAcks in order, each only after the store made its
// message durable: one WaitDurable covers every ack queued meanwhile
// (group commit). If the store cannot make them durable, every waiting
// publish gets an error PubAck instead.
func (r *runner) ackLoop() {
	defer r.done.Done()
	var batch []ack
	for {
		var ok bool
		if batch, ok = r.acks.take(batch); !ok {
			return
		}
		err := r.waitDurable(batch)
		if err == nil {
			r.setDurable(topSeq(batch))
		}
		for _, a := range batch {
			if err == nil {
				r.rePublish(a.rp)
			}
			if a.reply == "" {
				continue
			}
			payload := a.payload
			if err != nil && a.waitSeq > 0 {
				payload = stream.AppendPubAck(nil, r.name, stream.Result{Err: storeFailed(err)}, "")
			}
			r.js.tr.Publish(a.reply, "", nil, payload)
		}
	}
}

func (r *runner) waitDurable(batch []ack) error {
	if top := topSeq(batch); top > 0 {
		return r.store.WaitDurable(top)
	}
	return nil
}

// topSeq returns the highest sequence a batch of acks waits for.
func topSeq(batch []ack) uint64 {
	var top uint64
	for _, a := range batch {
		top = max(top, a.waitSeq)
	}
	return top
}

// storeFailed is the PubAck error for a message the store could not make
// durable (stream.StoreError: 10023 for a full disk, else 10077 without
// server paths).
func storeFailed(err error) *jserr.Error {
	return stream.StoreError(err, jserr.StreamStoreFailed)
}

// expireTick asks the apply goroutine for an expiry pass (max_age,
// per-message TTLs, the duplicate window) at the timer's time; the pass
// re-arms the timer (rearmExpiry).
func (r *runner) expireTick() {
	r.in.pushOp(item{req: &request{kind: reqExpire, time: r.js.now().UnixNano()}})
}

// minExpiryWait is the wait before retrying a subject delete marker that
// failed (nats-server's expiry timer has this floor for every pass);
// minTTLWait is the shortest wait for the next TTL deadline, so that
// TTLs are honoured within it rather than up to 250 ms late, while
// deadlines a few microseconds apart still share a pass.
// minDedupeWait is the shortest wait for the oldest Nats-Msg-Id to leave
// the duplicate window (nats-server v2.15.2 purgeMsgIds: minFire).
const (
	minExpiryWait = 250 * time.Millisecond
	minTTLWait    = 10 * time.Millisecond
	minDedupeWait = 50 * time.Millisecond
)

// untilDeadline returns the wait from now until deadline (unix ns), no
// shorter than floor.
func untilDeadline(deadline, now int64, floor time.Duration) time.Duration {
	return max(time.Duration(deadline-now), floor)
}

// rearmExpiry re-arms the expiry timer after this node's expiry pass at
// pass (unix ns), which found the stream's first sequence at first and
// the next TTL deadline next (stream.Outcome.Next), for the next
// deadline when that comes before expiryInterval: a message TTL, the
// oldest Nats-Msg-Id leaving the duplicate window, or the first message
// that max_age removes reaching it (Stream.MaxAgeDeadline), so that
// each is honoured within its floor (minTTLWait, minDedupeWait,
// minExpiryWait) rather than up to a second late, without polling more
// often. Apply goroutine.
func (r *runner) rearmExpiry(pass int64, first uint64, next int64) {
	later := r.js.now().UnixNano()
	wait := expiryWait(pass, later, next)
	if d, ok := r.st.DedupeDeadline(); ok {
		wait = min(wait, untilDeadline(d, later, minDedupeWait))
	}
	if d, ok := r.st.MaxAgeDeadline(); ok && d > pass {
		wait = min(wait, untilDeadline(d, later, maxAgeFloor(first, r.store.State(false).FirstSeq)))
	}
	r.mu.Lock()
	if !r.stopped {
		r.timer.Reset(wait)
		r.expireAt = r.js.now().Add(wait).UnixNano()
	}
	r.mu.Unlock()
}

// maxAgeFloor returns the shortest wait for the next max_age deadline
// after a pass that moved the stream's first sequence from first to now:
// minExpiryWait when the pass removed messages from the front, so that a
// stream under steady load with max_age is not swept more often than
// nats-server sweeps it (v2.15.2 resetAgeChk), and minTTLWait when it
// removed none, so that the first message after an idle spell, whose
// deadline the regular pass can precede by any fraction of a second, goes
// at its max_age rather than up to minExpiryWait late.
func maxAgeFloor(first, now uint64) time.Duration {
	if now != first {
		return minExpiryWait
	}
	return minTTLWait
}

// expiryWait returns how long to wait for the next expiry pass, given
// the time of the pass that ran (pass), the time now and the next TTL
// deadline the pass reported (unix ns; 0 for none, at or before pass
// while a marker waits): expiryInterval at most, the deadline but no
// sooner than minTTLWait, or minExpiryWait to retry a marker.
func expiryWait(pass, now, next int64) time.Duration {
	switch {
	case next == 0:
		return expiryInterval
	case next <= pass:
		return minExpiryWait
	}
	return min(expiryInterval, max(time.Duration(next-now), minTTLWait))
}

// expireBy brings the next expiry pass forward to deadline (unix
// nanoseconds) when the timer is set later, no sooner than minTTLWait
// from now (nats-server v2.15.2 resetAgeChk on a store with a TTL). With
// TTLs of a second or more and a pass every second, only a copied
// message (a mirror keeps the origin's time) can be due that soon.
func (r *runner) expireBy(deadline int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.timer == nil || deadline >= r.expireAt {
		return
	}
	now := r.js.now()
	wait := max(time.Duration(deadline-now.UnixNano()), minTTLWait)
	if at := now.Add(wait).UnixNano(); at < r.expireAt {
		r.timer.Reset(wait)
		r.expireAt = at
	}
}

// stop unsubscribes, drains the queues (every queued publish is still
// applied and acknowledged), waits for the goroutines and closes the
// store.
func (r *runner) stop(stopStatus []byte) error {
	r.mu.Lock()
	r.stopped = true
	subs := r.subs
	r.subs = nil
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	for _, s := range subs {
		s.Unsubscribe()
	}
	r.closeSources(true) // none left after Shutdown's closeSources(false)
	r.in.close()
	r.direct.close()
	r.done.Wait()
	r.atomic.Clear() // the apply goroutine is gone: the stop owns them
	r.fast.Clear()
	r.releaseUsage()
	r.stopConsumers(stopStatus)
	return r.store.Close()
}

// config returns a copy of the stream's current config.
func (r *runner) config() stream.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.Clone()
}

// dropIfUninterested marks for removal a just-stored message of an
// interest stream that no consumer will deliver: nats-server acknowledges
// it with its sequence and keeps nothing (protocol.md section 3.3,
// retention). flushDrops removes the marked messages together, in the
// same store batch, so that they cost one fsync rather than one each. It
// runs before any operation of the batch, so an operation never sees
// them; a consumer created meanwhile (consumers are created outside the
// apply goroutine) may still deliver one of a memory stream, which is
// durable at once, before the flush removes it: the same window the
// immediate Delete had, a batch long instead of a message long.
func (r *runner) dropIfUninterested(seq uint64, subject string) {
	if r.st.Retention() != stream.InterestPolicy || r.interested(subject) {
		return
	}
	r.drops = append(r.drops, seq)
}

// rePublish publishes a stored message's republished copy (nil: none).
// Like a delivery, it happens only once the message is durable.
func (r *runner) rePublish(rp *stream.RePublished) {
	if rp != nil {
		r.js.tr.Publish(rp.Subject, "", rp.Header, rp.Data)
	}
}

// logExpireErr logs a failed expiry pass: at once when the error changed,
// else at most every refusalLogEvery (a fenced store fails every pass,
// once a second, until the server restarts). Apply goroutine.
func (r *runner) logExpireErr(err error) {
	now, msg := r.js.now(), err.Error()
	if msg == r.expireErr && now.Sub(r.expireErrLogged) < refusalLogEvery {
		return
	}
	r.expireErr, r.expireErrLogged = msg, now
	r.js.logf("%v (expiry is retried every pass; this is logged at most every %v)", err, refusalLogEvery)
}
