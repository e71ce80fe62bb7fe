package jscluster

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Healing a stream short of its replicas (docs/clustering.md, "Removing
// a server"): a stream of three replicas or more drops the replica of a
// removed server that no other server could take (dropRemoved) and runs
// one replica short of its num_replicas. nats-server v2.15.2 brings such
// a stream back to its count when a new server enters the meta group
// (reconcilePeerAssignments: missing peers are placed, the stream's
// consumers remapped); cairn does it whenever a server can take the
// replica (a new server, or one back online), on the meta leader's
// housekeeping: healShort.

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
	if len(sa.Replicas) < 2 || sa.Move != nil {
		return false // one replica (or a scale-down to one settling): nothing to catch up from; a move in flight ends first
	}
	var cfg stream.Config
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
// (moveConsumers).
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
}
