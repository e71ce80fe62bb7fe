package jetstream

import (
	"slices"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
)

// position sets a new consumer's state at its starting sequence
// (protocol.md section 5.9): the delivered stream sequence is the start
// minus one.
func (c *cons) position() {
	st := c.sr.store.State(false)
	first := max(st.FirstSeq, 1)
	next := st.LastSeq + 1
	start := first
	switch c.cfg.DeliverPolicy {
	case consumer.DeliverAll:
		if len(c.filters) > 0 {
			start = c.firstMatch(first, next)
		}
	case consumer.DeliverLast:
		start = c.lastMatch(next)
	case consumer.DeliverNew:
		start = next
	case consumer.DeliverByStartSequence:
		start = max(c.cfg.OptStartSeq, first)
	case consumer.DeliverByStartTime:
		start = firstAtTime(c.sr.store, c.cfg.OptStartTime.UnixNano(), first, st.LastSeq)
	case consumer.DeliverLastPerSubject:
		c.lps = c.lastPerSubject()
		c.minNext = next
		start = next
		if len(c.lps) > 0 {
			start = c.lps[0]
		}
	}
	c.st = consumer.NewState(consumer.PolicyOf(&c.cfg), start)
}

// firstMatch returns the first sequence matching the filters, or next.
func (c *cons) firstMatch(first, next uint64) uint64 {
	if m, err := c.sr.store.LoadNext(c.filters, first); err == nil {
		return m.Seq
	}
	return next
}

// lastMatch returns the last sequence matching the filters, or next.
func (c *cons) lastMatch(next uint64) uint64 {
	filters := c.filters
	if len(filters) == 0 {
		filters = []string{">"}
	}
	var last uint64
	for _, f := range filters {
		if m, err := c.sr.store.LoadLast(f); err == nil {
			last = max(last, m.Seq)
		}
	}
	if last == 0 {
		return next
	}
	return last
}

// firstAtTime returns the first sequence of st in first..last whose
// message time is at or after t (unix nanoseconds; a binary search over
// sequences), or last+1.
func firstAtTime(st store.Store, t int64, first, last uint64) uint64 {
	lo, hi := first, last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := st.LoadNext(nil, mid)
		if err != nil || m.Seq > last {
			hi = mid
			continue
		}
		if m.Time >= t {
			hi = mid
		} else {
			lo = m.Seq + 1
		}
	}
	return lo
}

// lastPerSubject returns, in stream order, the last sequence of every
// subject matching the filters.
func (c *cons) lastPerSubject() []uint64 {
	filters := c.filters
	if len(filters) == 0 {
		filters = []string{">"}
	}
	seen := map[string]bool{}
	var seqs []uint64
	for _, f := range filters {
		for subj, ss := range c.sr.store.SubjectsState(f) {
			if !seen[subj] {
				seen[subj] = true
				seqs = append(seqs, ss.Last)
			}
		}
	}
	slices.Sort(seqs)
	return seqs
}

// needAck reports whether the consumer still needs stream sequence sseq
// on subject subj (interest retention): it matches the filters and is
// not yet delivered, or is delivered and awaiting an ack, or ran out of
// deliveries unacknowledged (nats-server v2.15.2 needAck keeps those
// too, so that they can be read after the MAX_DELIVERIES advisory).
func (c *cons) needAck(sseq uint64, subj string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.filters) > 0 && !store.MatchFilters(subj, c.filters) {
		return false
	}
	d := c.st.Delivered()
	if sseq > d.Stream {
		return true
	}
	if c.cfg.AckPolicy == consumer.AckNone {
		return false
	}
	return c.st.IsPending(sseq) || c.st.IsExhausted(sseq)
}

// needsAllAbove reports whether the consumer has no filter, and so
// needs (needAck) every message above floor, its delivered stream
// sequence.
func (c *cons) needsAllAbove() (floor uint64, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Delivered().Stream, len(c.filters) == 0
}

// matches reports whether the consumer's filters match subj.
func (c *cons) matches(subj string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.filters) == 0 || store.MatchFilters(subj, c.filters)
}

// skipTo notes that the stream holds nothing below seq any more (purge,
// compact): a consumer behind it moves up.
func (c *cons) skipTo(seq uint64) {
	c.mu.Lock()
	changed := c.commit(&consumer.SkipTo{Stream: seq}).Changed
	if changed {
		c.np.valid = false
		c.dirty = true
	}
	c.mu.Unlock()
	if changed {
		c.signal()
	}
}
