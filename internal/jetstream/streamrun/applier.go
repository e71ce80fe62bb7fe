package streamrun

import (
	"errors"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// The applier side of a stream's apply goroutine (docs/engine.md): the
// log hands it each committed operation; stream.ApplyOp alone decides
// the outcome, and the runtime then does the leader's part: it queues the
// answers keyed by the operation's waiter (sent once durable), tells the
// consumers what left the stream, and re-arms the expiry timer.

// Apply applies a committed operation of the stream's log (Applier). It
// runs on the apply goroutine: the local log calls it from Propose, a
// log that commits later through the queue (laterApplier).
func (r *Stream) Apply(index uint64, op stream.Op, key uint64) {
	r.st.ApplyOp(op, &r.out)
	r.applied.Store(index)
	var w waiter
	if key != 0 {
		var ok bool
		w, ok, r.dropped = r.waiting.take(key, r.dropped[:0])
		for _, d := range r.dropped {
			r.failWaiter(d)
		}
		if !ok {
			w = waiter{}
		}
	}
	switch o := op.(type) {
	case *stream.Publish:
		r.appliedPublish(&w)
	case *stream.Copy:
		for _, res := range r.out.Results {
			r.settle(res, "")
		}
	case *stream.BatchCommit:
		r.appliedCommit(o, &w)
	case *stream.Purge:
		if r.out.Err == nil {
			r.afterPurge(o.Request, r.out.Removed)
		}
	case *stream.DeleteMsg:
		if r.out.Err == nil {
			r.afterDelete(o.Seq)
		}
	case *stream.UpdateConfig:
		if r.out.Err == nil {
			r.configApplied(&o.Config)
		}
	case *stream.Expire:
		r.expired(&w)
	case *stream.FireSchedules:
		for _, res := range r.out.Results {
			r.settle(res, "")
		}
		if err := r.out.StoreErr; err != nil && !errors.Is(err, store.ErrClosed) {
			r.logExpireErr(err)
		}
	case *stream.Remove:
		if err := r.out.StoreErr; err != nil && !errors.Is(err, store.ErrClosed) && len(o.Seqs) > 0 {
			r.env.Logf("stream %s: remove %d messages (retention) from %d: %v", r.name, len(o.Seqs), o.Seqs[0], err)
		}
	}
	if w.req != nil {
		if w.kind == waitRequest {
			w.req.out = r.out
			w.req.out.Results = append([]stream.Result(nil), r.out.Results...)
			if res := w.req.out.Results; w.refused != 0 && (len(res) == 0 || res[len(res)-1].Err == nil) {
				w.req.out.Results = append(res, stream.Result{Err: jserr.New(w.refused)})
			}
		}
		r.settleRequest(w.req)
	}
}

// appliedPublish answers the entries of a Publish: each its PubAck (or,
// for a fast batch message, the batch's replies).
func (r *Stream) appliedPublish(w *waiter) {
	if w.kind == waitFast {
		res := r.out.Results[0]
		if res.Err == nil && !res.Duplicate {
			r.afterStore(res)
			r.queueAck(ack{rp: res.RePublish, waitSeq: res.Seq})
		}
		r.fastReplies(w.reply, r.fast.After(w.fast, res))
		return
	}
	for i, res := range r.out.Results {
		reply := ""
		if i < len(w.replies) {
			reply = w.replies[i]
		}
		r.settle(res, reply)
	}
}

// settle does the runtime's part for one applied publish or copy: a
// stored message's retention, expiry timer and rollup, and its PubAck
// (to reply, "" for none), which waits until the message is durable.
func (r *Stream) settle(res stream.Result, reply string) {
	stored := res.Err == nil && !res.Duplicate
	if stored {
		r.afterStore(res)
	} else {
		if res.Rollup != nil {
			r.afterPurge(*res.Rollup, res.Purged)
		}
		if res.SchedulerPurge != nil {
			r.afterPurge(*res.SchedulerPurge, res.SchedulerPurged)
		}
	}
	a := ack{rp: res.RePublish}
	if stored {
		a.waitSeq = res.Seq // consumers wait for it to be durable
	}
	if reply != "" && !r.noAck() {
		a.reply, a.payload = reply, stream.AppendPubAck(nil, r.name, res, r.env.Domain)
	}
	if a.reply != "" || a.waitSeq > 0 || r.dir == "" {
		r.queueAck(a)
	}
}

// appliedCommit answers an atomic batch's commit: its PubAck waits for
// the batch's last message to be durable (and so for all of it).
func (r *Stream) appliedCommit(c *stream.BatchCommit, w *waiter) {
	if r.out.Err != nil {
		if w.respond {
			r.queueAck(ack{reply: w.reply, payload: stream.AppendPubAck(nil, r.name, stream.Result{Err: r.out.Err}, "")})
		}
		return
	}
	results := r.out.Results
	for _, res := range results {
		r.afterStore(res)
		r.queueAck(ack{rp: res.RePublish, waitSeq: res.Seq})
	}
	if w.respond && len(results) > 0 {
		last := results[len(results)-1].Seq
		r.queueAck(ack{reply: w.reply, payload: stream.AppendBatchPubAck(nil, r.name, r.env.Domain, last, c.ID, uint64(len(results))), waitSeq: last})
	}
}

// configApplied makes an applied config update the runtime's: the copy
// other goroutines read, the dead-letter subject its consumers use, and
// the open batches it no longer allows.
func (r *Stream) configApplied(cfg *stream.Config) {
	r.mu.Lock()
	r.cfg = cfg.Clone()
	r.mu.Unlock()
	r.setDeadLetter(cfg)
	r.setCopyFactor(cfg)
	r.batchesAfterUpdate(cfg)
}

// expired does the runtime's part after an Expire: the subject delete
// markers it stored are settled like publishes, the consumers drop their
// deliveries of what it removed, and, after this node's own pass (w), the
// idle batches are abandoned and the timer is re-armed.
func (r *Stream) expired(w *waiter) {
	for _, res := range r.out.Results {
		r.settle(res, "")
	}
	if err := r.out.StoreErr; err != nil && !errors.Is(err, store.ErrClosed) {
		r.logExpireErr(err)
	}
	if r.out.Changed {
		r.afterExpiry()
	}
	if w.kind == waitExpire {
		r.expireBatches(w.pass)
		r.rearmExpiry(w.pass, w.first, r.out.Next)
	}
}
