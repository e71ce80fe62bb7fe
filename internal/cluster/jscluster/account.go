package jscluster

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/subject"
)

// account is one account's JetStream as the cluster layer drives it.
type account struct {
	c    *Cluster
	name string
	js   *jetstream.JetStream
	// starting is the replica whose stream the engine is creating, for
	// newLog (set and cleared by the run goroutine around StreamCreate).
	starting atomic.Pointer[replica]
	// cstarting is the consumer replica the engine is creating, for
	// newConsumerLog (set and cleared by the run goroutine around
	// CreateConsumer).
	cstarting atomic.Pointer[creplica]
}

// EngineConfig sets the hooks of a clustered engine in cfg, the config
// of account's engine, before jetstream.New: the replicated streams' and
// consumers' logs (NewReplicatedLog, NewConsumerLog), the cluster part of
// stream and consumer infos (ClusterInfo, ConsumerClusterInfo), no
// restore at start (DeferRestore: the meta group says which streams this
// server runs) and, when a stream starts, only the consumers with one
// replica the meta group assigns here (RestoreConsumer), and inactive
// consumers removed through the meta group (RemoveInactive). Register
// the engine with AddAccount once made.
func (c *Cluster) EngineConfig(accountName string, cfg *jetstream.Config) {
	acc := c.account(accountName)
	cfg.NewReplicatedLog = func(name string, a jetstream.Applier[stream.Op]) jetstream.Log[stream.Op] {
		return c.newLog(acc, name, a)
	}
	cfg.ClusterInfo = func(name string) *jetstream.ClusterInfo { return c.clusterInfo(streamKey{accountName, name}) }
	cfg.NewConsumerLog = func(streamName, name string, a jetstream.Applier[consumer.Op]) jetstream.Log[consumer.Op] {
		return c.newConsumerLog(acc, streamName, name, a)
	}
	cfg.ConsumerClusterInfo = func(streamName, name string) *jetstream.ClusterInfo {
		return c.consumerClusterInfo(consumerKey{accountName, streamName, name})
	}
	cfg.DeferRestore = true
	cfg.ClusterAdvises = true
	cfg.ConsumerCount = func(streamName string) (n int, ok bool) {
		c.meta.View(func(st *meta.State) { n, ok = st.NumConsumers(accountName, streamName) })
		return n, ok
	}
	cfg.RestoreConsumer = func(streamName, name string, created time.Time) bool {
		ca, mine, assigned, here := c.consumerAssignment(consumerKey{accountName, streamName, name})
		return assigned && here && c.runsSingle(ca, mine) && ca.Created == created.UnixNano()
	}
	cfg.RemoveInactive = func(streamName, name string, created time.Time) {
		c.askRemoveInactive(consumerKey{accountName, streamName, name}, created)
	}
}

// account returns the account record of name, made on first use.
func (c *Cluster) account(name string) *account {
	c.mu.Lock()
	defer c.mu.Unlock()
	if acc := c.accounts[name]; acc != nil {
		return acc
	}
	acc := &account{c: c, name: name}
	c.accounts[name] = acc
	return acc
}

// AddAccount registers the engine of an account whose config
// EngineConfig prepared, and returns the account's jsapi.Cluster for its
// API (jsapi.Options.Cluster). The streams the meta group assigns to this
// server in the account are started from the run goroutine.
func (c *Cluster) AddAccount(name string, js *jetstream.JetStream) jsapi.Cluster {
	acc := c.account(name)
	c.mu.Lock()
	acc.js = js
	c.mu.Unlock()
	c.pushAccountUsage(name)              // the other servers' reports of it (accountusage.go)
	c.enqueue(meta.Event{Restored: true}) // reconcile every assignment with the engine now present
	return acc
}

// AccountCounts implements jsapi.AccountCounter: the account's streams
// and consumers the meta group holds.
func (a *account) AccountCounts() (streams, consumers int) {
	a.c.meta.View(func(st *meta.State) {
		for _, sa := range st.Streams(a.name) {
			streams++
			n, _ := st.NumConsumers(a.name, sa.Name)
			consumers += n
		}
	})
	return streams, consumers
}

// Answers implements jsapi.Cluster (package comment, "Who answers an API
// request").
func (a *account) Answers(key, streamName string) bool {
	c := a.c
	if streamName == "" || key == "STREAM.CREATE" || key == "STREAM.UPDATE" || key == "STREAM.DELETE" || key == "STREAM.RESTORE" ||
		key == "STREAM.PEER.REMOVE" || key == "STREAM.PEER.EVACUATE" || key == "STREAM.CANCEL_MOVE" {
		return c.metaAnswers()
	}
	k := streamKey{a.name, streamName}
	if _, _, assigned, _ := c.assignment(k); !assigned || key == "STREAM.INFO" && c.streamOutOfReach(k) {
		return c.metaAnswers()
	}
	if !c.awaitConversion(k) {
		// Still turning into a stream of one replica here, which
		// nobody else answers for: 10008 (Unavailable).
		return true
	}
	r := c.replicaOf(k)
	return r != nil && (r.leads.Load() || c.answersLeaderless(key, r))
}

// Unavailable implements jsapi.MetaUnavailable: a request naming a
// stream this server is turning into a stream of one replica waits for
// that to end (at most convertAnswerWait; it may have begun since Answers
// let the request through) and gets 10008 if it did not (scaledown.go), as
// does a request this server answers for the meta group (by the rule of
// Answers and AnswersConsumer) while it does not lead it (it has known no
// meta leader for leaderlessAfter): never this server's own view of the
// streams (a server still replaying its log after a restart holds none
// of them yet).
func (a *account) Unavailable(key, streamName, consumerName string, _ []byte) bool {
	if strings.HasPrefix(key, "STREAM.") && !a.forMeta(key, streamName, consumerName) && !a.c.awaitConversion(streamKey{a.name, streamName}) {
		// Still converting after convertAnswerWait: Answers waited for
		// it in vain, or it began since (the request then waits here).
		return true
	}
	return !a.c.metaLeader() && a.forMeta(key, streamName, consumerName)
}

// forMeta reports whether the responder rule sends a request to the meta
// leader (package comment, "Who answers an API request").
func (a *account) forMeta(key, streamName, consumerName string) bool {
	if strings.HasPrefix(key, "CONSUMER.") {
		if forMeta, _, decided := a.consumerRoute(key, streamName, consumerName); decided {
			return forMeta
		}
	}
	if streamName == "" || key == "STREAM.CREATE" || key == "STREAM.UPDATE" || key == "STREAM.DELETE" || key == "STREAM.RESTORE" ||
		key == "STREAM.PEER.REMOVE" || key == "STREAM.PEER.EVACUATE" || key == "STREAM.CANCEL_MOVE" {
		return true
	}
	k := streamKey{a.name, streamName}
	_, _, assigned, _ := a.c.assignment(k)
	return !assigned || key == "STREAM.INFO" && a.c.streamOutOfReach(k)
}

// metaAnswers reports whether this server answers the meta group's
// requests: it leads the meta group, or it has known no meta leader for
// leaderlessAfter (the meta group has not started, or cannot elect),
// when it answers what it can (a proposal gets 10008, "JetStream system
// temporarily unavailable") rather than leave the client to time out, as
// nats-server's leaderless servers do (isLeaderless); a short election
// stays silent, so that no answer races the new leader's. A server whose
// meta replica is fenced (its WAL damaged, docs/cluster.md "Fencing")
// stays silent too: it hears nothing of the meta group, whose leader the
// others may well have, and its 10008 would race that leader's answer to
// every request (the process-level fault suite's corrupt-wal).
func (c *Cluster) metaAnswers() bool {
	if c.metaLeader() {
		return true
	}
	if c.metaFenced.Load() {
		return false
	}
	since := c.leaderless.Load()
	return since != 0 && time.Since(time.Unix(0, since)) >= leaderlessAfter
}

// leaderlessAfter is how long a server must know no meta leader before
// it answers the meta group's requests itself (with 10008).
const leaderlessAfter = 2 * time.Second

// noteLeaderless records since when this server knows no meta leader
// (Cluster.leaderless; 0 while it knows one). The run goroutine calls
// it every housekeeping tick, and before the meta group started.
func (c *Cluster) noteLeaderless() {
	st, err := c.node.Status(meta.MetaGroup)
	c.logMetaLeader(st, err)
	c.metaFenced.Store(err == nil && st.Fenced != nil)
	if c.firstCommit == 0 && err == nil && st.Fenced == nil {
		c.firstCommit = st.LeaderCommit // rejoin.go
	}
	if err == nil && st.Fenced == nil && st.Leader != 0 {
		c.leaderless.Store(0)
		return
	}
	c.leaderless.CompareAndSwap(0, time.Now().UnixNano())
}

// logMetaLeader logs a change of the meta group's leader as this server
// sees it (st, err: its status), in nats-server v2.15.2's words
// (processLeaderChange): "Self is new JetStream cluster metadata
// leader", "JetStream cluster new metadata leader: <server>/<cluster>",
// "JetStream cluster no metadata leader" once one was known. Sampled
// by the run goroutine's housekeeping, so a change undone within it goes
// unlogged.
func (c *Cluster) logMetaLeader(st raftnode.GroupStatus, err error) {
	var cur raftnode.ServerID
	if err == nil && st.Fenced == nil {
		cur = st.LeaderServer
	}
	if cur == c.metaLeaderSeen {
		return
	}
	c.metaLeaderSeen = cur
	switch cur {
	case c.name:
		c.cfg.Infof("Self is new JetStream cluster metadata leader")
	case "":
		c.cfg.Infof("JetStream cluster no metadata leader")
	default:
		c.cfg.Infof("JetStream cluster new metadata leader: %s/%s", cur, c.host.ClusterName())
	}
}

// proposeTimeout bounds how long the meta leader waits for a proposal to
// apply before the request gets 10008 (the client retries).
const proposeTimeout = 10 * time.Second

// propose proposes op on the meta group and waits for its outcome.
func (c *Cluster) propose(op meta.Op) (meta.Result, *jserr.Error) {
	w, err := c.meta.Propose(op)
	if err != nil {
		return meta.Result{}, jserr.New(jserr.ClusterNotAvail)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := w.Wait(ctx)
	if err != nil {
		return meta.Result{}, jserr.New(jserr.ClusterNotAvail)
	}
	return res, res.Err
}

// StreamCreate implements jsapi.Meta on the meta leader: the config is
// readied and checked as on one server (stream.Config.PrepareCreate) and
// against the account's limits over the cluster (checkLimits), the
// servers chosen (meta.Place), and the assignment proposed; apply decides
// the rest (10058, 10065). When this server holds a replica, the answer
// waits (at most proposeTimeout) for the stream's group to have a
// leader, so that a publish right after finds it (waitLeader when the
// meta leader holds a replica, waitLeaderAway when it does not, for a
// stream of one replica as well).
func (a *account) StreamCreate(req jetstream.StreamRequest) (*jetstream.StreamInfo, *jserr.Error) {
	c := a.c
	cfg := req.Config
	if err := cfg.PrepareClusteredCreate(req.Subject, req.Pedantic); err != nil {
		return nil, err
	}
	if !c.metaLeader() {
		return nil, jserr.New(jserr.ClusterNotAvail) // a leaderless server (metaAnswers)
	}
	if sa, _, ok, _ := c.assignment(streamKey{a.name, cfg.Name}); ok {
		return a.existing(sa, cfg)
	}
	if err := a.checkLimits(&cfg); err != nil {
		return nil, err
	}
	var servers []raftnode.ServerID
	var perr *jserr.Error
	c.meta.View(func(st *meta.State) {
		servers, perr = meta.Place(st, c.placeRequest(st, cfg.Replicas, cfg.Placement))
	})
	if perr != nil {
		return nil, perr
	}
	body, err := json.Marshal(&cfg)
	if err != nil {
		return nil, jserr.From(err, jserr.StreamCreate)
	}
	res, jerr := c.propose(&meta.AssignStream{Account: a.name, Name: cfg.Name, Config: body, Created: c.cfg.Now().UnixNano(), Servers: servers})
	if jerr != nil {
		return nil, jerr
	}
	if _, here := meta.On(res.Stream.Replicas, c.name); here {
		// Led elsewhere, the leader's own info names the replicas: this
		// follower's view would list the leader among them, leave itself
		// out and have no leader_since.
		var si jetstream.StreamInfo
		if b := c.waitLeader(streamKey{a.name, cfg.Name}); b != nil && json.Unmarshal(b, &si) == nil && si.Cluster != nil {
			return &si, nil
		}
	} else {
		// The leader's own info names it and the replicas, which this
		// server, outside the group, cannot (nats-server's stream leader
		// answers the create itself). A stream of one replica too: its
		// server answers once its subscriptions reached every server.
		var si jetstream.StreamInfo
		ask := 2 * recampaign // a group elects its leader within one (firstleader.go)
		if len(res.Stream.Replicas) == 1 {
			ask = singleAsk // no election: its server starts it
		}
		if b := c.waitLeaderAway(streamKey{a.name, cfg.Name}, ask, time.Now().Add(proposeTimeout)); b != nil && json.Unmarshal(b, &si) == nil && si.Cluster != nil {
			return &si, nil
		}
	}
	return a.infoOf(*res.Stream), nil
}

// checkLimits applies the account's JetStream limits to stream cfg,
// new, scaled up or restored, against the streams the meta group
// assigns to the account (jetstream.CheckClusteredLimits, as
// nats-server v2.15.2's jsClusteredStreamLimitsCheck before it
// proposes): 10027, 10026, 10028, 10047, 10113, 10122.
func (a *account) checkLimits(cfg *stream.Config) *jserr.Error {
	if a.js == nil {
		return nil
	}
	var assigned []jetstream.AssignedStream
	a.c.meta.View(func(st *meta.State) {
		for _, sa := range st.Streams(a.name) {
			var sc stream.Config
			if json.Unmarshal(sa.Config, &sc) != nil {
				continue
			}
			assigned = append(assigned, jetstream.AssignedStream{Name: sa.Name, Storage: sc.Storage, MaxBytes: sc.MaxBytes, Replicas: max(sc.Replicas, 1)})
		}
	})
	return a.js.CheckClusteredLimits(cfg, assigned)
}

// waitLeaderAway waits, until deadline, for the leader of stream k (its
// server, for one replica), on another server, to answer its $JSC.SI
// request: a leader answers once its subscriptions have reached every
// server (announceStream), so a publish right after the create finds
// the stream, as nats-server's stream leader, which answers the create
// itself, makes sure. A replica answers only once it leads
// (infoAnswerDelay), which a follower's status may name it to do a
// round trip earlier: so it asks again, each ask waiting at most every
// (twice recampaign for a group, singleAsk for one replica). It returns
// the leader's answer (its StreamInfo JSON), nil when none came.
func (c *Cluster) waitLeaderAway(k streamKey, every time.Duration, deadline time.Time) []byte {
	for time.Now().Before(deadline) {
		if out := c.requestAll([]string{streamInfoSubject(k)}, nil, every); len(out[0]) > 0 {
			return out[0]
		}
		select { // requestAll returns at once without a transport: no spin
		case <-c.quit:
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// offline returns the servers of the meta group's catalogue this server
// has no route to, or whose route announced lame duck mode (other than
// itself): placement ranks them last and does not count them towards a
// group's quorum (meta.PlaceRequest), and a step-down or handover does
// not choose them.
func (c *Cluster) offline() map[raftnode.ServerID]bool {
	var off map[raftnode.ServerID]bool
	c.meta.View(func(st *meta.State) { off = c.offlineIn(st) })
	return off
}

// offlineIn is offline for a caller already inside meta.Log.View, with
// its state st: View's read lock must not be taken twice, since a writer
// waiting between the two would deadlock them.
func (c *Cluster) offlineIn(st *meta.State) map[raftnode.ServerID]bool {
	up := map[raftnode.ServerID]bool{c.name: true}
	for _, p := range c.host.ClusterPeers() {
		if !p.LameDuck { // leaving: nothing placed on it, no leadership handed to it
			up[raftnode.ServerID(p.Name)] = true
		}
	}
	off := map[raftnode.ServerID]bool{}
	for _, sv := range st.Servers() {
		if !up[sv.Name] {
			off[sv.Name] = true
		}
	}
	return off
}

// existing answers a create of a stream the meta group holds: its info
// when the config is the same (with this replica's state when this
// server holds one, as nats-server v2.15.2's stream leader answers an
// equal create with its state), else 10058.
func (a *account) existing(sa meta.StreamAssignment, cfg stream.Config) (*jetstream.StreamInfo, *jserr.Error) {
	var cur stream.Config
	if err := json.Unmarshal(sa.Config, &cur); err != nil {
		return nil, jserr.From(err, jserr.StreamCreate)
	}
	cfg.CopyVersionMetadata(&cur)
	if !cfg.Equal(&cur) {
		return nil, jserr.New(jserr.StreamNameExist)
	}
	return a.StreamInfo(sa.Name, jetstream.InfoOptions{})
}

// recampaign is the longest pause of a new group's first campaigner
// between its campaigns while the group has no leader (recampaignFresh),
// and how long waitLeader lets a new stream's group go without a leader
// before the meta leader's replica, the first campaigner, campaigns
// again; recampaignOther is that wait when another replica is the first
// campaigner: the meta leader's replica steps in only after that one's
// first campaign and four more (25, 75, 175 and 325 ms after it), for a
// first campaigner that is gone but still looks online here, or that
// runs an earlier build, which does not know the rule.
const (
	recampaign      = 150 * time.Millisecond
	recampaignOther = 3 * recampaign
)

// singleAsk is how long each $JSC.SI ask of waitLeaderAway waits for the
// server of a stream of one replica placed elsewhere: it answers once it
// started the stream and flushed its routes, a few milliseconds after it
// applied the assignment.
const singleAsk = 50 * time.Millisecond

// waitLeader waits, at most proposeTimeout, until the meta leader can
// tell that stream k has a leader: its own replica leads, or its group
// reports one. The group's first campaigner campaigned when it started
// its replica (runReplica); a campaign whose votes reached replicas that
// had not started the group yet is lost, so the meta leader's replica
// campaigns again every recampaign while no leader is known, rather
// than wait an election timeout: from recampaign on when it is the first
// campaigner, from recampaignOther on when another replica is. It
// returns the leader's answer (its StreamInfo JSON, waitLeaderAway) when
// another server leads, nil when this one does or none was found.
func (c *Cluster) waitLeader(k streamKey) []byte {
	start := time.Now()
	deadline := start.Add(proposeTimeout)
	var next time.Time // set once the replica runs here
	for time.Now().Before(deadline) {
		if ci := c.clusterInfo(k); ci != nil && ci.Leader != "" {
			// Its subscriptions reach every server before the answer
			// does: flushed here when this server leads (once its
			// replica runs: a stream of one replica is led by its
			// server as soon as it is assigned, before it started),
			// else by the leader before it answers $JSC.SI
			// (announceStream), asked until it does: this replica
			// learns of its leadership before the leader's does.
			r := c.replicaOf(k)
			switch {
			case r != nil && r.leads.Load():
				c.announceStream(r)
				return nil
			case ci.Leader != string(c.name):
				return c.waitLeaderAway(k, 2*recampaign, deadline)
			}
		}
		switch r := c.replicaOf(k); {
		case r == nil || len(r.sa.Replicas) == 1:
		case next.IsZero() && c.campaignsFirst(r.sa):
			next = start.Add(recampaign)
		case next.IsZero():
			next = start.Add(recampaignOther)
		case time.Now().After(next):
			_ = c.node.Campaign(r.sa.Group)
			next = time.Now().Add(recampaign)
		}
		select {
		case <-c.quit:
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// DeleteStream implements jsapi.Meta on the meta leader: the removal is
// proposed; every server holding a replica deletes it when it applies.
// Errors: 10059 from apply, 10008 when the meta group cannot decide.
func (a *account) DeleteStream(name string) *jserr.Error {
	if _, jerr := a.c.propose(&meta.RemoveStream{Account: a.name, Name: name}); jerr != nil {
		return jerr
	}
	a.c.waitGone(streamKey{a.name, name})
	return nil
}

// waitGone waits, at most proposeTimeout, until this server no longer
// runs a replica of stream k, so that the answer to a delete is not
// followed by an info this server still answers from the replica being
// stopped.
func (c *Cluster) waitGone(k streamKey) {
	deadline := time.Now().Add(proposeTimeout)
	for c.replicaOf(k) != nil && time.Now().Before(deadline) {
		select {
		case <-c.quit:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Names implements jsapi.Meta: the account's streams the meta group
// holds whose subjects overlap filter ("" for all), sorted.
func (a *account) Names(filter string) []string {
	var names []string
	a.c.meta.View(func(st *meta.State) {
		for _, sa := range st.Streams(a.name) {
			if filter == "" || overlaps(sa.Config, filter) {
				names = append(names, sa.Name)
			}
		}
	})
	slices.Sort(names)
	return names
}

// overlaps reports whether a stream config's subjects overlap filter.
func overlaps(config []byte, filter string) bool {
	var cfg stream.Config
	if json.Unmarshal(config, &cfg) != nil {
		return false
	}
	for _, s := range cfg.Subjects {
		if subject.Overlap(s, filter) {
			return true
		}
	}
	return false
}

// StreamInfo implements jsapi.Meta for STREAM.LIST on the meta leader:
// the local engine's info when this server runs a replica of the stream
// (its state as of the last entry applied here), else the assignment's
// config with the state left empty. Errors: 10059.
func (a *account) StreamInfo(name string, opts jetstream.InfoOptions) (*jetstream.StreamInfo, *jserr.Error) {
	k := streamKey{a.name, name}
	sa, _, ok, _ := a.c.assignment(k)
	if !ok {
		return nil, jserr.New(jserr.StreamNotFound)
	}
	if r := a.c.replicaOf(k); r != nil {
		// This server's replica, led here or not: its state is the
		// leader's as of the last entry applied here.
		if si, err := a.js.StreamInfo(name, opts); err == nil {
			return si, nil
		}
	}
	return a.infoOf(sa), nil
}

// infoOf returns the info of an assigned stream as the meta group knows
// it: config, created time, cluster; an empty state.
func (a *account) infoOf(sa meta.StreamAssignment) *jetstream.StreamInfo {
	var cfg stream.Config
	_ = json.Unmarshal(sa.Config, &cfg)
	if a.js != nil {
		cfg = a.js.WithServerMetadata(cfg)
	}
	return &jetstream.StreamInfo{
		Config: cfg, Created: time.Unix(0, sa.Created).UTC(),
		Cluster:   a.c.clusterInfo(streamKey{a.name, sa.Name}),
		TimeStamp: a.c.cfg.Now().UTC(),
	}
}

// clusterInfo returns the cluster part of stream k's info (nats-server
// v2.15.2 ClusterInfo): the cluster's name, the group, its leader and,
// on the leader, the other replicas; for one replica, the name and the
// leader.
func (c *Cluster) clusterInfo(k streamKey) *jetstream.ClusterInfo {
	sa, _, ok, _ := c.assignment(k)
	if !ok {
		return nil
	}
	ci := &jetstream.ClusterInfo{Name: c.host.ClusterName()}
	r := c.replicaOf(k)
	if len(sa.Replicas) == 1 {
		// One replica has no group: nats-server v2.15.2 shows the
		// cluster and the leader alone (created so, or scaled down).
		ci.Leader = string(sa.Replicas[0].Server)
		return ci
	}
	ci.RaftGroup = groupName(sa)
	st, err := c.node.Status(sa.Group)
	if err != nil {
		return ci
	}
	ci.Leader = string(st.LeaderServer)
	ci.SystemAcc, ci.TrafficAcc = true, c.cfg.SystemAccount
	if r != nil && r.leads.Load() {
		since := time.Unix(0, r.since.Load()).UTC()
		ci.LeaderSince = &since
	}
	ci.Replicas = c.peerInfos(st, shownReplicas(sa, st))
	if ci.Desired = c.desiredInfo(sa); ci.Desired != nil {
		ci.Desired.Status = c.moveStatus(sa, st)
	}
	return ci
}

// shownReplicas is the replicas stream sa's info lists: its assigned
// ones, and during a move also the origin's still in the group, as
// nats-server v2.15.2 lists the group's peers, origin and targets,
// until the move ends; each server once (a server the move keeps may
// hold an old replica of the group beside its assigned one for a
// moment).
func shownReplicas(sa meta.StreamAssignment, st raftnode.GroupStatus) []meta.Replica {
	if sa.Move == nil {
		return sa.Replicas
	}
	out := slices.Clone(sa.Replicas)
	for _, p := range st.Peers {
		if !slices.ContainsFunc(out, func(r meta.Replica) bool { return r.ID == p.Replica || r.Server == p.Server }) {
			out = append(out, meta.Replica{ID: p.Replica, Server: p.Server})
		}
	}
	return out
}

// groupName names a stream's Raft group as nats-server shapes it
// ("S-R3F-<id>": replicas and storage, then the group).
func groupName(sa meta.StreamAssignment) string {
	var cfg stream.Config
	_ = json.Unmarshal(sa.Config, &cfg)
	st := "F"
	if cfg.Storage == stream.MemoryStorage {
		st = "M"
	}
	// Named by the replicas it was created with, as nats-server keeps a
	// group's name through a scale; a stream of one replica has no group
	// (nats-server renames it when it scales up from one).
	n := initialReplicas(sa)
	if n == 1 {
		n = uint64(len(sa.Replicas))
	}
	return fmt.Sprintf("S-R%d%s-%d", n, st, sa.Group)
}

// peerHash is a server's peer ID as nats-server v2.15.2 shows it: 8
// characters derived from the server's name (docs/cluster.md decision
// 3 keeps nats-server's peer strings).
func peerHash(name raftnode.ServerID) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	v := h.Sum64()
	b := make([]byte, 8)
	for i := range b {
		b[i] = alphabet[v%uint64(len(alphabet))]
		v /= uint64(len(alphabet))
	}
	return string(b)
}
