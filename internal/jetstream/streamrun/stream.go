package streamrun

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// Ingest bounds, the defaults of Env.MaxBufferedMsgs and
// Env.MaxBufferedBytes: a stream queues at most this many publishes, of
// at most this many bytes, before it answers 429 / 10167 "too many
// requests" (nats-server v2.15.2's stream ingest queue defaults,
// streamDefaultMaxQueueMsgs and streamDefaultMaxQueueBytes; its
// jetstream max_buffered_msgs and max_buffered_size).
const (
	defaultMaxBufferedMsgs  = 100_000
	defaultMaxBufferedBytes = 128 << 20
)

// expiryInterval is how often a stream applies max_age and forgets
// expired Nats-Msg-Ids; a per-message TTL due sooner brings the next pass
// forward (Stream.rearmExpiry).
const expiryInterval = time.Second

// ack is a PubAck waiting to be sent once waitSeq is durable (0 = send
// at once; for a stream with persist_mode async, once waitSeq is
// written).
type ack struct {
	reply   string
	payload []byte
	waitSeq uint64
	rp      *stream.RePublished // published, before the PubAck, once durable
	passed  chan struct{}       // a DurableBarrier's marker: closed once the acks before it were handled
}

// Env is what a stream's runtime takes from the engine that runs it.
// Every field is required except NewLog (nil: NewLocalLog).
type Env struct {
	Transport Transport
	Now       func() time.Time                 // the clock for entry times and expiry
	Logf      func(format string, args ...any) // problems
	APILevel  int                              // the JetStream API level (direct get's Nats-Required-Api-Level)
	Domain    string                           // the JetStream domain named in PubAcks and advisories; "" for none
	Account   string                           // the stream's account, named in log lines ("$G" for the global one)
	// MaxPending bounds a batched direct get without max_bytes (the
	// server's max_pending, ADR-31); 0 is nats-server's default, 64 MiB.
	MaxPending int64
	// MaxBufferedMsgs and MaxBufferedBytes bound the publishes a stream
	// queues before its apply goroutine takes them (bytes: subject,
	// reply, header and data, as nats-server v2.15.2 counts them); past
	// either a publish is answered 429 / 10167 and the drop is logged,
	// once a second at most per stream (logIngestDrop). jetstream
	// max_buffered_msgs and max_buffered_size: 0 is nats-server's
	// defaults, 100,000 and 128 MiB; negative is no bound, as in
	// nats-server.
	MaxBufferedMsgs  int
	MaxBufferedBytes int64
	// MaxPayload is the server's max_payload (bytes; 0: none), which the
	// proposer puts into the entries of a counter stream
	// (stream.Entry.MaxPayload).
	MaxPayload int64
	// Storage is the server's storage accounting, shared by every stream.
	Storage *Storage
	// BatchLimits (APILevel set) and Batches, the server-wide count of
	// open batches, bound batch publishing.
	BatchLimits stream.BatchLimits
	Batches     *stream.BatchInflight
	NewLog      NewLogFunc
	// NewReplicatedLog, when set, is asked first for the stream's log: it
	// returns a log that commits after Propose returns, on another
	// goroutine (a replicated stream's, internal/cluster/streamlog), or
	// nil for a stream with one replica (NewLog's then). The stream hands
	// it an Applier that queues what it commits for the apply goroutine
	// (laterApplier), and answers a request once its operation applied,
	// not once proposed (docs/engine.md, "Logs that commit later").
	NewReplicatedLog NewLogFunc
}

// Stream is the runtime of one stream: its state machine (through the
// apply goroutine), its log, its subscriptions, its ack, direct-get and
// expiry goroutines. The engine makes it with New, restores its
// consumers between Open and Serve, and ends it with Stop.
type Stream struct {
	env     Env
	name    string
	created time.Time
	dir     string // the stream directory (metadata and messages); "" for memory streams

	st     *stream.Stream // owned by the apply goroutine after start
	store  store.Store
	in     *queue[item]
	acks   *queue[ack]
	direct *queue[directJob]
	// replies holds the PubAcks of a file stream with persist_mode
	// async, which the reply goroutine sends once their messages are
	// written, before the fsync (replyLoop); nil for every other stream,
	// whose PubAcks go through acks.
	replies *queue[ack]

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
	// pubSubjects are the subjects of pub's entries (waiter.subjects);
	// pubBytes their bytes (maxPublishGroupBytes), pubEnc their bytes in
	// the Publish's byte form (stream.EntrySize, against maxEntry).
	pubSubjects []string
	pubBytes    int
	pubEnc      int
	dropped     []waiter
	early       []item // applyCommitted's scratch
	// batcher is the store as an appendBatcher (nil if it is not one);
	// batching: a run of appends it began is open (applyLoop, endBatch).
	batcher  appendBatcher
	batching bool
	// maxEntry is the largest operation, in byte form, the log carries
	// (EntryLimiter); 0 for no bound (one server's log). Set by New.
	maxEntry int

	mu   sync.Mutex // guards cfg, subs, leading, timer, expireAt, stopped
	cfg  stream.Config
	subs []Subscription
	// leading: this node leads the stream's replicated log (SetLeader);
	// a replicated stream holds subscriptions only while it does.
	leading bool
	timer   *time.Timer
	// expireAt is when the timer fires next (unix ns).
	expireAt int64
	// expireErr and expireErrLogged are the last expiry failure logged
	// and when (owned by the apply goroutine; logExpireErr).
	expireErr       string
	expireErrLogged time.Time
	stopped         bool
	done            sync.WaitGroup

	// refusing: a leader handing its leadership over ran out of
	// patience (Quiesce): the publishes it took and has not proposed are
	// answered 503 instead (flushPublishes), until it leads again
	// (SetLeader true).
	refusing atomic.Bool

	// dropLogged is when the ingest queue's refusals were last logged
	// (unix ns; 0 never), for a full count and full bytes
	// (logIngestDrop); any publisher's goroutine.
	dropLogged [2]atomic.Int64

	storage   stream.StorageType // fixed at creation
	counter   bool               // allow_msg_counter, fixed at creation
	usedBytes int64              // stored bytes last added to the Storage's usage; apply goroutine
	// copyFactor is how many other replicas hold a copy of this one
	// (setCopyFactor), copyBytes what was last added to the Storage's
	// copies for them (usedBytes times copyFactor); apply goroutine.
	copyFactor, copyBytes int64
	// drops are the messages of an interest stream stored without
	// interest, to remove before the next request and at the end of the
	// batch (dropIfUninterested); apply goroutine.
	drops []uint64
	// seenRemovals is the store's Removals when the apply goroutine last
	// looked for messages a limit removed (dropLimitRemoved).
	seenRemovals uint64
	// rm holds the acknowledged or copied messages queued for removal
	// (RemoveMsgs), for the apply goroutine to remove together.
	rm struct {
		mu   sync.Mutex
		seqs []uint64
	}

	consumers ConsumerSet // the stream's consumers (SetConsumers)
	sources   SourceSet   // the stream's own sourcers (SetSources); nil without
	durable   atomic.Uint64
	// applied is the index of the last operation the apply goroutine
	// applied (Applier), or the checkpoint's after Restore.
	applied atomic.Uint64

	// watchers are the sourcers of other streams that read this one
	// (Watch); wmu guards them.
	wmu      sync.Mutex
	watchers map[Watcher]struct{}

	// atomic and fast are the stream's open batches (batch.go); apply
	// goroutine.
	atomic *stream.AtomicBatches
	fast   *stream.FastBatches

	dlq atomic.Pointer[string] // the stream's own dead-letter subject (DeadLetter)
}

// New makes the runtime of a stream with config cfg (defaults applied,
// validated), created at created, whose files are under dir ("" for a
// memory stream), over the opened store st. Nothing runs until Open and
// Serve.
func New(env Env, cfg stream.Config, created time.Time, dir string, st store.Store) *Stream {
	r := &Stream{
		env: env, name: cfg.Name, created: created, dir: dir,
		st: stream.New(cfg, st), store: st, cfg: cfg,
		in: newIngest(env), acks: newQueue[ack](0), direct: newQueue[directJob](maxDirectQueue),
		storage:   cfg.Storage,
		counter:   cfg.AllowMsgCounter,
		consumers: noConsumers{},
		atomic:    stream.NewAtomicBatches(env.BatchLimits, env.Batches),
		fast:      stream.NewFastBatches(cfg.Name, env.BatchLimits, env.Batches),
	}
	if env.NewReplicatedLog != nil {
		r.log = env.NewReplicatedLog(cfg.Name, laterApplier{r})
	}
	if r.log == nil {
		newLog := env.NewLog
		if newLog == nil {
			newLog = NewLocalLog
		}
		r.log = newLog(cfg.Name, r)
	}
	if l, ok := r.log.(EntryLimiter); ok {
		r.maxEntry = l.MaxEntryBytes()
	}
	_, replicated := r.log.(Leader)
	if (cfg.PersistMode == stream.AsyncPersist || replicated) && dir != "" {
		// Fixed at creation: an update cannot change the mode. A
		// replicated stream's PubAck stands on its log's commit (fsynced
		// in the WAL of a majority, the leader's own included), so it
		// goes once the message is written here, as with persist_mode
		// async; consumers still wait for the store's fsync.
		r.replies = newQueue[ack](0)
	}
	r.fast.SetDomain(env.Domain)
	r.setDeadLetter(&cfg)
	r.setCopyFactor(&cfg)
	return r
}

// Name returns the stream's name.
func (r *Stream) Name() string { return r.name }

// Created returns when the stream was created.
func (r *Stream) Created() time.Time { return r.created }

// Dir returns the stream's directory, "" for a memory stream.
func (r *Stream) Dir() string { return r.dir }

// Store returns the stream's store, for reads (every change goes
// through an operation).
func (r *Stream) Store() store.Store { return r.store }

// SetConsumers gives the stream its consumer set; call it before Open.
func (r *Stream) SetConsumers(c ConsumerSet) { r.consumers = c }

// SetSources gives the stream its own sourcers (nil: none); the stream
// closes them when it stops.
func (r *Stream) SetSources(s SourceSet) {
	r.mu.Lock()
	r.sources = s
	r.mu.Unlock()
}

// Sources returns the stream's own sourcers, nil when it has none.
func (r *Stream) Sources() SourceSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sources
}

// Open readies a stream over a store that may hold messages: it removes
// an atomic batch a crash cut short, rebuilds the duplicate window and
// counts the stored bytes. Its consumers are restored next, then Serve.
func (r *Stream) Open() error {
	if pb, ok, err := r.st.DropPartialBatch(); err != nil {
		return err
	} else if ok {
		r.env.Logf("jetstream: stream %s: removed the atomic batch %q (sequences %d to %d) that a crash cut short before its commit was stored; it was never acknowledged", r.name, pb.ID, pb.First, pb.Last)
	}
	if err := r.st.RebuildAt(r.env.Now().UnixNano()); err != nil {
		return err
	}
	r.durable.Store(r.store.State(false).LastSeq) // recovered means durable
	r.syncUsage()
	return nil
}

// Serve runs an expiry pass, subscribes to the stream's subjects and
// starts the goroutines; the caller starts the sourcers. On an error
// the stream's consumers are stopped and nothing runs.
func (r *Stream) Serve() error {
	// What expired while the server was down goes before anything is
	// served (nats-server expireMsgsOnRecover); the pass arms the timer.
	r.mu.Lock()
	r.timer = time.AfterFunc(expiryInterval, r.expireTick)
	r.expireAt = r.env.Now().Add(expiryInterval).UnixNano()
	r.mu.Unlock()
	r.expirePass(r.env.Now().UnixNano(), nil)
	if err := r.subscribeIfLeading(); err != nil {
		r.mu.Lock()
		r.timer.Stop()
		r.mu.Unlock()
		r.consumers.StopAll(nil)
		return err
	}
	r.done.Add(3)
	go r.applyLoop()
	go r.ackLoop()
	go r.directLoop()
	if r.replies != nil {
		r.done.Add(1)
		go r.replyLoop()
	}
	return nil
}

// subscribeIfLeading subscribes the stream to its subjects unless its
// log is replicated: a replica subscribes only while it leads (SetLeader).
func (r *Stream) subscribeIfLeading() error {
	if _, replicated := r.log.(Leader); replicated {
		return nil
	}
	return r.Subscribe(r.Config())
}

// SetLeader subscribes a replicated stream to its subjects (and the
// direct-get subjects with allow_direct) when this node became the
// leader of its log, and unsubscribes them when it no longer leads, so
// that publishes reach only the leader (docs/cluster.md decision 14;
// nats-server v2.15.2 subscribes only the stream leader too). It does
// nothing once the stream stopped. The error is Subscribe's.
func (r *Stream) SetLeader(leader bool) error {
	r.mu.Lock()
	stopped, cfg := r.stopped, r.cfg.Clone()
	r.leading = leader
	r.mu.Unlock()
	if leader {
		r.refusing.Store(false)
	}
	if stopped {
		return nil
	}
	if leader {
		if err := r.Subscribe(cfg); err != nil {
			return err
		}
		// Acknowledgements applied while another replica led (ackedWorkQueue),
		// off the caller's goroutine (a raftnode worker): the scan reads
		// the store.
		go func() { r.RemoveMsgs(r.ackedWorkQueue(), false) }()
		return nil
	}
	r.unsubscribe()
	return nil
}

// Withdraw stops announcing the stream's subscriptions to the other
// servers of the cluster (those that are Withdrawers) while they go on
// receiving what was routed to them before the others learned it; the
// stream still takes publishes meanwhile. A leader about to hand its
// leadership over calls it, then waits for its routes to flush, then
// drops its subscriptions (SetLeader false), so that no publish on its
// way to it is dropped for want of a subscription (docs/cluster.md,
// "Lame duck mode and shutdown").
func (r *Stream) Withdraw() {
	r.mu.Lock()
	subs := slices.Clone(r.subs)
	r.mu.Unlock()
	for _, s := range subs {
		if w, ok := s.(Withdrawer); ok {
			w.Withdraw()
		}
	}
}

// unsubscribe drops every subscription of the stream.
func (r *Stream) unsubscribe() {
	r.mu.Lock()
	subs := r.subs
	r.subs = nil
	r.mu.Unlock()
	for _, s := range subs {
		s.Unsubscribe()
	}
}

// Subscribe replaces the stream's subscriptions: its subjects, and the
// direct-get subjects when allow_direct is set.
func (r *Stream) Subscribe(cfg stream.Config) error {
	subs := make([]Subscription, 0, len(cfg.Subjects)+2)
	fail := func(err error) error {
		for _, s := range subs {
			s.Unsubscribe()
		}
		return err
	}
	for _, subj := range cfg.Subjects {
		var sub Subscription
		var err error
		if ts, ok := r.env.Transport.(TracedSubscriber); ok {
			sub, err = ts.SubscribeTraced(subj, "", r.handleTracedPublish)
		} else {
			sub, err = r.env.Transport.Subscribe(subj, "", r.handlePublish)
		}
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
	_, replicated := r.log.(Leader)
	r.mu.Lock()
	old := r.subs
	if replicated && !r.leading {
		old, subs = subs, nil // no longer leads: SetLeader(false) ran meanwhile
	}
	r.subs = subs
	r.mu.Unlock()
	for _, s := range old {
		s.Unsubscribe()
	}
	return nil
}

// Resubscribe moves the stream's subscriptions to the subjects of cfg,
// after an update; a replicated stream's only where it leads (SetLeader).
func (r *Stream) Resubscribe(cfg stream.Config) error {
	r.mu.Lock()
	leading := r.leading
	r.mu.Unlock()
	if _, replicated := r.log.(Leader); replicated && !leading {
		return nil
	}
	return r.Subscribe(cfg)
}

// handlePublish runs on the publisher's goroutine: it copies the message
// into an entry stamped with the current time and queues it, or answers
// 429 / 10167 at once when the queue is full.
func (r *Stream) handlePublish(subject, reply string, hdr, data []byte) {
	r.handleTracedPublish(subject, reply, hdr, data, nil)
}

// handleTracedPublish is handlePublish with the publish's message trace
// (nil when not traced). A trace-only publish is neither stored nor
// answered: the stream reports the "js" event and stops, as nats-server
// v2.15.2 does. A traced publish that is stored keeps its trace headers
// with Nats-Trace-Dest set to "trace disabled", so that its deliveries
// are not traced again (nats-server processInboundJetStreamMsg). The
// "js" event is reported when the message is queued for the stream, so
// it names the stream and subject but not a refusal the apply makes
// later (that one reaches the publisher in its PubAck; docs/compatibility.md).
func (r *Stream) handleTracedPublish(subject, reply string, hdr, data []byte, t Tracer) {
	if t != nil {
		if t.Only() {
			t.JetStream(r.name, subject, nil)
			return
		}
		hdr = stream.SetHeader(hdr, traceDestHeader, traceDisabled)
	}
	buf := make([]byte, len(hdr)+len(data))
	copy(buf, hdr)
	copy(buf[len(hdr):], data)
	e := stream.Entry{Subject: subject, Data: buf[len(hdr):], Time: r.env.Now().UnixNano()}
	if len(hdr) > 0 {
		e.Header = buf[:len(hdr):len(hdr)]
	}
	pr := r.in.pushSized(item{entry: e, reply: reply}, len(subject)+len(reply)+len(buf))
	if !pr.ok() {
		r.logIngestDrop(pr)
		res := stream.Result{Err: jserr.New(jserr.StreamTooManyRequests)}
		if t != nil {
			t.JetStream(r.name, subject, res.Err)
		}
		if reply == "" {
			return
		}
		r.env.Transport.Publish(reply, "", tooManyRequests, stream.AppendPubAck(nil, r.name, res, r.env.Domain))
		return
	}
	if t != nil {
		t.JetStream(r.name, subject, nil)
	}
	if pr == pushedCrowded {
		r.stallPublisher()
	}
}

// ingestStall is the longest a publish, once queued, holds its publisher
// while the ingest queue is more than half full: it returns when the
// apply goroutine takes the queue, or after ingestStall. The publisher's
// connection reads nothing meanwhile, so a burst faster than the stream
// stores slows down instead of filling the queue and getting 429s, as
// nats-server v2.15.2 stalls a fast producer (stallClientMaxDuration 5 ms,
// stallTotalAllowed 10 ms; its log: "Producer was stalled"). Trial 35:
// bursts of 700 MB to an R3 stream got about half 429s, nats-server none.
const ingestStall = 10 * time.Millisecond

func (r *Stream) stallPublisher() {
	t := time.NewTimer(ingestStall)
	defer t.Stop()
	for {
		select {
		case <-r.in.room:
			if !r.in.crowded() {
				return
			}
		case <-t.C:
			return
		}
	}
}

// The message trace header a stored message keeps disabled (nats-server
// v2.15.2 MsgTraceDest, MsgTraceDestDisabled: not a valid subject).
const (
	traceDestHeader = "Nats-Trace-Dest"
	traceDisabled   = "trace disabled"
)

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
func (r *Stream) applyLoop() {
	defer r.done.Done()
	defer r.acks.close()
	if r.replies != nil {
		defer r.replies.close()
	}
	defer r.failWaiting()
	r.batcher, _ = r.store.(appendBatcher)
	var batch []item
	for {
		var ok bool
		if batch, ok = r.in.take(batch); !ok {
			return
		}
		if r.batcher != nil {
			r.batcher.BeginBatch()
			r.batching = true
		}
		for i := range batch {
			r.take(&batch[i])
			batch[i] = item{}
		}
		r.flushPublishes()
		r.dropLimitRemoved()
		r.flushDrops()
		r.noteRemovals()
		r.endBatch()
		r.syncUsage()
	}
}

// endBatch ends the run of appends applyLoop began for the batch it took
// (appendBatcher), if it is still open: the store writes what it holds.
func (r *Stream) endBatch() {
	if r.batching {
		r.batcher.EndBatch()
		r.batching = false
	}
}

// Leads reports whether this node's proposals enter the stream's log: a
// replicated stream's where this replica leads it (raft's view, which
// may be ahead of SetLeader), any other stream's always.
func (r *Stream) Leads() bool { return r.leads() }

// Replicated reports whether the stream's log is replicated (a clustered
// stream of more than one replica).
func (r *Stream) Replicated() bool {
	_, ok := r.log.(Leader)
	return ok
}

// leads reports whether the stream's log takes this node's proposals
// (Leader); the local log always does.
func (r *Stream) leads() bool {
	l, ok := r.log.(Leader)
	return !ok || l.Leader()
}

// failWaiting gives up on every operation still awaited when the apply
// goroutine ends (a log that commits later may never hand them back):
// their requests complete as failed, their publishes get no reply.
func (r *Stream) failWaiting() {
	for {
		w, ok := r.waiting.first()
		if !ok {
			return
		}
		r.failWaiter(w)
	}
}

func (r *Stream) noAck() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.NoAck
}

// ackLoop sends PubAcks in order, each only after the store made its
// message durable: one WaitDurable covers every ack queued meanwhile
// (group commit). If the store cannot make them durable, every waiting
// publish gets an error PubAck instead. It moves the stream's durable
// sequence (consumers deliver up to it) and republishes the stored
// messages once durable; for a stream with persist_mode async it does
// only that, the reply goroutine sending the PubAcks (replyLoop).
func (r *Stream) ackLoop() {
	defer r.done.Done()
	var batch []ack
	for {
		var ok bool
		if batch, ok = r.acks.take(batch); !ok {
			return
		}
		err := r.waitDurable(topSeq(batch))
		if err == nil {
			r.setDurable(topSeq(batch))
		}
		for _, a := range batch {
			if err == nil {
				r.rePublish(a.rp)
			}
			r.sendReply(a, err)
			if a.passed != nil {
				close(a.passed)
			}
		}
	}
}

// replyLoop sends the PubAcks of a file stream with persist_mode async
// in order, each once the store has written its message to its file,
// without waiting for the fsync (ADR-56; docs/durability.md section 3):
// one WaitWritten covers every PubAck queued meanwhile. The fsync still
// follows on the store's schedule (group commit), and the ack goroutine
// still waits for it before consumers and republishing see the message.
// If the write fails, every waiting publish gets an error PubAck.
func (r *Stream) replyLoop() {
	defer r.done.Done()
	var batch []ack
	for {
		var ok bool
		if batch, ok = r.replies.take(batch); !ok {
			return
		}
		err := r.waitWritten(topSeq(batch))
		for _, a := range batch {
			r.sendReply(a, err)
		}
	}
}

// sendReply publishes a's PubAck, if it has a reply subject: its payload,
// or, when the wait for its message failed with err, the store error.
func (r *Stream) sendReply(a ack, err error) {
	if a.reply == "" {
		return
	}
	payload := a.payload
	if err != nil && a.waitSeq > 0 {
		payload = stream.AppendPubAck(nil, r.name, stream.Result{Err: storeFailed(err)}, "")
	}
	r.env.Transport.Publish(a.reply, "", nil, payload)
}

// waitDurable waits until every message through top is durable (0:
// nothing to wait for).
func (r *Stream) waitDurable(top uint64) error {
	if top > 0 {
		return r.store.WaitDurable(top)
	}
	return nil
}

// writeWaiter is a store that tells when a message is written to its
// file, before the fsync (filestore.Store.WaitWritten).
type writeWaiter interface {
	WaitWritten(seq uint64) error
}

// waitWritten waits until every message through top is written (0:
// nothing to wait for); a store that cannot tell is waited for until
// durable, which is never less.
func (r *Stream) waitWritten(top uint64) error {
	if top == 0 {
		return nil
	}
	if w, ok := r.store.(writeWaiter); ok {
		return w.WaitWritten(top)
	}
	return r.store.WaitDurable(top)
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
func (r *Stream) expireTick() {
	r.in.pushOp(item{req: &request{kind: reqExpire, time: r.env.Now().UnixNano(), timer: true}})
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
// oldest Nats-Msg-Id leaving the duplicate window, the first message
// that max_age removes reaching it (Stream.MaxAgeDeadline), or the first
// message schedule falling due (Stream.NextSchedule), so that
// each is honoured within its floor (minTTLWait, minDedupeWait,
// minExpiryWait) rather than up to a second late, without polling more
// often. Apply goroutine.
func (r *Stream) rearmExpiry(pass int64, first uint64, next int64) {
	later := r.env.Now().UnixNano()
	wait := expiryWait(pass, later, next)
	if d, ok := r.st.DedupeDeadline(); ok {
		wait = min(wait, untilDeadline(d, later, minDedupeWait))
	}
	if d, ok := r.st.MaxAgeDeadline(); ok && d > pass {
		wait = min(wait, untilDeadline(d, later, maxAgeFloor(first, r.store.State(false).FirstSeq)))
	}
	if d, ok := r.st.NextSchedule(); ok {
		wait = min(wait, untilDeadline(d, later, minTTLWait))
	}
	r.mu.Lock()
	if !r.stopped {
		r.timer.Reset(wait)
		r.expireAt = r.env.Now().Add(wait).UnixNano()
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
func (r *Stream) expireBy(deadline int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.timer == nil || deadline >= r.expireAt {
		return
	}
	now := r.env.Now()
	wait := max(time.Duration(deadline-now.UnixNano()), minTTLWait)
	if at := now.Add(wait).UnixNano(); at < r.expireAt {
		r.timer.Reset(wait)
		r.expireAt = at
	}
}

// Stop unsubscribes, closes the stream's sourcers, drains the queues
// (every queued publish is still applied and acknowledged), waits for
// the goroutines, stops the consumers (their waiting pull requests get
// stopStatus when it is not nil) and closes the store.
func (r *Stream) Stop(stopStatus []byte) error {
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
	if src := r.Sources(); src != nil {
		src.Close(true) // none left after Shutdown's Close(false)
	}
	r.in.close()
	r.direct.close()
	r.done.Wait()
	r.atomic.Clear() // the apply goroutine is gone: the stop owns them
	r.fast.Clear()
	r.releaseUsage()
	r.consumers.StopAll(stopStatus)
	return r.store.Close()
}

// Config returns a copy of the stream's current config.
func (r *Stream) Config() stream.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.Clone()
}

// dropIfUninterested marks for removal a just-stored message of an
// interest stream that no consumer will deliver: nats-server acknowledges
// it with its sequence and keeps nothing (nats-server v2.15.2 StreamInfo and StreamState,
// retention). flushDrops removes the marked messages together, in the
// same store batch, so that they cost one fsync rather than one each. It
// runs before any operation of the batch, so an operation never sees
// them; a consumer created meanwhile (consumers are created outside the
// apply goroutine) may still deliver one of a memory stream, which is
// durable at once, before the flush removes it: the same window the
// immediate Delete had, a batch long instead of a message long.
func (r *Stream) dropIfUninterested(seq uint64, subject string) {
	if r.st.Retention() != stream.InterestPolicy || r.interested(subject) {
		return
	}
	r.drops = append(r.drops, seq)
}

// rePublish publishes a stored message's republished copy (nil: none).
// Like a delivery, it happens only once the message is durable.
func (r *Stream) rePublish(rp *stream.RePublished) {
	if rp != nil {
		r.env.Transport.Publish(rp.Subject, "", rp.Header, rp.Data)
	}
}

// logExpireErr logs a failed expiry pass: at once when the error changed,
// else at most every RefusalLogEvery (a fenced store fails every pass,
// once a second, until the server restarts). Apply goroutine.
func (r *Stream) logExpireErr(err error) {
	now, msg := r.env.Now(), err.Error()
	if msg == r.expireErr && now.Sub(r.expireErrLogged) < RefusalLogEvery {
		return
	}
	r.expireErr, r.expireErrLogged = msg, now
	r.env.Logf("%v (expiry is retried every pass; this is logged at most every %v)", err, RefusalLogEvery)
}

// tooManyRequests is the header of the answer to a publish the ingest
// queue refused, with the PubAck's 10167 error (nats-server v2.15.2
// queueInbound).
var tooManyRequests = []byte("NATS/1.0 429 Too Many Requests\r\n\r\n")

// newIngest returns a stream's ingest queue, bounded as env says
// (Env.MaxBufferedMsgs, Env.MaxBufferedBytes: 0 the default, negative no
// bound).
func newIngest(env Env) *queue[item] {
	msgs, bytes := env.MaxBufferedMsgs, env.MaxBufferedBytes
	switch {
	case msgs == 0:
		msgs = defaultMaxBufferedMsgs
	case msgs < 0:
		msgs = 0
	}
	switch {
	case bytes == 0:
		bytes = defaultMaxBufferedBytes
	case bytes < 0:
		bytes = 0
	}
	q := newQueue[item](msgs)
	q.byteLimit = int(min(bytes, int64(^uint(0)>>1)))
	return q
}

// ingestDropLogEvery is how often a stream logs, per cause, that its
// ingest queue refused publishes: nats-server v2.15.2's RateLimitWarnf
// logs a statement once until its rate-limit window (a second) passes.
const ingestDropLogEvery = time.Second

// ingestDropCause is the end of nats-server v2.15.2's log line for each
// refusal of a full ingest queue (its ipQueue's errors).
var ingestDropCause = map[pushResult]string{
	fullMsgs:  "IPQ len limit reached",
	fullBytes: "IPQ size limit reached",
}

// logIngestDrop logs, with nats-server v2.15.2's text (stream.go
// queueInbound), that the ingest queue refused a publish, at most once
// per ingestDropLogEvery per cause: a burst refused by the thousand logs
// one line. A closed queue (a stream stopping) is not logged. Any
// publisher's goroutine: the time of the last line is swapped atomically.
func (r *Stream) logIngestDrop(pr pushResult) {
	cause, ok := ingestDropCause[pr]
	if !ok {
		return
	}
	last := &r.dropLogged[0]
	if pr == fullBytes {
		last = &r.dropLogged[1]
	}
	now, prev := r.env.Now().UnixNano(), last.Load()
	if prev != 0 && now-prev < int64(ingestDropLogEvery) || !last.CompareAndSwap(prev, now) {
		return
	}
	r.env.Logf("Dropping messages due to excessive stream ingest rate on '%s' > '%s': %s", r.account(), r.name, cause)
}

// account names the stream's account in log lines.
func (r *Stream) account() string {
	if r.env.Account == "" {
		return "$G"
	}
	return r.env.Account
}
