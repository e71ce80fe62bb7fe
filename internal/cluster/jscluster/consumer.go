package jscluster

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/consumerlog"
	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/cluster/transport"
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
	_ jsapi.AccountCounter  = (*account)(nil)
)

// Consumers in a cluster (docs/cluster.md, "Consumers in a cluster"),
// as nats-server v2.15.2 keeps them: every consumer, durable or
// ephemeral, is held by the meta group (AssignConsumer) on
// consumer.Config.EffectiveReplicas of its stream's servers (a durable
// defaults to the stream's count, an ephemeral of a limits stream to
// one). A consumer with more than one replica runs in each of its
// servers' engines over a consumerlog.Log of its own group; one with one
// replica runs on its server alone, with the engine's local log (its
// files in its stream's directory, restored when that server restarts).
// The meta leader creates, updates, deletes and lists them; the
// consumer's leader (for one replica, its server) delivers and answers
// the rest, and asks the meta group to remove it past its
// inactive_threshold.

// consumerKey names a consumer of a stream in an account.
type consumerKey struct{ account, stream, name string }

// creplica is this server's replica of a consumer the meta group
// assigns to it.
type creplica struct {
	// ca: the assignment, written by the run goroutine under Cluster.mu
	// (an update, a membership change: keepConsumer); other goroutines
	// read it under Cluster.mu only (assignedOf), never through mine.
	ca  meta.ConsumerAssignment
	log *consumerlog.Log // nil for a consumer with one replica
	// leads and since: this replica delivers (its consumer leads and
	// caught up; always for one replica), since when (unix ns).
	leads atomic.Bool
	since atomic.Int64
	// announced: since it came to lead, every route peer has processed
	// this replica's subscriptions (answerConsumerInfo flushed the
	// routes once); reset when the leadership changes.
	announced atomic.Bool
	// ckptIndex and ckptAt: the last index applied, of any kind
	// (consumerlog LastApplied), at the last checkpoint, and when (the
	// run goroutine's).
	ckptIndex uint64
	ckptAt    time.Time
	// changing is the membership change this replica, leading its
	// group, proposed last (consumerscale.go); leaderless is since when a
	// leaving replica has known no leader (retireConsumers); convertAt
	// when a scale-down to one replica last failed here, or the settle
	// was last asked (consumerdown.go). The run goroutine's.
	changing   *raftnode.Proposal
	leaderless time.Time
	convertAt  time.Time
	// forceSince: as replica's (lostvoter.go).
	forceSince time.Time
}

// leaderReplica forwards a consumer's leadership to its runtime and
// records it for the API's routing (AnswersConsumer) and info.
type leaderReplica struct {
	consumerlog.Replica
	c  *Cluster
	cr *creplica
	k  consumerKey // cr.ca's names, which the run goroutine's writes of cr.ca (under Cluster.mu) leave alone
}

// SetLeading records the leadership, then tells the consumer.
func (l leaderReplica) SetLeading(on bool) {
	if on {
		l.cr.since.Store(l.c.cfg.Now().UnixNano())
		l.c.cfg.Infof("JetStream cluster new consumer leader for '%s > %s > %s'", l.k.account, l.k.stream, l.k.name) // nats-server v2.15.2's words
	}
	l.cr.announced.Store(false)
	l.cr.leads.Store(on)
	l.Replica.SetLeading(on)
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
	ca, mine, assigned, here := c.consumerAssignment(k)
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
	case cur != nil && here && streamUp && cur.ca.Group == ca.Group && cur.mine(c.name) == mine.ID && cur.log == nil && len(ca.Replicas) > 1:
		// Scaled up from one replica: its state starts the group
		// (consumerscale.go).
		c.mu.Lock()
		delete(c.creplicas, k)
		c.mu.Unlock()
		c.startConsumer(acc, k, ca, mine)
	case cur != nil && here && streamUp && cur.ca.Group == ca.Group && cur.mine(c.name) == mine.ID && cur.log != nil && !sameServers(cur.ca.Replicas, ca.Replicas):
		// Another replica came or went (a scale): this one stays, and
		// its group's leader changes the membership.
		c.keepConsumer(k, cur, ca)
		if string(cur.ca.Config) != string(ca.Config) {
			c.updateConsumer(acc, k, cur, ca)
		}
	case cur != nil && !here && assigned && streamUp && cur.log != nil && cur.ca.Group == ca.Group && c.consumerMember(cur):
		// Leaving: it runs, and may lead, until its group removed it
		// (retireConsumers).
		if !sameServers(cur.ca.Replicas, ca.Replicas) {
			c.keepConsumer(k, cur, ca)
		}
	case cur != nil && here && streamUp && cur.log == nil && cur.ca.Unsettled() && len(ca.Replicas) == 1 && cur.ca.Created == ca.Created && ca.Replicas[0].Server == c.name:
		// Settled (meta.SettleConsumer): the same consumer of one
		// replica, under its new group.
		c.mu.Lock()
		cur.ca = ca
		c.mu.Unlock()
	case cur != nil && here && streamUp && cur.log == nil && cur.ca.Unsettled() && cur.ca.Created == ca.Created && cur.ca.Group != ca.Group &&
		len(ca.Replicas) > 1 && mine.ID == 1:
		// Settled and scaled up since, both applied before this
		// reconcile: its state starts the settled group, as a scale-up
		// from one replica (stopping it and starting an empty replica
		// would lose its delivery and acknowledgement state).
		c.mu.Lock()
		delete(c.creplicas, k)
		c.mu.Unlock()
		c.startConsumer(acc, k, ca, mine)
	case cur != nil && (!here || !streamUp || cur.ca.Group != ca.Group || !sameServers(cur.ca.Replicas, ca.Replicas)):
		c.stopConsumer(acc, k, cur)
		if here && streamUp {
			c.startConsumer(acc, k, ca, mine)
		}
	case cur == nil && here && streamUp:
		c.startConsumer(acc, k, ca, mine)
	case cur == nil && !here && assigned && streamUp:
		c.startLeavingConsumer(acc, k, ca)
	case cur != nil && string(cur.ca.Config) != string(ca.Config):
		c.updateConsumer(acc, k, cur, ca)
	}
}

// startConsumer starts this server's replica of consumer k
// (tryStartConsumer); a failure is logged and, when it may pass, tried
// again later (noteConsumerStart, cretry.go).
func (c *Cluster) startConsumer(acc *account, k consumerKey, ca meta.ConsumerAssignment, mine meta.Replica) {
	c.noteConsumerStart(k, c.tryStartConsumer(acc, k, ca, mine))
}

// tryStartConsumer starts this server's replica of consumer k: for one
// replica, restored from its files (RestoreConsumer: its server
// restarted) or created with the engine's local log; for more, created
// in the account's engine over a consumerlog.Log of its group, then the
// group added. The engine checks the consumer against the config the
// meta group assigns its stream (createAssigned). Errors: why the
// replica does not run (noRetry: a config that does not decode, a fenced
// checkpoint); nil once it runs, or once its group failed to start (the
// replica is then recorded, and the failure logged).
func (c *Cluster) tryStartConsumer(acc *account, k consumerKey, ca meta.ConsumerAssignment, mine meta.Replica) error {
	var cfg consumer.Config
	if err := json.Unmarshal(ca.Config, &cfg); err != nil {
		return noRetry(fmt.Errorf("its assigned config does not decode: %w", err))
	}
	if h := c.cfg.Hooks; h != nil && h.FailConsumerStart != nil {
		if err := h.FailConsumerStart(k.account, k.stream, k.name); err != nil {
			return fmt.Errorf("this server's replica cannot start: %w", err)
		}
	}
	created := time.Unix(0, ca.Created)
	cr := &creplica{ca: ca}
	if c.runsSingle(ca, mine) {
		if err := c.startSingle(acc, k, cfg, created); err != nil {
			if !retryable(err) {
				return noRetry(fmt.Errorf("this server's replica cannot start: %w", err))
			}
			return fmt.Errorf("this server's replica cannot start: %w", err)
		}
		cr.leads.Store(true)
		cr.since.Store(ca.Created)
		c.mu.Lock()
		c.creplicas[k] = cr
		c.mu.Unlock()
		return nil
	}
	label := "consumer '" + k.account + " > " + k.stream + " > " + k.name + "'"
	if old, ok := c.retireStale(ca.Group, mine.ID, label); !ok {
		return fmt.Errorf("this server's replica waits for this store's earlier replica %d of group %d to be removed", old, ca.Group)
	} else if old != 0 {
		c.removeCheckpoint(ca.Group) // the earlier replica's: this one joins empty
	}
	if err := c.adoptSingle(acc, k, ca, mine); err != nil {
		return fmt.Errorf("scaling up from one replica, not started here (its files left as they are): %w", err)
	}
	acc.cstarting.Store(cr)
	jerr := c.createAssigned(acc, k, cfg, jetstream.CreateOrUpdate, created)
	acc.cstarting.Store(nil)
	switch {
	case jerr != nil:
		return fmt.Errorf("this server's replica cannot start: %w", jerr)
	case cr.log == nil:
		return errors.New("this server's replica cannot start: the engine holds the consumer already, without its group's log")
	}
	if err := c.startFromCheckpoint(cr); err != nil {
		_ = acc.js.DeleteConsumer(k.stream, k.name)
		return noRetry(fmt.Errorf("this server's replica is fenced (not started, its checkpoint left as it is): %w", err))
	}
	c.mu.Lock()
	c.creplicas[k] = cr
	c.mu.Unlock()
	gc := consumerGroupConfig(ca, mine)
	gc.ForceSole = c.forcing.Load() // force.go
	_, recovered := c.node.RecoveredReplica(ca.Group)
	if err := c.node.AddGroup(gc, cr.log.StateMachine()); err != nil {
		c.groupNotStarted(fmt.Sprintf("consumer %s > %s > %s", k.account, k.stream, k.name), ca.Group, mine.ID, err)
		return nil
	}
	if int(mine.ID) <= ca.Initial && cr.mine(c.name) == mine.ID && (!recovered || ca.Initial == 1) && c.consumerCampaignsFirst(ca) {
		// The group's chosen first replica (firstleader.go) campaigns
		// at once, so that the group leads and subscribes before the
		// meta leader answers the create (waitConsumer asks the leader
		// over $JSC.CI), and the client's next request finds the
		// consumer's subscriptions. A consumer of one replica scaled up
		// bootstraps its group alone here: its runtime of one replica,
		// retired, waits for this one to lead (consumerrun retire.go),
		// not for an election timeout.
		c.campaignFresh(ca.Group)
	}
	return nil
}

// createAssigned creates or updates (action) consumer k in the account's
// engine with config cfg, created at created, checked against the config
// the meta group assigns its stream (jetstream.CreateConsumerAssigned),
// or, when the meta group holds no such stream, the one the stream runs
// here. Errors: the engine's.
func (c *Cluster) createAssigned(acc *account, k consumerKey, cfg consumer.Config, action jetstream.ConsumerAction, created time.Time) *jserr.Error {
	if scfg, ok := c.assignedConfig(streamKey{k.account, k.stream}); ok {
		_, jerr := acc.js.CreateConsumerAssigned(k.stream, k.name, cfg, action, created, scfg)
		return jerr
	}
	_, jerr := acc.js.CreateConsumerAt(k.stream, k.name, cfg, action, created)
	return jerr
}

// startLeavingConsumer starts this server's replica of consumer k,
// which its assignment ca no longer names, when the WAL still holds it in
// ca's group: the server stopped while the replica was leaving (it moved
// with its stream's), and the group may need its vote, as
// startLeaving's stream replica (docs/cluster.md, "Replacing a
// replica"). It runs until its group removed it (retireConsumers).
func (c *Cluster) startLeavingConsumer(acc *account, k consumerKey, ca meta.ConsumerAssignment) {
	id, ok := c.node.RecoveredReplica(ca.Group)
	if !ok || slices.ContainsFunc(ca.Replicas, func(x meta.Replica) bool { return x.ID == id }) {
		return
	}
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s': restarting this server's replica %d, which was leaving group %d", k.account, k.stream, k.name, id, ca.Group)
	c.startConsumer(acc, k, ca, meta.Replica{ID: id, Server: c.name, Incarnation: c.node.Incarnation()})
}

// startSingle starts this server's replica of consumer k with one
// replica (config cfg, created at created): restored from its files when
// it has some here (a restart; a config the meta group changed meanwhile
// is then applied), else from the state handed over in memory when one
// is kept for it (startHanded), else created. Errors: the engine's; files that do
// not restore (the engine holds them aside) marked noRetry.
func (c *Cluster) startSingle(acc *account, k consumerKey, cfg consumer.Config, created time.Time) error {
	found, jerr := acc.js.RestoreConsumer(k.stream, k.name, created)
	switch {
	case jerr != nil && found:
		return noRetry(jerr)
	case jerr != nil:
		return jerr
	}
	if !found {
		// A consumer kept in memory (a memory stream's, mem_storage)
		// whose runtime a conversion of its stream, or the end of its
		// group, stopped (memscale.go).
		if handed, err := c.startHanded(acc, k, cfg, created); handed {
			return err
		}
	} else {
		// Its files hold the state a hand-over kept too (a memory
		// stream's replica directory holds them; the stream's start
		// restored it): that copy must not outlive it (adoptSingle
		// would prefer it to the runtime's).
		c.takeHanded(k, created.UnixNano())
	}
	action := jetstream.CreateOrUpdate
	if found {
		cur, jerr := acc.js.ConsumerConfig(k.stream, k.name)
		if jerr != nil {
			return jerr
		}
		want := cfg
		if want.Name == "" {
			want.Name = k.name // restored, an ephemeral's config names it, as in nats-server
		}
		if want.EqualForCreate(&cur) {
			return nil
		}
		action = jetstream.UpdateOnly
	}
	if jerr := c.createAssigned(acc, k, cfg, action, created); jerr != nil {
		return jerr
	}
	return nil
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

// checkpointConsumers takes a checkpoint of every consumer replica of a
// group that applied checkpointEntries entries since its last one, or any
// since checkpointEvery (the run goroutine's tick).
func (c *Cluster) checkpointConsumers() {
	c.mu.Lock()
	crs := make([]*creplica, 0, len(c.creplicas))
	for _, cr := range c.creplicas {
		if cr.log != nil {
			crs = append(crs, cr)
		}
	}
	c.mu.Unlock()
	now := c.cfg.Now()
	for _, cr := range crs {
		applied := cr.log.LastApplied()
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
// this long after the last one when anything applied since, and at a
// clean stop (StopCheckpoints): what a crash makes it apply again
// (docs/cluster.md, "Restarts").
const (
	checkpointEntries = 1024
	checkpointEvery   = 10 * time.Second
)

// updateConsumer gives this server's replica of consumer k its new
// config; for more than one replica, the replica that leads commits the
// policy change. A failure is logged and tried again later, as a
// start's (noteConsumerStart).
func (c *Cluster) updateConsumer(acc *account, k consumerKey, cr *creplica, ca meta.ConsumerAssignment) {
	var cfg consumer.Config
	if err := json.Unmarshal(ca.Config, &cfg); err != nil {
		c.noteConsumerStart(k, noRetry(fmt.Errorf("its assigned config does not decode: %w", err)))
		return
	}
	if jerr := c.createAssigned(acc, k, cfg, jetstream.UpdateOnly, time.Unix(0, ca.Created)); jerr != nil {
		c.noteConsumerStart(k, fmt.Errorf("update of this server's replica: %w", jerr))
		return
	}
	c.mu.Lock()
	cr.ca = ca
	c.mu.Unlock()
	c.noteConsumerStart(k, nil)
}

// stopConsumer deletes this server's replica of consumer k (when its
// stream's replica still runs) and removes its group, if it has one.
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
	if cr.log == nil {
		return
	}
	// A replica started next for the same group (a replacement on this
	// server) needs the node to be done with this one.
	if err := c.removeGroupWait(cr.ca.Group); err != nil && !errors.Is(err, errRemoveStopping) && !errors.Is(err, raftnode.ErrUnknownGroup) {
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
		if cr.log == nil {
			continue
		}
		if _, err := c.node.RemoveGroup(cr.ca.Group); err != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: remove group %d: %v", k.account, k.name, cr.ca.Name, cr.ca.Group, err)
		}
		c.removeCheckpoint(cr.ca.Group)
	}
}

// newConsumerLog is the engine's NewConsumerLog for account acc: the
// log of the replica of a consumer with more than one replica being
// started (startConsumer), over its group; the engine's local log for
// every other consumer.
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
	k := consumerKey{acc.name, streamName, name}
	await := func(done func()) { go c.awaitSuccessor(k, done) }
	cr.log = consumerlog.New(consumerlog.Config{Node: c.node, Group: cr.ca.Group, Save: save, Logf: c.cfg.Logf, AwaitSuccessor: await,
		PeersLevel: func() int { return c.peersLevel(k) }},
		leaderReplica{Replica: rep, c: c, cr: cr, k: k})
	return cr.log
}

// creplicaOf returns this server's running replica of consumer k, or
// nil.
func (c *Cluster) creplicaOf(k consumerKey) *creplica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creplicas[k]
}

// assignedOf returns this server's replica of consumer k and its
// assignment as the run goroutine last set it (cr.ca, which an update
// replaces under c.mu), for the goroutines other than the run goroutine
// (API workers, info answers); nil when there is none.
func (c *Cluster) assignedOf(k consumerKey) (*creplica, meta.ConsumerAssignment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr := c.creplicas[k]
	if cr == nil {
		return nil, meta.ConsumerAssignment{}
	}
	return cr, cr.ca
}

// AnswersConsumer implements jsapi.ConsumerCluster: the meta leader
// creates, lists and deletes the consumers of a stream the meta group
// holds, and the replica that leads a consumer (for one replica, its
// server) answers the other requests naming it, as in nats-server
// v2.15.2, and a replica whose group knows no leader answers
// CONSUMER.INFO (leaderless.go); the meta leader answers CONSUMER.INFO,
// PAUSE, UNPIN and LEADER.STEPDOWN of a consumer this server's meta
// state does not hold (metaMissing); the rest (a stream the meta group
// does not hold: 10059) is left to Answers.
func (a *account) AnswersConsumer(key, streamName, name string, _ []byte) (answers, decided bool) {
	forMeta, cr, decided := a.consumerRoute(key, streamName, name)
	switch {
	case !decided:
		return false, false
	case forMeta:
		return a.c.metaAnswers(), true
	}
	return cr != nil && (cr.leads.Load() || key == "CONSUMER.INFO" && a.ConsumerLeaderless(streamName, name)), true
}

// metaMissing are the requests naming a consumer that the meta leader
// answers when this server's meta state does not hold the consumer
// (consumerRoute), besides those it answers whether or not it does.
var metaMissing = map[string]bool{
	"CONSUMER.INFO": true, "CONSUMER.PAUSE": true, "CONSUMER.UNPIN": true, "CONSUMER.LEADER.STEPDOWN": true,
}

// consumerRoute is AnswersConsumer's rule: decided false leaves the
// request to Answers; else forMeta says the meta leader answers it, and
// otherwise this server's replica cr of the consumer (nil: none) answers
// it where it leads.
func (a *account) consumerRoute(key, streamName, name string) (forMeta bool, cr *creplica, decided bool) {
	c := a.c
	if _, _, ok, _ := c.assignment(streamKey{a.name, streamName}); !ok {
		return false, nil, false
	}
	switch key {
	case "CONSUMER.CREATE", "CONSUMER.DURABLE.CREATE", "CONSUMER.NAMES", "CONSUMER.LIST", "CONSUMER.PEER.EVACUATE", "CONSUMER.PEER.REMOVE", "CONSUMER.DELETE":
		// CONSUMER.DELETE whether or not this server's meta state holds
		// the consumer: a stream leader whose meta replica had not yet
		// applied a consumer's creation answered its delete, right after
		// the create's answer, 10014 from its engine (ConsumerDelete).
		return true, nil, true
	}
	k := consumerKey{a.name, streamName, name}
	if _, _, assigned, _ := c.consumerAssignment(k); !assigned {
		// Not held here (yet): the meta leader's to answer, with 10014
		// when it does not hold it either (ConsumerMissing). The stream's
		// leader answered these before, and one whose meta replica had
		// not yet applied the consumer's creation answered 10014 from its
		// engine right after the create's answer
		// (TestJetStreamClusterConsumerRequestsAfterCreate).
		return metaMissing[key], nil, metaMissing[key]
	}
	if key == "CONSUMER.INFO" && c.consumerOutOfReach(k) {
		return true, nil, true
	}
	return false, c.creplicaOf(k), true
}

// ConsumerCreate implements jsapi.ConsumerCluster on the meta leader, as
// nats-server v2.15.2 jsClusteredConsumerRequest: the request is checked
// against what the meta group holds (the stream's assigned config, its
// consumers' assigned configs; jetstream.PrepareConsumer), so the meta
// leader need not hold a replica of the stream; an unnamed ephemeral is
// named; a new consumer is placed on consumer.Config.EffectiveReplicas
// of the stream's servers (meta.PlaceConsumer); the assignment is
// proposed; and the answer waits (at most proposeTimeout) for the
// consumer's leader to run the config and gives its info. Errors: 10059,
// the engine's create errors, 10023 (no servers for it), 10061 for an
// update taking a consumer kept in memory down to one replica
// (docs/cluster.md, "Scaling consumers"), 10008 when the meta group
// cannot decide.
func (a *account) ConsumerCreate(streamName string, cfg consumer.Config, action jetstream.ConsumerAction, pedantic bool) (*consumer.Info, *jserr.Error, bool) {
	c := a.c
	var sa meta.StreamAssignment
	var cas []meta.ConsumerAssignment
	var ok bool
	c.meta.View(func(st *meta.State) {
		if sa, ok = st.Stream(a.name, streamName); ok {
			cas = st.Consumers(a.name, streamName)
		}
	})
	if !ok {
		return nil, jserr.New(jserr.StreamNotFound), true
	}
	if !c.metaLeader() {
		return nil, jserr.New(jserr.ClusterNotAvail), true // a leaderless server (metaAnswers)
	}
	var scfg stream.Config
	if err := json.Unmarshal(sa.Config, &scfg); err != nil {
		return nil, jserr.From(err, jserr.ConsumerCreate), true
	}
	existing := make(map[string]*consumer.Config, len(cas))
	byName := make(map[string]meta.ConsumerAssignment, len(cas))
	for _, ca := range cas {
		var cc consumer.Config
		if err := json.Unmarshal(ca.Config, &cc); err != nil {
			return nil, jserr.From(err, jserr.ConsumerCreate), true
		}
		if cc.Name == "" {
			cc.Name = ca.Name
		}
		existing[ca.Name], byName[ca.Name] = &cc, ca
	}
	prepared, same, jerr := a.js.PrepareConsumer(scfg, existing, cfg, action, pedantic)
	if jerr != nil {
		return nil, jerr, true
	}
	name := prepared.Name
	if name == "" {
		// An unnamed ephemeral: named here, its config left without the
		// name, as nats-server's.
		for name == "" || byName[name].Name != "" {
			name = jetstream.ConsumerName()
		}
	}
	k := consumerKey{a.name, streamName, name}
	body, err := json.Marshal(&prepared)
	if err != nil {
		return nil, jserr.From(err, jserr.ConsumerCreate), true
	}
	isNew := false
	if !same {
		servers, jerr := c.consumerServers(sa, byName[name], existing[name], &prepared, &scfg)
		if jerr != nil {
			return nil, jerr, true
		}
		created := c.cfg.Now().UnixNano()
		if ca, ok := byName[name]; ok {
			created = ca.Created
		}
		op := &meta.AssignConsumer{Account: a.name, Stream: streamName, Name: name, Action: metaAction(action),
			Config: body, Created: created, Servers: servers}
		res, jerr := c.propose(op)
		if jerr != nil {
			return nil, jerr, true
		}
		if res.Consumer != nil {
			body = res.Consumer.Config
		}
		isNew = !res.Existed && res.PrevConsumer == nil
	} else {
		body = byName[name].Config
	}
	info, jerr := c.waitConsumer(a, k, body)
	if isNew {
		a.js.AdviseConsumer(streamName, name, true) // once, where each replica's engine is quiet (Config.ClusterAdvises)
	}
	return info, jerr, true
}

// consumerServers returns the servers of the consumer being created or
// updated with config cfg: for a new one (ca has no name), placed among
// its stream's servers (meta.PlaceConsumer); for an existing one, its
// servers, scaled when an update changes num_replicas and with it the
// count (scaledConsumerServers: docs/cluster.md, "Scaling
// consumers"); while its scale-down to one replica is not through
// (meta.ConsumerAssignment.Unsettled) the scale waits for the settle,
// 10008 when that takes over settleWait (waitConsumerSettled). A
// consumer kept in memory (mem_storage, a memory stream's) scaled down to
// one replica starts from its group's committed state in memory
// (convertConsumer, memscale.go). The consumers created before counts were honoured (a durable of
// a replicated stream had its stream's count whatever its config said)
// keep their count while num_replicas stays as it is.
func (c *Cluster) consumerServers(sa meta.StreamAssignment, ca meta.ConsumerAssignment, old, cfg *consumer.Config, scfg *stream.Config) ([]raftnode.ServerID, *jserr.Error) {
	want := cfg.EffectiveReplicas(scfg)
	if ca.Name != "" {
		if old.Replicas != cfg.Replicas && want != len(ca.Replicas) {
			if ca.Unsettled() {
				// Its scale-down to one replica is not through yet: the
				// scale starts from the settled assignment (settle.go).
				settled, ok := c.waitConsumerSettled(consumerKey{ca.Account, ca.Stream, ca.Name}, ca)
				if !ok {
					return nil, jserr.New(jserr.ClusterNotAvail)
				}
				ca = settled
			}
			return c.scaledConsumerServers(sa, ca, want) // consumerscale.go, consumerdown.go
		}
		return meta.Servers(ca.Replicas), nil
	}
	var servers []raftnode.ServerID
	var perr *jserr.Error
	offline, behind, unfit := c.offline(), c.metaBehind(), c.lostServers(sa)
	c.meta.View(func(st *meta.State) {
		servers, perr = meta.PlaceConsumer(st, sa, meta.ConsumerPlaceRequest{Replicas: want, Offline: offline, Behind: behind, Unfit: unfit, Seed: rand.Uint64()})
	})
	return servers, perr
}

// metaBehind returns the servers whose meta replica the meta leader
// does not know to be caught up (nats-server IsFollowerCaughtUp false):
// placement chooses them last.
func (c *Cluster) metaBehind() map[raftnode.ServerID]bool {
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil {
		return nil
	}
	behind := map[raftnode.ServerID]bool{}
	for _, rs := range st.Replicas {
		if rs.Server != c.name && (rs.Match < st.Commit || !rs.Active) {
			behind[rs.Server] = true
		}
	}
	return behind
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

// waitConsumer waits, at most proposeTimeout, until the leader of
// consumer k runs its assigned config body, and returns its info: this
// server's replica when it leads (with its subscriptions in place, so
// that its interest reaches every server before the answer does), else
// the leader's answer to $JSC.CI (internal.go). Errors: 10008 when no
// leader answered in time (the client retries; a create is idempotent).
func (c *Cluster) waitConsumer(acc *account, k consumerKey, body []byte) (*consumer.Info, *jserr.Error) {
	deadline := time.Now().Add(proposeTimeout)
	var pause backoff
	for {
		cr, ca := c.assignedOf(k)
		if cr != nil && string(ca.Config) == string(body) && cr.leads.Load() && acc.js.ConsumerLeads(k.stream, k.name) {
			if info, jerr := c.consumerInfo(acc, k); jerr == nil {
				return info, nil
			}
		} else if cr == nil || !cr.leads.Load() {
			if r, err := c.remoteConsumerInfo(k, body, remoteInfoWait); err == nil && string(r.Config) == string(body) {
				return r.Info, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, jserr.New(jserr.ClusterNotAvail)
		}
		select {
		case <-c.quit:
			return nil, jserr.New(jserr.ClusterNotAvail)
		case <-time.After(pause.next()):
		}
	}
}

// consumerInfo returns the info of consumer k, led here, once this
// server's replica of its stream reflects every entry its group
// committed (readStream): the pending counts are the stream's here,
// and a follower replica may not yet have applied the last publishes
// acknowledged by the stream's leader (a consumer created right after
// two publishes answered num_pending 0 once under load, where
// nats-server's and the client's count is 2). Errors: the engine's
// (10014 when the consumer is not here).
func (c *Cluster) consumerInfo(acc *account, k consumerKey) (*consumer.Info, *jserr.Error) {
	c.readStream(acc, streamKey{k.account, k.stream})
	return acc.js.ConsumerInfo(k.stream, k.name)
}

// readStream waits, at most streamReadWait in all, until this server's
// replica of stream k has applied, and made durable, every entry its
// group committed before the call: a linearizable read of the group
// (streamCurrent), then a barrier through the stream's apply and ack
// queues (jetstream.JetStream.StreamBarrier: what the read made raftnode
// hand the stream, applied, and the stream's durable sequence, to which
// consumers count, past it). It returns at once where the replica leads
// (its state holds what it acknowledged) or the stream has one replica;
// when the group cannot confirm in time (no leader, a stuck apply
// queue), it leaves the replica's state as it is, possibly behind the
// last acknowledged publishes.
func (c *Cluster) readStream(acc *account, k streamKey) {
	deadline := time.Now().Add(streamReadWait)
	if c.streamCurrent(k, streamReadWait) {
		acc.js.StreamBarrier(k.name, deadline)
	}
}

// streamReadWait bounds how long readStream waits for the stream's
// replica here to be current.
const streamReadWait = time.Second

// streamCurrent waits, at most wait, until this server's replica of the
// replicated stream k was handed every entry its group committed before
// the call (readGroup), and reports whether it was: false at once when
// the replica here leads, or the stream has one replica or none here,
// and when the read failed or took longer (the replica's state may be a
// few entries behind).
func (c *Cluster) streamCurrent(k streamKey, wait time.Duration) bool {
	sa, _, ok, here := c.assignment(k)
	if !ok || !here || len(sa.Replicas) < 2 {
		return false
	}
	if r := c.replicaOf(k); r == nil || r.leads.Load() {
		return false
	}
	return c.readGroup(sa.Group, wait) == nil
}

// backoff is the pause of a loop that waits for a replica: 1 ms at first
// (a consumer starts within a few milliseconds of its assignment), twice
// as long each time, up to 20 ms.
type backoff time.Duration

// next returns the next pause.
func (b *backoff) next() time.Duration {
	*b = backoff(min(max(2*time.Duration(*b), time.Millisecond), 20*time.Millisecond))
	return time.Duration(*b)
}

// remoteInfoWait is how long one $JSC.CI request of the meta leader asks
// the consumer's leader to wait for its replica to lead with the new
// config (waitConsumer asks again until proposeTimeout); listInfoWait
// bounds the requests of a CONSUMER.LIST page (nats-server v2.15.2 waits
// 4 s, then lists the consumers that did not answer as missing).
const (
	remoteInfoWait = 2 * time.Second
	listInfoWait   = 4 * time.Second
)

// ConsumerDelete implements jsapi.ConsumerCluster on the meta leader for
// a stream the meta group holds: the removal is proposed and the answer
// waits for this server's replica, if any, to go. Errors, in nats-server
// v2.15.2's order (jsClusteredConsumerDeleteRequest): handled false for
// a stream the meta group does not hold (the engine's 10059), 10014 for
// a consumer it does not hold (here or from apply), 10008 when the meta
// group cannot decide.
func (a *account) ConsumerDelete(streamName, name string) (*jserr.Error, bool) {
	c := a.c
	if _, _, ok, _ := c.assignment(streamKey{a.name, streamName}); !ok {
		return nil, false
	}
	k := consumerKey{a.name, streamName, name}
	if _, _, assigned, _ := c.consumerAssignment(k); !assigned {
		return jserr.New(jserr.ConsumerNotFound), true
	}
	if _, jerr := c.propose(&meta.RemoveConsumer{Account: a.name, Stream: streamName, Name: name}); jerr != nil {
		return jerr, true
	}
	a.js.AdviseConsumer(streamName, name, false)
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

// ConsumerNames implements jsapi.ConsumerCluster on the meta leader: the
// sorted names of the consumers of stream the meta group holds (nats-server
// v2.15.2 answers CONSUMER.NAMES from its assignments). handled is false
// for a stream it does not hold.
func (a *account) ConsumerNames(streamName string) (names []string, handled bool) {
	a.c.meta.View(func(st *meta.State) {
		if _, handled = st.Stream(a.name, streamName); handled {
			for _, ca := range st.Consumers(a.name, streamName) {
				names = append(names, ca.Name)
			}
		}
	})
	return names, handled
}

var _ jsapi.ConsumerHolder = (*account)(nil)

// ConsumerMissing implements jsapi.ConsumerHolder: 10014 for a consumer
// of a stream the meta group holds that this server's meta state does
// not hold, as nats-server v2.15.2's meta leader answers from its
// assignments (jsConsumerInfoRequest, jsConsumerPauseRequest); nil
// otherwise. On the meta leader, which answers such requests
// (consumerRoute), that state holds every consumer whose create was
// answered: it answered the create once it applied the assignment, and a
// new leader answers once it applied its predecessors' terms
// (metaLeader).
func (a *account) ConsumerMissing(streamName, name string) *jserr.Error {
	c := a.c
	if _, _, ok, _ := c.assignment(streamKey{a.name, streamName}); !ok {
		return nil
	}
	if _, _, assigned, _ := c.consumerAssignment(consumerKey{a.name, streamName, name}); assigned {
		return nil
	}
	return jserr.New(jserr.ConsumerNotFound)
}

var _ jsapi.ConsumerInfoReader = (*account)(nil)

// ConsumerInfo implements jsapi.ConsumerInfoReader where this server's
// replica leads consumer name of a stream the meta group holds: its
// info once this server's replica of the stream is current
// (consumerInfo), as the create's answer and $JSC.CI give it, so that a
// CONSUMER.INFO right after a publish's PubAck counts the publish where
// the stream's replica here follows. handled false leaves the request
// to the engine (a consumer not led here; a leaderless group's 10008
// comes first).
func (a *account) ConsumerInfo(streamName, name string) (*consumer.Info, *jserr.Error, bool) {
	k := consumerKey{a.name, streamName, name}
	if cr := a.c.creplicaOf(k); cr == nil || !cr.leads.Load() {
		return nil, nil, false
	}
	info, jerr := a.c.consumerInfo(a, k)
	return info, jerr, true
}

// ConsumerInfos implements jsapi.ConsumerCluster on the meta leader for
// one CONSUMER.LIST page (nats-server v2.15.2
// jsClusteredConsumerListRequest): the info of each consumer named, from
// this server's replica when it leads (once this server's replica of the
// stream is current, readStream, as a leader's $JSC.CI answer has it),
// else from its leader ($JSC.CI, all asked at once, at most
// listInfoWait); those that did not answer are missing, in the order
// named.
func (a *account) ConsumerInfos(streamName string, names []string) (infos []*consumer.Info, missing []string) {
	c := a.c
	var remote []string
	var keys []consumerKey
	read := false
	for _, name := range names {
		k := consumerKey{a.name, streamName, name}
		if cr := c.creplicaOf(k); cr != nil && cr.leads.Load() {
			if !read {
				c.readStream(a, streamKey{a.name, streamName})
				read = true
			}
			if info, jerr := a.js.ConsumerInfo(streamName, name); jerr == nil {
				infos = append(infos, info)
				continue
			}
		}
		keys = append(keys, k)
		remote = append(remote, consumerInfoSubject(k))
	}
	if len(remote) > 0 {
		for i, ans := range c.requestAll(remote, nil, listInfoWait) {
			var r consumerInfoReply
			if ans == nil || json.Unmarshal(ans, &r) != nil || r.Info == nil {
				missing = append(missing, keys[i].name)
				continue
			}
			infos = append(infos, r.Info)
		}
	}
	slices.SortFunc(infos, func(x, y *consumer.Info) int { return cmp.Compare(x.Name, y.Name) })
	return infos, missing
}

// consumerClusterInfo returns the cluster part of consumer k's info
// (nats-server v2.15.2 ClusterInfo): for one replica, the cluster's name
// and its server as the leader, as nats-server shows it; for more, the
// group, its leader and, on the leader, the other replicas the meta
// group assigns (a replica being replaced or removed is not listed). A consumer
// the meta group does not hold (one being deleted) shows this server as
// its leader.
func (c *Cluster) consumerClusterInfo(k consumerKey) *jetstream.ClusterInfo {
	ca, _, ok, _ := c.consumerAssignment(k)
	if !ok {
		return &jetstream.ClusterInfo{Name: c.host.ClusterName(), Leader: string(c.name)}
	}
	if len(ca.Replicas) == 1 {
		return &jetstream.ClusterInfo{Name: c.host.ClusterName(), Leader: string(ca.Replicas[0].Server)}
	}
	ci := &jetstream.ClusterInfo{Name: c.host.ClusterName(), RaftGroup: consumerGroupName(ca)}
	cr := c.creplicaOf(k)
	st, err := c.node.Status(ca.Group)
	if err != nil {
		return ci
	}
	ci.Leader = string(st.LeaderServer)
	ci.SystemAcc, ci.TrafficAcc = true, c.cfg.SystemAccount
	if cr != nil && cr.leads.Load() {
		since := time.Unix(0, cr.since.Load()).UTC()
		ci.LeaderSince = &since
	}
	ci.Replicas = c.peerInfos(st, ca.Replicas)
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
// whose replica leads the consumer (AnswersConsumer): a consumer with one
// replica (or one the meta group does not hold) runs here alone and
// answers success, as nats-server's; a replicated one hands its
// leadership over (stepDown, as a stream's), asked through the consumer
// (consumerlog.Log.HandOver) so that no delivery it made is lost.
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
	cr := c.creplicaOf(k)
	if cr == nil || !cr.leads.Load() {
		return jserr.New(jserr.ClusterNotAvail)
	}
	if cr.log == nil {
		return nil
	}
	p, err := placement()
	if err != nil {
		return err
	}
	// Through the consumer: it stops delivering and has what it
	// delivered queued ahead of the transfer, so that its successor does
	// not deliver it again as first deliveries (consumerlog.Replica).
	return c.stepDownVia(ca.Group, p, cr.log.HandOver)
}

// peersLevel returns the lowest feature level the servers of consumer
// k's other replicas, as the meta group assigns them, announced in their
// transport hellos (transport.Transport.PeerLevel: 0 for a server of an
// earlier build or not heard from since this server started);
// transport.FeatureLevel when there are none (consumerlog.Config.PeersLevel).
func (c *Cluster) peersLevel(k consumerKey) int {
	ca, _, _, _ := c.consumerAssignment(k)
	low := transport.FeatureLevel
	for _, r := range ca.Replicas {
		if r.Server != c.name && c.tr != nil {
			low = min(low, c.tr.PeerLevel(r.Server))
		}
	}
	return low
}
