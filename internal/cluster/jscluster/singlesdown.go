package jscluster

import (
	"sync"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// Which server a scale-down to one replica keeps, and what its
// consumers do first (docs/cluster.md, "Scaling down to one replica"):
// every consumer of the stream must run alone on the kept server before
// the stream's UpdateStream. A replicated consumer with a replica there
// scales down to one replica on it (consumersToOne); a consumer of one
// replica on another server moves there with its delivered and
// acknowledged state, in the two steps of "Moving consumers of one
// replica" (moveSingle; a consumer kept in memory too), as nats-server
// v2.15.2 migrates such a consumer to the stream's kept peer (measured:
// durables, ephemerals and mem_storage durables of one replica on each
// of three servers, of a file and of a memory stream, delivered and
// acknowledged, all on the kept server with the same state after `nats
// stream edit --replicas 1`). The kept server is the one of the
// scale-down's order (streamKeepOrder) that needs the fewest such
// moves, the first of them among equals.

// keepChoice is a scale-down to one replica's kept server and what its
// consumers do first.
type keepChoice struct {
	// keep is the server whose replica stays.
	keep raftnode.ServerID
	// shrink are the replicated consumers with a replica on keep: they
	// scale down to one replica there (consumersToOne).
	shrink []meta.ConsumerAssignment
	// move are the consumers of one replica on other servers: they move
	// to keep with their state (singlesToKeep).
	move []meta.ConsumerAssignment
}

// chooseKeep returns the kept server of a scale-down to one replica of a
// stream whose servers, in the scale-down's order, are order and whose
// consumers are cas: of the servers where every consumer either has its
// one replica, or a replica (a replicated consumer), or is of one
// replica elsewhere and movable to it (movable(ca, s)), the one needing
// the fewest moves, the first in order among equals. False when no
// server will do (StreamUpdate answers 10061).
func chooseKeep(order []raftnode.ServerID, cas []meta.ConsumerAssignment, movable func(ca meta.ConsumerAssignment, to raftnode.ServerID) bool) (keepChoice, bool) {
	var best keepChoice
	found := false
	for _, s := range order {
		ch, ok := keepOn(s, cas, movable)
		if ok && (!found || len(ch.move) < len(best.move)) {
			best, found = ch, true
		}
	}
	return best, found
}

// keepOn returns what keeping server s asks of consumers cas
// (chooseKeep), false when a consumer cannot run alone there.
func keepOn(s raftnode.ServerID, cas []meta.ConsumerAssignment, movable func(ca meta.ConsumerAssignment, to raftnode.ServerID) bool) (keepChoice, bool) {
	ch := keepChoice{keep: s}
	for _, ca := range cas {
		_, on := meta.On(ca.Replicas, s)
		switch {
		case len(ca.Replicas) == 1 && on:
		case len(ca.Replicas) > 1 && on:
			ch.shrink = append(ch.shrink, ca)
		case len(ca.Replicas) == 1 && movable(ca, s):
			ch.move = append(ch.move, ca)
		default:
			return keepChoice{}, false
		}
	}
	return ch, true
}

// keepForConsumers returns the kept server of stream sa's scale-down to
// one replica, its servers in the scale-down's order being order
// (streamKeepOrder: the leader first, then online servers, current
// first), and what its consumers do first (chooseKeep). A consumer of
// one replica can move to a server when it is settled, its server and
// that one are online and that one is not removed: its state moves in a
// group of two (moveSingle), from its files or, kept in memory
// (mem_storage, a memory stream's), from its runtime (adoptSingle), and
// ends on the kept server in files or handed over in memory
// (convertConsumer). One that cannot (its server down: its state is out
// of reach; just scaled down, not yet settled) keeps the stream on its
// server, and such consumers on two servers, or one of them and a down
// server as the only other choice, leave no server (false: 10061).
func (c *Cluster) keepForConsumers(sa meta.StreamAssignment, order []raftnode.ServerID) (keepChoice, bool) {
	var ch keepChoice
	var ok bool
	c.meta.View(func(st *meta.State) {
		off := c.offlineIn(st)
		movable := func(ca meta.ConsumerAssignment, to raftnode.ServerID) bool {
			sv, known := st.Server(to)
			return !ca.Unsettled() && !off[ca.Replicas[0].Server] && !off[to] && known && !sv.Removed
		}
		ch, ok = chooseKeep(order, st.Consumers(sa.Account, sa.Name), movable)
	})
	return ch, ok
}

// singlesToKeep, on the meta leader scaling stream sa down to one
// replica on server keep, starts for each server holding consumers of
// move (of one replica) a mover (runMover, keyed by the stream and that
// server, so that the stream's moves and scales get 10124 meanwhile and
// finishSingleMoves leaves its consumers alone) that moves them to keep
// with their state, up to keepMoves at once (movesToKeep; a failure is logged
// and the consumer stays where it is, so the scale-down's wait,
// consumersToOne, runs out: 10008, and the client's retry finds the
// others moved). Error: 10008 when this server is closing.
func (c *Cluster) singlesToKeep(sa meta.StreamAssignment, keep raftnode.ServerID, move []meta.ConsumerAssignment) *jserr.Error {
	k := streamKey{sa.Account, sa.Name}
	byServer := map[raftnode.ServerID][]meta.ConsumerAssignment{}
	var froms []raftnode.ServerID
	for _, ca := range move {
		from := ca.Replicas[0].Server
		if byServer[from] == nil {
			froms = append(froms, from)
		}
		byServer[from] = append(byServer[from], ca)
	}
	for _, from := range froms {
		cas := byServer[from]
		started := c.runMover(singleMoveKey{k: k, from: from}, func() { c.movesToKeep(cas, from, keep) }, func() {})
		if !started {
			return jserr.New(jserr.ClusterNotAvail)
		}
		c.cfg.Infof("JetStream cluster: stream '%s > %s' scales down to one replica on %s: its %d consumers of one replica on %s move there first", k.account, k.name, keep, len(cas), from)
	}
	return nil
}

// keepMoves bounds how many consumers of one replica a mover of
// singlesToKeep moves at once: each move takes a few hundred
// milliseconds (two meta proposals, a group started, a learner caught
// up, the settle), so a server with a few dozen of them (ordered
// consumers, KV watchers) is through within the scale-down's wait.
const keepMoves = 8

// movesToKeep moves consumers cas, of one replica on server from, to
// server keep with their state (moveSingle), at most keepMoves at once,
// each on a goroutine of its own; it returns once every move ended. A
// failure is logged: the consumer stays where it is. None starts once
// this server stops or no longer leads the meta group.
func (c *Cluster) movesToKeep(cas []meta.ConsumerAssignment, from, keep raftnode.ServerID) {
	slots := make(chan struct{}, keepMoves)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, ca := range cas {
		select {
		case slots <- struct{}{}:
		case <-c.quit:
			return
		}
		if !c.metaLeader() {
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := c.moveSingle(ca, from, keep); err != nil {
				c.cfg.Logf("jscluster: consumer %s > %s > %s: not moved from %s to %s for its stream's scale-down to one replica: %v", ca.Account, ca.Stream, ca.Name, from, keep, err)
			}
		})
	}
}
