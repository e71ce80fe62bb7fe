package jscluster

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/subject"
)

// Stream updates in a cluster (docs/cluster.md, "Stream updates"):
//
//  1. The meta leader checks the request as nats-server v2.15.2 does
//     (jsClusteredStreamUpdateRequest) and proposes an UpdateStream: the
//     meta group's assignment takes the new config (its LogConfig, the
//     config the stream's group log starts from, stays).
//  2. The server whose replica leads the stream, when it applies that
//     operation or when it comes to lead the stream, proposes the
//     assignment's config to the stream as an UpdateConfig operation
//     (pushConfig, jetstream.SetAssignedConfig): every replica applies it
//     in the stream log's order, and a restart replays it (a file
//     replica from its checkpoint, whose config is the one in force at
//     the checkpoint; a memory replica from the LogConfig, replaying the
//     whole log).
//  3. Before it proposes, a replicated stream's leader reads the meta
//     group linearizably (raftnode ReadIndex), so its assignment is at
//     least as new as the config any earlier leader proposed: configs
//     enter the stream's log in the meta group's order, and a leader
//     whose meta state lags never puts an older config back.
//  4. The meta leader answers once its own replica, if the new
//     assignment keeps one here, applied the new config (at most
//     proposeTimeout).

// configPush is the set of streams whose leader must compare its config
// with the assignment's (Cluster.markConfig); the run goroutine takes it
// (pushConfigs).
type configPush struct {
	mu      sync.Mutex
	pending map[streamKey]bool
}

// markConfig asks the run goroutine to compare stream k's config with
// its assignment on this server, if it leads the stream. It does not
// block (the raftnode worker calls it through onLeader).
func (c *Cluster) markConfig(k streamKey) {
	c.cfgPush.mu.Lock()
	if c.cfgPush.pending == nil {
		c.cfgPush.pending = map[streamKey]bool{}
	}
	c.cfgPush.pending[k] = true
	c.cfgPush.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pushConfigs, on the run goroutine, pushes the config of every marked
// stream; a push that must be tried again (the meta group could not be
// read) stays marked for the next housekeeping tick.
func (c *Cluster) pushConfigs() {
	c.cfgPush.mu.Lock()
	keys := make([]streamKey, 0, len(c.cfgPush.pending))
	for k := range c.cfgPush.pending {
		keys = append(keys, k)
	}
	clear(c.cfgPush.pending)
	c.cfgPush.mu.Unlock()
	slices.SortFunc(keys, func(a, b streamKey) int {
		return strings.Compare(a.account+"\x00"+a.name, b.account+"\x00"+b.name)
	})
	for _, k := range keys {
		if c.pushConfig(k) {
			c.cfgPush.mu.Lock()
			c.cfgPush.pending[k] = true
			c.cfgPush.mu.Unlock()
		}
	}
}

// metaReadTimeout bounds the linearizable read of the meta group before
// a push.
const metaReadTimeout = 2 * time.Second

// pushConfig makes this server's replica of stream k, if it leads the
// stream, propose the assignment's config when its own differs (step 2
// and 3 above). It returns true when it must be tried again.
func (c *Cluster) pushConfig(k streamKey) (retry bool) {
	r := c.replicaOf(k)
	c.mu.Lock()
	acc := c.accounts[k.account]
	c.mu.Unlock()
	if r == nil || !r.leads.Load() || acc == nil || acc.js == nil {
		return false
	}
	cfg, ok := c.assignedConfig(k)
	if !ok || c.hasConfig(acc, cfg) {
		return false
	}
	if r.log != nil {
		if err := c.readMeta(); err != nil {
			return true
		}
		if cfg, ok = c.assignedConfig(k); !ok {
			return false
		}
	}
	changed, jerr := acc.js.SetAssignedConfig(cfg)
	switch {
	case jerr != nil:
		c.cfg.Logf("jscluster: stream %s > %s: the updated config is not applied here: %v", k.account, k.name, jerr)
	case changed:
		c.cfg.Infof("JetStream cluster: stream '%s > %s' updated", k.account, k.name)
	}
	return false
}

// assignedConfig returns the config the meta group assigns stream k.
func (c *Cluster) assignedConfig(k streamKey) (stream.Config, bool) {
	sa, _, ok, _ := c.assignment(k)
	if !ok {
		return stream.Config{}, false
	}
	var cfg stream.Config
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		return stream.Config{}, false
	}
	return cfg, true
}

// hasConfig reports whether the account's engine runs stream cfg.Name
// with config cfg.
func (c *Cluster) hasConfig(acc *account, cfg stream.Config) bool {
	cur, ok := acc.js.StreamConfig(cfg.Name)
	return ok && cur.Equal(&cfg)
}

// readMeta waits, at most metaReadTimeout, until this server's meta state
// reflects every operation the meta group committed before the call
// (raftnode ReadIndex).
func (c *Cluster) readMeta() error { return c.readGroup(meta.MetaGroup, metaReadTimeout) }

// readGroup waits, at most wait, until this server's replica of group g
// was handed every entry the group committed before the call (raftnode
// ReadIndex: the leader confirms its commit index). Errors: ReadIndex's
// (raftnode.ErrNotLeader when no leader is known, ErrUnknownGroup...),
// context.DeadlineExceeded after wait, context.Canceled once the Cluster
// is closed.
func (c *Cluster) readGroup(g raftnode.GroupID, wait time.Duration) error {
	p, err := c.node.ReadIndex(g)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	select {
	case <-p.Done():
		_, err := p.Result()
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.quit:
		return context.Canceled
	}
}

// StreamUpdate implements jsapi.Meta on the meta leader (step 1 above):
// the config is readied as for one server but with replicas allowed
// (stream.Config.PrepareClusteredUpdate: 10157, validation 10052, 10056),
// then checked against the assignment in nats-server v2.15.2's order
// (jsClusteredStreamUpdateRequest): 10059 when the meta group holds no
// such stream; the update rules (stream.CheckClusteredUpdate: 10052,
// 10055 for a changed mirror); the source filters (10069, as on one
// server); subjects overlapping another stream of the account (10065);
// a scale-up past the account's limits over the cluster (checkLimits:
// 10028, 10047, 10122);
// consumer limits an assigned consumer exceeds (10069 "change to limits
// violates consumers: ..."). A changed num_replicas scales the stream
// (scaleServers: 10005 when too few servers are eligible;
// docs/cluster.md, "Scaling"; down to one replica, keepForConsumers,
// "Scaling down to one replica"), and its consumers with it
// (scaleConsumers after the UpdateStream; down to one replica, before
// it, its consumers of one replica on other servers moved to the kept
// one with their state, singlesToKeep, and its replicated consumers
// scaled down to one replica there, consumersToOne, 10008 when they are
// not through within proposeTimeout: "Scaling consumers"), but a
// scale-down to one replica whose consumers cannot follow
// (keepForConsumers finds no server: consumers of one replica that
// cannot move, their server down or their scale-down not settled, on
// two servers), which is refused where nats-server would start it with
// 10061 "Replicas configuration can not be updated"
// (docs/compatibility.md).
// A memory stream's consumers keep their state in memory through its
// scales (memscale.go). A changed
// placement moves the stream (moveServers: 10005 when too few servers
// match; docs/cluster.md, "Moving a stream"), with a changed
// num_replicas too 10123 "can not move and scale a stream in a single
// update", and for a stream with a consumer of one replica on a server
// that leaves and no server staying to take it 10069 "stream placement
// can not be changed" (not built: canMove). Its consumers move with it
// (moveConsumerPairs, moveAfterSingles). A move is proposed as a
// meta.MoveStream, which records its origin (cancelmove.go). A stream
// of one replica moves instead as SERVER.EVACUATE moves it, the update
// proposing step 1 (singleplace.go: singlePlaced, 10069 for an
// offline server or a consumer that cannot move); its
// answer waits for the stream's group to lead with the new config
// (waitPlaced). A move or a scale while a move is recorded, while
// consumers of one replica of the stream move ahead of its replicas
// (singles.go), or while a stream of one replica moves
// (singleStreamMove), gets 10124 "stream move already in progress", as
// nats-server answers it while its move is in flight. A scale between
// replicated counts is proposed as a meta.ScaleStream, which records it
// the same way (recordScale); while it is recorded a move gets 10226
// "stream reconfiguration already in progress" and a scale stacks on
// it, as nats-server v2.15.2 answers during a scale. A scale or move of a stream
// whose scale-down to one replica is not settled yet waits for the
// settle (waitSettled, at most settleWait; 10008 "JetStream system
// temporarily unavailable" after it) and starts from the settled
// assignment, as nats-server v2.15.2 takes a scale sent right after a
// scale-down to one replica. Then the UpdateStream is
// proposed (10008 when the meta group cannot decide; apply's 10059 and
// 10065). The answer to a scale waits for the stream's leader to run
// with the new replica count (waitScaled). The answer waits for this server's
// replica, if the new assignment keeps one here, to apply the new
// config, and carries its info (the assignment's otherwise).
func (a *account) StreamUpdate(req jetstream.StreamRequest) (*jetstream.StreamInfo, *jserr.Error) {
	c := a.c
	cfg := req.Config
	if err := cfg.PrepareClusteredUpdate(req.Subject, req.Pedantic); err != nil {
		return nil, err
	}
	if !c.metaLeader() {
		return nil, jserr.New(jserr.ClusterNotAvail) // a leaderless server (metaAnswers)
	}
	k := streamKey{a.name, cfg.Name}
	sa, old, jerr := c.updateTarget(k)
	if jerr != nil {
		return nil, jerr
	}
	if sa.Unsettled() && (isMove(&old, &cfg) || cfg.Replicas != old.Replicas) {
		// Scaled down to one replica a moment ago: the scale or move
		// starts from the settled assignment (settle.go).
		if !c.waitSettled(k, sa) {
			return nil, jserr.New(jserr.ClusterNotAvail)
		}
		if sa, old, jerr = c.updateTarget(k); jerr != nil {
			return nil, jerr
		}
	}
	if err := a.checkUpdate(&old, &cfg); err != nil {
		return nil, err
	}
	if cfg.Replicas > old.Replicas {
		// The new replicas need the account's room (nats-server
		// v2.15.2 checks a scale-up alone: jsClusteredStreamLimitsCheck).
		if err := a.checkLimits(&cfg); err != nil {
			return nil, err
		}
	}
	body, err := json.Marshal(&cfg)
	if err != nil {
		return nil, jserr.From(err, jserr.StreamUpdate)
	}
	servers := meta.Servers(sa.Replicas)
	_, _, singleMoving := singleStreamMove(sa) // its mover here or not (an interrupted move)
	if (isMove(&old, &cfg) || cfg.Replicas != old.Replicas) && (sa.Moving() || c.moving(k) || singleMoving) {
		return nil, jserr.New(jserr.StreamMoveInProgress)
	}
	if isMove(&old, &cfg) && sa.Scaling() {
		return nil, jserr.New(jserr.StreamReconfigureInProgress)
	}
	var moving []raftnode.ServerID // a move waiting for consumers of one replica (moveAfterSingles)
	var dest raftnode.ServerID     // a stream of one replica moving there (singleplace.go)
	if isMove(&old, &cfg) {
		if sa.Unsettled() {
			return nil, jserr.New(jserr.ClusterNotAvail)
		}
		var perr *jserr.Error
		if servers, perr = c.moveServers(sa, &cfg); perr != nil {
			return nil, perr
		}
		switch {
		case sameSet(servers, meta.Servers(sa.Replicas)):
		case len(sa.Replicas) == 1:
			if servers, perr = c.singlePlaced(k, sa, &old, servers[0]); perr != nil {
				return nil, perr
			}
			dest = servers[1]
		default:
			singles, ok := c.canMove(k, sa, servers)
			if !ok {
				return nil, placementRefused()
			}
			if singles {
				moving, servers = servers, meta.Servers(sa.Replicas)
			}
		}
	}
	if cfg.Replicas != old.Replicas {
		if sa.Unsettled() {
			// Scaled down to one replica, its server not yet through
			// with its group (docs/cluster.md, "Scaling down to one
			// replica"): a moment later.
			return nil, jserr.New(jserr.ClusterNotAvail)
		}
		var perr *jserr.Error
		if cfg.Replicas > 1 {
			if servers, perr = c.scaleServers(sa, &cfg); perr != nil {
				return nil, perr
			}
		} else {
			ch, ok := c.keepForConsumers(sa, c.streamKeepOrder(sa))
			if !ok {
				return nil, jserr.New(jserr.StreamReplicasNotUpdatable)
			}
			// Its consumers of one replica elsewhere move to that
			// server with their state (singlesdown.go) and its
			// replicated consumers go down to one replica there
			// (consumerdown.go) first; the stream follows once each
			// runs there alone.
			if jerr := c.singlesToKeep(sa, ch.keep, ch.move); jerr != nil {
				return nil, jerr
			}
			if jerr := c.consumersToOne(a, k, ch.keep, ch.shrink); jerr != nil {
				return nil, jerr
			}
			servers = []raftnode.ServerID{ch.keep}
		}
	}
	var op meta.Op = &meta.UpdateStream{Account: a.name, Name: cfg.Name, Config: body, Servers: servers}
	switch {
	case dest != "":
		// Step 1 of the move of a stream of one replica, unrecorded
		// (singleStreamMove).
	case moving != nil || (isMove(&old, &cfg) && !sameSet(servers, meta.Servers(sa.Replicas))):
		op = c.moveOp(a.name, &old, body, servers)
	case recordScale(sa, &old, &cfg):
		op = c.scaleOp(a.name, &old, body, servers)
	}
	res, jerr := c.propose(op)
	if jerr != nil {
		return nil, jerr
	}
	if dest != "" {
		// Steps 2 and 3 on a mover (singlestream.go); the answer waits
		// for the stream's group to lead with the new config.
		c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica moves from %s to %s for its new placement: its messages are caught up there", k.account, k.name, servers[0], dest)
		c.startSingleStreamMove(k, servers[0], dest)
		if si := c.waitPlaced(a, k, cfg); si != nil {
			return si, nil
		}
		return a.infoOf(*res.Stream), nil
	}
	if moving != nil {
		c.moveAfterSingles(sa, cfg.Placement, moving)
	} else if !sameSet(servers, meta.Servers(sa.Replicas)) && isMove(&old, &cfg) {
		c.moveConsumerPairs(sa, servers)
	}
	if cfg.Replicas != old.Replicas && res.Stream != nil {
		c.scaleConsumers(a, *res.Stream, &cfg) // its consumers follow (consumerscale.go)
	}
	if cfg.Replicas != old.Replicas {
		c.waitScaled(a, k, cfg.Replicas)
	}
	if _, _, _, here := c.assignment(k); here && c.replicaOf(k) != nil {
		// Not for a replica the update leaves out (a scale-down): it
		// may be removed from its group before it applies the config,
		// and the answer would wait proposeTimeout in vain.
		c.waitConfig(a, cfg)
		if si, err := a.js.StreamInfo(cfg.Name, jetstream.InfoOptions{}); err == nil {
			c.leaderCluster(k, si)
			return si, nil
		}
	}
	return a.infoOf(*res.Stream), nil
}

// moveOp returns the meta.MoveStream that moves stream cfg to servers
// (its own while consumers of one replica move first:
// moveAfterSingles), recording the placement of its config old and
// now as the move's start (cancelmove.go).
func (c *Cluster) moveOp(account string, old *stream.Config, cfg []byte, servers []raftnode.ServerID) meta.Op {
	var origin []byte
	if old.Placement != nil {
		origin, _ = json.Marshal(old.Placement)
	}
	return &meta.MoveStream{Account: account, Name: old.Name, Config: cfg, Servers: servers, Created: c.cfg.Now().UnixNano(), OriginPlacement: origin}
}

// recordScale reports whether the update of stream sa from config old
// to next is a scale StreamUpdate records (meta.ScaleStream): one
// between replicated counts, or any scale while one is recorded (a
// scale down to one replica then ends the record). A scale from or to
// one replica otherwise goes as an UpdateStream, unrecorded
// (docs/cluster.md, "Scaling").
func recordScale(sa meta.StreamAssignment, old, next *stream.Config) bool {
	if next.Replicas == old.Replicas {
		return false
	}
	return sa.Scaling() || len(sa.Replicas) > 1 && old.Replicas > 1 && next.Replicas > 1
}

// scaleOp returns the meta.ScaleStream that scales stream old to the
// config cfg on servers, starting now with old's placement as its
// origin's (a recorded scale keeps its own: meta.ScaleStream).
func (c *Cluster) scaleOp(account string, old *stream.Config, cfg []byte, servers []raftnode.ServerID) meta.Op {
	var origin []byte
	if old.Placement != nil {
		origin, _ = json.Marshal(old.Placement)
	}
	return &meta.ScaleStream{Account: account, Name: old.Name, Config: cfg, Servers: servers, Created: c.cfg.Now().UnixNano(), OriginPlacement: origin}
}

// checkUpdate runs StreamUpdate's checks of next against the stream's
// assigned config old, in nats-server's order; CheckClusteredUpdate may
// change next (a seal).
func (a *account) checkUpdate(old, next *stream.Config) *jserr.Error {
	if err := stream.CheckClusteredUpdate(old, next); err != nil {
		return err
	}
	if err := next.CheckSourceFilters(); err != nil {
		return jserr.New(jserr.StreamUpdate, jserr.Sub("err", err.Description))
	}
	var overlap bool
	var consumers []meta.ConsumerAssignment
	a.c.meta.View(func(st *meta.State) {
		for _, sa := range st.Streams(a.name) {
			if sa.Name != next.Name && subjectsOverlap(sa.Config, next.Subjects) {
				overlap = true
			}
		}
		consumers = st.Consumers(a.name, next.Name)
	})
	if overlap {
		return jserr.New(jserr.StreamSubjectOverlap)
	}
	if err := checkConsumerLimits(old.ConsumerLimits, next.ConsumerLimits, consumers); err != nil {
		return err
	}
	if isMove(old, next) && next.Replicas != old.Replicas {
		return jserr.New(jserr.StreamMoveAndScale)
	}
	return nil
}

// persistedConsumer reports whether consumer ca keeps files as a consumer
// of one replica of a file stream (not mem_storage): a file stream of one
// replica moves only with such consumers (consumerBlocked).
func persistedConsumer(ca meta.ConsumerAssignment) bool {
	var cc consumer.Config
	return json.Unmarshal(ca.Config, &cc) == nil && !cc.MemoryStorage
}

// canMove reports whether stream k (assignment sa) can move to servers:
// it has a group to catch a new replica up (more than one replica), and
// each consumer of one replica on a server that leaves can move with its
// state to a server that stays (singlesOn: the consumer settled, its
// server online, a server staying; one kept in memory too); singles reports
// whether there are such consumers (the move then waits for them:
// moveAfterSingles). Replicated consumers move with the stream's
// replicas (moveConsumerPairs). A placement its servers already satisfy
// moves nothing and needs neither (docs/cluster.md, "Moving a
// stream").
func (c *Cluster) canMove(k streamKey, sa meta.StreamAssignment, servers []raftnode.ServerID) (singles, ok bool) {
	if len(sa.Replicas) < 2 {
		return false, false
	}
	stay := slices.DeleteFunc(meta.Servers(sa.Replicas), func(s raftnode.ServerID) bool { return !slices.Contains(servers, s) })
	var cas []meta.ConsumerAssignment
	c.meta.View(func(st *meta.State) { cas = st.Consumers(k.account, k.name) })
	for _, ca := range cas {
		if len(ca.Replicas) != 1 || slices.Contains(servers, ca.Replicas[0].Server) {
			continue
		}
		movable, dest := c.singlesOn(sa, ca.Replicas[0].Server, stay)
		if dest == "" || !slices.ContainsFunc(movable, func(m meta.ConsumerAssignment) bool { return m.Name == ca.Name }) {
			return false, false
		}
		singles = true
	}
	return singles, true
}

// serverDiff returns the servers of old that next leaves out (gone) and
// those of next that old did not have (came), each in its order.
func serverDiff(old, next []raftnode.ServerID) (gone, came []raftnode.ServerID) {
	for _, s := range old {
		if !slices.Contains(next, s) {
			gone = append(gone, s)
		}
	}
	for _, s := range next {
		if !slices.Contains(old, s) {
			came = append(came, s)
		}
	}
	return gone, came
}

// moveConsumerPairs, on the meta leader after a move of stream sa (its
// assignment before the move) to servers applied, moves the replicas its
// replicated consumers had on each server that left to the server that
// took its place (moveConsumers), pairing them in order.
func (c *Cluster) moveConsumerPairs(sa meta.StreamAssignment, servers []raftnode.ServerID) {
	gone, came := serverDiff(meta.Servers(sa.Replicas), servers)
	for i := range min(len(gone), len(came)) {
		c.moveConsumers(sa.Account, sa.Name, gone[i], came[i])
	}
}

// moveAfterSingles, on the meta leader after the update that changed
// stream sa's placement to placement applied without moving it, moves
// its consumers of one replica off the servers that leave to a server
// that stays (moveSingle), then the stream to servers (an UpdateStream
// of its config then, unless a later update changed its placement or
// servers meanwhile) and its replicated consumers with it
// (moveConsumerPairs), on a mover's goroutine (runMover).
func (c *Cluster) moveAfterSingles(sa meta.StreamAssignment, placement *stream.Placement, servers []raftnode.ServerID) {
	k := streamKey{sa.Account, sa.Name}
	stay := slices.DeleteFunc(meta.Servers(sa.Replicas), func(s raftnode.ServerID) bool { return !slices.Contains(servers, s) })
	c.runMover(singleMoveKey{k: k}, func() {
		for _, from := range meta.Servers(sa.Replicas) {
			if slices.Contains(servers, from) {
				continue
			}
			cas, dest := c.singlesOn(sa, from, stay)
			for _, ca := range cas {
				if err := c.moveSingle(ca, from, dest); err != nil {
					c.cfg.Logf("jscluster: consumer %s > %s > %s: not moved from %s to %s with its stream: %v", ca.Account, ca.Stream, ca.Name, from, dest, err)
				}
			}
		}
	}, func() {
		now, _, ok, _ := c.assignment(k)
		var cfg stream.Config
		if !ok || json.Unmarshal(now.Config, &cfg) != nil || !reflect.DeepEqual(cfg.Placement, placement) || !sameSet(meta.Servers(now.Replicas), meta.Servers(sa.Replicas)) {
			c.cfg.Logf("jscluster: stream %s > %s: not moved to %v: updated meanwhile", k.account, k.name, servers)
			return
		}
		if _, jerr := c.propose(&meta.UpdateStream{Account: k.account, Name: k.name, Config: now.Config, Servers: servers}); jerr != nil {
			c.cfg.Logf("jscluster: stream %s > %s: not moved to %v: %v", k.account, k.name, servers, jerr)
			return
		}
		c.cfg.Infof("JetStream cluster: stream '%s > %s' moves to %v, its consumers of one replica moved first", k.account, k.name, servers)
		c.moveConsumerPairs(now, servers)
	})
}

// sameSet reports whether a and b hold the same servers.
func sameSet(a, b []raftnode.ServerID) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s raftnode.ServerID) bool { return !slices.Contains(b, s) })
}

// isMove reports whether an update from old to next moves the stream: it
// names a placement other than the stream's (nats-server v2.15.2
// jsClusteredStreamUpdateRequest isMoveRequest; dropping the placement
// moves nothing).
func isMove(old, next *stream.Config) bool {
	return next.Placement != nil && !reflect.DeepEqual(old.Placement, next.Placement)
}

// moveServers returns the servers of stream sa under next's placement
// (docs/cluster.md, "Moving a stream"): the stream's servers that
// satisfy it stay, in their order, and the others are replaced by
// servers placed as a create places them (meta.Place, the staying
// servers as Existing: 10005 with nats-server's reasons when too few
// are eligible). The membership machinery then adds each new replica as
// a learner, catches it up by a stream snapshot and promotes it while
// removing one that leaves (reconcileMembership).
func (c *Cluster) moveServers(sa meta.StreamAssignment, next *stream.Config) ([]raftnode.ServerID, *jserr.Error) {
	var servers []raftnode.ServerID
	var perr *jserr.Error
	c.meta.View(func(st *meta.State) {
		pr := c.placeRequest(st, len(sa.Replicas), next.Placement)
		for _, srv := range meta.Servers(sa.Replicas) {
			if meta.Eligible(st, pr, srv) {
				pr.Existing = append(pr.Existing, srv)
			}
		}
		servers, perr = meta.Place(st, pr)
	})
	return servers, perr
}

// scaleServers returns the servers of stream sa scaled to next.Replicas
// replicas (docs/cluster.md, "Scaling"): up, as nats-server v2.15.2
// jsClusteredStreamUpdateRequest chooses them, the current servers
// first and new ones placed as a create places them (meta.Place: 10005
// when too few are eligible; the stream's Excluded servers, an
// evacuation's, never chosen); down, the first of streamKeepOrder (the
// leader, then online servers current first, then offline ones), as
// nats-server v2.15.2's stream leader picks them (keep.go).
func (c *Cluster) scaleServers(sa meta.StreamAssignment, next *stream.Config) ([]raftnode.ServerID, *jserr.Error) {
	cur := meta.Servers(sa.Replicas)
	if next.Replicas < len(cur) {
		return c.streamKeepOrder(sa)[:next.Replicas], nil
	}
	if st, err := c.node.Status(sa.Group); err == nil && st.LeaderServer != "" {
		if i := slices.Index(cur, st.LeaderServer); i > 0 {
			cur = append([]raftnode.ServerID{st.LeaderServer}, slices.Delete(cur, i, i+1)...)
		}
	}
	if next.Replicas == len(cur) {
		return cur, nil
	}
	var servers []raftnode.ServerID
	var perr *jserr.Error
	c.meta.View(func(st *meta.State) {
		pr := c.placeRequest(st, next.Replicas, next.Placement)
		pr.Existing, pr.Exclude = cur, excludedFor(sa, "")
		servers, perr = meta.Place(st, pr)
	})
	return servers, perr
}

// subjectsOverlap reports whether a stream config's subjects overlap any
// of subjects.
func subjectsOverlap(config []byte, subjects []string) bool {
	var cfg stream.Config
	if json.Unmarshal(config, &cfg) != nil {
		return false
	}
	for _, s := range cfg.Subjects {
		for _, t := range subjects {
			if subject.Overlap(s, t) {
				return true
			}
		}
	}
	return false
}

// consumerLimits are the fields of a consumer's config the stream's
// consumer_limits bound.
type consumerLimits struct {
	InactiveThreshold time.Duration `json:"inactive_threshold"`
	MaxAckPending     int           `json:"max_ack_pending"`
}

// checkConsumerLimits refuses a change of consumer_limits that an
// assigned consumer exceeds: 10069 "change to limits violates consumers:
// <names>" (sorted), checking a limit only when it is set and changed
// (nats-server v2.15.2 jsClusteredStreamUpdateRequest, as the single
// server's jetstream.checkConsumerLimits).
func checkConsumerLimits(old, cur stream.ConsumerLimits, cs []meta.ConsumerAssignment) *jserr.Error {
	inactive := cur.InactiveThreshold > 0 && cur.InactiveThreshold != old.InactiveThreshold
	ackPending := cur.MaxAckPending > 0 && cur.MaxAckPending != old.MaxAckPending
	if !inactive && !ackPending {
		return nil
	}
	var names []string
	for _, ca := range cs {
		var cl consumerLimits
		if json.Unmarshal(ca.Config, &cl) != nil {
			continue
		}
		if (inactive && cl.InactiveThreshold > cur.InactiveThreshold) || (ackPending && cl.MaxAckPending > cur.MaxAckPending) {
			names = append(names, ca.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return jserr.New(jserr.StreamUpdate, jserr.Sub("err", "change to limits violates consumers: "+strings.Join(names, ", ")))
}

// scaleWait bounds how long the answer to a stream's scale waits for
// the stream's leader to run with the new replica count (waitScaled):
// within a client's 5 s request timeout (nats.go's and the nats CLI's
// default), with room for the request that follows.
const scaleWait = 3 * time.Second

// waitScaled waits, at most scaleWait, until stream k, just scaled to
// want replicas, is served by a leader that runs with want replicas:
// this server's replica leads with that config, or the leader answers
// $JSC.SI so. A scale-up from one replica stops the stream of one
// replica and starts its group's first replica from its files
// (scaleUpFromOne); until that replica leads nobody answers about the
// stream, so a STREAM.INFO sent right after the update's answer (the
// nats CLI's `stream edit` sends one) would be lost and the client would
// time out; and until the leader applied the new config from its log,
// its info shows the old count. The answer waits instead, as
// nats-server v2.15.2's stream keeps answering while it scales.
func (c *Cluster) waitScaled(a *account, k streamKey, want int) {
	deadline := time.Now().Add(scaleWait)
	for {
		if r := c.replicaOf(k); r != nil && r.leads.Load() && (want == 1 || r.log != nil) {
			if cur, ok := a.js.StreamConfig(k.name); ok && cur.Replicas == want {
				c.announceStream(r)
				return
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		if c.leaderRunsWith(k, want, min(scaleAskWait, left)) {
			return
		}
		select {
		case <-c.quit:
			return
		case <-time.After(min(scalePoll, time.Until(deadline))):
		}
	}
}

// leaderRunsWith asks the leader of stream k for its info ($JSC.SI) and
// reports whether it answered within wait, naming itself the leader and
// running with want replicas (a stream of one replica being scaled up
// still runs with one).
func (c *Cluster) leaderRunsWith(k streamKey, want int, wait time.Duration) bool {
	b := c.requestAll([]string{streamInfoSubject(k)}, nil, wait)[0]
	var si jetstream.StreamInfo
	return b != nil && json.Unmarshal(b, &si) == nil && si.Config.Name == k.name &&
		si.Config.Replicas == want && si.Cluster != nil && si.Cluster.Leader != ""
}

const (
	// scalePoll is how often waitScaled asks again.
	scalePoll = 20 * time.Millisecond
	// scaleAskWait bounds each of its asks.
	scaleAskWait = 250 * time.Millisecond
)

// waitConfig waits, at most proposeTimeout, until this server's replica
// of stream cfg.Name runs with config cfg (step 4 above). It looks every
// configPoll: an update takes two majority fsyncs (the meta group's, the
// stream's), a few milliseconds.
func (c *Cluster) waitConfig(a *account, cfg stream.Config) {
	deadline := time.Now().Add(proposeTimeout)
	for !c.hasConfig(a, cfg) && time.Now().Before(deadline) {
		select {
		case <-c.quit:
			return
		case <-time.After(configPoll):
		}
	}
}

// configPoll is how often waitConfig looks at the replica's config.
const configPoll = 2 * time.Millisecond

// startConfig is the config this server's replica of stream sa starts
// from before it applies its log: for a replicated stream the config
// its group's log starts from (meta.StreamAssignment.LogConfig; a file
// replica with a checkpoint starts from the checkpoint's instead), for
// one replica, which has no group log, the assigned config.
func startConfig(sa meta.StreamAssignment) []byte {
	if len(sa.Replicas) > 1 && len(sa.LogConfig) > 0 {
		return sa.LogConfig
	}
	return sa.Config
}

// leaderCluster sets the cluster block of si, this replica's info of
// stream k, to the stream leader's when another server leads, as
// nats-server v2.15.2's stream leader answers an update itself: a
// follower's view lists the leader among the replicas, leaves itself
// out and has no leader_since. One ask of the leader (waitLeaderAway);
// unanswered, si keeps this replica's view.
func (c *Cluster) leaderCluster(k streamKey, si *jetstream.StreamInfo) {
	if r := c.replicaOf(k); r == nil || r.leads.Load() {
		return
	}
	var li jetstream.StreamInfo
	if b := c.waitLeaderAway(k, 2*recampaign, time.Now().Add(2*recampaign)); b != nil && json.Unmarshal(b, &li) == nil && li.Cluster != nil {
		si.Cluster = li.Cluster
	}
}
