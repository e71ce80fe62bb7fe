package jetstream

import "github.com/cairnmq/cairn/internal/consumer"

// NeedAck reports whether the consumer still needs stream sequence sseq
// on subject subj (interest retention): it matches the filters and is
// not yet delivered, or is delivered and awaiting an ack, or ran out of
// deliveries unacknowledged (nats-server v2.15.2 needAck keeps those
// too, so that they can be read after the MAX_DELIVERIES advisory).
func (c *cons) NeedAck(sseq uint64, subj string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.NeedAck(sseq, subj)
}

// NeedsAllAbove reports whether the consumer has no filter, and so
// needs (needAck) every message above floor, its delivered stream
// sequence.
func (c *cons) NeedsAllAbove() (floor uint64, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.NeedsAllAbove()
}

// Matches reports whether the consumer's filters match subj.
func (c *cons) Matches(subj string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Matches(subj)
}

// SkipTo notes that the stream holds nothing below seq any more (purge,
// compact): a consumer behind it moves up.
func (c *cons) SkipTo(seq uint64) {
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
