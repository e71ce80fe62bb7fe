package streamrun

import (
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// DurableSeq is the highest sequence every message through which is
// durable: consumers deliver nothing above it. It is the lower of what
// the ack goroutine saw made durable and what the store reports (under
// an interval sync policy the store lags the acknowledgements).
func (r *Stream) DurableSeq() uint64 { return min(r.durable.Load(), r.store.DurableSeq()) }

// Acknowledged returns the highest sequence the ack goroutine saw made
// durable (the store's own DurableSeq may be lower under an interval
// sync policy): a sourcer copies through it.
func (r *Stream) Acknowledged() uint64 { return r.durable.Load() }

// setDurable records that everything through seq is durable and wakes
// the consumers when it moved.
func (r *Stream) setDurable(seq uint64) {
	for {
		cur := r.durable.Load()
		if seq <= cur {
			return
		}
		if r.durable.CompareAndSwap(cur, seq) {
			r.signalConsumers()
			r.signalWatchers()
			return
		}
	}
}

// Retention returns the stream's retention policy.
func (r *Stream) Retention() stream.RetentionPolicy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.Retention
}

func (r *Stream) signalConsumers() {
	for _, c := range r.consumers.List() {
		c.Signal()
	}
}

// interested reports whether a consumer of the stream would deliver a
// message on subject (interest retention keeps nothing else).
func (r *Stream) interested(subject string) bool {
	if r.consumers.Held() {
		return true
	}
	for _, c := range r.consumers.List() {
		if c.Matches(subject) {
			return true
		}
	}
	for _, w := range r.watcherList() {
		if w.Matches(subject) {
			return true
		}
	}
	return false
}

// OnAcked applies retention after consumer c acknowledged seqs: a
// workqueue stream removes them; an interest stream removes each one no
// other consumer still needs (nats-server v2.15.2's retention policies).
//
// With wait set (a double ack is to be answered), it returns only once
// the removals are applied, so that the client's confirmation means the
// message is gone, as with nats-server.
func (r *Stream) OnAcked(c Consumer, seqs []uint64, wait bool) {
	switch r.Retention() {
	case stream.WorkQueuePolicy:
		srcs := r.watcherList()
		if len(srcs) == 0 {
			r.RemoveMsgs(seqs, wait)
			return
		}
		var gone []uint64
		for _, seq := range seqs {
			if m, err := r.store.Load(seq); err == nil && !watchersNeed(srcs, nil, seq, m.Subject) {
				gone = append(gone, seq)
			}
		}
		r.RemoveMsgs(gone, wait)
	case stream.InterestPolicy:
		if r.consumers.Held() {
			return
		}
		var gone []uint64
		others, srcs := r.consumers.List(), r.watcherList()
		for _, seq := range seqs {
			m, err := r.store.Load(seq)
			if err != nil {
				continue
			}
			if !anyNeeds(others, c, seq, m.Subject) && !watchersNeed(srcs, nil, seq, m.Subject) {
				gone = append(gone, seq)
			}
		}
		r.RemoveMsgs(gone, wait)
	}
}

// OnSourced applies retention after sourcer s (of another stream) copied
// msgs from this stream, as nats-server's sourcing consumer (ack none)
// does: a workqueue stream removes them; an interest stream removes each
// one that no consumer and no other sourcer still needs. s calls it only
// once its copies are durable; with wait set it returns once the
// removals are applied.
func (r *Stream) OnSourced(s Watcher, msgs []*store.StoredMsg, wait bool) {
	var gone []uint64
	switch r.Retention() {
	case stream.WorkQueuePolicy:
		// Only what no consumer still has to deliver (nats-server ackMsg:
		// a workqueue message stays while another party needs it).
		others := r.consumers.List()
		for _, m := range msgs {
			if !anyNeeds(others, nil, m.Seq, m.Subject) {
				gone = append(gone, m.Seq)
			}
		}
	case stream.InterestPolicy:
		if r.consumers.Held() {
			return
		}
		others, srcs := r.consumers.List(), r.watcherList()
		for _, m := range msgs {
			if !anyNeeds(others, nil, m.Seq, m.Subject) && !watchersNeed(srcs, s, m.Seq, m.Subject) {
				gone = append(gone, m.Seq)
			}
		}
	}
	r.RemoveMsgs(gone, wait)
}

// DropUnneeded removes, from an interest stream, every message that no
// consumer and no sourcer still needs: after a consumer is deleted or
// refiltered, or a sourcer stops reading the stream. The removal is
// queued for the apply goroutine.
func (r *Stream) DropUnneeded() { r.RemoveMsgs(r.unneeded(), false) }

// DropUnneededWait is DropUnneeded returning once the messages are gone,
// for an API request to answer after them (nats-server v2.15.2 removes
// them before it answers a consumer's delete).
func (r *Stream) DropUnneededWait() { r.RemoveMsgs(r.unneeded(), true) }

// unneeded returns, for an interest stream, the messages that no
// consumer and no sourcer still needs.
func (r *Stream) unneeded() []uint64 {
	if r.Retention() != stream.InterestPolicy || r.consumers.Held() {
		return nil
	}
	others, srcs := r.consumers.List(), r.watcherList()
	st := r.store.State(false)
	// An unfiltered party needs everything above its position: the scan
	// stops there (at 0, with a consumer that has delivered nothing).
	end := st.LastSeq
	for _, c := range others {
		if floor, all := c.NeedsAllAbove(); all {
			end = min(end, floor)
		}
	}
	for _, w := range srcs {
		if floor, all := w.NeedsAllAbove(); all {
			end = min(end, floor)
		}
	}
	var gone []uint64
	for seq := st.FirstSeq; seq > 0 && seq <= end; {
		m, err := r.store.LoadNext(nil, seq)
		if err != nil || m.Seq > end {
			break
		}
		if !anyNeeds(others, nil, m.Seq, m.Subject) && !watchersNeed(srcs, nil, m.Seq, m.Subject) {
			gone = append(gone, m.Seq)
		}
		seq = m.Seq + 1
	}
	return gone
}

// RemoveMsgs has the apply goroutine remove messages retention let go
// (a Remove operation), waiting until it is applied when wait is set.
// Without wait, the sequences join those already waiting for the apply
// goroutine, and one operation removes them all: single acks arrive far
// faster than one removal (and its fsync) each.
func (r *Stream) RemoveMsgs(seqs []uint64, wait bool) {
	if len(seqs) == 0 {
		return
	}
	if wait {
		r.submit(&request{op: &stream.Remove{Reason: stream.RemoveAcked, Seqs: seqs}})
		return
	}
	r.rm.mu.Lock()
	first := len(r.rm.seqs) == 0
	r.rm.seqs = append(r.rm.seqs, seqs...)
	r.rm.mu.Unlock()
	if first {
		r.in.pushOp(item{req: &request{kind: reqRemovals}})
	}
}

// afterPurge moves the consumers past what purge req took (n messages)
// and drops their pending deliveries of removed messages (without
// advisories), as nats-server v2.15.2 purgeLocked and consumer.purge do,
// also when nothing was removed:
//
//   - without a subject, every consumer moves up to the stream's new first
//     sequence;
//   - with a subject, a consumer whose every filter lies within it moves
//     up to the first message left on the subject, or past the stream's
//     last sequence: the purge covered all it can deliver, so it
//     reports nothing pending and an ack floor past the purge;
//   - a consumer whose filters reach beyond the subject but share
//     messages with it as nats-server sees it (one filter lies within
//     the subject, or the subject lies within one filter or there is no
//     filter) moves up to the stream's new first sequence;
//   - any other consumer (disjoint filters) keeps its position.
func (r *Stream) afterPurge(req store.PurgeRequest, n uint64) {
	cs := r.consumers.List()
	if len(cs) == 0 {
		return
	}
	st := r.store.State(false)
	covered := uint64(0) // where a covered consumer moves to; 0 until needed
	for _, c := range cs {
		to := st.FirstSeq
		if req.Subject != "" {
			switch c.PurgeRelation(req.Subject) {
			case consumer.PurgeCovers:
				if covered == 0 {
					covered = st.LastSeq + 1
					if m, err := r.store.LoadNext([]string{req.Subject}, st.FirstSeq); err == nil {
						covered = m.Seq
					}
				}
				to = covered
			case consumer.PurgeDisjoint:
				to = 0
			}
		}
		if to > 0 {
			c.SkipTo(to)
		}
		if n > 0 {
			c.DropGone(false)
		}
	}
}

// afterExpiry drops the consumers' pending deliveries of messages an
// expiry pass removed (max_age, a per-message TTL, or the rollup of a
// subject delete marker), so that they stop counting against
// max_ack_pending and the ack floor moves past them, with a
// MSG_TERMINATED advisory each, as nats-server v2.15.2 does when a
// pending message is removed (decStreamPending terminates it).
func (r *Stream) afterExpiry() {
	for _, c := range r.consumers.List() {
		c.DropGone(true)
	}
}

// afterDelete drops the pending deliveries of the deleted message seq, so
// that they stop counting against max_ack_pending.
func (r *Stream) afterDelete(seq uint64) {
	for _, c := range r.consumers.List() {
		c.DropPending(seq)
	}
}

// dropLimitRemoved drops, each with a MSG_TERMINATED advisory, the
// consumers' pending deliveries of messages the store removed since the
// last call or op (noteRemovals): messages a limit pushed out on publish
// (max_msgs, max_bytes, max_msgs_per_subject with discard old), as
// nats-server v2.15.2 does at the removal (decStreamPending). Expiry,
// delete and purge run as ops and drop theirs themselves. Only a stream
// with such a limit looks, and only when the store's removal count
// moved. Apply goroutine.
func (r *Stream) dropLimitRemoved() {
	if !r.st.LimitsRemove() {
		return
	}
	rem := r.store.Removals()
	if rem == r.seenRemovals {
		return
	}
	r.seenRemovals = rem
	for _, c := range r.consumers.List() {
		c.DropGone(true)
	}
}

// noteRemovals records the store's removal count after an op or the
// batch's retention removals, which are not a limit's
// (dropLimitRemoved); a stream without such a limit skips the read (a
// store lock) on its apply path. Apply goroutine.
func (r *Stream) noteRemovals() {
	if r.st.LimitsRemove() {
		r.seenRemovals = r.store.Removals()
	}
}

// ackedWorkQueue returns, for a work-queue stream, the messages a
// consumer whose filters match them has acknowledged and no sourcer
// needs: what a leader removes when it starts to lead (SetLeader), since
// the acknowledgements that committed while another replica led reached
// this replica's consumers when its stream could not remove anything
// (followers make no retention decision), and the leader that could may
// have died first. A message no consumer matches stays, as a work queue
// keeps it for the consumer still to come.
func (r *Stream) ackedWorkQueue() []uint64 {
	if r.Retention() != stream.WorkQueuePolicy {
		return nil
	}
	others, srcs := r.consumers.List(), r.watcherList()
	var end uint64
	for _, c := range others {
		floor, _ := c.NeedsAllAbove()
		end = max(end, floor)
	}
	var gone []uint64
	st := r.store.State(false)
	for seq := st.FirstSeq; seq > 0 && seq <= end; {
		m, err := r.store.LoadNext(nil, seq)
		if err != nil || m.Seq > end {
			break
		}
		if ackedByMatching(others, m.Seq, m.Subject) && !watchersNeed(srcs, nil, m.Seq, m.Subject) {
			gone = append(gone, m.Seq)
		}
		seq = m.Seq + 1
	}
	return gone
}

// ackedByMatching reports whether some consumer matches subj and none
// that matches still needs seq.
func ackedByMatching(cs []Consumer, seq uint64, subj string) bool {
	matched := false
	for _, c := range cs {
		if !c.Matches(subj) {
			continue
		}
		if c.NeedAck(seq, subj) {
			return false
		}
		matched = true
	}
	return matched
}
