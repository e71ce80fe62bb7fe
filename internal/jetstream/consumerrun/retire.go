package consumerrun

import (
	"time"
)

// Replacing a consumer's runtime on the same server (docs/cluster.md,
// "Scaling consumers", "In place"): a consumer whose replica count
// changes, or whose stream's does, runs under a new runtime on the
// server that ran it (a consumer of one replica becomes its group's
// first replica, a group's last replica becomes the consumer of one
// replica, a stream's conversion restarts the stream's consumers). The
// old runtime retires (Retire): it stops deciding and saves its state as
// a stop does, but keeps its subscriptions, the pull requests that
// waited on it, and queues what reaches it. The new one, given it
// (Succeed), takes it over once it has subscribed (takeOver): the old
// one's subscriptions end only then, so the server's interest in the
// consumer's subjects never lapses and no ack or pull request meets a
// 503; the waiting pull requests and the messages it queued go to the
// new runtime. nats-server v2.15.2 changes the consumer's replica count
// in place, its pull requests still waiting and no ack refused.

// retireWait bounds how long a retired runtime keeps its subscriptions
// and pull requests for a successor (endRetired): one that does not come
// (the conversion failed) leaves the pull requests answered as at a stop.
const retireWait = 10 * time.Second

// forwardable reports whether the event came in a message to the
// consumer's subjects (an ack, a pull request, a flow control reply, a
// reset): what a retired runtime hands to its successor.
func (ev *cevent) forwardable() bool {
	return ev.ack != nil || ev.pull != nil || ev.fcSub != "" || ev.reset != nil
}

// Retire stops the consumer for a runtime of the same consumer on this
// server to take its place (Succeed), as Stop(nil) stops it (its loop
// ended, its state saved and its store closed), but it keeps its
// subscriptions and waiting pull requests, and queues the acks, pull
// requests, flow control replies and resets that reach it, for its
// successor. It reports false when it kept nothing (it was not
// subscribed, or is a replicated consumer that does not lead): it then
// stopped as Stop(nil) stops. A retired consumer nobody takes over
// within retireWait ends as a stop would have (endRetired).
func (c *Consumer) Retire() bool {
	c.persisting.Wait()
	c.mu.Lock()
	if c.stopped || len(c.subs) == 0 || (c.repl && !c.leading) {
		c.mu.Unlock()
		c.Stop(nil)
		return false
	}
	c.stopped, c.retiring = true, true
	c.mu.Unlock()
	close(c.quit)
	c.done.Wait()
	if c.repl {
		c.settleProposals()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) > 0 {
		// Events a hold kept for later (replicated.go, holdRound) go to
		// the successor first.
		c.evMu.Lock()
		c.events = append(c.held, c.events...)
		c.evMu.Unlock()
		c.held = nil
	}
	c.cancelMoves()
	c.maybeSave(c.now(), true)
	if c.saver != nil {
		c.saver.close()
	}
	if c.cstore != nil {
		_ = c.cstore.Close()
	}
	if c.retiring { // not taken over meanwhile
		c.retireTimer = time.AfterFunc(retireWait, c.endRetired)
	}
	return true
}

// requeue puts the events of evs its successor takes (forwardable)
// back at the head of the queue: the loop took them from the queue as
// the consumer retired, and handles none (c.mu held).
func (c *Consumer) requeue(evs []cevent) {
	var keep []cevent
	for i := range evs {
		if evs[i].forwardable() {
			keep = append(keep, evs[i])
		}
	}
	if len(keep) == 0 {
		return
	}
	c.evMu.Lock()
	c.events = append(keep, c.events...)
	c.evMu.Unlock()
}

// Retiring reports whether the consumer retired (Retire) and nobody took
// it over or ended it yet.
func (c *Consumer) Retiring() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retiring
}

// EndRetired ends a retired consumer nobody took over: its
// subscriptions end, its waiting pull requests get what a stop gives
// them (409 Server Shutdown) and what it queued is dropped. It does
// nothing to another consumer.
func (c *Consumer) EndRetired() { c.endRetired() }

func (c *Consumer) endRetired() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.retiring {
		return
	}
	c.retiring = false
	if c.retireTimer != nil {
		c.retireTimer.Stop()
	}
	c.unsubscribe()
	c.d.EndPulls(nil)
	c.takeEvents(nil)
}

// Succeed makes the consumer, not started yet, the successor of prev, a
// retired runtime of the same consumer (Retire): it takes prev over once
// it subscribes (at Start, or for a replicated consumer when it comes to
// lead).
func (c *Consumer) Succeed(prev *Consumer) {
	c.pred.Store(prev)
}

// TakePred returns, and forgets, the retired runtime the consumer was to
// take over and has not (it never subscribed): nil when none.
func (c *Consumer) TakePred() *Consumer {
	return c.pred.Swap(nil)
}

// takeOver takes the consumer's retired predecessor over once the
// consumer has subscribed (its loop, before each round, holding no
// lock): the predecessor's subscriptions end (the server's interest in
// the consumer's subjects stays: this consumer's subscriptions hold it),
// the messages it queued go ahead of this consumer's queue, and any that
// reaches it from now on follows them (push); its waiting pull requests
// join this consumer's. The double-ack confirmations its committed log
// released (a replicated consumer's) are sent, and the acknowledgements
// it committed go to this consumer's retention.
func (c *Consumer) takeOver() {
	p := c.pred.Load()
	if p == nil {
		return
	}
	c.mu.Lock()
	subscribed := len(c.subs) > 0
	c.mu.Unlock()
	if !subscribed || !c.pred.CompareAndSwap(p, nil) {
		return
	}
	p.mu.Lock()
	if !p.retiring {
		p.mu.Unlock()
		return
	}
	p.retiring = false
	if p.retireTimer != nil {
		p.retireTimer.Stop()
	}
	pulls := p.d.TakePulls()
	acked, replies := p.takeCommitted()
	p.evMu.Lock()
	var evs []cevent
	for i := range p.events {
		if p.events[i].forwardable() {
			evs = append(evs, p.events[i])
		}
	}
	p.events = nil
	p.successor = c
	p.evMu.Unlock()
	p.unsubscribe()
	p.mu.Unlock()
	c.evMu.Lock()
	c.events = append(evs, c.events...) // those its subscriptions took came first
	c.evMu.Unlock()
	c.mu.Lock()
	c.d.AdoptPulls(pulls)
	if c.repl {
		c.cacked = append(c.cacked, acked...)
	} else {
		c.acked = append(c.acked, acked...)
	}
	c.mu.Unlock()
	for _, r := range replies {
		c.env.Transport.Publish(r, "", nil, nil)
	}
	c.Signal()
}

// settleWait bounds how long a retiring replicated consumer waits for
// the operations it proposed to apply (settleProposals).
const settleWait = 5 * time.Second

// settlePoll is how often settleProposals looks.
const settlePoll = 2 * time.Millisecond

// settleProposals, on a leading replicated consumer whose loop ended
// (Retire), proposes the batch back-pressure held and waits, at most
// settleWait, until every operation it proposed has applied to its
// committed state: the state its caller takes then (CommittedSnapshot)
// holds every delivery and acknowledgement it decided, so that the
// consumer's next runtime delivers none of them again. It gives up when
// the replica stops leading or a batch is lost.
func (c *Consumer) settleProposals() {
	deadline := time.Now().Add(settleWait)
	for {
		c.mu.Lock()
		c.flushReplicated()
		done := !c.leading || c.stepDown || (!c.unflushed && c.kapplied >= c.ckey)
		c.mu.Unlock()
		if done || time.Now().After(deadline) {
			return
		}
		time.Sleep(settlePoll)
	}
}
