package jscluster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// What this server reports of its Raft groups to operators' tools
// (docs/monitoring.md, "Replicas and the meta group"): the replicas of a
// ClusterInfo, the meta group's standing, the high-availability assets,
// and what keeps /healthz from saying ok.

// peerInfos returns the replicas of a group whose status on this server
// st is, as nats-server v2.15.2's ClusterInfo lists them (jetstream_cluster.go
// clusterInfo, raft.go Peers), sorted by name:
//
//   - every replica but this server's, and this server's too when it
//     knows no leader (then it is current, seen now, as nats-server's
//     raft.go Peers counts itself; but not a replica that does not hold
//     what its group committed, raftnode GroupStatus.HoldsCommitted: one
//     that joined empty and was not promoted yet is not current before
//     it caught up);
//   - on the leader, a replica is current when it holds every committed
//     entry (lag counts those it lacks) and the leader heard from it within
//     the contact window (raftnode.Node.ContactWindow);
//   - on a follower, the leader is current when this replica heard from it
//     within that window, and the other followers are not current (a
//     follower does not know their logs), as nats-server's followers show
//     them;
//   - active is how long ago this replica last heard from it (0 when it
//     never did), offline that this server has no route to its server.
//
// A name assigned a replica that runs under another name (the old name
// of a server renamed over its store, rename.go) is listed offline.
//
// With assigned (a stream's assignment), only the replicas it names are
// listed (a replica being replaced is not shown beside its replacement),
// and on the leader a replica being added (assigned but not in the group
// yet, a learner, or the incoming half of a joint configuration) is
// pending and not current, however close it is ("Replacing a replica" in
// docs/cluster.md).
func (c *Cluster) peerInfos(st raftnode.GroupStatus, assigned []meta.Replica) []*jetstream.PeerInfo {
	off := c.offline()
	window := c.node.ContactWindow()
	now := time.Now()
	progress := map[raftnode.ReplicaID]raftnode.ReplicaStatus{}
	for _, rs := range st.Replicas {
		progress[rs.Replica] = rs
	}
	isAssigned := func(r raftnode.ReplicaID) bool {
		return assigned == nil || slices.ContainsFunc(assigned, func(a meta.Replica) bool { return a.ID == r })
	}
	var out []*jetstream.PeerInfo
	if st.Leader == 0 {
		out = append(out, &jetstream.PeerInfo{Name: string(c.name), Current: st.HoldsCommitted, Peer: peerHash(c.name)})
	}
	listed := map[raftnode.ReplicaID]raftnode.ServerID{st.Replica: c.name}
	for _, p := range st.Peers {
		if !isAssigned(p.Replica) {
			continue
		}
		listed[p.Replica] = p.Server
		pi := &jetstream.PeerInfo{Name: string(p.Server), Peer: peerHash(p.Server), Active: p.Since(now), Offline: off[p.Server]}
		seen := p.Heard && p.Ago <= window
		switch {
		case st.Role == raftnode.Leader:
			rs, inGroup := progress[p.Replica]
			if rs.Match < st.Commit {
				pi.Lag = st.Commit - rs.Match
			}
			pi.Pending = !inGroup || rs.Learner || rs.Joining
			pi.Current = pi.Lag == 0 && seen && !pi.Pending
		case p.Replica == st.Leader:
			pi.Current = seen
		}
		out = append(out, pi)
	}
	for _, r := range assigned {
		as, ok := listed[r.ID]
		switch {
		case r.Server == c.name:
		case ok && as != r.Server:
			// The old name of a store that runs under another (a
			// server renamed over its store, rename.go): offline, as
			// nats-server v2.15.2 lists the old name's peer.
			out = append(out, &jetstream.PeerInfo{Name: string(r.Server), Peer: peerHash(r.Server), Offline: true})
		case !ok && st.Role == raftnode.Leader:
			out = append(out, &jetstream.PeerInfo{Name: string(r.Server), Peer: peerHash(r.Server), Pending: true, Offline: off[r.Server]})
		}
	}
	slices.SortFunc(out, func(a, b *jetstream.PeerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// HAAssets returns the number of Raft groups this server runs a
// replica of: the meta group, and its replicas of replicated streams and
// consumers (nats-server v2.15.2 JetStreamStats.HAAssets, its number of
// Raft nodes); 0 before the meta group started.
func (c *Cluster) HAAssets() int {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return 0
	}
	return len(c.node.Groups())
}

// Problem is one reason this server's part of the JetStream cluster is
// not healthy (Health).
type Problem struct {
	// Kind is "meta" (the meta group), "stream" or "consumer";
	// Account, Stream and Consumer name the asset.
	Kind                      string
	Account, Stream, Consumer string
	// Text is what /healthz says, nats-server v2.15.2's words where it
	// has them (monitor.go healthz).
	Text string
}

// Health returns what keeps this server's part of the JetStream cluster
// from being healthy (docs/monitoring.md, "/healthz"), the meta group's
// problem first, then those of the streams and consumers the meta group
// assigns to this server, sorted by account, stream and consumer, as
// nats-server v2.15.2's healthz checks them (monitor.go healthz,
// jetstream_cluster.go isStreamHealthy, isConsumerHealthy):
//
//   - the Raft WAL still being replayed after a restart ("JetStream is
//     still recovering meta layer"; docs/cluster.md, "Restarts");
//   - this server removed from the meta group (SERVER.REMOVE), while it
//     ran or while it was down (removedown.go): removedText, where
//     nats-server, which disables JetStream on it, says "JetStream not
//     enabled";
//   - the meta group not started yet (its routes unresolved), fenced, or
//     its replica here without a leader ("JetStream has not established
//     contact with a meta leader"), not current ("JetStream is not
//     current with the meta leader"), or still applying what it knows
//     committed (a restart replaying its log, also on a leader: "JetStream
//     is still recovering meta layer", nats-server's isMetaRecovering);
//   - a stream assigned here that does not run here ("JetStream stream
//     'A > S' is not current: stream not found"), and a consumer so
//     assigned more than consumerGrace after its creation ("JetStream
//     consumer 'A > S > C' is not current: consumer not found");
//   - each replica of a replicated stream or consumer here that is
//     fenced, or not current: "...: stream catching up" when it knows its
//     leader but has not applied what that leader committed (a leader too:
//     one elected while its restart still applies its log), or its stream
//     has yet to apply what its group caught up with (applylag.go), "...:
//     group node unhealthy" otherwise.
//
// Current is raftnode's (GroupStatus.Current), nats-server's isCurrent.
func (c *Cluster) Health() []Problem {
	if !c.replayed.Load() {
		return []Problem{{Kind: "meta", Text: "JetStream is still recovering meta layer"}}
	}
	c.mu.Lock()
	started := c.started
	var accs []string
	for name, acc := range c.accounts {
		if acc.js != nil {
			accs = append(accs, name)
		}
	}
	c.mu.Unlock()
	if !started {
		names, _ := c.host.ClusterMembers()
		return []Problem{{Kind: "meta", Text: fmt.Sprintf("JetStream cluster waits to enter its meta group: the servers its routes name, or a meta leader adding it (known: %v)", names)}}
	}
	if c.removedSelf() {
		return []Problem{{Kind: "meta", Text: removedText}}
	}
	st, err := c.node.Status(meta.MetaGroup)
	switch {
	case err != nil:
		return []Problem{{Kind: "meta", Text: "JetStream meta group: " + err.Error()}}
	case st.Fenced != nil:
		return []Problem{{Kind: "meta", Text: "JetStream meta group replica fenced: " + st.Fenced.Error()}}
	case st.Leader == 0:
		return []Problem{{Kind: "meta", Text: "JetStream has not established contact with a meta leader"}}
	case !st.Current:
		return []Problem{{Kind: "meta", Text: "JetStream is not current with the meta leader"}}
	case st.Applied < st.Commit:
		return []Problem{{Kind: "meta", Text: "JetStream is still recovering meta layer"}}
	}
	var out []Problem
	for _, a := range c.assetsHere(accs) {
		if p, ok := c.assetProblem(a); ok {
			out = append(out, p)
		}
	}
	return out
}

// consumerGrace is how long a consumer assigned here may take to start
// before Health reports it missing, as nats-server's 5 s.
const consumerGrace = 5 * time.Second

// asset is a stream (consumer "") or consumer the meta group assigns to
// this server.
type asset struct {
	account, stream, consumer string
	group                     raftnode.GroupID
	replicas                  int
	created                   time.Time
}

// assetsHere lists the streams and consumers of accounts the meta group
// assigns to this server, sorted.
func (c *Cluster) assetsHere(accounts []string) []asset {
	var out []asset
	c.meta.View(func(ms *meta.State) {
		for _, acc := range accounts {
			for _, sa := range ms.Streams(acc) {
				if _, here := meta.On(sa.Replicas, c.name); !here {
					continue
				}
				out = append(out, asset{acc, sa.Name, "", sa.Group, len(sa.Replicas), time.Unix(0, sa.Created)})
				for _, ca := range ms.Consumers(acc, sa.Name) {
					if _, here := meta.On(ca.Replicas, c.name); here {
						out = append(out, asset{acc, sa.Name, ca.Name, ca.Group, len(ca.Replicas), time.Unix(0, ca.Created)})
					}
				}
			}
		}
	})
	slices.SortFunc(out, func(a, b asset) int {
		return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.stream, b.stream), cmp.Compare(a.consumer, b.consumer))
	})
	return out
}

// assetProblem returns what keeps an asset assigned here from being
// healthy (Health), if anything.
func (c *Cluster) assetProblem(a asset) (Problem, bool) {
	p := Problem{Kind: "stream", Account: a.account, Stream: a.stream, Consumer: a.consumer}
	name := fmt.Sprintf("stream '%s > %s'", a.account, a.stream)
	running := c.replicaOf(streamKey{a.account, a.stream}) != nil
	if a.consumer != "" {
		p.Kind, name = "consumer", fmt.Sprintf("consumer '%s > %s > %s'", a.account, a.stream, a.consumer)
		running = c.creplicaOf(consumerKey{a.account, a.stream, a.consumer}) != nil
	}
	notCurrent := func(why string) (Problem, bool) {
		p.Text = fmt.Sprintf("JetStream %s is not current: %s", name, why)
		return p, true
	}
	d, damaged := c.damagedOf(streamKey{a.account, a.stream})
	switch {
	case !running && a.consumer == "" && damaged && d.group == a.group:
		p.Text = fmt.Sprintf("JetStream %s replica fenced: %v", name, d.err)
		return p, true
	case !running && a.consumer == "":
		return notCurrent("stream not found")
	case !running && c.cfg.Now().Sub(a.created) < consumerGrace:
		return p, false
	case !running:
		return notCurrent("consumer not found")
	case a.replicas <= 1:
		return p, false
	}
	gs, err := c.node.Status(a.group)
	if err != nil {
		return notCurrent("group node missing")
	}
	sk := streamKey{a.account, a.stream}
	behind := a.consumer == "" && gs.Role != raftnode.Leader && c.applyBehind(sk, c.replicaOf(sk))
	switch {
	case gs.Fenced != nil:
		p.Text = fmt.Sprintf("JetStream %s replica fenced: %v", name, gs.Fenced)
		return p, true
	case gs.Current && !behind && gs.Applied >= gs.Commit:
		return p, false
	case a.consumer == "" && gs.Leader != 0 && (!gs.CaughtUp || behind || gs.Applied < gs.Commit):
		return notCurrent("stream catching up")
	}
	return notCurrent("group node unhealthy")
}
