package streamrun

import (
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// The proposer side of a stream's apply goroutine (docs/engine.md, "What
// decides what"): it turns what the ingest queue holds into operations,
// making the decisions that may read the clock, the server's storage
// limits or the consumers, proposes them to the stream's log and keeps
// a waiter for each, by key, for the applier to answer.

// item is one input of a stream's apply goroutine: a publish (entry and
// reply subject), or, with req set, a request.
type item struct {
	entry stream.Entry
	reply string
	req   *request
}

// requestKind says what a request asks of the apply goroutine.
type requestKind uint8

const (
	reqPropose  requestKind = iota // propose req.op
	reqExpire                      // run an expiry pass at req.time
	reqRemovals                    // propose the removals queued in Stream.rm
	reqBarrier                     // nothing: reached in queue order (with release set, the goroutine then waits for it)
	reqApply                       // apply req.op, committed at req.index under req.key (a log that commits later)
	reqForget                      // the proposal of req.key will never be handed back (Forgetter)
)

// request is work another goroutine (an API worker, a sourcer, the
// expiry timer, retention, a log that commits later) asks of the apply
// goroutine. It is data: no code crosses the queue. When done is not
// nil, the apply goroutine closes it once the request was served and
// every operation proposed for it was applied or will never be (open
// counts those still awaited; a log that commits later applies them
// after the request was served); out then holds the outcome of its
// operation, or failed is set (the log will never apply it).
type request struct {
	kind  requestKind
	op    stream.Op
	time  int64  // reqExpire: the pass's time (unix ns)
	timer bool   // reqExpire: the expiry timer's pass (skipped when stream.Stream.ExpiryIdle)
	index uint64 // reqApply: the operation's index in the log
	key   uint64 // reqApply, reqForget: the proposal's key (0: none)
	// unproposed: reqForget of an operation that never entered the log
	// (Forgetter, ErrUnproposed): its publishes are answered 503.
	unproposed bool
	out        stream.Outcome
	failed     bool
	open       int  // waiters holding this request, not yet applied or failed
	served     bool // serve is done proposing for it
	// finished: done was closed (by the apply goroutine; the waiting
	// goroutine reads done only).
	finished bool
	done     chan struct{}
	release  chan struct{} // reqBarrier: waited for after done is closed (tests hold the goroutine with it)
	// then is a request to serve once this one's operation applied
	// without error, whose completion completes this one (the expiry
	// pass after an update that shortens max_age); parent is the request
	// a follow-up completes.
	then, parent *request
}

// waitKind says what waits for an operation's outcome.
type waitKind uint8

const (
	waitNone    waitKind = iota
	waitPublish          // replies, subjects: one per entry of a Publish (reply "" for none)
	waitFast             // reply, fast: a fast batch message
	waitCommit           // reply, respond: an atomic batch's commit
	waitRequest          // req: the outcome goes to a request
	waitExpire           // pass, first: an expiry pass, whose timer is re-armed from the outcome
)

// waiter is what the proposer of an operation waits for: how to answer
// once it is applied. It is kept by key until the applier takes it.
type waiter struct {
	key     uint64
	kind    waitKind
	replies []string
	// subjects are a Publish's subjects, one per reply (waitPublish), for
	// the 503 of a publish that never entered the log (refuseUnproposed).
	subjects []string
	reply    string
	respond  bool
	fast     *stream.FastInfo
	req      *request
	pass     int64  // waitExpire: the pass's time
	first    uint64 // waitExpire: the stream's first sequence before the pass
	// refused is the error (10023, 10002) that ends a Copy's results
	// after what was applied, when the proposer cut the copy short
	// (proposeCopy); 0 for none.
	refused jserr.ErrCode
}

// waiters holds the waiters of proposed operations in key order.
type waiters struct {
	q    []waiter
	head int
	next uint64
}

// add keeps w under the next key, which it returns.
func (ws *waiters) add(w waiter) uint64 {
	ws.next++
	w.key = ws.next
	ws.q = append(ws.q, w)
	return w.key
}

// take removes and returns the waiter of key (ok false when there is
// none). Waiters of lower keys still kept belong to proposals the log
// dropped: they are returned in dropped, in order, for the caller to
// fail.
func (ws *waiters) take(key uint64, dropped []waiter) (w waiter, ok bool, _ []waiter) {
	for ws.head < len(ws.q) && ws.q[ws.head].key < key {
		dropped = append(dropped, ws.q[ws.head])
		ws.q[ws.head] = waiter{}
		ws.head++
	}
	if ws.head < len(ws.q) && ws.q[ws.head].key == key {
		w, ok = ws.q[ws.head], true
		ws.q[ws.head] = waiter{}
		ws.head++
	}
	if ws.head == len(ws.q) {
		ws.q, ws.head = ws.q[:0], 0
	}
	return w, ok, dropped
}

// remove forgets the waiter of key, if kept, and returns it.
func (ws *waiters) remove(key uint64) (waiter, bool) {
	for i := ws.head; i < len(ws.q); i++ {
		if ws.q[i].key == key {
			w := ws.q[i]
			ws.q = append(ws.q[:i], ws.q[i+1:]...)
			return w, true
		}
	}
	return waiter{}, false
}

// first removes and returns the waiter of the lowest key kept (ok false
// when none is).
func (ws *waiters) first() (waiter, bool) {
	if ws.head == len(ws.q) {
		return waiter{}, false
	}
	w := ws.q[ws.head]
	ws.q[ws.head] = waiter{}
	ws.head++
	if ws.head == len(ws.q) {
		ws.q, ws.head = ws.q[:0], 0
	}
	return w, true
}

// pending reports whether waiters are kept.
func (ws *waiters) pending() bool { return ws.head < len(ws.q) }

// maxPublishGroup bounds the entries of one Publish operation, and
// maxPublishGroupBytes their bytes (subject, header and data): a group is
// flushed once it reaches either. The byte bound keeps one operation, a
// replicated stream's one raft entry, near raftnode's MaxSizePerMsg
// (1 MiB): 1,024 messages of 128 KiB made a 128 MiB entry, larger than
// the transport's largest frame (64 MiB), that no follower ever received.
// A group may still pass 1 MiB by its last message; it never passes the
// log's largest entry (EntryLimiter): it is flushed before a message
// that would take it over, and a message that would not fit alone is
// refused (10054).
const (
	maxPublishGroup      = 1024
	maxPublishGroupBytes = 1 << 20
)

// take handles one input of the batch the apply goroutine took.
func (r *Stream) take(it *item) {
	if it.req != nil {
		// A request sees the messages stored so far, without those
		// stored without interest (flushDrops) or pushed out by a limit
		// (dropLimitRemoved).
		r.flushPublishes()
		r.dropLimitRemoved()
		r.flushDrops()
		r.serve(it.req)
		r.noteRemovals()
		return
	}
	if r.counter {
		it.entry.MaxPayload = r.env.MaxPayload
	}
	if info, fast := stream.ParseFastReply(it.reply); fast {
		r.flushPublishes()
		r.applyFast(it.entry, it.reply, info)
		return
	}
	if id := stream.BatchID(it.entry.Header); id != "" {
		r.flushPublishes()
		r.applyAtomic(it.entry, id, it.reply)
		return
	}
	var refusal *jserr.Error
	enc := stream.EntrySize(&it.entry)
	if code, refused := r.refusal(len(it.entry.Header) + len(it.entry.Data)); refused {
		refusal = jserr.New(code)
	} else if r.maxEntry > 0 {
		// A replicated stream answers on size before proposing, as
		// nats-server's clustered path does: max_msg_size 10054, a file
		// record over 32 MiB 10077; then a message no follower could
		// receive (EntryLimiter, only a memory stream's can get here)
		// 10054, as nats-server answers one over max_msg_size.
		refusal = r.st.BatchPolicy().ProposalSizeError(&it.entry)
		if refusal == nil && r.overLog(stream.PublishSize(1, enc)) {
			refusal = jserr.New(jserr.StreamMessageExceedsMaximum)
		}
	}
	if refusal != nil {
		r.flushPublishes() // the answers stay in order
		r.settle(stream.Result{Err: refusal}, it.reply)
		return
	}
	if len(r.pub.Entries) > 0 && r.overLog(stream.PublishSize(len(r.pub.Entries)+1, r.pubEnc+enc)) {
		r.flushPublishes() // the group would pass the log's largest entry
	}
	r.pub.Entries = append(r.pub.Entries, it.entry)
	r.pubReplies = append(r.pubReplies, it.reply)
	r.pubSubjects = append(r.pubSubjects, it.entry.Subject)
	r.pubBytes += len(it.entry.Subject) + len(it.entry.Header) + len(it.entry.Data)
	r.pubEnc += enc
	if len(r.pub.Entries) == maxPublishGroup || r.pubBytes >= maxPublishGroupBytes {
		r.flushPublishes()
	}
}

// flushPublishes proposes the publishes gathered since the last flush as
// one Publish operation; a leader out of patience handing its leadership
// over (Quiesce) answers them 503 instead, as publishes nothing of which
// entered the log (refuseUnproposed).
func (r *Stream) flushPublishes() {
	if len(r.pub.Entries) == 0 {
		return
	}
	r.applyCommitted()
	w := waiter{kind: waitPublish, replies: r.pubReplies, subjects: r.pubSubjects}
	if r.refusing.Load() {
		r.refuseUnproposed(w)
	} else {
		r.propose(&r.pub, w)
	}
	clear(r.pub.Entries)
	r.pub.Entries = r.pub.Entries[:0]
	r.pubBytes, r.pubEnc = 0, 0
	if r.waiting.pending() {
		// still held by a waiter: a log that applies later
		r.pubReplies, r.pubSubjects = nil, nil
	} else {
		clear(r.pubReplies)
		r.pubReplies = r.pubReplies[:0]
		clear(r.pubSubjects)
		r.pubSubjects = r.pubSubjects[:0]
	}
}

// applyCommitted applies what the log committed since the apply
// goroutine last took its queue (the committed lane), before it proposes
// more: a batch of publishes it took may take seconds to propose (the
// log's Propose waits while 64 MiB await their outcome), and their
// PubAcks, which the applies send, would wait for all of it.
func (r *Stream) applyCommitted() {
	r.early = r.in.takeCommitted(r.early)
	if len(r.early) == 0 {
		return
	}
	for i := range r.early {
		r.serve(r.early[i].req)
		r.early[i] = item{}
	}
	r.dropLimitRemoved()
	r.flushDrops()
	r.noteRemovals()
	// What they appended is written now, not once the batch is proposed:
	// their PubAcks wait for it (the rest of the batch appends unbatched).
	r.endBatch()
}

// overLog reports whether an operation of size bytes, in byte form,
// would pass the largest entry of the stream's log (EntryLimiter; never
// for a log without a bound).
func (r *Stream) overLog(size int) bool { return r.maxEntry > 0 && size > r.maxEntry }

// insufficient reports whether a message of size bytes finds no storage
// (10023): the server's limit for the stream's storage type is exceeded
// or, for a file stream, the disk is short. It is the proposer's check:
// it reads the server's usage and the disk, which no apply may read.
func (r *Stream) insufficient(size int) bool {
	return r.env.Storage.OverLimit(r.storage) || r.storage == stream.FileStorage && r.env.Storage.DiskLow(size)
}

// refusal returns the error a publish or a copy of a message of size
// bytes gets before it is proposed, in nats-server v2.15.2's order: 10023
// when it finds no storage (insufficient), else 10002 when the account's
// streams of the stream's storage type already use more than the
// account's limit (wouldExceedLimits); refused is false when neither
// holds. The proposer's check: it reads the usage, which no apply may.
func (r *Stream) refusal(size int) (code jserr.ErrCode, refused bool) {
	switch {
	case r.insufficient(size):
		return jserr.InsufficientResources, true
	case r.env.Storage.OverAccountLimit(r.storage):
		return jserr.AccountResourcesExceeded, true
	}
	return 0, false
}

// propose proposes op to the stream's log with w as its waiter (kind
// waitNone: nobody waits). A log that refuses the proposal fails w.
func (r *Stream) propose(op stream.Op, w waiter) {
	var key uint64
	if w.kind != waitNone {
		if w.req != nil {
			w.req.open++
		}
		key = r.waiting.add(w)
	}
	if err := r.log.Propose(op, key); err != nil {
		if r.leads() {
			r.env.Logf("stream %s: operation of kind %d not proposed: %v", r.name, op.Kind(), err)
		}
		if w, ok := r.waiting.remove(key); ok {
			r.refuseUnproposed(w)
			r.failWaiter(w)
		}
	}
}

// refuseUnproposed answers each publish of an operation the log refused
// with the status of a request no subscriber took (503, with
// Nats-Subject, as nats-server sends it): nothing of it entered the log
// (Log.Propose), so nothing was stored, and a client retries a 503
// (nats.go: twice, 250 ms apart), which finds the stream's new leader. A
// replicated stream's log refuses when its replica no longer leads or
// hands its leadership over (a publish that reached it in the moment
// its subscription went), or, later, when raft drops the proposal
// during a leadership transfer (Forgetter, ErrUnproposed). nats-server
// says nothing then; the client's publish times out
// (docs/compatibility.md).
func (r *Stream) refuseUnproposed(w waiter) {
	if w.kind != waitPublish || r.noAck() {
		return
	}
	for i, reply := range w.replies {
		if reply == "" || i >= len(w.subjects) {
			continue
		}
		hdr := append(append([]byte("NATS/1.0 503\r\nNats-Subject: "), w.subjects[i]...), "\r\n\r\n"...)
		r.env.Transport.Publish(reply, "", hdr, nil)
	}
}

// failWaiter gives up on an operation that will never be applied: a
// request learns it failed; a publish gets no reply (the client's timeout
// and retry decide, as for a lost PubAck: an error could race a
// successful apply elsewhere).
func (r *Stream) failWaiter(w waiter) {
	if w.req != nil {
		w.req.failed = true
		r.settleRequest(w.req)
	}
}

// settleRequest counts one of req's waiters as applied or failed and
// completes req once none is left and serve is done with it.
func (r *Stream) settleRequest(req *request) {
	req.open--
	r.completeRequest(req)
}

// completeRequest closes req's done once it was served and no waiter
// holds it; a request whose operation applied without error and that
// has a follow-up (then) is completed by the follow-up instead, which
// is queued now.
func (r *Stream) completeRequest(req *request) {
	if !req.served || req.open > 0 {
		return
	}
	if next := req.then; next != nil {
		req.then = nil
		if !req.failed && req.out.Err == nil {
			next.parent = req
			if r.in.pushOp(item{req: next}) {
				return
			}
		}
	}
	if req.parent != nil {
		parent := req.parent
		req.parent = nil
		parent.failed = parent.failed || req.failed
		r.finish(parent)
	}
	r.finish(req)
}

// finish closes req's done, if any, once.
func (r *Stream) finish(req *request) {
	if req.done != nil && !req.finished {
		req.finished = true
		close(req.done)
	}
}

// serve handles a request on the apply goroutine.
func (r *Stream) serve(req *request) {
	release := req.release
	switch req.kind {
	case reqPropose:
		r.proposeRequest(req)
	case reqExpire:
		r.expirePass(req.time, req)
	case reqRemovals:
		r.flushRemovals()
	case reqApply:
		r.Apply(req.index, req.op, req.key)
	case reqForget:
		if w, ok := r.waiting.remove(req.key); ok {
			if req.unproposed {
				r.refuseUnproposed(w)
			}
			r.failWaiter(w)
		}
	}
	req.served = true
	r.completeRequest(req)
	if release != nil {
		<-release
	}
}

// proposeRequest proposes a request's operation with the proposer's
// checks and follow-ups: a Copy only up to the first message without
// storage (10023); an UpdateConfig that shortens max_age is followed by
// an expiry pass, so that messages now too old go before the update is
// answered, as nats-server v2.15.2 removes them when its store's config
// is updated.
func (r *Stream) proposeRequest(req *request) {
	switch op := req.op.(type) {
	case *stream.Copy:
		r.proposeCopy(op, req)
	case *stream.UpdateConfig:
		if shortensMaxAge(r.st.Config().MaxAge, op.Config.MaxAge) {
			req.then = &request{kind: reqExpire, time: r.env.Now().UnixNano()}
		}
		r.propose(op, waiter{kind: waitRequest, req: req})
	default:
		r.propose(op, waiter{kind: waitRequest, req: req})
	}
}

// proposeCopy proposes the entries of a sourcer's copy up to the first
// that finds no storage or is over the account's limit, which it reports
// as refused (10023, 10002: refusal) after what was applied: the sourcer
// retries from there. A copy that would pass the log's largest entry
// (EntryLimiter) is cut before the entry that would take it over,
// without an error (the sourcer goes on from there at once), or, when
// that is the first, refused with 10054 (retried as the others). An
// empty Copy is proposed as it is (SyncLog).
func (r *Stream) proposeCopy(op *stream.Copy, req *request) {
	n := len(op.Entries)
	empty := n == 0
	if r.counter {
		for i := range op.Entries {
			op.Entries[i].MaxPayload = r.env.MaxPayload
		}
	}
	var code jserr.ErrCode
	enc := 0
	for i := range op.Entries {
		if c, refused := r.refusal(len(op.Entries[i].Header) + len(op.Entries[i].Data)); refused {
			n, code = i, c
			break
		}
		enc += stream.CopyEntrySize(op, i)
		if r.overLog(stream.CopySize(i+1, enc)) {
			// Cut before the entry that would take the copy past the
			// log's largest entry: the sourcer goes on from there. One
			// that would not fit alone is refused as a publish is.
			if n = i; i == 0 {
				code = jserr.StreamMessageExceedsMaximum
			}
			break
		}
	}
	refused := n < len(op.Entries)
	op.Entries = op.Entries[:n]
	if op.Mirror {
		op.OriginSeqs = op.OriginSeqs[:n]
	}
	if n > 0 || empty {
		r.propose(op, waiter{kind: waitRequest, req: req, refused: code})
	} else if refused {
		req.out.Results = append(req.out.Results, stream.Result{Err: jserr.New(code)})
	}
}

// expirePass proposes, when a message schedule is due at now (unix ns),
// the FireSchedules that stores its messages (ADR-51: the leader's clock
// decides when, the apply function what), then an expiry up to now,
// whose outcome re-arms the expiry timer (Stream.expired); req, when not
// nil, is completed once the expiry applied. Only the leader of a
// replicated stream expires (the others apply its Expire operations);
// a follower's pass only re-arms its timer, so that it expires soon
// after it leads. The timer's pass proposes no Expire when it would
// change nothing (stream.Stream.ExpiryIdle).
func (r *Stream) expirePass(now int64, req *request) {
	if !r.leads() {
		r.rearmExpiry(now, 0, 0)
		return
	}
	if next, ok := r.st.NextSchedule(); ok && next <= now {
		r.propose(&stream.FireSchedules{Time: now}, waiter{})
	}
	if req != nil && req.timer && r.st.ExpiryIdle(now) {
		// The timer's pass would change nothing: no entry, so that an
		// idle replicated stream's group stays quiet.
		r.expireBatches(now)
		r.rearmExpiry(now, r.store.State(false).FirstSeq, 0)
		return
	}
	r.propose(&stream.Expire{Time: now}, waiter{kind: waitExpire, pass: now, first: r.store.State(false).FirstSeq, req: req})
}

// flushDrops proposes the removal of the messages dropIfUninterested
// marked (the leader's decision: a follower forgets them).
func (r *Stream) flushDrops() {
	if len(r.drops) == 0 {
		return
	}
	if !r.leads() {
		r.drops = r.drops[:0]
		return
	}
	r.propose(&stream.Remove{Reason: stream.RemoveNoInterest, Seqs: r.drops}, waiter{})
	r.drops = r.drops[:0]
}

// flushRemovals proposes the removals removeMsgs queued.
func (r *Stream) flushRemovals() {
	r.rm.mu.Lock()
	seqs := r.rm.seqs
	r.rm.seqs = nil
	r.rm.mu.Unlock()
	if len(seqs) > 0 && r.leads() {
		r.propose(&stream.Remove{Reason: stream.RemoveAcked, Seqs: seqs}, waiter{})
	}
}

// submit hands req to the apply goroutine and waits until it was
// served. It returns false when the stream has stopped or the log will
// never apply the request's operation.
func (r *Stream) submit(req *request) bool {
	req.done = make(chan struct{})
	if !r.in.pushOp(item{req: req}) {
		return false
	}
	<-req.done
	return !req.failed
}

// Do proposes op (from another goroutine: an API worker, a sourcer) on
// the stream's apply goroutine and waits until it is applied; it
// returns the outcome, and false when the stream has stopped or the log
// will never apply op. A Copy is proposed up to its first message that
// finds no storage (10023, the last result); an UpdateConfig is followed
// by an expiry pass when it shortens max_age (proposeRequest).
func (r *Stream) Do(op stream.Op) (stream.Outcome, bool) {
	req := &request{op: op}
	if !r.submit(req) {
		return stream.Outcome{}, false
	}
	return req.out, true
}

// SyncLog proposes an empty Copy, which changes nothing, and waits until
// it is applied: the stream's state then holds every operation its log
// committed before it, those of earlier leaders included. A sourcer that
// comes to lead a replicated stream calls it before it reads from the
// stream where its copies end (docs/cluster.md, "Sourcing in a
// cluster"). It returns false when this replica does not lead the
// stream, the log dropped the proposal or the stream stopped.
func (r *Stream) SyncLog() bool {
	_, ok := r.Do(&stream.Copy{})
	return ok
}

// ExpireAt runs an expiry pass at now (unix ns) on the apply goroutine,
// as the timer does, and waits for it.
func (r *Stream) ExpireAt(now int64) bool {
	return r.submit(&request{kind: reqExpire, time: now})
}

// Barrier returns once the apply goroutine has taken everything queued
// before it; false when the stream has stopped.
func (r *Stream) Barrier() bool { return r.submit(&request{kind: reqBarrier}) }

// DurableBarrier is Barrier for a reader of the stream's state with a
// deadline (an API request): it returns true once the apply goroutine
// has taken everything queued before it and, for a file stream, the ack
// goroutine has handled the acks of what it applied (DurableSeq, up to
// which consumers count and deliver, then covers it: a follower replica
// applies a publish before its own fsync). It returns false when the
// stream stopped, and at the deadline when either goroutine has not got
// there (stuck behind a slow store, a held batch or a long queue),
// leaving its marker in the queue, to be passed unwaited.
func (r *Stream) DurableBarrier(deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	req := &request{kind: reqBarrier, done: make(chan struct{})}
	if !r.in.pushOp(item{req: req}) {
		return false
	}
	select {
	case <-req.done:
	case <-t.C:
		return false
	}
	if req.failed {
		return false
	}
	if r.dir == "" {
		return true // a memory stream's messages are durable once applied (queueAck)
	}
	passed := make(chan struct{})
	if !r.acks.push(ack{passed: passed}) {
		return false
	}
	select {
	case <-passed:
		return true
	case <-t.C:
		return false
	}
}

// Quiesce is Barrier for a leader handing its leadership over, which
// has dropped its subscriptions (SetLeader false): it waits until every
// publish the stream took before was proposed, or, once patience passed,
// until each of those still unproposed was answered 503 (nothing of it
// entered the log, so the client's retry, nats.go's after 250 ms, stores
// it once, with the new leader). The ingest queue holds up to
// max_buffered_size (128 MiB): a leader stopped during a burst of large
// messages proposed it for 1.9 s at its disk's pace before its transfer,
// while every new publish got 503 (docs/cluster.md, "Lame duck mode and
// shutdown"). The stream answers so until it leads again (SetLeader
// true). It reports Barrier's result.
func (r *Stream) Quiesce(patience time.Duration) bool {
	done := make(chan bool, 1)
	go func() { done <- r.Barrier() }()
	t := time.NewTimer(patience)
	defer t.Stop()
	select {
	case ok := <-done:
		return ok
	case <-t.C:
	}
	r.refusing.Store(true)
	return <-done
}

// Hold keeps the apply goroutine waiting, once it has taken everything
// queued before, until release is called: what is queued meanwhile is
// taken as one batch, and nothing changes the stream's state. Tests and
// replica checks use it.
func (r *Stream) Hold() (release func()) {
	busy, done := make(chan struct{}), make(chan struct{})
	if !r.in.pushOp(item{req: &request{kind: reqBarrier, done: busy, release: done}}) {
		return func() {}
	}
	<-busy
	return func() { close(done) }
}

// AppendState appends the stream's whole state (stream.Stream.AppendState);
// call it while the apply goroutine is held (Hold) or stopped.
func (r *Stream) AppendState(dst []byte) []byte { return r.st.AppendState(dst) }

// NextExpiry returns when the expiry timer fires next (unix ns).
func (r *Stream) NextExpiry() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expireAt
}

// Queued returns the number of inputs (publishes and requests) waiting
// for the apply goroutine.
func (r *Stream) Queued() int {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	return len(r.in.items)
}
