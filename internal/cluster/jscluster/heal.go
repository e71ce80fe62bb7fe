package jscluster

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Healing a stream short of its replicas (docs/cluster.md, "Removing
// a server"): a stream of three replicas or more drops the replica of a
// removed server that no other server could take (dropRemoved) and runs
// one replica short of its num_replicas. nats-server v2.15.2 brings such
// a stream back to its count when a new server enters the meta group
// (reconcilePeerAssignments: missing peers are placed, the stream's
// consumers remapped); cairn does it whenever a server can take the
// replica (a new server, or one back online), on the meta leader's
// housekeeping: healShort. Meanwhile the stream's replicated consumers
// run on the stream's servers alone, as nats-server remaps a consumer's
// peers to its stream's (remapConsumerAssignments): their replicas on
// servers the stream left are dropped (dropLeftConsumers), and a
// consumer's info lists the replicas left.

// healShort, on the meta leader, proposes for every replicated stream
// whose assignment names fewer servers than its num_replicas a
// meta.UpdateStream with its config unchanged and its servers plus
// those placed as a scale-up places them (the current ones kept); the
// stream's leader then adds each new replica as a learner, catches it up
// and promotes it (reconcileMembership). The replicas of the stream's
// replicated consumers still on servers the stream left (a removed
// server's, kept in their assignments) move to the new servers
// (meta.MoveConsumer). At most once per staleRetry per stream; a stream
// no server can complete stays as it is, and is tried again.
func (c *Cluster) healShort() {
	if !c.metaLeader() {
		return
	}
	var shorts []meta.StreamAssignment
	c.meta.View(func(st *meta.State) {
		for _, acc := range st.Accounts() {
			for _, sa := range st.Streams(acc) {
				if short(sa) {
					shorts = append(shorts, sa)
				}
			}
		}
	})
	now := time.Now()
	for _, sa := range shorts {
		k := streamKey{sa.Account, sa.Name}
		if c.moving(k) || !c.staleAsked.due(staleKey{k: k, consumer: "\x00heal"}, now, staleRetry) {
			continue
		}
		if !c.healStream(sa) {
			return
		}
	}
}

// short reports whether a replicated stream's assignment names fewer
// servers than its config's num_replicas, with no move in flight.
func short(sa meta.StreamAssignment) bool {
	if len(sa.Replicas) < 2 || sa.Moving() {
		return false // one replica (or a scale-down to one settling): nothing to catch up from; a move in flight ends first
	}
	// Only num_replicas: every meta leader's housekeeping round asks of
	// every stream, and a whole stream.Config decoded each time was the
	// largest part of an idle meta leader's CPU (trial 37, finding 5).
	var cfg struct {
		Replicas int `json:"num_replicas"`
	}
	return json.Unmarshal(sa.Config, &cfg) == nil && len(sa.Replicas) < cfg.Replicas
}

// healStream places the missing replicas of stream sa and proposes the
// update, then moves its consumers' replicas left on servers it no
// longer has. It reports false when the meta group did not take the
// proposal (the caller stops for this round).
func (c *Cluster) healStream(sa meta.StreamAssignment) bool {
	var cfg stream.Config
	if json.Unmarshal(sa.Config, &cfg) != nil {
		return true
	}
	cur := meta.Servers(sa.Replicas)
	servers, perr := c.scaleServers(sa, &cfg)
	if perr != nil || len(servers) <= len(cur) {
		return true // no server can take a replica yet
	}
	if _, err := c.meta.Propose(&meta.UpdateStream{Account: sa.Account, Name: sa.Name, Config: sa.Config, Servers: servers}); err != nil {
		return false
	}
	_, added := serverDiff(cur, servers)
	c.cfg.Infof("JetStream cluster: stream '%s > %s' was %d replica(s) short of %d: adds %v", sa.Account, sa.Name, cfg.Replicas-len(cur), cfg.Replicas, added)
	c.healConsumers(sa, servers, added)
	return true
}

// healConsumers moves the replicas of stream sa's replicated consumers
// on servers outside servers (the stream's new servers: a removed
// server's, kept in their assignments) to added, the servers the stream
// just gained: the n-th such server, in name order, to added[n]
// (moveConsumers); then each replicated consumer with fewer replicas
// than it wants (dropLeftConsumers dropped one) gains replicas on the
// stream's servers (growConsumer).
func (c *Cluster) healConsumers(sa meta.StreamAssignment, servers, added []raftnode.ServerID) {
	var gone []raftnode.ServerID
	c.meta.View(func(st *meta.State) {
		for _, ca := range st.Consumers(sa.Account, sa.Name) {
			for _, r := range ca.Replicas {
				if !slices.Contains(servers, r.Server) && !slices.Contains(gone, r.Server) {
					gone = append(gone, r.Server)
				}
			}
		}
	})
	slices.Sort(gone)
	for i, from := range gone {
		if i < len(added) {
			c.moveConsumers(sa.Account, sa.Name, from, added[i])
		}
	}
	var cas []meta.ConsumerAssignment
	c.meta.View(func(st *meta.State) { cas = st.Consumers(sa.Account, sa.Name) })
	for _, ca := range cas {
		c.growConsumer(sa, ca, servers)
	}
}

// growShortConsumers, on the meta leader, tries growConsumer again for
// every replicated consumer with fewer replicas than it wants whose
// stream has all its own and no move in flight: healConsumers grows them
// once when the stream heals, and a proposal that failed then (a meta
// leader change, a timeout) would leave the consumer short for good.
// Only a consumer found short for staleRetry (shortSince), then at most
// once per staleRetry.
func (c *Cluster) growShortConsumers() {
	if !c.metaLeader() {
		return
	}
	type grow struct {
		sa meta.StreamAssignment
		ca meta.ConsumerAssignment
	}
	var grows []grow
	c.meta.View(func(st *meta.State) {
		for _, acc := range st.Accounts() {
			for _, sa := range st.Streams(acc) {
				if len(sa.Replicas) < 2 || sa.Move != nil || short(sa) {
					continue
				}
				for _, ca := range st.Consumers(acc, sa.Name) {
					if consumerShort(sa, ca) {
						grows = append(grows, grow{sa, ca})
					}
				}
			}
		}
	})
	now := c.cfg.Now()
	since := make(map[staleKey]time.Time, len(grows))
	for _, g := range grows {
		k := streamKey{g.sa.Account, g.sa.Name}
		key := staleKey{k: k, consumer: "\x00grow\x00" + g.ca.Name}
		first, ok := c.shortSince[key]
		if !ok {
			first = now
		}
		since[key] = first
		// Short for staleRetry at least: not a scale the update that
		// caused it is about to propose (scaleConsumers).
		if now.Sub(first) < staleRetry || c.moving(k) || !c.staleAsked.due(key, now, staleRetry) {
			continue
		}
		c.growConsumer(g.sa, g.ca, meta.Servers(g.sa.Replicas))
	}
	c.shortSince = since
}

// consumerShort reports whether replicated consumer ca, settled, has
// fewer replicas than it wants (consumerTarget) and stream sa has a
// server it lacks.
func consumerShort(sa meta.StreamAssignment, ca meta.ConsumerAssignment) bool {
	if len(ca.Replicas) < 2 || ca.Unsettled() {
		return false
	}
	// The stream's servers first: a consumer on every one of them (the
	// common case, which every meta leader's housekeeping round asks of
	// every consumer) is not short whatever its configs say, and is
	// answered without decoding them.
	lacks := false
	for _, r := range sa.Replicas {
		if _, on := meta.On(ca.Replicas, r.Server); !on {
			lacks = true
			break
		}
	}
	if !lacks {
		return false
	}
	var cc consumer.Config
	var scfg stream.Config
	if json.Unmarshal(ca.Config, &cc) != nil || json.Unmarshal(sa.Config, &scfg) != nil {
		return false
	}
	return len(ca.Replicas) < consumerTarget(&cc, &scfg)
}

// growConsumer proposes, for replicated consumer ca of stream sa whose
// assignment names fewer servers than it wants (consumerTarget), a
// meta.AssignConsumer update with its config unchanged and its servers
// plus the first of servers (the stream's) it lacks; its group's leader
// adds them as learners (reconcileConsumerMemberships). Failures are
// logged, and growShortConsumers tries again.
func (c *Cluster) growConsumer(sa meta.StreamAssignment, ca meta.ConsumerAssignment, servers []raftnode.ServerID) {
	var cc consumer.Config
	var scfg stream.Config
	if len(ca.Replicas) < 2 || ca.Unsettled() || json.Unmarshal(ca.Config, &cc) != nil || json.Unmarshal(sa.Config, &scfg) != nil {
		return
	}
	want := consumerTarget(&cc, &scfg)
	grown := meta.Servers(ca.Replicas)
	for _, s := range servers {
		if len(grown) >= want {
			break
		}
		if !slices.Contains(grown, s) {
			grown = append(grown, s)
		}
	}
	if len(grown) == len(ca.Replicas) {
		return
	}
	if h := c.cfg.Hooks; h != nil && h.FailGrowConsumer != nil {
		if err := h.FailGrowConsumer(sa.Account, sa.Name, ca.Name); err != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: not brought back to %d replicas with its stream: %v", sa.Account, sa.Name, ca.Name, want, err)
			return
		}
	}
	op := &meta.AssignConsumer{Account: sa.Account, Stream: sa.Name, Name: ca.Name, Action: meta.Update, Config: ca.Config, Created: ca.Created, Servers: grown}
	if _, jerr := c.propose(op); jerr != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: not brought back to %d replicas with its stream: %v", sa.Account, sa.Name, ca.Name, want, jerr)
		return
	}
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' was %d replica(s) short of %d: adds %v", sa.Account, sa.Name, ca.Name, want-len(ca.Replicas), want, grown[len(ca.Replicas):])
}

// dropLeftConsumers, on the meta leader, drops from each replicated
// consumer of a stream short of its replicas (short: dropRemoved left
// a removed server's replica out) its replicas on servers the stream no
// longer has, as nats-server v2.15.2 remaps a consumer's peers to its
// stream's when a removed peer cannot be replaced: a meta.AssignConsumer
// update with its config unchanged and its other servers; its group's
// leader then removes those replicas (reconcileConsumerMemberships), and
// its info no longer lists them. A consumer that would be left with one
// replica is not changed (that is a scale-down to one replica: its
// replica on the removed server stays listed, offline), nor one being
// scaled down to one. healShort brings the consumers back with their
// stream (healConsumers). At most once per staleRetry per consumer.
func (c *Cluster) dropLeftConsumers() {
	if !c.metaLeader() {
		return
	}
	type drop struct {
		ca   meta.ConsumerAssignment
		keep []raftnode.ServerID
	}
	var drops []drop
	c.meta.View(func(st *meta.State) {
		for _, acc := range st.Accounts() {
			for _, sa := range st.Streams(acc) {
				if !short(sa) {
					continue
				}
				for _, ca := range st.Consumers(acc, sa.Name) {
					keep := slices.DeleteFunc(meta.Servers(ca.Replicas), func(s raftnode.ServerID) bool {
						_, on := meta.On(sa.Replicas, s)
						return !on
					})
					if len(keep) < len(ca.Replicas) && len(keep) >= 2 && !ca.Unsettled() {
						drops = append(drops, drop{ca, keep})
					}
				}
			}
		}
	})
	now := time.Now()
	for _, d := range drops {
		ca := d.ca
		if !c.staleAsked.due(staleKey{k: streamKey{ca.Account, ca.Stream}, consumer: "\x00drop\x00" + ca.Name}, now, staleRetry) {
			continue
		}
		op := &meta.AssignConsumer{Account: ca.Account, Stream: ca.Stream, Name: ca.Name, Action: meta.Update, Config: ca.Config, Created: ca.Created, Servers: d.keep}
		if _, err := c.meta.Propose(op); err != nil {
			return
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s': its replicas on servers its stream left are dropped: it runs on %v", ca.Account, ca.Stream, ca.Name, d.keep)
	}
}
