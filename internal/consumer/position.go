package consumer

import (
	"github.com/nats-io/nuid"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/subject"
)

// Position gives a new consumer its state at its starting sequence
// (nats-server v2.15.2 consumer.go selectStartingSeqNo): the delivered
// stream sequence is the start minus one. deliver_policy last_per_subject
// also lists the last message of each matching subject to deliver
// first.
func (d *Deliverer) Position() {
	st := d.src.State(false)
	first := max(st.FirstSeq, 1)
	next := st.LastSeq + 1
	start := first
	switch d.cfg.DeliverPolicy {
	case DeliverAll:
		if len(d.filters) > 0 {
			start = d.firstMatch(first, next)
		}
	case DeliverLast:
		start = d.lastMatch(next)
	case DeliverNew:
		start = next
	case DeliverByStartSequence:
		start = max(d.cfg.OptStartSeq, first)
	case DeliverByStartTime:
		start = FirstAtTime(d.src, d.cfg.OptStartTime.UnixNano(), first, st.LastSeq)
	case DeliverLastPerSubject:
		d.lps = d.lastPerSubject()
		d.minNext = next
		start = next
		if len(d.lps) > 0 {
			start = d.lps[0]
		}
	}
	d.st = NewState(PolicyOf(&d.cfg), start)
}

// firstMatch returns the first sequence matching the filters, or next.
func (d *Deliverer) firstMatch(first, next uint64) uint64 {
	if m, err := d.src.LoadNext(d.filters, first); err == nil {
		return m.Seq
	}
	return next
}

// lastMatch returns the last sequence matching the filters, or next.
func (d *Deliverer) lastMatch(next uint64) uint64 {
	filters := d.filters
	if len(filters) == 0 {
		filters = []string{">"}
	}
	var last uint64
	for _, f := range filters {
		if m, err := d.src.LoadLast(f); err == nil {
			last = max(last, m.Seq)
		}
	}
	if last == 0 {
		return next
	}
	return last
}

// FirstAtTime returns the first sequence of src in first..last whose
// message time is at or after t (unix nanoseconds; a binary search over
// sequences, message times taken to grow with the sequence as
// nats-server assumes), or last+1.
func FirstAtTime(src interface {
	LoadNext(filters []string, start uint64) (*store.StoredMsg, error)
}, t int64, first, last uint64) uint64 {
	lo, hi := first, last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := src.LoadNext(nil, mid)
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

// flowID returns the random last token of a flow control request's
// reply subject.
func flowID() string { return nuid.Next()[18:] }

// How a purge with a subject relates to a consumer's filters
// (PurgeRelation), in nats-server v2.15.2 purgeLocked's terms.
const (
	PurgeWider    = iota // the filters reach beyond the purge subject: the consumer moves to the stream's new first sequence
	PurgeCovers          // every filter lies within the purge subject: it moves past what the purge left on it
	PurgeDisjoint        // nats-server leaves the consumer alone
)

// PurgeRelation returns how a purge of subj relates to the consumer's
// filters: isEqualOrSubsetMatch (a filter within subj), isFilterSubsetOf
// (all of them) and isFilteredMatch (subj within a filter, or no
// filter) of nats-server v2.15.2 purgeLocked.
func (d *Deliverer) PurgeRelation(subj string) int { return purgeRelation(d.filters, subj) }

func purgeRelation(filters []string, subj string) int {
	within := 0
	for _, f := range filters {
		if subject.SubsetOf(f, subj) {
			within++
		}
	}
	switch {
	case within > 0 && within == len(filters):
		return PurgeCovers
	case within > 0:
		return PurgeWider
	}
	if len(filters) == 0 {
		return PurgeWider
	}
	for _, f := range filters {
		if subject.SubsetOf(subj, f) {
			return PurgeWider
		}
	}
	return PurgeDisjoint
}
