package jscluster

import (
	"encoding/json"
	"slices"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Evacuating a server (docs/cluster.md, "Evacuating a server"):
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
// success once it proposed the moves). A stream of one replica, file or
// memory, moves with its messages and its consumers' state, those kept
// in memory too (evacuateSingle, singlestream.go, as nats-server v2.15.2
// migrates it); a stream of two replicas with no server to take its
// replica stays (one replica left would need the conversion of a
// scale-down to one): docs/compatibility.md.
// 10008 when the meta group's status cannot be read.
func (c *Cluster) EvacuateServer(name, peerID string) *jserr.Error {
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil {
		return jserr.New(jserr.ClusterNotAvail)
	}
	found := c.memberNamed(st, name, peerID)
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
// kept out), its consumers of one replica there first (a stream of one
// replica with its data and its consumers' state: evacuateSingle; one
// moving so already goes on as it is); with no such
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
		_ = c.evacuateSingle(sa, from) // singlestream.go; what stays is logged
		return
	}
	if f, _, moving := singleStreamMove(sa); moving {
		if f != from {
			c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica keeps its replica on evacuated server %s: it is moving there from %s", sa.Account, sa.Name, from, f)
		}
		return // its move goes on (finishSingleStreamMoves)
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

var _ jsapi.ConsumerPeers = (*account)(nil)

// ConsumerEvacuatePeer implements jsapi.ConsumerPeers on the meta leader,
// as nats-server v2.15.2 jsConsumerRemapPeerRequest (remapConsumerAssignment,
// not removing): the replica of the stream's consumer on peer (a server
// name or nats-server's peer ID of one) moves to a server of the stream
// the consumer is not on (online ones first): a replicated consumer's by
// a meta.MoveConsumer (caught up by a snapshot, then promoted while the
// old one leaves), a consumer of one replica with its state, on a mover
// of its own, the answer coming at once (moveSingle). Errors: 10059 no
// such stream, 10014 no such consumer, 10040 no replica of it on peer,
// 10075 "peer remap failed" for a stream of one replica, no server of
// the stream left to take it, or a consumer of one replica whose state
// cannot move (not yet settled, or its server offline: nats-server moves
// these too, docs/compatibility.md). One kept in memory (mem_storage, a
// memory stream's) moves with its state handed over in memory.
func (a *account) ConsumerEvacuatePeer(streamName, name, peer string) *jserr.Error {
	return a.remapConsumer(streamName, name, peer, "CONSUMER.PEER.EVACUATE")
}

// ConsumerRemovePeer implements jsapi.ConsumerPeers on the meta leader:
// CONSUMER.PEER.REMOVE moves the replica as ConsumerEvacuatePeer does,
// with its errors. nats-server v2.15.2 (remapConsumerAssignment with
// remove set) takes the same replacement, a server of the stream the
// consumer is not on, and drops the removed peer from the group at once
// rather than once the replacement caught up; a consumer of one replica
// on a server that is down it starts over on the replacement, where
// cairn answers 10075 (its state is out of reach: docs/compatibility.md).
func (a *account) ConsumerRemovePeer(streamName, name, peer string) *jserr.Error {
	return a.remapConsumer(streamName, name, peer, "CONSUMER.PEER.REMOVE")
}

// remapConsumer is ConsumerEvacuatePeer's and ConsumerRemovePeer's move,
// api naming the request in the log.
func (a *account) remapConsumer(streamName, name, peer, api string) *jserr.Error {
	c := a.c
	sa, _, ok, _ := c.assignment(streamKey{a.name, streamName})
	if !ok {
		return jserr.New(jserr.StreamNotFound)
	}
	ca, _, ok, _ := c.consumerAssignment(consumerKey{a.name, streamName, name})
	if !ok {
		return jserr.New(jserr.ConsumerNotFound)
	}
	i := slices.IndexFunc(ca.Replicas, func(r meta.Replica) bool { return string(r.Server) == peer || peerHash(r.Server) == peer })
	if i < 0 {
		return jserr.New(jserr.ClusterPeerNotMember)
	}
	from := ca.Replicas[i]
	dest, movable := c.consumerDest(sa, ca, from.Server)
	if dest == "" || !movable {
		return jserr.New(jserr.PeerRemap)
	}
	if len(ca.Replicas) > 1 {
		if _, err := c.propose(&meta.MoveConsumer{Account: a.name, Stream: streamName, Name: name, Replica: from.ID, To: dest}); err != nil {
			return err
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s': its replica on %s moves to %s (%s)", a.name, streamName, name, from.Server, dest, api)
		return nil
	}
	key := singleMoveKey{streamKey{a.name, streamName}, from.Server}
	c.mu.Lock()
	busy := c.singleMoves[key]
	c.mu.Unlock()
	if busy || !c.runMover(key, func() {
		if err := c.moveSingle(ca, from.Server, dest); err != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: not moved from %s to %s (%s): %v", a.name, streamName, name, from.Server, dest, api, err)
		}
	}, func() {}) {
		return jserr.New(jserr.PeerRemap)
	}
	return nil
}

// consumerDest returns the server of stream sa that takes consumer ca's
// replica on server from: one of the stream's servers the consumer is
// not on, not removed, online ones first, in assignment order ("": none).
// movable is false for a consumer of one replica whose state cannot
// move (singlesOn's conditions: not yet settled, or its server offline;
// one kept in memory moves, its state handed over in memory).
func (c *Cluster) consumerDest(sa meta.StreamAssignment, ca meta.ConsumerAssignment, from raftnode.ServerID) (dest raftnode.ServerID, movable bool) {
	if len(sa.Replicas) < 2 {
		return "", false
	}
	movable = len(ca.Replicas) != 1 || !ca.Unsettled()
	c.meta.View(func(st *meta.State) {
		off := c.offlineIn(st)
		if len(ca.Replicas) == 1 && off[from] {
			movable = false // its state is out of reach
		}
		var cands []raftnode.ServerID
		for _, s := range meta.Servers(sa.Replicas) {
			sv, ok := st.Server(s)
			if _, on := meta.On(ca.Replicas, s); s == from || on || !ok || sv.Removed {
				continue
			}
			cands = append(cands, s)
		}
		slices.SortStableFunc(cands, func(a, b raftnode.ServerID) int { return cmpBool(off[a], off[b]) })
		if len(cands) > 0 {
			dest = cands[0]
		}
	})
	return dest, movable
}
