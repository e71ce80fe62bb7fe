package consumerrun

import "github.com/cairnmq/cairn/internal/consumer"

// NeedAck reports whether the consumer still needs stream sequence sseq
// on subject subj (interest retention): it matches the filters and is
// not yet delivered, or is delivered and awaiting an ack, or ran out of
// deliveries unacknowledged (nats-server v2.15.2 needAck keeps those
// too, so that they can be read after the MAX_DELIVERIES advisory).
func (c *Consumer) NeedAck(sseq uint64, subj string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.NeedAck(sseq, subj)
}

// NeedsAllAbove reports whether the consumer has no filter, and so
// needs (needAck) every message above floor, its delivered stream
// sequence.
func (c *Consumer) NeedsAllAbove() (floor uint64, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.NeedsAllAbove()
}

// OldestPending returns the time (unix ns) of the last delivery of the
// delivery that has awaited its ack longest, and false when none awaits
// one (consumer.State.OldestPending; /metrics' oldest unacknowledged
// age).
func (c *Consumer) OldestPending() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.OldestPending()
}

// Matches reports whether the consumer's filters match subj.
func (c *Consumer) Matches(subj string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Matches(subj)
}

// SkipTo notes that the stream holds nothing below seq any more (purge,
// compact): a consumer behind it moves up.
func (c *Consumer) SkipTo(seq uint64) {
	c.mu.Lock()
	changed := c.Commit(&consumer.SkipTo{Stream: seq}).Changed
	if changed {
		c.d.Invalidate()
		c.dirty = true
	}
	c.mu.Unlock()
	if changed {
		c.Signal()
	}
}

// PurgeRelation returns how a purge of subj relates to the consumer's
// filters (consumer.PurgeRelation).
func (c *Consumer) PurgeRelation(subj string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.PurgeRelation(subj)
}

// DropPending drops the consumer's pending delivery of seq, if any, with
// a MSG_TERMINATED advisory, or releases seq if it ran out of deliveries
// (nats-server decStreamPending).
func (c *Consumer) DropPending(seq uint64) {
	c.mu.Lock()
	gone := false
	if c.st.IsPending(seq) || c.st.IsExhausted(seq) {
		ds := c.Commit(&consumer.Drop{Seqs: []uint64{seq}}).Dropped
		if gone = len(ds) > 0; gone && !ds[0].Exhausted {
			c.adviseDropped(ds[0])
		}
		c.dirty = c.dirty || gone
	}
	c.mu.Unlock()
	if gone {
		c.Signal()
	}
}

// DropGone drops the consumer's pending deliveries whose message the
// stream no longer holds, each with a MSG_TERMINATED advisory when
// advise is set (nats-server sends none for a purge), and releases the
// messages out of deliveries that are gone (no advisory).
func (c *Consumer) DropGone(advise bool) {
	c.mu.Lock()
	n := c.dropGoneLocked(advise)
	c.mu.Unlock()
	if n > 0 {
		c.Signal()
	}
}

// dropGoneLocked is dropGone with c.mu held; it returns how many it
// dropped.
func (c *Consumer) dropGoneLocked(advise bool) int {
	seqs := c.st.Select(func(seq uint64) bool { return c.sr.Store().NumPending(nil, seq, seq) == 0 })
	if len(seqs) == 0 {
		return 0
	}
	ds := c.Commit(&consumer.Drop{Seqs: seqs}).Dropped
	if len(ds) > 0 {
		c.dirty = true
	}
	if advise {
		for _, d := range ds {
			if !d.Exhausted {
				c.adviseDropped(d)
			}
		}
	}
	return len(ds)
}
