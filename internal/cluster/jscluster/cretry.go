package jscluster

import (
	"errors"
	"slices"
	"strings"
	"time"
)

// Consumer replicas that could not start (docs/cluster.md, "Consumers
// in a cluster"): reconcileConsumer starts this server's replica of a
// consumer when a meta operation or its stream's replica starting asks
// for it; a start that fails for a reason that may pass (its stream's
// replica still catching up, its group's earlier replica here not
// removed yet, the engine busy deleting an earlier consumer of the name)
// is tried again by the run goroutine's housekeeping, after startRetryMin,
// then twice as long each time up to startRetryMax, by the cluster's
// clock (Config.Now). Without it the replica stays out until the server
// restarts, while its group counts it as a voter (a consumer of three
// replicas running on two) and the server's health reports the consumer
// missing. A failure is logged when it differs from the last one of
// that consumer, and the start after failures is logged too.
const (
	startRetryMin = 250 * time.Millisecond
	startRetryMax = 10 * time.Second
)

// startRetry is a consumer replica whose start failed: when to try
// again (at), the wait after that attempt (wait), the last failure's
// text (last), and how many attempts failed (failed).
type startRetry struct {
	at     time.Time
	wait   time.Duration
	last   string
	failed int
}

// noRetryError is a failure that an attempt again cannot mend (a config
// that does not decode, a fenced checkpoint, consumer files that do not
// restore): it is logged, not retried. Its text is err's.
type noRetryError struct{ err error }

func (e noRetryError) Error() string { return e.err.Error() }
func (e noRetryError) Unwrap() error { return e.err }

// noRetry wraps err as a failure not to retry.
func noRetry(err error) error { return noRetryError{err} }

// retryable reports whether err may pass (not marked noRetry).
func retryable(err error) bool {
	var nr noRetryError
	return !errors.As(err, &nr)
}

// noteConsumerStart records the outcome of an attempt to start this
// server's replica of consumer k (nil: it runs), logs a new failure, and
// schedules the next attempt; the run goroutine's.
func (c *Cluster) noteConsumerStart(k consumerKey, err error) {
	r := c.cretry[k]
	if err == nil {
		if r != nil {
			delete(c.cretry, k)
			c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s': this server's replica runs as assigned (after %d failed attempt(s))", k.account, k.stream, k.name, r.failed)
		}
		return
	}
	text := err.Error()
	if r == nil || r.last != text {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: %s", k.account, k.stream, k.name, text)
	}
	if !retryable(err) {
		delete(c.cretry, k)
		return
	}
	if r == nil {
		r = &startRetry{wait: startRetryMin}
		if c.cretry == nil {
			c.cretry = map[consumerKey]*startRetry{}
		}
		c.cretry[k] = r
	}
	r.last, r.failed = text, r.failed+1
	r.at = c.cfg.Now().Add(r.wait)
	r.wait = min(2*r.wait, startRetryMax)
}

// retryConsumerStarts reconciles each consumer whose replica's start is
// due to be tried again (noteConsumerStart); one that no longer needs a
// start (its replica runs, or it is not assigned here, or its stream's
// replica does not run: the stream's start reconciles it) is forgotten.
func (c *Cluster) retryConsumerStarts() {
	now := c.cfg.Now()
	var due []consumerKey
	for k, r := range c.cretry {
		if !now.Before(r.at) {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b consumerKey) int {
		return strings.Compare(a.account+"\x00"+a.stream+"\x00"+a.name, b.account+"\x00"+b.stream+"\x00"+b.name)
	})
	for _, k := range due {
		r := c.cretry[k]
		if r == nil {
			continue
		}
		failed := r.failed
		c.reconcileConsumer(k)
		if r = c.cretry[k]; r != nil && r.failed == failed {
			delete(c.cretry, k) // no start was attempted: nothing to retry
		}
	}
}
