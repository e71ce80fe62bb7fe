package jscluster

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/cluster/streamckpt"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Scaling a replicated file stream down to one replica
// (docs/cluster.md, "Scaling down to one replica"):
//
//  1. The meta leader proposes the UpdateStream naming one server, the
//     one of the scale-down's order (the stream's leader, then live,
//     current replicas, a down one last: keep.go) where every consumer
//     can run alone with the fewest consumers of one replica to move
//     there first (keepForConsumers, singlesdown.go), once they moved
//     and the replicated consumers scaled down to one replica there;
//     that server keeps its replica ID in the stream's group (the
//     assignment is "unsettled": meta.StreamAssignment.Unsettled).
//  2. The group's leader removes the other replicas one membership change
//     at a time (membership.go), each only once the kept replica holds
//     everything committed; a removed replica deletes its files once it
//     applied its removal (retireReplicas).
//  3. The kept replica, leading a group of which it is the only voter,
//     with the assigned config applied, turns into the stream of one
//     replica (convert): its log sealed and a barrier applied, the last
//     checkpoint taken over the fsynced store (streamckpt.Replica.Final),
//     meta.json written for one replica, the group removed (its tombstone
//     fsynced), the checkpoint released (streamckpt.Release), the stream
//     restored from its files.
//  4. It then asks the meta leader ($SYS.JSC.STREAM.SETTLE) to propose a
//     meta.SettleStream: the stream gets a new group whose replica ID 1
//     can bootstrap a later scale-up (the old ID is tombstoned here).
//
// A restart resumes where the disk says (startReplica): a checkpoint
// file and a live group, the replica runs again and step 3 starts over;
// a checkpoint file and the group's tombstone, step 3 ends with the
// release; no checkpoint file, the stream of one replica.

// settleSubject carries settleMsg from the server that converted its
// replica to the meta leader (no reply; it asks again every settleRetry
// while the assignment stays unsettled).
const settleSubject = "$SYS.JSC.STREAM.SETTLE"

// settleMsg is the body of settleSubject: the stream, the group and the
// replica ID the server's replica had in it.
type settleMsg struct {
	Account string             `json:"account"`
	Stream  string             `json:"stream"`
	Group   raftnode.GroupID   `json:"group"`
	Replica raftnode.ReplicaID `json:"replica"`
}

const (
	// settleRetry is how often a converted server asks for the settle
	// while its assignment stays unsettled.
	settleRetry = 2 * time.Second
	// convertWait bounds the wait for the barrier to apply and the
	// runtime to catch up with it; convertRetry spaces failed attempts.
	convertWait  = 5 * time.Second
	convertRetry = 2 * time.Second
)

// settleReady is the state of a replica that may convert (step 3): this
// server leads its group, every entry of earlier terms applied, it is
// the only replica of the configuration, no change in flight.
func settleReady(st raftnode.GroupStatus) bool {
	return st.Role == raftnode.Leader && st.LeaderReady && st.Fenced == nil && !st.Joint && st.Member &&
		len(st.Replicas) == 1 && st.Replicas[0].Replica == st.Replica && !st.Replicas[0].Learner
}

// convertReplicas runs step 3 for every replica of this server that the
// meta group scaled down to one replica here and that is ready.
func (c *Cluster) convertReplicas() {
	c.mu.Lock()
	var keys []streamKey
	for k, r := range c.replicas {
		if r.log != nil && r.ckpt != nil && len(r.sa.Replicas) == 1 && r.sa.Replicas[0].Server == c.name {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		r := c.replicaOf(k)
		if r == nil || r.log == nil || r.changing != nil || time.Since(r.convertAt) < convertRetry {
			continue
		}
		st, err := c.node.Status(r.sa.Group)
		if err != nil || !settleReady(st) || c.consumersInGroups(k) {
			continue
		}
		c.mu.Lock()
		acc := c.accounts[k.account]
		c.mu.Unlock()
		var cfg stream.Config
		if acc == nil || acc.js == nil || json.Unmarshal(r.sa.Config, &cfg) != nil || !c.hasConfig(acc, cfg) {
			continue // the leader proposes the assigned config first (update.go)
		}
		if err := c.convert(acc, k, r, cfg); err != nil {
			r.convertAt = time.Now()
			c.cfg.Logf("jscluster: stream %s > %s: scaling down to one replica (tried again in %v): %v", k.account, k.name, convertRetry, err)
		}
	}
}

// consumersInGroups reports whether a consumer of stream k runs here in
// a group (a replicated runtime): the stream's conversion restarts its
// consumers over the stream of one replica (stopStreamConsumers removes
// their groups and checkpoints), so it waits until each ran its own
// conversion to one replica (a scale-down's consumers go first,
// consumersToOne; a move of a stream of one replica rolled back,
// singlestream.go, waits for them too).
func (c *Cluster) consumersInGroups(k streamKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ck, cr := range c.creplicas {
		if ck.account == k.account && ck.stream == k.name && cr.log != nil {
			return true
		}
	}
	return false
}

// convert turns this server's replica r of stream k, the only voter of
// its group, into the stream of one replica with config cfg (step 3).
// An error before the group's removal leaves the replica running, its
// log sealed (no publish is taken; the next attempt goes on from there);
// one after it leaves the stream stopped until a restart completes it.
func (c *Cluster) convert(acc *account, k streamKey, r *replica, cfg stream.Config) error {
	defer c.converts(k)()
	c.cfg.Infof("JetStream cluster: stream '%s > %s' scales down to one replica: its group %d ends here", k.account, k.name, r.sa.Group)
	c.quiesceStream(acc, k)
	r.log.Seal()
	r.leads.Store(false)
	if err := acc.js.SetStreamLeader(k.name, false); err != nil {
		return err
	}
	p, err := r.log.Barrier()
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(convertWait):
		return errors.New("the barrier entry did not apply in time")
	case <-c.quit:
		return errors.New("stopping")
	}
	if _, err := p.Result(); err != nil {
		return err
	}
	_, last := p.Position()
	if err := r.ckpt.Final(last, convertWait); err != nil {
		return err
	}
	// From here on the replica's files are the stream's: nothing else
	// changes them until the stream runs as one replica.
	c.mu.Lock()
	delete(c.replicas, k)
	c.mu.Unlock()
	// Its consumers of one replica kept in memory (a memory stream's,
	// a file stream's mem_storage ones: a move's, or a rollback's,
	// singlestream.go) keep their state only in their runtimes, which
	// the stream's stop ends: they start again with it over the stream
	// of one replica (memscale.go).
	c.handConsumers(acc, k, cfg.Storage == stream.MemoryStorage)
	c.stopStreamConsumers(k)
	c.svc.Unregister(r.sa.Group, r.ckpt)
	state, st, jerr := acc.js.DetachStream(k.name)
	if jerr != nil {
		return jerr
	}
	r.log.Close()
	if cfg.Storage == stream.MemoryStorage {
		return c.finishMemoryConvert(acc, k, r.sa, cfg, state, st) // memscale.go
	}
	return c.finishConvert(acc, k, r.sa, r.mine(), cfg, true)
}

// quiesceStream has this server's replica of stream k, about to be
// sealed for its conversion, stop taking publishes without leaving one
// unanswered, as a hand-over does (HandOver, quiesceStreams): its
// subscriptions withdrawn from the other servers, the routes flushed
// (a publish routed here before they learned it has arrived), then its
// subscriptions dropped and what it took proposed (for handOverPatience,
// the rest answered 503). A publish sent from
// then until the stream of one replica subscribes finds no responders,
// which clients retry at once; one the sealed log refused went
// unanswered, and its client waited for its whole timeout (5 s for
// nats.go's and the nats CLI's).
func (c *Cluster) quiesceStream(acc *account, k streamKey) {
	c.quiesceStreamWithin(acc, k, convertWait)
}

// quiesceStreamWithin is quiesceStream with the flush of the routes
// bounded by flush.
func (c *Cluster) quiesceStreamWithin(acc *account, k streamKey, flush time.Duration) {
	if err := acc.js.StreamWithdraw(k.name); err != nil {
		return
	}
	if !c.host.FlushRoutes(flush) {
		c.cfg.Logf("jscluster: stream %s > %s: a route did not answer its flush: a publish on its way may go unanswered", k.account, k.name)
	}
	if err := acc.js.StreamHandOver(k.name, handOverPatience); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: stop taking publishes: %v", k.account, k.name, err)
	}
}

// finishConvert ends a conversion whose last checkpoint is durable and
// whose stream is stopped: meta.json for one replica, the group removed
// (unless its tombstone is already durable: removeGroup false), the
// checkpoint released, the stream restored from its files as one
// replica. Errors leave the files for a restart to complete.
func (c *Cluster) finishConvert(acc *account, k streamKey, sa meta.StreamAssignment, mine raftnode.ReplicaID, cfg stream.Config, removeGroup bool) error {
	if err := acc.js.WriteStreamMeta(cfg, time.Unix(0, sa.Created).UTC()); err != nil {
		return err
	}
	if removeGroup {
		if err := c.removeGroupWait(sa.Group); err != nil {
			return err
		}
	}
	dir := acc.js.StreamDir(k.name)
	if err := streamckpt.Release(streamckpt.Config{Dir: dir, Store: acc.js.FileStoreConfig(dir), Group: sa.Group, Replica: mine}); err != nil {
		return err
	}
	found, jerr := acc.js.RestoreStream(k.name)
	if jerr != nil || !found {
		return errors.Join(errors.New("the stream of one replica does not restore"), jerr)
	}
	c.runAsSingle(k, sa, "")
	return nil
}

// runAsSingle records stream k, assigned as sa, as this server's
// replica of one replica, leading since now (its group's conversion
// done: scaledown.go, memscale.go), logs it (how: what follows "on this
// server") and starts its consumers.
func (c *Cluster) runAsSingle(k streamKey, sa meta.StreamAssignment, how string) {
	nr := &replica{sa: sa, leadState: &leadState{}, server: c.name}
	nr.leads.Store(true)
	nr.since.Store(c.cfg.Now().UnixNano())
	c.mu.Lock()
	c.replicas[k] = nr
	c.mu.Unlock()
	c.cfg.Infof("JetStream cluster: stream '%s > %s' runs as one replica on this server%s", k.account, k.name, how)
	c.reconcileConsumers(k)
}

// converts records that stream k is being converted here (Cluster.
// converting) and returns the function that records its end.
func (c *Cluster) converts(k streamKey) (end func()) {
	done := make(chan struct{})
	c.mu.Lock()
	c.converting[k] = done
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.converting, k)
		c.mu.Unlock()
		close(done)
	}
}

// conversion returns the channel closed when the conversion of stream
// k here ends, nil when none runs.
func (c *Cluster) conversion(k streamKey) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.converting[k]
}

// convertAnswerWait bounds how long a request about a stream this
// server is converting to one replica waits for the conversion to end
// (Answers): it takes milliseconds (a barrier, a checkpoint, the group's
// removal); a request still waiting then gets 10008 (Unavailable).
const convertAnswerWait = time.Second

// awaitConversion waits, at most convertAnswerWait, for the conversion
// of stream k here to end, if one runs; false when it still runs.
func (c *Cluster) awaitConversion(k streamKey) bool {
	done := c.conversion(k)
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-c.quit:
		return true
	case <-time.After(convertAnswerWait):
		return false
	}
}

// resumeConvert starts this server's replica of stream k, assigned here
// as its only replica, whose directory still holds a replica's
// checkpoint (a restart during step 3, or before it). With the group's
// tombstone durable, the conversion ends (finishConvert); without, the
// replica starts as a replica of its group and convertReplicas takes it
// from there.
func (c *Cluster) resumeConvert(acc *account, k streamKey, r *replica, cfg stream.Config, mine meta.Replica) {
	if c.node.Removed(r.sa.Group, mine.ID) {
		var assigned stream.Config
		if err := json.Unmarshal(r.sa.Config, &assigned); err != nil {
			assigned = cfg
		}
		if err := c.finishConvert(acc, k, r.sa, mine.ID, assigned, false); err != nil {
			c.cfg.Logf("jscluster: stream %s > %s: scaling down to one replica, not restored (files left as they are): %v", k.account, k.name, err)
		}
		return
	}
	c.startFileReplica(acc, k, r, cfg, mine)
}

// askSettles, for every stream this server runs as its only replica
// whose assignment is still unsettled, asks the meta leader for the
// SettleStream (step 4), every settleRetry.
func (c *Cluster) askSettles() {
	c.mu.Lock()
	var msgs []settleMsg
	for k, r := range c.replicas {
		if r.log == nil && r.sa.Unsettled() && r.sa.Replicas[0].Server == c.name && time.Since(r.convertAt) >= settleRetry {
			r.convertAt = time.Now()
			msgs = append(msgs, settleMsg{Account: k.account, Stream: k.name, Group: r.sa.Group, Replica: r.sa.Replicas[0].ID})
		}
	}
	c.mu.Unlock()
	for _, m := range msgs {
		c.askMeta(settleSubject, m)
	}
}

// onSettle, on the meta leader, proposes the SettleStream a settleMsg
// asks for when the assignment is the one it names, apart from the
// publisher's goroutine.
func (c *Cluster) onSettle(_, _ string, _, data []byte) {
	var m settleMsg
	if !c.metaRequest(data, &m) || m.Stream == "" || m.Account == "" {
		return
	}
	sa, _, assigned, _ := c.assignment(streamKey{m.Account, m.Stream})
	if !assigned || !sa.Unsettled() || sa.Group != m.Group || sa.Replicas[0].ID != m.Replica {
		return
	}
	go func() {
		if _, jerr := c.propose(&meta.SettleStream{Account: m.Account, Stream: m.Stream, Group: m.Group, Replica: m.Replica}); jerr == nil {
			c.cfg.Infof("JetStream cluster: stream '%s > %s' settled as one replica", m.Account, m.Stream)
		}
	}()
}
