package jscluster

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/consumerlog"
	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

var (
	_ jsapi.ConsumerCluster = (*account)(nil)
	_ jsapi.ConsumerLeaders = (*account)(nil)
)

// Replicated consumers (docs/clustering.md, "Replicated consumers"): a
// durable consumer of a stream with more than one replica is held by the
// meta group (AssignConsumer) on every server of its stream, each
// replica running the consumer in its engine over a consumerlog.Log of
// the consumer's own group. The meta leader creates, updates and deletes
// them; the consumer's leader delivers and answers the rest. Ephemeral
// consumers, and those of streams with one replica, run as on one server
// on the server that answered their create (the stream's leader).

// consumerKey names a consumer of a stream in an account.
type consumerKey struct{ account, stream, name string }

// creplica is this server's replica of a replicated consumer.
type creplica struct {
	ca  meta.ConsumerAssignment
	log *consumerlog.Log
	// leads and since: this replica delivers (its consumer leads and
	// caught up), since when (unix ns).
	leads atomic.Bool
	since atomic.Int64
	// ckptIndex and ckptAt: the applied index at the last checkpoint, and
	// when (the run goroutine's).
	ckptIndex uint64
	ckptAt    time.Time
}

// leaderReplica forwards a consumer's leadership to its runtime and
// records it for the API's routing (AnswersConsumer) and info.
type leaderReplica struct {
	consumerlog.Replica
	c  *Cluster
	cr *creplica
}

// SetLeading records the leadership, then tells the consumer.
func (l leaderReplica) SetLeading(on bool) {
	if on {
		l.cr.since.Store(l.c.cfg.Now().UnixNano())
	}
	l.cr.leads.Store(on)
	l.Replica.SetLeading(on)
}

// replicated reports whether a consumer with cfg of a stream assigned as
// sa is one the meta group holds: a durable of a stream with more than
// one replica.
func replicated(sa meta.StreamAssignment, durable bool) bool {
	return len(sa.Replicas) > 1 && durable
}

// consumerAssignment returns the meta group's assignment of consumer k
// and this server's replica in it.
func (c *Cluster) consumerAssignment(k consumerKey) (ca meta.ConsumerAssignment, mine meta.Replica, assigned, here bool) {
	c.meta.View(func(st *meta.State) {
		ca, assigned = st.Consumer(k.account, k.stream, k.name)
	})
	if assigned {
		mine, here = meta.On(ca.Replicas, c.name)
	}
	return ca, mine, assigned, here
}

// reconcileConsumers reconciles every consumer the meta group assigns
// in stream k and every consumer replica of it running here.
func (c *Cluster) reconcileConsumers(k streamKey) {
	names := map[string]bool{}
	c.meta.View(func(st *meta.State) {
		for _, ca := range st.Consumers(k.account, k.name) {
			names[ca.Name] = true
		}
	})
	c.mu.Lock()
	for ck := range c.creplicas {
		if ck.account == k.account && ck.stream == k.name {
			names[ck.name] = true
		}
	}
	c.mu.Unlock()
	for name := range names {
		c.reconcileConsumer(consumerKey{k.account, k.name, name})
	}
}

// reconcileConsumer starts, updates or stops this server's replica of
// consumer k to match the meta group's assignment. A replica starts only
// once its stream's replica runs here.
func (c *Cluster) reconcileConsumer(k consumerKey) {
	ca, mine, _, here := c.consumerAssignment(k)
	c.mu.Lock()
	cur := c.creplicas[k]
	acc := c.accounts[k.account]
	ready := acc != nil && acc.js != nil
	streamUp := c.replicas[streamKey{k.account, k.stream}] != nil
	c.mu.Unlock()
	if !ready {
		return // the account has no JetStream here (yet): AddAccount reconciles
	}
	switch {
	case cur != nil && (!here || !streamUp || cur.ca.Group != ca.Group):
		c.stopConsumer(acc, k, cur)
		if here && streamUp {
			c.startConsumer(acc, k, ca, mine)
		}
	case cur == nil && here && streamUp:
		c.startConsumer(acc, k, ca, mine)
	case cur != nil && string(cur.ca.Config) != string(ca.Config):
		c.updateConsumer(acc, k, cur, ca)
	}
}

// startConsumer creates consumer k in the account's engine over a
// consumerlog.Log of its group, then adds the group.
func (c *Cluster) startConsumer(acc *account, k consumerKey, ca meta.ConsumerAssignment, mine meta.Replica) {
	var cfg consumer.Config
	if err := json.Unmarshal(ca.Config, &cfg); err != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: its assigned config does not decode: %v", k.account, k.stream, k.name, err)
		return
	}
	cr := &creplica{ca: ca}
	acc.cstarting.Store(cr)
	_, jerr := acc.js.CreateConsumerAt(k.stream, cfg, jetstream.CreateOrUpdate, time.Unix(0, ca.Created))
	acc.cstarting.Store(nil)
	if jerr != nil || cr.log == nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: this server's replica cannot start: %v", k.account, k.stream, k.name, jerr)
		return
	}
	if err := c.startFromCheckpoint(cr); err != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: this server's replica is fenced (not started, its checkpoint left as it is): %v", k.account, k.stream, k.name, err)
		_ = acc.js.DeleteConsumer(k.stream, k.name)
		return
	}
	c.mu.Lock()
	c.creplicas[k] = cr
	c.mu.Unlock()
	gc := raftnode.GroupConfig{ID: ca.Group, Replica: mine.ID, Incarnation: mine.Incarnation, Peers: meta.Peers(ca.Replicas)}
	if err := c.node.AddGroup(gc, cr.log.StateMachine()); err != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: its group %d cannot start here: %v", k.account, k.stream, k.name, ca.Group, err)
		return
	}
	if c.metaLeader() {
		// The meta leader answers the create: its replica campaigns at
		// once, so that it is likely to lead and subscribe before it
		// answers (waitConsumer), and the client's next request finds the
		// consumer's subscriptions.
		_ = c.node.Campaign(ca.Group)
	}
}

// consumerCheckpoint is a replicated consumer replica's checkpoint file
// (<cluster dir>/consumers/<group>/meta.json, a metafile): the snapshot
// of its committed state (consumerlog) and the log index it reflects.
type consumerCheckpoint struct {
	Index uint64          `json:"index"`
	State json.RawMessage `json:"state"`
}

// consumerDir is where a consumer group's replica keeps its checkpoint.
func (c *Cluster) consumerDir(g raftnode.GroupID) string {
	return path.Join(c.cfg.Dir, "consumers", strconv.FormatUint(uint64(g), 10))
}

// startFromCheckpoint restores the consumer replica cr from its
// checkpoint, if it has one. Errors: a checkpoint that is damaged or does
// not restore (the replica is fenced).
func (c *Cluster) startFromCheckpoint(cr *creplica) error {
	var ck consumerCheckpoint
	err := metafile.Read(c.cfg.FS, c.consumerDir(cr.ca.Group), &ck)
	if vfs.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return cr.log.Start(ck.Index, ck.State)
}

// checkpointConsumers takes a checkpoint of every consumer replica that
// applied checkpointEntries entries since its last one, or any since
// checkpointEvery (the run goroutine's tick).
func (c *Cluster) checkpointConsumers() {
	c.mu.Lock()
	crs := make([]*creplica, 0, len(c.creplicas))
	for _, cr := range c.creplicas {
		crs = append(crs, cr)
	}
	c.mu.Unlock()
	now := c.cfg.Now()
	for _, cr := range crs {
		applied := cr.log.Applied()
		if applied <= cr.ckptIndex || (applied-cr.ckptIndex < checkpointEntries && now.Sub(cr.ckptAt) < checkpointEvery) {
			continue
		}
		if _, err := cr.log.Checkpoint(); err != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: checkpoint: %v", cr.ca.Account, cr.ca.Stream, cr.ca.Name, err)
		}
		cr.ckptIndex, cr.ckptAt = applied, now
	}
}

// A consumer replica's checkpoint is taken after this many entries, or
// this long after the last one when anything applied since.
const (
	checkpointEntries = 1024
	checkpointEvery   = 30 * time.Second
)

// updateConsumer gives this server's replica of consumer k its new
// config; the replica that leads commits the policy change.
func (c *Cluster) updateConsumer(acc *account, k consumerKey, cr *creplica, ca meta.ConsumerAssignment) {
	var cfg consumer.Config
	if err := json.Unmarshal(ca.Config, &cfg); err != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: its assigned config does not decode: %v", k.account, k.stream, k.name, err)
		return
	}
	if _, jerr := acc.js.CreateConsumer(k.stream, cfg, jetstream.UpdateOnly, false); jerr != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: update of this server's replica: %v", k.account, k.stream, k.name, jerr)
		return
	}
	c.mu.Lock()
	cr.ca = ca
	c.mu.Unlock()
}

// stopConsumer deletes this server's replica of consumer k (when its
// stream's replica still runs) and removes its group.
func (c *Cluster) stopConsumer(acc *account, k consumerKey, cr *creplica) {
	c.mu.Lock()
	delete(c.creplicas, k)
	streamUp := c.replicas[streamKey{k.account, k.stream}] != nil
	c.mu.Unlock()
	if streamUp {
		if jerr := acc.js.DeleteConsumer(k.stream, k.name); jerr != nil && jerr.ErrCode != uint16(jserr.ConsumerNotFound) {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: delete this server's replica: %v", k.account, k.stream, k.name, jerr)
		}
	}
	if _, err := c.node.RemoveGroup(cr.ca.Group); err != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: remove group %d: %v", k.account, k.stream, k.name, cr.ca.Group, err)
	}
	c.removeCheckpoint(cr.ca.Group)
}

// removeCheckpoint removes the checkpoint of a consumer group this
// server no longer holds a replica of.
func (c *Cluster) removeCheckpoint(g raftnode.GroupID) {
	if err := metafile.RemoveAll(c.cfg.FS, c.consumerDir(g)); err != nil && !vfs.IsNotExist(err) {
		c.cfg.Logf("jscluster: consumer group %d: remove its checkpoint: %v", g, err)
	}
}

// stopStreamConsumers forgets the consumer replicas of stream k, whose
// stream replica stops (the engine stops its consumers with it), and
// removes their groups.
func (c *Cluster) stopStreamConsumers(k streamKey) {
	c.mu.Lock()
	var gone []*creplica
	for ck, cr := range c.creplicas {
		if ck.account == k.account && ck.stream == k.name {
			gone = append(gone, cr)
			delete(c.creplicas, ck)
		}
	}
	c.mu.Unlock()
	for _, cr := range gone {
		if _, err := c.node.RemoveGroup(cr.ca.Group); err != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: remove group %d: %v", k.account, k.name, cr.ca.Name, cr.ca.Group, err)
		}
		c.removeCheckpoint(cr.ca.Group)
	}
}

// newConsumerLog is the engine's NewConsumerLog for account acc: the
// log of the consumer replica being started (startConsumer), over its
// group; the engine's local log for every other consumer.
func (c *Cluster) newConsumerLog(acc *account, streamName, name string, a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
	cr := acc.cstarting.Load()
	if cr == nil || cr.ca.Stream != streamName || cr.ca.Name != name {
		return streamrun.NewLocalConsumerLog(streamName, name, a)
	}
	rep, ok := a.(consumerlog.Replica)
	if !ok {
		c.cfg.Logf("jscluster: consumer %s > %s: the engine's consumer %T cannot be replicated", streamName, name, a)
		return streamrun.NewLocalConsumerLog(streamName, name, a)
	}
	dir := c.consumerDir(cr.ca.Group)
	save := func(index uint64, data []byte) error {
		if err := c.cfg.FS.MkdirAll(dir); err != nil {
			return err
		}
		return metafile.Write(c.cfg.FS, dir, consumerCheckpoint{Index: index, State: data})
	}
	cr.log = consumerlog.New(consumerlog.Config{Node: c.node, Group: cr.ca.Group, Save: save, Logf: c.cfg.Logf},
		leaderReplica{Replica: rep, c: c, cr: cr})
	return cr.log
}

// creplicaOf returns this server's running replica of consumer k, or
// nil.
func (c *Cluster) creplicaOf(k consumerKey) *creplica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creplicas[k]
}

// AnswersConsumer implements jsapi.ConsumerCluster: the meta leader
// creates and deletes a replicated consumer (a durable of a stream with
// more than one replica), the replica that leads it answers the other
// requests naming it; the rest is left to Answers.
func (a *account) AnswersConsumer(key, streamName, name string, body []byte) (answers, decided bool) {
	c := a.c
	sa, _, ok, _ := c.assignment(streamKey{a.name, streamName})
	if !ok {
		return false, false
	}
	switch key {
	case "CONSUMER.CREATE", "CONSUMER.DURABLE.CREATE":
		if !replicated(sa, key == "CONSUMER.DURABLE.CREATE" || durableIn(body)) {
			return false, false
		}
		return c.metaAnswers(), true
	case "CONSUMER.NAMES", "CONSUMER.LIST":
		return false, false
	}
	k := consumerKey{a.name, streamName, name}
	if _, _, assigned, _ := c.consumerAssignment(k); !assigned {
		return false, false
	}
	if key == "CONSUMER.DELETE" {
		return c.metaAnswers(), true
	}
	cr := c.creplicaOf(k)
	return cr != nil && cr.leads.Load(), true
}

// durableIn reports whether a consumer create body names a durable.
func durableIn(body []byte) bool {
	var req struct {
		Config struct {
			Durable string `json:"durable_name"`
		} `json:"config"`
	}
	return json.Unmarshal(body, &req) == nil && req.Config.Durable != ""
}

// ConsumerCreate implements jsapi.ConsumerCluster on the meta leader for
// a replicated consumer: the config is checked by this server's replica
// of the stream (jetstream.PrepareConsumer), the assignment proposed on
// the stream's servers, and the answer waits (at most proposeTimeout)
// for this server's replica of the consumer and its group's leader.
// Errors: the engine's create errors, 10008 when the meta group cannot
// decide or this server holds no replica of the stream to check the
// config with (docs/clustering.md, "Not yet built").
func (a *account) ConsumerCreate(streamName string, cfg consumer.Config, action jetstream.ConsumerAction, pedantic bool) (*consumer.Info, *jserr.Error, bool) {
	c := a.c
	sk := streamKey{a.name, streamName}
	sa, _, ok, _ := c.assignment(sk)
	if !ok || !replicated(sa, cfg.Durable != "") {
		return nil, nil, false
	}
	if !c.metaLeader() || c.replicaOf(sk) == nil {
		return nil, jserr.New(jserr.ClusterNotAvail), true
	}
	prepared, same, jerr := a.js.PrepareConsumer(streamName, cfg, action, pedantic)
	if jerr != nil {
		return nil, jerr, true
	}
	k := consumerKey{a.name, streamName, prepared.Name}
	if !same {
		body, err := json.Marshal(&prepared)
		if err != nil {
			return nil, jserr.From(err, jserr.ConsumerCreate), true
		}
		op := &meta.AssignConsumer{Account: a.name, Stream: streamName, Name: prepared.Name, Action: metaAction(action),
			Config: body, Created: c.cfg.Now().UnixNano(), Servers: meta.Servers(sa.Replicas)}
		if _, jerr := c.propose(op); jerr != nil {
			return nil, jerr, true
		}
	}
	c.waitConsumer(a, k, prepared)
	info, jerr := a.js.ConsumerInfo(streamName, prepared.Name)
	return info, jerr, true
}

// metaAction is the meta group's number of an engine consumer action.
func metaAction(a jetstream.ConsumerAction) meta.ConsumerAction {
	switch a {
	case jetstream.CreateOnly:
		return meta.Create
	case jetstream.UpdateOnly:
		return meta.Update
	}
	return meta.CreateOrUpdate
}

// waitConsumer waits, at most proposeTimeout, until this server runs its
// replica of consumer k with the config cfg and the consumer's leader
// delivers: this server's replica leads with its subscriptions in place
// (its interest then reaches every server before the answer does), or
// another server leads and its pull request subscription is seen here.
func (c *Cluster) waitConsumer(acc *account, k consumerKey, cfg consumer.Config) {
	body, _ := json.Marshal(&cfg)
	next := "$JS.API.CONSUMER.MSG.NEXT." + k.stream + "." + k.name
	deadline := time.Now().Add(proposeTimeout)
	for time.Now().Before(deadline) {
		cr := c.creplicaOf(k)
		if cr != nil && string(cr.ca.Config) == string(body) {
			if acc.js.ConsumerLeads(k.stream, k.name) {
				return
			}
			if ci := c.consumerClusterInfo(k); ci != nil && ci.Leader != "" && ci.Leader != string(c.name) && acc.js.HasInterest(next) {
				return
			}
		}
		select {
		case <-c.quit:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ConsumerDelete implements jsapi.ConsumerCluster on the meta leader for
// a consumer the meta group holds: the removal is proposed and the
// answer waits for this server's replica to go. Errors: 10014 from
// apply, 10008 when the meta group cannot decide.
func (a *account) ConsumerDelete(streamName, name string) (*jserr.Error, bool) {
	c := a.c
	k := consumerKey{a.name, streamName, name}
	if _, _, assigned, _ := c.consumerAssignment(k); !assigned {
		return nil, false
	}
	if _, jerr := c.propose(&meta.RemoveConsumer{Account: a.name, Stream: streamName, Name: name}); jerr != nil {
		return jerr, true
	}
	deadline := time.Now().Add(proposeTimeout)
	for c.creplicaOf(k) != nil && time.Now().Before(deadline) {
		select {
		case <-c.quit:
			return nil, true
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil, true
}

// consumerClusterInfo returns the cluster part of consumer k's info
// (nats-server v2.15.2 ClusterInfo). A consumer the meta group does not
// hold (an ephemeral, or one of a stream with one replica) runs on this
// server alone: the cluster's name and this server as its leader.
func (c *Cluster) consumerClusterInfo(k consumerKey) *jetstream.ClusterInfo {
	ca, _, ok, _ := c.consumerAssignment(k)
	if !ok {
		return &jetstream.ClusterInfo{Name: c.host.ClusterName(), Leader: string(c.name)}
	}
	ci := &jetstream.ClusterInfo{Name: c.host.ClusterName(), RaftGroup: consumerGroupName(ca)}
	cr := c.creplicaOf(k)
	st, err := c.node.Status(ca.Group)
	if err != nil {
		return ci
	}
	ci.Leader = string(st.LeaderServer)
	if cr != nil && cr.leads.Load() {
		since := time.Unix(0, cr.since.Load()).UTC()
		ci.LeaderSince = &since
	}
	ci.Replicas = c.peerInfos(st)
	return ci
}

// consumerGroupName names a consumer's Raft group as nats-server shapes
// it ("C-R3F-<id>"; consumers of memory streams are "M").
func consumerGroupName(ca meta.ConsumerAssignment) string {
	var cfg consumer.Config
	_ = json.Unmarshal(ca.Config, &cfg)
	st := "F"
	if cfg.MemoryStorage {
		st = "M"
	}
	return fmt.Sprintf("C-R%d%s-%d", len(ca.Replicas), st, ca.Group)
}

// ConsumerLeaderStepDown implements jsapi.ConsumerLeaders on the server
// whose replica leads the consumer (AnswersConsumer): a consumer the
// meta group does not hold runs here alone and answers success; a
// replicated one hands its leadership over (stepDown, as a stream's).
// Errors: 10059, 10014, 10008 when this replica no longer leads, the
// placement's and stepDown's.
func (a *account) ConsumerLeaderStepDown(streamName, name string, placement func() (*stream.Placement, *jserr.Error)) *jserr.Error {
	c := a.c
	k := consumerKey{a.name, streamName, name}
	ca, _, assigned, _ := c.consumerAssignment(k)
	if !assigned {
		if _, jerr := a.js.ConsumerInfo(streamName, name); jerr != nil {
			return jerr
		}
		return nil
	}
	if cr := c.creplicaOf(k); cr == nil || !cr.leads.Load() {
		return jserr.New(jserr.ClusterNotAvail)
	}
	p, err := placement()
	if err != nil {
		return err
	}
	return c.stepDown(ca.Group, p)
}
