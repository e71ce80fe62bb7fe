package consumerrun

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A replicated consumer (docs/cluster.md, "Replicated consumers") has
// a log that commits later: a Raft group of the consumer's replicas
// (internal/cluster/consumerlog). Its log implements ReplicatedLog, and
// the consumer then runs in one of two modes:
//
//   - following: it subscribes to nothing, delivers nothing and keeps
//     no timers; the log's committed operations are applied to its state
//     (Apply, on the log's goroutine, under mu), and the acknowledgements
//     they commit go to the stream for retention (only a stream leader
//     acts on them).
//   - leading: once its log says it leads and has applied every entry of
//     earlier terms (SetLeading), it delivers from a clone of the
//     committed state (consumer.State.Clone) and keeps the committed one
//     beside it (cst). Each operation it decides is applied to its own
//     state at once (delivery does not wait for consensus, as in
//     nats-server) and proposed; committed operations, its own, are
//     applied to cst. A double ack is confirmed once its operation has
//     committed (a replica that stops leading keeps the confirmations:
//     keptConfirms). It has at most maxUncommitted deliveries sent whose
//     operations have not applied (window.go): at the bound it delivers
//     nothing until they apply, which wakes it. Leadership lost: the
//     delivering state is dropped for the committed one (what was
//     proposed and not committed may be delivered again: at least once,
//     at most maxUncommitted messages). It keeps its subscriptions until
//     its successor serves from every server (SuccessorReady), then
//     ends the pull requests that waited on it with 409 Leadership
//     Change and publishes again, for the successor, the acks, pull
//     requests and resets that reached it after it stopped deciding
//     (endOrphans; docs/cluster.md, "Moving the subscriptions").
//
// The first leader of a new consumer proposes its starting position (a
// Reset to consumer.Deliverer.Position's sequence), so that every replica
// starts where the leader's stream replica said, whatever its own held.

// ReplicatedLog is a consumer log that commits later and says whether
// this replica leads it (streamrun.Leader). Propose only adds to a batch
// that Flush proposes as one entry, at the end of each round of the
// consumer's loop (a batch refused for back-pressure stays, pending, for
// the next Flush; an error means the batch is lost); Discard drops the
// batch when the replica stops leading. The log hands each committed
// entry's operations to the consumer's ApplyBatch, on the log's
// goroutine without the consumer's lock, and tells the consumer of its
// leadership through SetLeading. SuccessorReady reports, on a replica
// that led, whether the leader after it serves the consumer's subjects
// from every server (consumerlog.Log.SuccessorReady). StepDown asks the
// group to elect another leader (a batch was lost, so the delivering
// state went ahead of the log). MayDecide reports whether the leader may decide now (no
// leadership transfer asked or under way, still the group's leader);
// it is asked once per round of a leading consumer and must be cheap.
// Dropped reports whether raft refused, after Flush returned, a batch
// flushed since the last Discard while this replica led (it never
// entered the log: raftnode ErrDropped); it is asked once per round of
// a leading consumer and must be cheap too. HandedOver reports, on a
// replica that has come to lead, whether its predecessor handed it the
// leadership (alive, it ends its own pull requests: endOrphans) rather
// than going silent (consumerlog.Log.HandedOver). RecordsPulls reports
// whether the log may hold PullRequest operations (every replica's
// server decodes them: consumerlog.Log.RecordsPulls; pulls.go); it is
// asked once per new pull request reply subject. Outstanding returns the
// largest key of a batch flushed, in this leadership or an earlier one,
// that may still apply here with its key (its proposal not resolved:
// consumerlog.Log.Outstanding), 0 for none; it is asked by a replica
// that stopped leading while it keeps confirmations (keptConfirms).
type ReplicatedLog interface {
	streamrun.Log[consumer.Op]
	streamrun.Leader
	Flush() (pending bool, err error)
	Discard()
	Dropped() bool
	Outstanding() uint64
	StepDown()
	MayDecide() bool
	SuccessorReady() bool
	HandedOver() bool
	RecordsPulls() bool
}

// statusLeadershipChange ends the pull requests waiting on a consumer
// replica that no longer leads (nats-server v2.15.2: 409 Leadership
// Change; the clients send them again).
var statusLeadershipChange = []byte("NATS/1.0 409 Leadership Change\r\n\r\n")

// keyedReply is a double-ack confirmation waiting for the proposal with
// its key to commit.
type keyedReply struct {
	key   uint64
	reply string
}

// Double acks through a change of leader (docs/cluster.md, "Replicated
// consumers", decision 7). A confirmation waits for the batch that
// carries its key: the batch flushed at the end of the round that took
// the ack, whose operations hold consecutive keys up to the batch's own
// (the entry's tag; a batch with a gap never reaches the log, the
// replica steps down first). raftnode hands this replica an entry's tag
// only when the entry applies at the index and under the term this
// replica proposed it in, also after it lost the leadership (raftnode
// kept.go), so an applied entry with tag t and n operations releases the
// confirmations with keys in (t-n, t]. Those below belong to batches that
// will never apply here with their tags: a batch of this replica that
// commits applies before any it proposed later (a later leader's log
// holds it), so they are dropped (no answer; the client's retry or the
// ack's redelivery follows). A replica that stops leading keeps its
// confirmations (Before, it dropped them, and the client timed out
// although the ack committed under the next leader, as with
// nats-server v2.15.2, which forgets its pending ack replies on losing
// the leadership: consumer.go setLeader, o.replies = nil) and drops
// those whose batches can no longer apply (keyed above
// ReplicatedLog.Outstanding), looking every keptConfirmLook: raftnode
// resolves a deposed leader's proposals ten election timeouts after the
// loss at the latest, so the confirmations kept are those held at the
// loss, for that long at most.

// keptConfirmLook is how often a replica that stopped leading and keeps
// double-ack confirmations looks whether their batches can still apply
// (keptConfirms).
const keptConfirmLook = 250 * time.Millisecond

// releaseConfirms releases the confirmations that the applied entry with
// tag key and n operations carries and drops those of batches before it
// (c.mu held). It reports whether it released any.
func (c *Consumer) releaseConfirms(key uint64, n int) bool {
	released, i := false, 0
	for ; i < len(c.confirms) && c.confirms[i].key <= key; i++ {
		if c.confirms[i].key+uint64(n) > key {
			c.readyReplies = append(c.readyReplies, c.confirms[i].reply)
			released = true
		}
	}
	clear(c.confirms[:i])
	c.confirms = c.confirms[i:]
	return released
}

// keptConfirms drops, on a replica that no longer leads, the
// confirmations whose batches can no longer apply here with their keys
// (c.mu held): keyed above every proposal still outstanding.
func (c *Consumer) keptConfirms() {
	if c.leading || len(c.confirms) == 0 {
		return
	}
	out := c.log.(ReplicatedLog).Outstanding()
	i := len(c.confirms)
	for i > 0 && c.confirms[i-1].key > out {
		i--
	}
	clear(c.confirms[i:])
	c.confirms = c.confirms[:i]
}

// SetLeading tells a replicated consumer that its replica leads its log
// and has applied every entry of earlier terms (on), or that it no longer
// leads (off). It only queues the change for the loop.
func (c *Consumer) SetLeading(on bool) {
	c.push(cevent{lead: &on})
}

// Leading reports whether the consumer delivers here: always for a
// consumer with a local log, while it leads for a replicated one.
func (c *Consumer) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.repl || c.leading
}

// handOverDrain bounds how long a replicated consumer asked to hand its
// leadership over (HandOver) takes the acknowledgements of what it
// delivered before it asks the transfer: an ack that comes during the
// transfer is lost (raft drops what is proposed then), and the message
// waits for its ack wait to be delivered again.
const handOverDrain = 100 * time.Millisecond

// HandOver has a leading replicated consumer stop delivering and calls
// transfer (the request of its group's leadership transfer) from its
// loop once every operation it decided is queued to its log, so that
// the transfer follows them (consumerlog.Replica): after a round that
// took no acknowledgement (the client acknowledged what it got), or
// handOverDrain after the call, and once back-pressure let its batch
// through. It returns nil (transfer's error is logged). The consumer
// then holds (package comment) until its log says the transfer ended.
// A consumer that does not lead (or is not replicated) delivers
// nothing: transfer is called at once and its error returned.
func (c *Consumer) HandOver(transfer func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.repl || !c.leading || c.stopped {
		return transfer()
	}
	if c.transferWait == nil { // a request repeated meanwhile does not extend the drain
		c.drainUntil = c.now().Add(handOverDrain)
	}
	c.transferWait = transfer
	c.Signal()
	return nil
}

// askTransfer asks the transfer HandOver left to the loop once this
// round's operations are queued (flushReplicated) and the client's
// acknowledgements stopped (acks: how many this round took) or the
// drain is over (c.mu held).
func (c *Consumer) askTransfer(now time.Time, acks int) {
	t := c.transferWait
	if t == nil || c.unflushed || c.stepDown || acks > 0 && now.Before(c.drainUntil) {
		return
	}
	c.transferWait = nil
	c.holding = true // until the log says the transfer ended (holdRound)
	if err := t(); err != nil {
		c.env.Logf("consumer %s > %s: leadership transfer not asked: %v", c.sr.Name(), c.name, err)
	}
}

// holdRound is the round of a leading replicated consumer that may not
// decide now (package comment, holding; c.mu held): it registers pull
// requests, keeps the other events for later and proposes what waits.
// It reports false, the kept events put back before evs, when the
// consumer may decide again.
func (c *Consumer) holdRound(evs []cevent, now time.Time) ([]cevent, bool) {
	if c.log.(ReplicatedLog).MayDecide() {
		c.holding = false
		if len(c.held) > 0 {
			evs = append(c.held, evs...)
			c.held = nil
		}
		return evs, false
	}
	c.holding = true
	for i := range evs {
		switch {
		case evs[i].pull != nil:
			c.handle(&evs[i], now)
		case evs[i].lead == nil:
			c.held = append(c.held, evs[i])
		}
		evs[i] = cevent{}
	}
	c.flushReplicated()
	return evs, true
}

// commitReplicated is Commit for a replicated consumer (c.mu held): a
// follower decides nothing; the leader applies op to its delivering
// state and adds it to the batch its loop proposes at the end of the
// round (flushReplicated), under the next key. An operation that cannot
// be proposed leaves the delivering state ahead of the log: the replica
// steps down, and the next leader starts from what committed.
func (c *Consumer) commitReplicated(op consumer.Op) *consumer.Outcome {
	if !c.leading || c.stepDown {
		c.cout = consumer.Outcome{}
		return &c.cout
	}
	c.st.ApplyOp(op, &c.cout)
	c.ckey++
	if err := c.log.Propose(op, c.ckey); err != nil {
		c.env.Logf("consumer %s > %s: operation of kind %d not proposed (%v): stepping down", c.sr.Name(), c.name, op.Kind(), err)
		c.stepDown = true
	}
	switch op.(type) {
	case *consumer.Deliver, *consumer.Redeliver:
		c.win.delivered(c.ckey)
	}
	if !c.unflushed {
		c.unflushed = true
		c.Signal() // an operation decided outside the loop (an API call) is flushed by the next round
	}
	if c.cout.Dirty {
		c.dirty = true
	}
	return &c.cout
}

// flushReplicated proposes the round's batch (c.mu held). A batch lost
// (raftnode refused it for good, at once or after Flush returned:
// ReplicatedLog.Dropped) makes the replica step down: its delivering
// state went ahead of the log for good, and a batch that will never
// apply would hold its window (window.go) shut.
func (c *Consumer) flushReplicated() {
	c.win.flushed()
	rl := c.log.(ReplicatedLog)
	if !c.stepDown && rl.Dropped() {
		c.env.Logf("consumer %s > %s: operations proposed and then dropped by raft: stepping down", c.sr.Name(), c.name)
		c.stepDown = true
	}
	if !c.unflushed || c.stepDown {
		return
	}
	pending, err := rl.Flush()
	if err != nil {
		c.env.Logf("consumer %s > %s: operations not proposed (%v): stepping down", c.sr.Name(), c.name, err)
		c.stepDown = true
	}
	c.unflushed = pending
}

// noteActivity records on a follower the time of a delivery its leader
// made (op a Deliver or Redeliver: its Time), so that the info's
// delivered.last_active holds on the next leader (c.mu held).
func (c *Consumer) noteActivity(op consumer.Op) {
	switch o := op.(type) {
	case *consumer.Deliver:
		c.d.NoteDelivered(time.Unix(0, o.Time))
	case *consumer.Redeliver:
		c.d.NoteDelivered(time.Unix(0, o.Time))
	}
}

// applyCommitted applies an operation the replicated log committed: to
// the committed state beside the delivering one while leading, to the
// state otherwise. The acknowledgements it commits go to retention; this
// replica's own operation (key), while it leads or after, releases the
// confirmations that waited for it (releaseConfirms).
func (c *Consumer) applyCommitted(index uint64, op consumer.Op, key uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyCommittedLocked(index, []consumer.Op{op}, key)
}

// ApplyBatch applies the operations of one committed entry of a
// replicated consumer's log, all under one hold of the lock, so that a
// snapshot (CommittedSnapshot) holds whole entries only
// (consumerlog.Replica).
func (c *Consumer) ApplyBatch(index uint64, ops []consumer.Op, key uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyCommittedLocked(index, ops, key)
}

func (c *Consumer) applyCommittedLocked(index uint64, ops []consumer.Op, key uint64) {
	c.capplied = index
	st := c.st
	if c.leading {
		st = c.cst
	}
	acked := false
	for _, op := range ops {
		switch o := op.(type) {
		case *consumer.Reset:
			c.inited = true
		case *consumer.PullRequest:
			c.applyPull(o)
			continue
		}
		st.ApplyOp(op, &c.ccout)
		if len(c.ccout.Acked) > 0 {
			c.cacked = append(c.cacked, c.ccout.Acked...)
			acked = true
		}
		if !c.leading {
			c.noteActivity(op)
		}
	}
	if !c.leading {
		if acked {
			c.lastAck = c.now() // as nats-server's followers on a replicated ack
		}
		c.d.Invalidate()
		c.dirty = true
	}
	signal := acked
	if c.leading && key > c.kapplied {
		c.kapplied = key
	}
	if c.leading && key != 0 && c.win.applied(key) {
		signal = true // room again for deliveries (window.go)
	}
	if key != 0 && c.releaseConfirms(key, len(ops)) {
		signal = true
	}
	if signal {
		c.Signal()
	}
}

// lead switches a replicated consumer between its modes (the loop,
// c.mu held).
func (c *Consumer) lead(on bool) {
	if on == c.leading || c.stopped {
		return
	}
	c.log.(ReplicatedLog).Discard()
	held := c.held
	c.unflushed, c.stepDown = false, false
	c.held, c.transferWait, c.holding = nil, nil, false
	c.win.reset()
	if on {
		c.kapplied = c.ckey // a proposal of an earlier term that never applied is not waited for (settleProposals)
		// Every entry of earlier terms has applied here: the
		// confirmations kept from the last leadership that their entries
		// did not release never will be.
		clear(c.confirms)
		c.confirms = c.confirms[:0]
		ended := c.endOrphans(true)
		c.cst = c.st
		c.st = c.cst.Clone()
		c.d.SetState(c.st)
		c.d.Invalidate()
		c.leading = true
		c.d.Restarted(c.now())
		if !c.inited {
			// The first leader proposes where the consumer starts.
			c.d.Position()
			start := c.d.State().NextSeq()
			c.d.SetState(c.st)
			c.Commit(&consumer.Reset{Stream: start})
		}
		c.subscribe()
		// After subscribe: the 409s follow its interest on each route.
		c.endRecordedPulls(!c.log.(ReplicatedLog).HandedOver(), ended)
		c.Signal()
		return
	}
	c.leading = false
	// The subscriptions stay, and the waiting pull requests wait, until
	// the successor serves (endOrphans): a client sends its request again
	// on the 409 at once, and one that reached a server knowing no
	// leader's interest would be lost, the client waiting for its
	// heartbeats to miss (tens of seconds). What arrives meanwhile, and
	// the acks held during the transfer, go to the successor then.
	c.keepLate(held)
	if len(c.subs) > 0 || c.d.NumWaiting() > 0 || len(c.late) > 0 {
		c.orphansUntil = c.now().Add(orphanWait)
	} else {
		c.d.EndPullsOnce(statusLeadershipChange) // those whose requester left
	}
	c.st, c.cst = c.cst, nil
	c.d.SetState(c.st)
	last := c.d.LastDelivered()
	c.d.Reset()
	c.d.NoteDelivered(last) // delivered.last_active stays (noteActivity)
	// The confirmations stay (keptConfirms).
	c.acked, c.ackReplies = nil, nil
}

// orphanWait bounds how long a replica that stopped leading keeps its
// subscriptions and the pull requests that waited on it before it ends
// them with 409 Leadership Change (endOrphans).
const orphanWait = 4 * time.Second

// maxLate bounds the messages a replica that stopped leading keeps for
// its successor (keepLate); more are dropped.
const maxLate = 10000

// raw returns the message a replicated consumer's subscription received,
// copied, for its successor (rawMsg); nil for another consumer.
func (c *Consumer) raw(subject, reply string, hdr, data []byte) *rawMsg {
	if !c.repl {
		return nil
	}
	return &rawMsg{subject: subject, reply: reply, hdr: slices.Clone(hdr), data: slices.Clone(data)}
}

// keepLate keeps, for the successor, the events of evs that came in a
// message (acks, pull requests, resets: cevent.fwd) and reached this
// replica after it stopped deciding (c.mu held): held during a transfer
// that moved the leadership, or taken while it keeps its subscriptions
// (endOrphans).
func (c *Consumer) keepLate(evs []cevent) {
	for i := range evs {
		if evs[i].fwd != nil && len(c.late) < maxLate {
			c.late = append(c.late, evs[i])
		}
	}
}

// endOrphans ends what this replica kept when it stopped leading (c.mu
// held): once its log says the successor serves (its interest known to
// every server: ReplicatedLog.SuccessorReady), orphanWait after at the
// latest, or at once when it leads again (regained). Its subscriptions
// end first (a message routed here from then on is routed to the
// successor too), then the pull requests that waited on it get 409
// Leadership Change (nats-server v2.15.2's answer; the clients send them
// again), and the messages kept meanwhile are published again for the
// successor (forward), or, regained, handled here. It returns the reply
// subjects it sent the 409 to.
func (c *Consumer) endOrphans(regained bool) (ended map[string]bool) {
	if c.orphansUntil.IsZero() {
		return nil
	}
	if !regained && !c.log.(ReplicatedLog).SuccessorReady() && c.now().Before(c.orphansUntil) {
		return nil
	}
	c.orphansUntil = time.Time{}
	late := c.late
	c.late = nil
	ended = c.d.EndPullsOnce(statusLeadershipChange)
	if regained {
		c.held = late // handled once it may decide (holdRound)
		return ended
	}
	c.unsubscribe()
	c.forward(late)
	return ended
}

// forward publishes again the messages of the events a replica that no
// longer leads kept (keepLate), after it unsubscribed: they reach the
// successor, whose interest its server knows by then (c.mu held). A
// message the publisher's server also routed to the successor directly
// (it knew both interests) reaches it twice: an ack twice changes
// nothing; a pull request twice is served twice.
func (c *Consumer) forward(evs []cevent) {
	for i := range evs {
		m := evs[i].fwd
		c.env.Transport.Publish(m.subject, m.reply, m.hdr, m.data)
	}
}

// takeCommitted returns, and forgets, the stream sequences committed
// acknowledgements acknowledged and the confirmations released, for the
// loop to pass on after the round (c.mu held).
func (c *Consumer) takeCommitted() (acked []uint64, replies []string) {
	acked, replies = c.cacked, c.readyReplies
	c.cacked, c.readyReplies = nil, nil
	return acked, replies
}

// holdReplies makes this round's double-ack confirmations wait for the
// last operation proposed so far to commit (c.mu held): the last of the
// batch flushed this round, or of the batch back-pressure holds. A round
// that proposed nothing (a +TERM of a message no longer pending) when
// every operation this leader proposed has applied (its delivering state
// is the committed one) confirms at once: before, such a confirmation
// waited for the next batch to apply, on an idle consumer until the
// leadership moved (which dropped it).
func (c *Consumer) holdReplies(replies []string) {
	if !c.unflushed && c.kapplied >= c.ckey {
		c.readyReplies = append(c.readyReplies, replies...)
		return
	}
	for _, r := range replies {
		c.confirms = append(c.confirms, keyedReply{key: c.ckey, reply: r})
	}
}

// maybeStepDown acts on a refused proposal (the loop, after the round):
// the replica leaves its delivering state for the committed one and asks
// its group for another leader.
func (c *Consumer) maybeStepDown() {
	c.mu.Lock()
	if !c.stepDown {
		c.mu.Unlock()
		return
	}
	c.stepDown = false
	c.lead(false)
	c.mu.Unlock()
	if rl, ok := c.log.(ReplicatedLog); ok {
		rl.StepDown()
	}
}

// committedSnapshot is the encoding of a replicated consumer's committed
// state, in its group's snapshots and its replica's checkpoints
// (internal/cluster/consumerlog): the stored form of the delivery state
// (consumer.State.Snapshot), the pause and the dead-letter switch, as
// JSON. Restoring it recomputes the deadlines of pending deliveries as a
// restart does (consumer.RestoreState).
type committedSnapshot struct {
	State      *store.ConsumerState `json:"state"`
	Paused     int64                `json:"paused,omitempty"`
	DeadLetter bool                 `json:"dead_letter,omitempty"`
	// Pulls are the reply subjects of waiting pull requests the log
	// recorded, with their expiry (unix ns) (pulls.go).
	Pulls pullSet `json:"pulls,omitempty"`
}

// CommittedSnapshot returns the committed state of a replicated consumer
// (committedSnapshot's encoding) and the index of the last log entry it
// reflects. It takes the consumer's lock; Apply holds it too, so the two
// agree.
func (c *Consumer) CommittedSnapshot() (index uint64, data []byte, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	if c.leading {
		st = c.cst
	}
	data, err = json.Marshal(committedSnapshot{State: st.Snapshot(), Paused: st.PausedUntil(), DeadLetter: st.DeadLetterOn(), Pulls: c.pulls})
	return c.capplied, data, err
}

// RestoreCommitted replaces a replicated consumer's committed state with
// a snapshot taken at log index (CommittedSnapshot's encoding): at the
// start of a replica from its checkpoint, or when its group installs a
// leader's snapshot. Errors: a snapshot that does not decode or whose
// pending deliveries are not in ascending order (damage: the caller
// fences the replica).
func (c *Consumer) RestoreCommitted(index uint64, data []byte) error {
	var cs committedSnapshot
	if err := json.Unmarshal(data, &cs); err != nil {
		return fmt.Errorf("consumer %s > %s: snapshot at %d: %w", c.sr.Name(), c.name, index, err)
	}
	if cs.State == nil || !slices.IsSortedFunc(cs.State.Pending, func(a, b store.StreamPending) int { return cmp.Compare(a.Stream, b.Stream) }) {
		return fmt.Errorf("consumer %s > %s: snapshot at %d holds no state or unordered deliveries", c.sr.Name(), c.name, index)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := consumer.RestoreState(consumer.PolicyOf(&c.cfg), cs.State)
	st.SetDeadLetter(cs.DeadLetter)
	var out consumer.Outcome
	st.ApplyOp(&consumer.Pause{Until: cs.Paused}, &out)
	if c.leading {
		c.cst, c.st = st, st.Clone()
	} else {
		c.st = st
	}
	c.d.SetState(c.st)
	c.d.Invalidate()
	c.pulls = cs.Pulls
	c.capplied, c.inited, c.dirty = index, true, true
	return nil
}

// FromCommitted is FromState with the committed state data of a
// replicated consumer (CommittedSnapshot's encoding) for a consumer
// that keeps no files (Persisted false: a memory stream's, or
// mem_storage): the consumer of one replica such a consumer becomes
// when its group ends, or one whose runtime a stream's conversion
// stopped (docs/cluster.md, "Memory streams"), as WriteSnapshotFiles
// and Restore make a persisted one (its delivery state only: the pause
// and the dead-letter switch come from its config, as there). It does
// not run until Start. Errors: a state that does not decode, holds no
// state or unordered deliveries.
func FromCommitted(env Env, s *streamrun.Stream, name string, cfg consumer.Config, created time.Time, data []byte) (*Consumer, error) {
	var snap committedSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("consumer %s > %s: committed state: %w", s.Name(), name, err)
	}
	if snap.State == nil || !slices.IsSortedFunc(snap.State.Pending, func(a, b store.StreamPending) int { return cmp.Compare(a.Stream, b.Stream) }) {
		return nil, fmt.Errorf("consumer %s > %s: committed state holds no state or unordered deliveries", s.Name(), name)
	}
	return FromState(env, s, name, cfg, snap.State, created), nil
}

// WriteSnapshotFiles writes the files of consumer cfg.Name (config cfg,
// whose Name is set, created at created) of the stream whose directory
// is streamDir and store st, with the committed state data of a
// replicated consumer (CommittedSnapshot's encoding) as its stored
// state, durably: the consumer of one replica a replicated consumer
// scaled down to one replica becomes (docs/cluster.md, "Scaling
// consumers"), which Restore then starts from. The state is stored
// first and the metadata last, so that a crash leaves either the whole
// consumer or none a start restores. The state store is closed again.
// Errors: a snapshot that does not decode, the file system's.
func WriteSnapshotFiles(fs vfs.FS, streamDir string, st store.Store, cfg consumer.Config, created time.Time, data []byte) error {
	var snap committedSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("consumer %s: committed state: %w", cfg.Name, err)
	}
	if snap.State == nil {
		return fmt.Errorf("consumer %s: committed state holds no state", cfg.Name)
	}
	cs, err := st.ConsumerStore(cfg.Name)
	if err != nil {
		return err
	}
	err = cs.Update(snap.State)
	if err = errors.Join(err, cs.Close()); err != nil {
		return err
	}
	_, cs, err = WriteFiles(fs, streamDir, st, cfg, created)
	if cs != nil {
		err = errors.Join(err, cs.Close())
	}
	return err
}
