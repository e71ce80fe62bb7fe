package jscluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Scaling consumers (docs/cluster.md, "Scaling consumers"):
//
//  1. The meta leader changes a consumer's servers with an
//     AssignConsumer naming more of them (a stream's scale carrying its
//     consumers along, a consumer update raising num_replicas): the
//     consumer keeps its group, its servers keep their replica IDs, new
//     servers get new ones. The group's first replicas (IDs 1 to
//     meta.ConsumerAssignment.Initial) bootstrap it; later ones join it
//     empty (consumerGroupConfig).
//  2. A consumer of one replica becoming replicated: its server stops it
//     with its files kept (jetstream.DetachConsumer), writes its state as
//     the checkpoint of the group's base index 1 (durably), removes its
//     files, and starts its replica from that checkpoint, bootstrapping
//     the group alone (adoptSingle). A restart at any point finds either
//     the files (the checkpoint not yet written: the same steps again) or
//     the checkpoint (leftover files removed).
//  3. The replica that leads the group makes its membership follow the
//     assignment one change at a time (stepMembership, as a stream's):
//     each new replica added as a learner and caught up by the leader's
//     snapshot of the committed state (consumerlog), then promoted.

// consumerGroupConfig is the raftnode configuration of this server's
// replica mine of consumer ca: a replica among the group's first
// (ca.Initial) bootstraps with them as its voters; a later one joins
// empty, to be added by the leader as a learner. A group started by one
// replica holds that replica's state at its base (BaseHoldsState: a
// replica recovered without its checkpoint is fenced rather than
// restarted empty).
func consumerGroupConfig(ca meta.ConsumerAssignment, mine meta.Replica) raftnode.GroupConfig {
	gc := raftnode.GroupConfig{ID: ca.Group, Replica: mine.ID, Incarnation: mine.Incarnation, Peers: meta.Peers(ca.Replicas),
		Label: fmt.Sprintf("consumer '%s > %s > %s'", ca.Account, ca.Stream, ca.Name)}
	if !slices.ContainsFunc(gc.Peers, func(p raftnode.Peer) bool { return p.Replica == mine.ID }) {
		gc.Peers = append(gc.Peers, raftnode.Peer{Replica: mine.ID, Server: mine.Server}) // a leaving replica (startLeavingConsumer)
	}
	n := ca.Initial
	if n < 1 {
		n = len(ca.Replicas)
	}
	if int(mine.ID) > n {
		gc.Join = true
		return gc
	}
	for id := range n {
		gc.Voters = append(gc.Voters, raftnode.ReplicaID(id+1))
	}
	gc.BaseHoldsState = n == 1
	return gc
}

// scaledCheckpointIndex is the index of the checkpoint a consumer of one
// replica becoming replicated writes: the base of the group its replica
// bootstraps alone.
const scaledCheckpointIndex = 1

// adoptSingle readies this server's replica mine of the replicated
// consumer k (assignment ca) when it bootstraps the group alone (step 2
// above): without a checkpoint, the state of the consumer of one replica
// it was (running here, or in its files) becomes the checkpoint at the
// group's base; with one, leftover files of that consumer are removed.
// Other replicas have nothing to adopt. Errors: the engine's, the file
// system's; the consumer's files are then left as they are.
func (c *Cluster) adoptSingle(acc *account, k consumerKey, ca meta.ConsumerAssignment, mine meta.Replica) error {
	if ca.Initial != 1 || mine.ID != 1 || len(ca.Replicas) < 2 {
		return nil
	}
	dir := c.consumerDir(ca.Group)
	var ck consumerCheckpoint
	switch err := metafile.Read(c.cfg.FS, dir, &ck); {
	case err == nil:
	case vfs.IsNotExist(err):
		// A consumer of a memory stream scaled up from one replica was
		// detached before the stream stopped (memscale.go); the runtime
		// the engine may have started for it since, without its state,
		// is stopped and its state ignored.
		handed, wasHanded := c.takeHanded(k, ca.Created)
		state, found, jerr := acc.js.DetachConsumer(k.stream, k.name, time.Unix(0, ca.Created), nil)
		if jerr != nil {
			if wasHanded {
				c.handBack(k, ca.Created, handed) // for the next attempt
			}
			return jerr
		}
		if wasHanded {
			state, found = handed, true
		}
		if !found {
			return nil // nothing of it here (a consumer of a memory stream restarted): it starts as a new one
		}
		if err := c.cfg.FS.MkdirAll(dir); err != nil {
			return err
		}
		if err := metafile.Write(c.cfg.FS, dir, consumerCheckpoint{Index: scaledCheckpointIndex, State: state}); err != nil {
			return err
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' scales up from one replica: this server's state starts its group", k.account, k.stream, k.name)
	default:
		return err
	}
	if jerr := acc.js.RemoveConsumerFiles(k.stream, k.name); jerr != nil {
		return errors.Join(errors.New("the files of the consumer of one replica"), jerr)
	}
	return nil
}

// mine returns this server's replica ID in the consumer replica's
// assignment (0: none). It reads cr.ca unlocked: the run goroutine's
// only (creplica.ca).
func (cr *creplica) mine(server raftnode.ServerID) raftnode.ReplicaID {
	r, _ := meta.On(cr.ca.Replicas, server)
	return r.ID
}

// keepConsumer gives this server's replica cur of consumer k the
// assignment ca, which added or removed other replicas of its group: the
// node learns the new replicas' servers (the old ones', and every one it
// knew, stay known until the leader removed them: keptPeers).
func (c *Cluster) keepConsumer(k consumerKey, cur *creplica, ca meta.ConsumerAssignment) {
	old := cur.ca.Replicas
	c.mu.Lock()
	cur.ca.Replicas = ca.Replicas
	cur.ca.NextReplica = ca.NextReplica
	c.mu.Unlock()
	if err := c.node.SetPeers(ca.Group, c.keptPeers(ca.Group, old, ca.Replicas)); err != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: the servers of group %d: %v", k.account, k.stream, k.name, ca.Group, err)
	}
}

// reconcileConsumerMemberships runs stepMembership for every replicated
// consumer whose group this server leads (step 3 above).
func (c *Cluster) reconcileConsumerMemberships() {
	c.mu.Lock()
	var crs []*creplica
	for _, cr := range c.creplicas {
		if cr.log != nil && cr.leads.Load() {
			crs = append(crs, cr)
		}
	}
	c.mu.Unlock()
	for _, cr := range crs {
		c.mu.Lock()
		ca := cr.ca
		c.mu.Unlock()
		label := "consumer '" + ca.Account + " > " + ca.Stream + " > " + ca.Name + "'"
		c.stepMembership(ca.Group, ca.Replicas, &cr.changing, label, cr.log.HandOver)
	}
}

// consumerTarget is how many replicas a consumer with config cc has on a
// stream with config scfg, as nats-server v2.15.2 remaps a stream's
// consumers when it scales (consumerAssignment.targetReplicas): the
// stream's count on an interest or work-queue stream, else
// consumer.Config.EffectiveReplicas (num_replicas, 0 meaning the
// stream's for a durable and one for an ephemeral, at most the
// stream's).
func consumerTarget(cc *consumer.Config, scfg *stream.Config) int {
	if scfg.Retention != stream.LimitsPolicy {
		return max(scfg.Replicas, 1)
	}
	return cc.EffectiveReplicas(scfg)
}

// scaledConsumerServers returns the servers of consumer ca scaled to
// want replicas among the servers of its stream sa (step 1 above): its
// servers first, in the order a scale-down keeps them (keepOrder, with
// what this server's replica of the consumer knows: the replica leading
// its group, then online servers, current first, then offline ones, as
// a stream's: keep.go), then, up, the stream's others (online ones
// first, in the stream's order). Errors: 10023 when the stream has too
// few servers.
func (c *Cluster) scaledConsumerServers(sa meta.StreamAssignment, ca meta.ConsumerAssignment, want int) ([]raftnode.ServerID, *jserr.Error) {
	v, _ := c.localView(ca.Group)
	cur := keepOrder(meta.Servers(ca.Replicas), v)
	// Only servers that hold the stream stay (a server the stream left).
	cur = slices.DeleteFunc(cur, func(s raftnode.ServerID) bool { _, ok := meta.On(sa.Replicas, s); return !ok })
	if want <= len(cur) {
		return cur[:want], nil
	}
	offline := v.offline
	extra := slices.DeleteFunc(meta.Servers(sa.Replicas), func(s raftnode.ServerID) bool { return slices.Contains(cur, s) })
	slices.SortStableFunc(extra, func(a, b raftnode.ServerID) int { return cmpBool(offline[a], offline[b]) })
	if len(cur)+len(extra) < want {
		return nil, jserr.New(jserr.InsufficientResources)
	}
	return append(cur, extra[:want-len(cur)]...), nil
}

// scaleConsumers, on the meta leader after a stream update that changed
// the stream's replica count (sa, config scfg: applied), proposes an
// AssignConsumer for every consumer whose count that changes
// (consumerTarget), as nats-server v2.15.2 remaps them: its servers
// scaled (scaledConsumerServers) and a num_replicas other than 0 set to
// the new count. A consumer going down to one replica is left to the
// stream's scale-down (keepForConsumers). Failures are logged: the
// consumer keeps its replicas.
func (c *Cluster) scaleConsumers(a *account, sa meta.StreamAssignment, scfg *stream.Config) {
	var cas []meta.ConsumerAssignment
	c.meta.View(func(st *meta.State) { cas = st.Consumers(a.name, sa.Name) })
	for _, ca := range cas {
		var cc consumer.Config
		if err := json.Unmarshal(ca.Config, &cc); err != nil {
			continue
		}
		want := consumerTarget(&cc, scfg)
		if want == len(ca.Replicas) || want < 2 || ca.Unsettled() {
			continue // down to one: consumersToOne; unsettled: not yet through its scale-down
		}
		servers, jerr := c.scaledConsumerServers(sa, ca, want)
		if jerr != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: not scaled to %d replicas with its stream: %v", a.name, sa.Name, ca.Name, want, jerr)
			continue
		}
		op := &meta.AssignConsumer{Account: a.name, Stream: sa.Name, Name: ca.Name, Action: meta.Update, Config: withReplicas(ca.Config, want), Created: ca.Created, Servers: servers}
		if _, jerr := c.propose(op); jerr != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: not scaled to %d replicas with its stream: %v", a.name, sa.Name, ca.Name, want, jerr)
			continue
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' scales to %d replicas with its stream", a.name, sa.Name, ca.Name, want)
	}
}

// moveConsumers, on the meta leader moving stream stream's replica from
// server from to server to (STREAM.PEER.REMOVE), proposes a
// MoveConsumer of every replica a replicated consumer of the stream has
// on from to to, unless to holds one of its replicas already (it then
// keeps the replica on from, which stops once the stream's replica there
// stopped). A consumer of one replica has no group to catch a new
// replica up: it stays. Failures are logged.
func (c *Cluster) moveConsumers(account, stream string, from, to raftnode.ServerID) {
	var cas []meta.ConsumerAssignment
	c.meta.View(func(st *meta.State) { cas = st.Consumers(account, stream) })
	for _, ca := range cas {
		r, on := meta.On(ca.Replicas, from)
		if _, there := meta.On(ca.Replicas, to); !on || there || len(ca.Replicas) < 2 {
			continue
		}
		if _, jerr := c.propose(&meta.MoveConsumer{Account: account, Stream: stream, Name: ca.Name, Replica: r.ID, To: to}); jerr != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: its replica on %s not moved to %s: %v", account, stream, ca.Name, from, to, jerr)
			continue
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s': its replica on %s moves to %s", account, stream, ca.Name, from, to)
	}
}
