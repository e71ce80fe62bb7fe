package store

import (
	"cmp"
	"slices"
)

// Expiry: what ExpireUpTo removes at a time now, shared by both engines so
// that they decide identically (nats-server v2.15.2 memstore.go and
// filestore.go expireMsgs, docs/protocol.md sections 4.2 and 6.2).
//
//  1. MaxAge: the stored messages are walked in sequence order from the
//     first; a message with TTLNever is passed over; the walk stops at the
//     first other message that has not expired (Expired) and removes or
//     leaves for a marker (3) each one that has.
//  2. Per-message TTL: every message whose deadline (stored time + TTL) is
//     at or before now, in sequence order, is removed or left for a
//     marker (3).
//  3. With Config.SubjectDeleteMarkers, an expired message that is the
//     only one stored on its subject and is not itself a delete marker
//     (IsDeleteMarker) is not removed: it is reported in Expiry.Markers,
//     and the layer above stores a marker on its subject that rolls it
//     up. Until that happens it is reported again by every pass, and a
//     TTL's deadline stays pending (Expiry.Next is then at or before
//     now: the caller paces its retries).

// Expiry is the outcome of ExpireUpTo.
type Expiry struct {
	// Removed is the number of messages removed.
	Removed uint64
	// Markers are the expired messages left in place for a subject delete
	// marker, ascending by sequence (only with SubjectDeleteMarkers).
	Markers []Marker
	// Next is the earliest per-message TTL deadline of a stored message
	// (unix nanoseconds), 0 when there is none: the caller's next pass is due
	// then at the latest for TTLs.
	Next int64
	// NextAge is when the message the MaxAge walk (rule 1) stopped at
	// passes MaxAge (unix nanoseconds): the earliest MaxAge deadline of a
	// stored message, messages with TTLNever passed over. 0 when the walk
	// stopped at none (no MaxAge, or nothing left that MaxAge removes).
	NextAge int64
}

// Marker names an expired message that was the last on its subject.
type Marker struct {
	Seq     uint64
	Subject string
}

// ExpireView is what Expire needs of an engine, over its locked state.
type ExpireView interface {
	// NextStored returns the lowest stored sequence >= seq, or 0.
	NextStored(seq uint64) uint64
	// AgeExpired reports whether the stored message seq has passed MaxAge
	// at now (Expired), and when it has not, its stored time (unix
	// nanoseconds). gone is true when the engine found the message
	// unreadable and dropped it (it then counts as neither).
	AgeExpired(seq uint64, now int64) (expired, gone bool, stored int64, err error)
	// Subject returns the subject of the stored message seq.
	Subject(seq uint64) string
	// SubjectMsgs returns the number of messages stored on subj.
	SubjectMsgs(subj string) uint64
	// IsMarker reports whether the stored message seq is a delete marker
	// (IsDeleteMarker of its header).
	IsMarker(seq uint64) (bool, error)
	// Stored reports whether a message is stored at seq.
	Stored(seq uint64) bool
	// Remove removes the stored message seq.
	Remove(seq uint64)
}

// ExpireState is the part of an engine's state that Expire keeps between
// passes: the TTL index and the MaxAge walk's resume point.
type ExpireState struct {
	TTL TTLIndex
	// From is where the next MaxAge walk starts: every stored message
	// below it has TTLNever (the walk passed it over), so walking it again
	// would find nothing. Reset it to 0 whenever that may no longer hold.
	From uint64
}

// Expire removes what has expired at now (the rules at the top of this
// file) through v and returns the outcome.
func Expire(cfg Config, st *ExpireState, v ExpireView, now int64) (Expiry, error) {
	var res Expiry
	if cfg.MaxAge > 0 {
		if err := expireByAge(cfg, st, v, now, &res); err != nil {
			return res, err
		}
	}
	if err := expireByTTL(cfg, st, v, now, &res); err != nil {
		return res, err
	}
	res.Next = st.TTL.nextStored(v.Stored)
	return res, nil
}

// expireByAge is rule 1.
func expireByAge(cfg Config, st *ExpireState, v ExpireView, now int64, res *Expiry) error {
	from, moved := st.From, false
	for seq := v.NextStored(from); seq != 0; seq = v.NextStored(seq + 1) {
		if st.TTL.Never(seq) {
			if !moved {
				from = seq + 1
			}
			continue
		}
		expired, gone, stored, err := v.AgeExpired(seq, now)
		if err != nil {
			return err
		}
		if gone {
			continue
		}
		if !expired {
			if !moved {
				from = seq
			}
			res.NextAge = stored + int64(cfg.MaxAge)
			break
		}
		left, err := settle(cfg, v, seq, res)
		if err != nil {
			return err
		}
		if left && !moved {
			from, moved = seq, true
		}
	}
	st.From = from
	return nil
}

// expireByTTL is rule 2. A message left for a marker stays due (it keeps
// its deadline), and one the MaxAge walk already left is not reported
// twice.
func expireByTTL(cfg Config, st *ExpireState, v ExpireView, now int64, res *Expiry) error {
	due := st.TTL.popDue(now)
	byAge := len(res.Markers)
	defer slices.SortFunc(res.Markers, func(a, b Marker) int { return cmp.Compare(a.Seq, b.Seq) })
	for k, e := range due {
		if !v.Stored(e.seq) {
			continue
		}
		if reported(res.Markers[:byAge], e.seq) {
			st.TTL.push(e)
			continue
		}
		left, err := settle(cfg, v, e.seq, res)
		if err != nil {
			for _, rest := range due[k:] {
				st.TTL.push(rest)
			}
			return err
		}
		if left {
			st.TTL.push(e)
		}
	}
	return nil
}

// reported reports whether markers (ascending) name seq.
func reported(markers []Marker, seq uint64) bool {
	_, found := slices.BinarySearchFunc(markers, seq, func(m Marker, seq uint64) int {
		return cmp.Compare(m.Seq, seq)
	})
	return found
}

// settle removes the expired message seq, or leaves it for a marker
// (rule 3) and reports so.
func settle(cfg Config, v ExpireView, seq uint64, res *Expiry) (left bool, err error) {
	if cfg.SubjectDeleteMarkers {
		subj := v.Subject(seq)
		if v.SubjectMsgs(subj) == 1 {
			marker, err := v.IsMarker(seq)
			if err != nil {
				return false, err
			}
			if !marker {
				res.Markers = append(res.Markers, Marker{Seq: seq, Subject: subj})
				return true, nil
			}
		}
	}
	v.Remove(seq)
	res.Removed++
	return false, nil
}
