package route

import (
	"cmp"
	"slices"
)

// Interest counts a server's local subscriptions per (subject, queue) and
// says which RS+ or RS- its peers must be sent when the count changes
// (nats-server v2.15.2 updateRouteSubscriptionMap): a plain subject is
// announced when its first subscription arrives and withdrawn when its last
// leaves; a queue group is announced again with its new member count
// (weight) at every change and withdrawn at zero.
//
// Interest is not safe for concurrent use. The caller serializes every
// call with the writes of the returned lines to every route, under one
// lock, so that each peer receives the changes in the order the counts
// changed (nats-server #8233: RS+ and RS- for the same subject written by
// two goroutines in the wrong order left a peer without interest).
type Interest struct {
	account string
	counts  map[interestKey]int32
}

type interestKey struct{ subject, queue string }

// NewInterest returns an empty Interest whose lines name account.
func NewInterest(account string) *Interest {
	return &Interest{account: account, counts: make(map[interestKey]int32)}
}

// Add counts one more local subscription to subject (in queue group queue,
// or plain when queue is ""). It appends to dst the line to send to every
// peer, if any, and returns dst.
func (in *Interest) Add(dst []byte, subject, queue string) []byte {
	k := interestKey{subject, queue}
	n := in.counts[k] + 1
	in.counts[k] = n
	if queue == "" && n > 1 {
		return dst
	}
	return AppendSub(dst, in.account, subject, queue, n)
}

// Remove counts one local subscription less. It appends to dst the line to
// send to every peer, if any, and returns dst. Removing what was never
// added changes nothing.
func (in *Interest) Remove(dst []byte, subject, queue string) []byte {
	k := interestKey{subject, queue}
	n, ok := in.counts[k]
	if !ok {
		return dst
	}
	n--
	if n > 0 {
		in.counts[k] = n
		if queue == "" {
			return dst
		}
		return AppendSub(dst, in.account, subject, queue, n)
	}
	delete(in.counts, k)
	return AppendUnsub(dst, in.account, subject, queue)
}

// AppendAll appends one RS+ per subject and queue group with local
// interest, sorted by subject then queue, for a peer that just connected
// (nats-server sendSubsToRoute).
func (in *Interest) AppendAll(dst []byte) []byte {
	keys := make([]interestKey, 0, len(in.counts))
	for k := range in.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b interestKey) int {
		return cmp.Or(cmp.Compare(a.subject, b.subject), cmp.Compare(a.queue, b.queue))
	})
	for _, k := range keys {
		dst = AppendSub(dst, in.account, k.subject, k.queue, in.counts[k])
	}
	return dst
}

// Len returns the number of subjects and queue groups with local interest.
func (in *Interest) Len() int { return len(in.counts) }
