package jetstream

import "github.com/cairnmq/cairn/internal/consumer"

// PurgeRelation returns how a purge of subj relates to the consumer's
// filters (consumer.PurgeRelation).
func (c *cons) PurgeRelation(subj string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.PurgeRelation(subj)
}

// DropPending drops the consumer's pending delivery of seq, if any, with
// a MSG_TERMINATED advisory, or releases seq if it ran out of deliveries
// (nats-server decStreamPending).
func (c *cons) DropPending(seq uint64) {
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
func (c *cons) DropGone(advise bool) {
	c.mu.Lock()
	n := c.dropGoneLocked(advise)
	c.mu.Unlock()
	if n > 0 {
		c.Signal()
	}
}

// dropGoneLocked is dropGone with c.mu held; it returns how many it
// dropped.
func (c *cons) dropGoneLocked(advise bool) int {
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
