package jscluster

import (
	"encoding/json"
	"slices"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Evacuating a server (docs/clustering.md, "Evacuating a server"):
// $JS.API.SERVER.EVACUATE on the meta leader moves every replica of a
// replicated stream off a server that stays a member of the meta group,
// as nats-server v2.15.2 jsLeaderServerEvacuateRequest does: each
// replica to a server placed as a create places (meta.MoveReplica, its
// stream's consumers' replicas with it, its consumers of one replica
// first: the machinery of STREAM.PEER.REMOVE), or, with no server to
// take it, the replica is dropped from a stream of three replicas or
// more and the server excluded from that stream's placement
// (meta.ExcludeServer, then an UpdateStream), so that healShort does not
// hand the replica straight back; the exclusion ends when the stream is
// back at its num_replicas on other servers (a server joined). Later
// creates may be placed on the server again, as on nats-server.

// EvacuateServer implements jsapi.SystemCluster on the meta leader, as
// nats-server v2.15.2 jsLeaderServerEvacuateRequest: 10044 when no
// member of the meta group has the name (or the peer ID, nats-server's
// 8-character hash of the name, which takes precedence); otherwise every
// stream with a replica on the server is evacuated (evacuateStream) and
// the answer is success, whatever could move (nats-server answers
// success once it proposed the moves). A stream of one replica stays
// where it is (it has no group to catch a new replica up from;
// nats-server moves it: docs/compatibility.md), and so does a stream of
// two replicas with no server to take its replica (one replica left
// would need the conversion of a scale-down to one). 10008 when the
// meta group's status cannot be read.
func (c *Cluster) EvacuateServer(name, peerID string) *jserr.Error {
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil {
		return jserr.New(jserr.ClusterNotAvail)
	}
	var found raftnode.ServerID
	for _, rs := range c.members(st) {
		if (peerID != "" && peerHash(rs) == peerID) || (peerID == "" && string(rs) == name) {
			found = rs
			break
		}
	}
	if found == "" {
		return jserr.New(jserr.ClusterServerNotMember)
	}
	var sas []meta.StreamAssignment
	c.meta.View(func(ms *meta.State) {
		ss, _ := ms.Assigned(found)
		sas = ss
	})
	if len(sas) > 0 {
		c.cfg.Infof("JetStream cluster: evacuating server %s (SERVER.EVACUATE): %d stream(s) with a replica there", found, len(sas))
	}
	for _, sa := range sas {
		c.evacuateStream(sa, found)
	}
	return nil
}

// evacuateStream moves stream sa's replica on server from to a server
// placed as a create places (the stream's Excluded servers and from
// kept out), its consumers of one replica there first; with no such
// server it excludes from and drops the replica (a stream of three
// replicas or more), its consumers of one replica moving first to a
// server that stays. Failures are logged: the evacuation answers
// success regardless, as nats-server's.
func (c *Cluster) evacuateStream(sa meta.StreamAssignment, from raftnode.ServerID) {
	old, ok := meta.On(sa.Replicas, from)
	if !ok {
		return
	}
	if len(sa.Replicas) == 1 {
		c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica stays on evacuated server %s (it has no group to catch a new replica up)", sa.Account, sa.Name, from)
		return
	}
	var cfg stream.Config
	if json.Unmarshal(sa.Config, &cfg) != nil {
		return
	}
	to, perr := c.place(sa, cfg, from)
	if perr == nil {
		move := func() {
			if _, err := c.propose(&meta.MoveReplica{Account: sa.Account, Stream: sa.Name, Replica: old.ID, To: to}); err != nil {
				c.cfg.Logf("jscluster: stream %s > %s: its replica on evacuated server %s not moved to %s: %v", sa.Account, sa.Name, from, to, err)
				return
			}
			c.cfg.Infof("JetStream cluster: stream '%s > %s': its replica on evacuated server %s moves to %s", sa.Account, sa.Name, from, to)
			c.moveConsumers(sa.Account, sa.Name, from, to)
		}
		if !c.moveSinglesThen(sa, from, move) {
			move()
		}
		return
	}
	if len(sa.Replicas) < 3 {
		c.cfg.Infof("JetStream cluster: stream '%s > %s' keeps its replica on evacuated server %s: no server can take it (%v), and one replica left would need a scale-down", sa.Account, sa.Name, from, perr)
		return
	}
	drop := func() {
		k := streamKey{sa.Account, sa.Name}
		if _, err := c.propose(&meta.ExcludeServer{Account: sa.Account, Stream: sa.Name, Server: from}); err != nil {
			c.cfg.Logf("jscluster: stream %s > %s: evacuated server %s not excluded: %v", sa.Account, sa.Name, from, err)
			return
		}
		cur, _, assigned, _ := c.assignment(k)
		if !assigned || len(cur.Replicas) < 3 {
			return
		}
		if _, on := meta.On(cur.Replicas, from); on {
			c.dropRemoved(cur, from, perr)
		}
	}
	if !c.moveSinglesThen(sa, from, drop) {
		drop()
	}
}

// excludedFor returns the servers stream sa's placement keeps out:
// gone (when not empty) and the stream's Excluded servers
// (meta.ExcludeServer).
func excludedFor(sa meta.StreamAssignment, gone raftnode.ServerID) []raftnode.ServerID {
	out := slices.Clone(sa.Excluded)
	if gone != "" && !slices.Contains(out, gone) {
		out = append(out, gone)
	}
	return out
}
