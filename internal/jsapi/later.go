package jsapi

import (
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
)

// AnswerLater is implemented by a Cluster whose server may come to answer,
// within moments, a request it does not answer now, and that nobody else
// answers meanwhile: it knows no leader of the group that would answer
// (the meta group's, or that of its own replica of the stream or
// consumer), but has not known none long enough to answer for the group
// itself (jscluster: 2 s, so that no answer races a new leader's). The
// request is held rather than dropped, and Answers is asked again once
// the time Later returns has passed: the server then answers it (10008,
// a leaderless replica's info, or, if it came to lead, the answer
// itself) or drops it (another server leads). Without the hold, a
// request that arrived in those 2 s went unanswered for good and its
// client timed out after its own timeout (5 s for the nats CLI), where
// nats-server v2.15.2 answers at once (its isLeaderless has no such wait).
//
// Later returns how long to hold the request with endpoint key, stream
// and consumer tokens (as in Unavailable) before asking again; 0 drops it.
// A request is held at most maxHold in all, counted from its first hold.
type AnswerLater interface {
	Later(key, stream, consumer string) time.Duration
}

// maxHold bounds how long a request is held in all (AnswerLater): longer
// than the wait a server needs to answer for a leaderless group (2 s in
// jscluster) and the housekeeping that notices it, shorter than a
// client's usual timeout (5 s for the nats CLI and nats.go's JetStream).
const maxHold = 3 * time.Second

// hold schedules r, which this server does not answer now, to be served
// again when the Cluster says it may answer it soon (AnswerLater), and
// reports whether it did. The request goes back to the queue from a
// timer's goroutine; one that finds the API closed, the queue full, or
// the request held maxHold already is dropped.
func (a *API) hold(r *request) bool {
	l, ok := a.opts.Cluster.(AnswerLater)
	if !ok {
		return false
	}
	now := time.Now()
	if r.held.IsZero() {
		r.held = now
	}
	d := l.Later(r.key, r.stream, r.consumer)
	if d <= 0 {
		return false
	}
	left := maxHold - now.Sub(r.held)
	if left <= 0 {
		return false
	}
	time.AfterFunc(min(d, left), func() { a.requeue(r) })
	return true
}

// requeue puts a held request back in the queue without blocking.
func (a *API) requeue(r *request) {
	if a.closed.Load() {
		return
	}
	select {
	case a.queue <- r:
	default:
		a.warnDropped(r.subject)
	}
}

// OutOfReach is implemented by a Cluster whose meta leader answers for a
// stream or consumer that no server it can reach holds (jscluster: every
// server of the stream's, or the consumer's, replicas without a route
// to it, and none here), which nobody else would answer: OutOfReach
// reports whether request key (STREAM.INFO, CONSUMER.INFO) naming
// stream and consumer is such a request on the meta leader, and the
// request gets 10118 "stream is offline" or 10119 "consumer is offline"
// in the endpoint's response, as nats-server v2.15.2's meta leader
// answers when all the group's peers are offline (jsStreamInfoRequest,
// jsConsumerInfoRequest allPeersOffline), 500 ms after the request
// (offlineDelay). A server without a meta leader answers the same
// requests 10008 (MetaUnavailable).
type OutOfReach interface {
	OutOfReach(key, stream, consumer string) bool
}

// offline returns the error request r gets as one for a stream or
// consumer out of reach (OutOfReach), nil when it gets its answer.
func (a *API) offline(r *request) *jserr.Error {
	o, ok := a.opts.Cluster.(OutOfReach)
	if !ok || !o.OutOfReach(r.key, r.stream, r.consumer) {
		return nil
	}
	if r.key == "CONSUMER.INFO" {
		return jserr.New(jserr.ConsumerOffline)
	}
	return jserr.New(jserr.StreamOffline)
}

// offlineDelay is how long an offline answer (OutOfReach) waits, once, so
// that a leader of the stream or consumer that this server cannot reach
// but the client's server can answers first: nats-server v2.15.2's
// errRespDelay (jsStreamInfoRequest: "Delaying an error response gives
// the leader a chance to respond before us").
const offlineDelay = 500 * time.Millisecond

// delayOffline puts r back in the queue after offlineDelay the first time
// it is to get an offline answer, and reports whether it did.
func (a *API) delayOffline(r *request) bool {
	if r.delayed {
		return false
	}
	r.delayed = true
	time.AfterFunc(offlineDelay, func() { a.requeue(r) })
	return true
}
