package jscluster

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Moving consumers of one replica (docs/cluster.md, "Moving consumers
// of one replica"). A consumer of one replica has no Raft group, so its
// state cannot be caught up on another server directly. When a
// replicated stream's replica leaves a server (STREAM.PEER.REMOVE,
// SERVER.REMOVE), the meta leader first moves each consumer of one
// replica of the stream on that server to a server of the stream that
// stays, in two steps of the consumer scaling machinery
// ("Scaling consumers"):
//
//  1. an AssignConsumer naming the old server and the new one: the old
//     server's state becomes the checkpoint of a group it bootstraps
//     alone (adoptSingle), the new server's replica joins it empty and is
//     added as a learner, caught up by a snapshot, promoted;
//  2. once the consumer's leader reports the new replica current, an
//     AssignConsumer naming the new server alone: the group shrinks to it
//     (the old server hands its leadership over), and the new server
//     turns its replica into the consumer of one replica, settled.
//
// Only then is the stream's replica moved (then). The mover runs on its
// own goroutine (one per stream and server, singleMoves), since the
// steps take seconds and the API answers at once, as nats-server's does.
//
// A move interrupted between the steps (the meta leader stopped or
// killed, or lost its leadership; a step timed out, as when the
// consumer's server went down) leaves a consumer whose config wants one
// replica assigned two: the meta leader's housekeeping finishes it
// (finishSingleMoves), whichever server leads the meta group then.

// singleMoveKey names one mover: stream k's consumers of one replica on
// server from.
type singleMoveKey struct {
	k    streamKey
	from raftnode.ServerID
}

// singleMoveWait bounds each step of a consumer's move (the new replica
// current, the consumer settled on its new server).
const singleMoveWait = 20 * time.Second

// singlesOn returns the consumers of one replica of stream sa on server
// from that can move (settled; from online: the state of a consumer on
// a server that is down is out of reach), and the server they move to:
// the first of sa's other servers (of stay, when not nil), online ones
// first, that is not removed ("": none, and nothing to move). A
// consumer kept in memory (mem_storage, or any of a memory stream's)
// moves too: its state is taken from its runtime (adoptSingle) and
// handed over in memory on the new server (convertConsumer), as a
// stream's scale-down to one replica moves it (singlesdown.go).
func (c *Cluster) singlesOn(sa meta.StreamAssignment, from raftnode.ServerID, stay []raftnode.ServerID) ([]meta.ConsumerAssignment, raftnode.ServerID) {
	if len(sa.Replicas) < 2 {
		return nil, ""
	}
	var cas []meta.ConsumerAssignment
	var dest raftnode.ServerID
	c.meta.View(func(st *meta.State) {
		for _, ca := range st.Consumers(sa.Account, sa.Name) {
			if len(ca.Replicas) == 1 && ca.Replicas[0].Server == from && !ca.Unsettled() {
				cas = append(cas, ca)
			}
		}
		off := c.offlineIn(st)
		if off[from] {
			cas = nil // its state is out of reach: it stays (docs/cluster.md, "Moving consumers of one replica")
			return
		}
		others := slices.DeleteFunc(meta.Servers(sa.Replicas), func(s raftnode.ServerID) bool {
			sv, ok := st.Server(s)
			return s == from || !ok || sv.Removed || stay != nil && !slices.Contains(stay, s)
		})
		slices.SortStableFunc(others, func(a, b raftnode.ServerID) int { return cmpBool(off[a], off[b]) })
		if len(others) > 0 {
			dest = others[0]
		}
	})
	if dest == "" {
		return nil, ""
	}
	return cas, dest
}

// moveSinglesThen, on the meta leader, starts the mover of stream sa's
// consumers of one replica on server from, which calls then once they
// moved (or failed to: each failure is logged and the consumer stays
// where it is). It reports false, and starts nothing, when there are
// none to move (the caller moves the stream's replica itself), and true
// when a mover runs for them (started now or earlier). When a mover of
// the same stream and server runs already (an earlier request's, moving
// other consumers or the same), the request is asked again once it
// ends, if the stream still has a replica on from (moveSinglesAgain):
// before, it was dropped, its stream's replica left on from
// (STREAM.PEER.REMOVE answered success, nothing done).
func (c *Cluster) moveSinglesThen(sa meta.StreamAssignment, from raftnode.ServerID, then func()) bool {
	cas, dest := c.singlesOn(sa, from, nil)
	if len(cas) == 0 {
		return false
	}
	key := singleMoveKey{streamKey{sa.Account, sa.Name}, from}
	if c.afterMover(key, func() { c.moveSinglesAgain(key, then) }) {
		return true
	}
	return c.runMover(key, func() {
		for _, ca := range cas {
			if err := c.moveSingle(ca, from, dest); err != nil {
				c.cfg.Logf("jscluster: consumer %s > %s > %s: not moved from %s to %s with its stream's replica: %v", ca.Account, ca.Stream, ca.Name, from, dest, err)
			}
		}
	}, then)
}

// afterMover queues f to run when the mover of key ends, if one runs
// now; false (f dropped) when none runs.
func (c *Cluster) afterMover(key singleMoveKey, f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.singleMoves[key] {
		return false
	}
	if c.moverAfter == nil {
		c.moverAfter = map[singleMoveKey][]func(){}
	}
	c.moverAfter[key] = append(c.moverAfter[key], f)
	return true
}

// moveSinglesAgain asks moveSinglesThen again for the stream of key, as
// it stands now, and then runs then at once when it has no consumer of
// one replica left on key.from to move; nothing when the stream is gone
// or no longer has a replica on key.from (the mover that ran moved it).
func (c *Cluster) moveSinglesAgain(key singleMoveKey, then func()) {
	sa, _, ok, _ := c.assignment(key.k)
	if !ok {
		return
	}
	if _, on := meta.On(sa.Replicas, key.from); !on {
		return
	}
	if !c.moveSinglesThen(sa, key.from, then) {
		then()
	}
}

// runMover runs work and then then (unless this server stopped or lost
// the meta leadership meanwhile) on a goroutine of its own, once per
// key: false when it stops (nothing started), true when a mover of key
// runs (started now or earlier). A request to move a stream of one
// replica that found the mover running (singleAgain) is taken up again
// once it ends (retakeSingle).
func (c *Cluster) runMover(key singleMoveKey, work, then func()) bool {
	c.mu.Lock()
	if c.closed || c.singleMoves[key] {
		running := c.singleMoves[key]
		c.mu.Unlock()
		return running
	}
	if c.singleMoves == nil {
		c.singleMoves = map[singleMoveKey]bool{}
	}
	c.singleMoves[key] = true
	c.done.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.done.Done()
		defer func() {
			c.mu.Lock()
			delete(c.singleMoves, key)
			again, after := c.singleAgain[key], c.moverAfter[key]
			delete(c.singleAgain, key)
			delete(c.moverAfter, key)
			c.mu.Unlock()
			if again {
				c.retakeSingle(key) // singleplace.go
			}
			c.runAfter(after)
		}()
		work()
		select {
		case <-c.quit:
			return
		default:
		}
		if c.metaLeader() {
			then()
		}
	}()
	return true
}

// runAfter runs what was asked while a mover ran (moverAfter), in
// order, while this server runs and leads the meta group (what is left
// is dropped, as any request in flight when the meta leadership moves).
func (c *Cluster) runAfter(after []func()) {
	for _, f := range after {
		select {
		case <-c.quit:
			return
		default:
		}
		if !c.metaLeader() {
			return
		}
		f()
	}
}

// moveSingle moves consumer ca, of one replica on server from, to server
// dest with its state (steps 1 and 2 above). Errors: the meta group's,
// errSingleMoveStopped, or a step not through within singleMoveWait.
func (c *Cluster) moveSingle(ca meta.ConsumerAssignment, from, dest raftnode.ServerID) error {
	k := consumerKey{ca.Account, ca.Stream, ca.Name}
	grow := &meta.AssignConsumer{Account: ca.Account, Stream: ca.Stream, Name: ca.Name, Action: meta.Update,
		Config: ca.Config, Created: ca.Created, Servers: []raftnode.ServerID{from, dest}}
	if _, jerr := c.propose(grow); jerr != nil {
		return jerr
	}
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' of one replica moves from %s to %s: its state is caught up there", k.account, k.stream, k.name, from, dest)
	if h := c.cfg.Hooks; h != nil && h.SingleMoveStep1 != nil {
		h.SingleMoveStep1(k.account, k.stream, k.name, c.quit)
		select {
		case <-c.quit:
			return errSingleMoveStopped
		default:
		}
	}
	if err := c.waitUp(dest, func() bool { return c.replicaCurrent(k, dest) }); err != nil {
		return errors.Join(errors.New("its new replica was not caught up"), err)
	}
	grown, _, _, _ := c.consumerAssignment(k)
	shrink := &meta.AssignConsumer{Account: ca.Account, Stream: ca.Stream, Name: ca.Name, Action: meta.Update,
		Config: ca.Config, Created: ca.Created, Servers: []raftnode.ServerID{dest}}
	if _, jerr := c.propose(shrink); jerr != nil {
		return jerr
	}
	if err := c.waitFor(func() bool { return c.consumerSettledSince(k, grown) }); err != nil {
		return errors.Join(errors.New("it did not settle on its new server"), err)
	}
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' of one replica moved from %s to %s", k.account, k.stream, k.name, from, dest)
	return nil
}

// errSingleMoveStopped ends a move when the server stops or loses the
// meta leadership.
var errSingleMoveStopped = errors.New("the meta leader stopped or lost its leadership")

// errSingleMoveTimeout ends a step not through within singleMoveWait.
var errSingleMoveTimeout = errors.New("not done in time")

// waitFor polls done until it holds (nil), at most singleMoveWait
// (errSingleMoveTimeout), or until this server stops or is no longer the
// meta leader (errSingleMoveStopped).
func (c *Cluster) waitFor(done func() bool) error {
	return c.waitCheck(singleMoveWait, func() (bool, error) { return done(), nil })
}

// waitCheck polls check every 50 ms until it reports done (nil) or an
// error (that error), at most wait (errSingleMoveTimeout), or until
// this server stops or is no longer the meta leader
// (errSingleMoveStopped).
func (c *Cluster) waitCheck(wait time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(wait)
	for {
		done, err := check()
		switch {
		case done:
			return nil
		case err != nil:
			return err
		case !c.metaLeader():
			return errSingleMoveStopped
		case time.Now().After(deadline):
			return errSingleMoveTimeout
		}
		select {
		case <-c.quit:
			return errSingleMoveStopped
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitUp is waitFor, but gives up with errDestDown once server dest
// has been offline for destDownWait: a replica on a server that went
// down is not caught up before it comes back, and the move is better
// finished back (finishSingleMoves) than waited on for the whole
// singleMoveWait.
func (c *Cluster) waitUp(dest raftnode.ServerID, done func() bool) error {
	var down downTimer
	return c.waitCheck(singleMoveWait, func() (bool, error) {
		if done() {
			return true, nil
		}
		if down.expired(c.offline()[dest], time.Now()) {
			return false, errDestDown
		}
		return false, nil
	})
}

// downTimer tracks since when a server has been seen offline.
type downTimer struct{ since time.Time }

// expired records whether the server is offline now and reports
// whether it has been so for destDownWait.
func (d *downTimer) expired(offline bool, now time.Time) bool {
	switch {
	case !offline:
		d.since = time.Time{}
	case d.since.IsZero():
		d.since = now
	}
	return offline && now.Sub(d.since) >= destDownWait
}

// replicaCurrent reports whether the leader of consumer k (this server's
// replica, or the server answering $JSC.CI) runs on server or reports
// server's replica current and no longer pending.
func (c *Cluster) replicaCurrent(k consumerKey, server raftnode.ServerID) bool {
	var ci *jetstream.ClusterInfo
	if cr := c.creplicaOf(k); cr != nil && cr.log != nil && cr.leads.Load() {
		ci = c.consumerClusterInfo(k)
	} else if r, err := c.remoteConsumerInfo(k, nil, time.Second); err == nil && r.Info != nil {
		ci = r.Info.Cluster
	}
	if ci == nil {
		return false
	}
	if ci.Leader == string(server) {
		return true
	}
	return slices.ContainsFunc(ci.Replicas, func(p *jetstream.PeerInfo) bool {
		return p.Name == string(server) && p.Current && !p.Pending
	})
}

// consumerSettledSince reports whether consumer k, assigned as ca when
// its shrink to one server was proposed, is settled since:
// meta.SettleConsumer gave it a new group, or it is gone (deleted, or
// deleted and created again). As settledSince for a stream's move: a
// poll for the consumer on its new server alone, settled, could miss it
// when a move of it asked meanwhile proposes its first step right after
// the settle, and the mover then held its key for singleMoveWait.
func (c *Cluster) consumerSettledSince(k consumerKey, ca meta.ConsumerAssignment) bool {
	cur, _, assigned, _ := c.consumerAssignment(k)
	return !assigned || cur.Created != ca.Created || cur.Group != ca.Group
}

// moving reports whether a mover of stream k's consumers of one replica
// runs on this server (the meta leader): StreamUpdate then answers a move
// or a scale 10124 "stream move already in progress".
func (c *Cluster) moving(k streamKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.singleMoves {
		if key.k == k {
			return true
		}
	}
	return false
}

// finishSingleMoves, on the meta leader, proposes for each consumer
// whose config wants one replica (consumerTarget) but whose assignment
// names more, grown from fewer (Initial) — a move of a consumer of one
// replica interrupted between its steps, and no mover of its stream
// running here — an AssignConsumer naming one of its servers alone
// (pickSingle): the group shrinks to it, the kept replica holding every
// committed entry first, and it becomes the consumer of one replica,
// its delivered and acknowledged state kept ("Scaling consumers"). At
// most once per staleRetry per consumer; failures are retried then.
// docs/cluster.md, "Moving consumers of one replica".
func (c *Cluster) finishSingleMoves() {
	if !c.metaLeader() {
		return
	}
	type finish struct {
		ca   meta.ConsumerAssignment
		keep raftnode.ServerID
	}
	var todo []finish
	c.meta.View(func(st *meta.State) {
		off := c.offlineIn(st)
		for _, acc := range st.Accounts() {
			for _, sa := range st.Streams(acc) {
				var scfg *stream.Config
				for _, ca := range st.Consumers(acc, sa.Name) {
					if len(ca.Replicas) < 2 || ca.Initial >= len(ca.Replicas) {
						continue // created with its replicas: no move of one
					}
					if scfg == nil {
						scfg = new(stream.Config)
						if json.Unmarshal(sa.Config, scfg) != nil {
							break
						}
					}
					var cc consumer.Config
					if json.Unmarshal(ca.Config, &cc) != nil || consumerTarget(&cc, scfg) != 1 {
						continue
					}
					if keep := pickSingle(st, sa, ca, off); keep != "" {
						todo = append(todo, finish{ca, keep})
					}
				}
			}
		}
	})
	now := time.Now()
	for _, f := range todo {
		k := streamKey{f.ca.Account, f.ca.Stream}
		if c.moving(k) || !c.staleAsked.due(staleKey{k: k, consumer: f.ca.Name}, now, staleRetry) {
			continue
		}
		op := &meta.AssignConsumer{Account: f.ca.Account, Stream: f.ca.Stream, Name: f.ca.Name, Action: meta.Update,
			Config: f.ca.Config, Created: f.ca.Created, Servers: []raftnode.ServerID{f.keep}}
		if _, err := c.meta.Propose(op); err != nil {
			return
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' of one replica ran on %d servers (its move was interrupted): back to one replica, on %s", f.ca.Account, f.ca.Stream, f.ca.Name, len(f.ca.Replicas), f.keep)
	}
}

// pickSingle returns the server consumer ca of stream sa keeps when it
// goes back to one replica (finishSingleMoves): one of its servers that
// holds a replica of the stream and is not removed, online ones first,
// then the newest replica (the move's destination: the move finishes
// rather than rolls back); "" when none.
func pickSingle(st *meta.State, sa meta.StreamAssignment, ca meta.ConsumerAssignment, off map[raftnode.ServerID]bool) raftnode.ServerID {
	cands := slices.DeleteFunc(slices.Clone(ca.Replicas), func(r meta.Replica) bool {
		sv, ok := st.Server(r.Server)
		_, onStream := meta.On(sa.Replicas, r.Server)
		return !onStream || ok && sv.Removed
	})
	if len(cands) == 0 {
		return ""
	}
	slices.SortStableFunc(cands, func(a, b meta.Replica) int {
		if o := cmpBool(off[a.Server], off[b.Server]); o != 0 {
			return o
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return cands[0].Server
}
