package jscluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Moving a stream of one replica (docs/cluster.md, "Moving a stream of
// one replica"). A file stream of one replica has no Raft group
// (decision 2), so nothing can catch a replica up on another server
// directly. SERVER.EVACUATE and STREAM.PEER.EVACUATE of its server, and
// a STREAM.UPDATE changing its placement (singleplace.go: the update is
// step 1, with its new config), move it with its messages and its
// consumers' state, as nats-server v2.15.2 migrates it, in the steps of
// a scale ("Scaling"), the way consumers of one replica move
// (singles.go), on a mover of the meta leader (runMover: one per stream
// and server; the API answers at once):
//
//  1. an UpdateStream naming the stream's server and the destination,
//     its config unchanged (num_replicas 1; a placement change's new
//     config): its server turns the stream
//     into the first replica of its group (scaleUpFromOne), the
//     destination's replica joins it empty and is added as a learner,
//     caught up by a stream snapshot, promoted;
//  2. once the stream's leader reports the destination's replica
//     current, its consumers (of one replica, as every consumer of a
//     stream of one replica is) move there with their state
//     (moveSingle);
//  3. an UpdateStream naming the destination alone: the group shrinks to
//     it as a scale-down to one replica does (the old server hands its
//     leadership over; its replica leaves only once the destination's
//     holds every committed entry), and the destination turns its
//     replica into the stream of one replica (scaledown.go), settled.
//
// A move interrupted (the meta leader stopped, killed or deposed; a
// step failed) leaves a stream whose config says one replica assigned
// two (singleStreamMove): the meta leader of the moment takes it up in
// its housekeeping (finishSingleStreamMoves), forward while the
// destination is online, back to the old server alone (rollBackSingle)
// once the destination has been offline for destDownWait, did not catch
// up within singleStreamWait, or a consumer cannot move, unless some
// consumer state went to the destination already (the move then waits
// for it). A memory stream of one replica moves the same way, its
// store becoming its group's first replica's (adoptMemory) and its
// consumers' states handed over in memory (memscale.go).

const (
	// singleStreamWait bounds step 1, the destination's replica caught up
	// by a stream snapshot of every message the stream holds.
	singleStreamWait = 2 * time.Minute
	// destDownWait is how long the destination of a move may be offline
	// before the move rolls back (a restart is shorter).
	destDownWait = 10 * time.Second
)

var (
	// errDestDown ends step 1 when the destination stayed offline for
	// destDownWait.
	errDestDown = errors.New("its destination is offline")
	// errDestRemoved rolls back a move whose destination was removed
	// from the meta group (SERVER.REMOVE).
	errDestRemoved = errors.New("its destination was removed")
	// errSingleChanged ends a move whose stream is no longer that move
	// (deleted, updated, scaled, moved back meanwhile).
	errSingleChanged = errors.New("the stream was changed meanwhile")
)

// errBlocked is a consumer that cannot move with its stream of one
// replica: the move rolls back.
type errBlocked struct{ why string }

func (e errBlocked) Error() string { return e.why }

// singleStreamMove reports whether stream sa is a move of a stream of
// one replica under way: its config says one replica (num_replicas 0
// or 1), it is assigned two, and no move or scale is recorded (a
// scale from one replica changes num_replicas in the same update). from
// is the older replica's server (the stream's), to the newer's (the
// destination).
func singleStreamMove(sa meta.StreamAssignment) (from, to raftnode.ServerID, ok bool) {
	if len(sa.Replicas) != 2 || sa.Move != nil {
		return "", "", false
	}
	var cfg struct {
		Replicas int `json:"num_replicas"`
	}
	if json.Unmarshal(sa.Config, &cfg) != nil || cfg.Replicas > 1 {
		return "", "", false
	}
	a, b := sa.Replicas[0], sa.Replicas[1]
	if a.ID > b.ID {
		a, b = b, a
	}
	return a.Server, b.Server, true
}

// evacuateSingle, on the meta leader, starts the move of stream sa, of
// one replica on server from, to a server placed as a create places
// (place: its Excluded servers and from kept out), for SERVER.EVACUATE,
// STREAM.PEER.EVACUATE and STREAM.PEER.REMOVE. 10075 "peer remap
// failed" (logged) when it
// cannot move (singleStreamBlocked) or no server can take it; nil once
// a mover of it runs (started now or earlier).
func (c *Cluster) evacuateSingle(sa meta.StreamAssignment, from raftnode.ServerID) *jserr.Error {
	k := streamKey{sa.Account, sa.Name}
	var cfg stream.Config
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		return jserr.New(jserr.PeerRemap)
	}
	if why := c.singleStreamBlocked(sa, from); why != "" {
		c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica stays on %s: %s", k.account, k.name, from, why)
		return jserr.New(jserr.PeerRemap)
	}
	to, perr := c.place(sa, cfg, from)
	if perr != nil {
		c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica stays on %s: no server can take it (%v)", k.account, k.name, from, perr)
		return jserr.New(jserr.PeerRemap)
	}
	if !c.startSingleStreamMove(k, from, to) {
		return jserr.New(jserr.PeerRemap)
	}
	return nil
}

// singleStreamBlocked returns why stream sa, of one
// replica on server from, cannot move ("" when it can): from offline
// (the stream's only copy is out of reach), or a consumer that cannot
// move with its state (consumerBlocked). A memory stream moves as a
// file stream does, its consumers' states handed over in memory
// (memscale.go).
func (c *Cluster) singleStreamBlocked(sa meta.StreamAssignment, from raftnode.ServerID) string {
	var why string
	c.meta.View(func(st *meta.State) {
		if c.offlineIn(st)[from] {
			why = "its server is offline"
			return
		}
		for _, ca := range st.Consumers(sa.Account, sa.Name) {
			if why = consumerBlocked(ca, from); why != "" {
				return
			}
		}
	})
	return why
}

// consumerBlocked returns why consumer ca, on server from alone, cannot
// move with its state to the destination of its stream of one replica
// ("" when it can): not settled after a scale-down to one replica, as
// singlesOn's rules. One kept in memory (mem_storage, or a memory
// stream's) has its state handed over in memory at each of its stream's
// conversions (memscale.go).
func consumerBlocked(ca meta.ConsumerAssignment, from raftnode.ServerID) string {
	switch {
	case len(ca.Replicas) != 1 || ca.Replicas[0].Server != from:
		return fmt.Sprintf("consumer '%s' is on %v, not on %s alone", ca.Name, meta.Servers(ca.Replicas), from)
	case ca.Unsettled():
		return fmt.Sprintf("consumer '%s' is not settled after its scale-down to one replica", ca.Name)
	}
	return ""
}

// singleSettleWait bounds how long the mover of a stream of one replica
// waits for the stream's earlier scale-down or move to settle.
const singleSettleWait = 30 * time.Second

// moveSingleStream moves stream k, of one replica on server from, to
// server to (steps 1 to 3 above), or takes up such a move interrupted
// (the stream assigned both). It rolls the move back (rollBackSingle)
// when the destination did not catch up within singleStreamWait, stayed
// offline for destDownWait, or a consumer cannot move. Errors: the meta
// group's, errSingleMoveStopped (no longer the meta leader),
// errSingleChanged, a step's.
func (c *Cluster) moveSingleStream(k streamKey, from, to raftnode.ServerID) error {
	sa, _, ok, _ := c.assignment(k)
	if !ok {
		return nil // deleted meanwhile
	}
	if sa.Unsettled() {
		// Scaled down to one replica a moment ago (or moved here):
		// the move starts from the settled assignment (settle.go). The
		// request was answered already, and nothing starts the mover
		// again: it waits as long as a loaded cluster may take to
		// settle (a move right after another stayed undone: its
		// settle came after one settleWait).
		deadline := time.Now().Add(singleSettleWait)
		for !c.waitSettled(k, sa) {
			if time.Now().After(deadline) {
				return errors.New("its scale-down to one replica is not settled yet")
			}
			select {
			case <-c.quit:
				return errSingleMoveStopped
			default:
			}
		}
		if sa, _, ok, _ = c.assignment(k); !ok {
			return nil
		}
	}
	if f, t, moving := singleStreamMove(sa); moving {
		if f != from || t != to {
			return errSingleChanged
		}
	} else {
		if len(sa.Replicas) != 1 || sa.Replicas[0].Server != from {
			return errSingleChanged
		}
		step1 := &meta.UpdateStream{Account: k.account, Name: k.name, Config: sa.Config, Servers: []raftnode.ServerID{from, to}}
		if _, jerr := c.propose(step1); jerr != nil {
			return jerr
		}
		c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica moves from %s to %s: its messages are caught up there", k.account, k.name, from, to)
	}
	if h := c.cfg.Hooks; h != nil && h.SingleStreamStep1 != nil {
		h.SingleStreamStep1(k.account, k.name, c.quit)
		select {
		case <-c.quit:
			return errSingleMoveStopped
		default:
		}
	}
	if err := c.waitDest(k, from, to); err != nil {
		if !errors.Is(err, errSingleMoveStopped) && !errors.Is(err, errSingleChanged) {
			c.rollBackSingle(k, from, to, err, false)
		}
		return errors.Join(errors.New("its new replica was not caught up"), err)
	}
	if err := c.moveStreamConsumers(k, from, to); err != nil {
		if errors.As(err, new(errBlocked)) {
			c.rollBackSingle(k, from, to, err, false)
		}
		return err
	}
	cur, _, ok, _ := c.assignment(k)
	if f, t, moving := singleStreamMove(cur); !ok || !moving || f != from || t != to {
		return errSingleChanged
	}
	step3 := &meta.UpdateStream{Account: k.account, Name: k.name, Config: cur.Config, Servers: []raftnode.ServerID{to}}
	if _, jerr := c.propose(step3); jerr != nil {
		return jerr
	}
	if err := c.waitFor(func() bool { return c.settledSince(k, cur) }); err != nil {
		return errors.Join(errors.New("it did not settle on its new server"), err)
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica moved from %s to %s", k.account, k.name, from, to)
	return nil
}

// waitDest waits, at most singleStreamWait, until the leader of stream
// k reports the replica on server to current (step 1). Errors:
// errSingleMoveStopped, errSingleChanged (the stream is no longer its
// move from from to to), errDestDown (to offline for destDownWait),
// errSingleMoveTimeout.
func (c *Cluster) waitDest(k streamKey, from, to raftnode.ServerID) error {
	var down downTimer
	return c.waitCheck(singleStreamWait, func() (bool, error) {
		if c.streamReplicaCurrent(k, to) {
			return true, nil
		}
		sa, _, ok, _ := c.assignment(k)
		if f, t, moving := singleStreamMove(sa); !ok || !moving || f != from || t != to {
			return false, errSingleChanged
		}
		if down.expired(c.offline()[to], time.Now()) {
			return false, errDestDown
		}
		return false, nil
	})
}

// streamReplicaCurrent reports whether the leader of stream k (this
// server's replica, or the server answering $JSC.SI) runs on server or
// reports server's replica current and no longer pending (a voter).
func (c *Cluster) streamReplicaCurrent(k streamKey, server raftnode.ServerID) bool {
	var ci *jetstream.ClusterInfo
	if r := c.replicaOf(k); r != nil && r.log != nil && r.leads.Load() {
		ci = c.clusterInfo(k)
	} else if b := c.requestAll([]string{streamInfoSubject(k)}, nil, time.Second)[0]; b != nil {
		var si jetstream.StreamInfo
		if json.Unmarshal(b, &si) == nil {
			ci = si.Cluster
		}
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

// moveStreamConsumers moves every consumer of stream k with a replica
// on server from to server to, with its state (step 2): one on from
// alone in the two steps of moveSingle, one on both (its own move
// interrupted) down to to alone. Consumers created meanwhile on from are
// moved in a later round. Errors: errBlocked for a consumer that cannot
// move (consumerBlocked; the caller rolls back), moveSingle's, or some
// still on from after three rounds.
func (c *Cluster) moveStreamConsumers(k streamKey, from, to raftnode.ServerID) error {
	for range 3 {
		var cas []meta.ConsumerAssignment
		c.meta.View(func(st *meta.State) {
			for _, ca := range st.Consumers(k.account, k.name) {
				if _, on := meta.On(ca.Replicas, from); on {
					cas = append(cas, ca)
				}
			}
		})
		if len(cas) == 0 {
			return nil
		}
		for _, ca := range cas {
			if err := c.moveStreamConsumer(ca, from, to); err != nil {
				return err
			}
		}
	}
	return errors.New("consumers are still created on its old server")
}

// moveStreamConsumer moves consumer ca, with a replica on server from,
// to server to alone (moveStreamConsumers).
func (c *Cluster) moveStreamConsumer(ca meta.ConsumerAssignment, from, to raftnode.ServerID) error {
	if len(ca.Replicas) == 1 {
		if why := consumerBlocked(ca, from); why != "" {
			return errBlocked{why}
		}
		return c.moveSingle(ca, from, to)
	}
	if _, on := meta.On(ca.Replicas, to); !on || len(ca.Replicas) != 2 {
		return errBlocked{fmt.Sprintf("consumer '%s' is on %v", ca.Name, meta.Servers(ca.Replicas))}
	}
	// Grown to both by an interrupted move of its own: step 2 of
	// moveSingle (the kept replica holds every committed entry before
	// the other leaves: "Scaling consumers").
	k := consumerKey{ca.Account, ca.Stream, ca.Name}
	shrink := &meta.AssignConsumer{Account: ca.Account, Stream: ca.Stream, Name: ca.Name, Action: meta.Update,
		Config: ca.Config, Created: ca.Created, Servers: []raftnode.ServerID{to}}
	if _, jerr := c.propose(shrink); jerr != nil {
		return jerr
	}
	if err := c.waitFor(func() bool { return c.consumerSettledSince(k, ca) }); err != nil {
		return errors.Join(fmt.Errorf("consumer '%s' did not settle on %s", ca.Name, to), err)
	}
	return nil
}

// settledSince reports whether stream k, assigned as sa when step 3
// was proposed (its group of two), is settled since: meta.SettleStream
// gave it a new group (after step 3 it stays unsettled in sa's group
// until the destination converted its replica), or it is gone (deleted,
// or deleted and created again). It does not look for the destination
// alone: a move asked meanwhile (STREAM.PEER.REMOVE right after the
// previous move was answered) waits for the same settle and proposes
// its step 1 within milliseconds of it, so a poll every 50 ms could miss
// the settled stream of one replica and wait its whole singleMoveWait,
// the mover's key held meanwhile.
func (c *Cluster) settledSince(k streamKey, sa meta.StreamAssignment) bool {
	cur, _, assigned, _ := c.assignment(k)
	return !assigned || cur.Created != sa.Created || cur.Group != sa.Group
}

// rollBackSingle proposes stream k, moving from server from to server
// to, back on from alone (why: the reason, logged), unless it is no
// longer that move or rollbackBlocked says why not yet (then logged).
// The group shrinks to from as a scale-down to one replica does; with
// to a voter that is down, from forces it out after forceOutAfter
// (lostvoter.go: a group of two commits only what both hold). It
// reports whether it proposed.
func (c *Cluster) rollBackSingle(k streamKey, from, to raftnode.ServerID, why error, toRemoved bool) bool {
	sa, _, ok, _ := c.assignment(k)
	if f, t, moving := singleStreamMove(sa); !ok || !moving || f != from || t != to {
		return false
	}
	if wait := c.rollbackBlocked(k, from, to, toRemoved); wait != "" {
		c.cfg.Logf("jscluster: stream %s > %s of one replica: its move from %s to %s stalls (%v), and it does not roll back yet: %s", k.account, k.name, from, to, why, wait)
		return false
	}
	op := &meta.UpdateStream{Account: k.account, Name: k.name, Config: sa.Config, Servers: []raftnode.ServerID{from}}
	if _, err := c.meta.Propose(op); err != nil {
		return false
	}
	c.cfg.Logf("JetStream cluster: stream '%s > %s' of one replica stays on %s: its move to %s is rolled back (%v)", k.account, k.name, from, to, why)
	return true
}

// rollbackBlocked returns why stream k, moving from server from to
// server to, cannot roll back yet ("" when it can): a consumer with a
// replica on to (its state went there, and the move goes on once to
// can take it; unless to was removed: SERVER.REMOVE, whose consumers of
// one replica stay, out of reach), or one assigned from and another
// server (its own move goes back first, finishSingleMoves). One
// assigned from alone and still in its group (its scale-down to one
// replica not through) does not block: the stream's conversion on from
// waits for it (consumersInGroups).
func (c *Cluster) rollbackBlocked(k streamKey, from, to raftnode.ServerID, toRemoved bool) string {
	var why string
	c.meta.View(func(st *meta.State) {
		for _, ca := range st.Consumers(k.account, k.name) {
			_, onFrom := meta.On(ca.Replicas, from)
			_, onTo := meta.On(ca.Replicas, to)
			switch {
			case onTo && !toRemoved:
				why = fmt.Sprintf("consumer '%s' has its state on %s", ca.Name, to)
			case onFrom && len(ca.Replicas) != 1:
				why = fmt.Sprintf("consumer '%s' is not back on %s alone yet", ca.Name, from)
			default:
				continue
			}
			return
		}
	})
	return why
}

// finishSingleStreamMoves, on the meta leader's housekeeping, takes up
// each move of a stream of one replica found interrupted
// (singleStreamMove, no mover of the stream running here): forward
// (moveSingleStream on a mover) while its destination is online and not
// removed, back (rollBackSingle) once the destination has been offline
// or removed for destDownWait. At most once per staleRetry per stream.
func (c *Cluster) finishSingleStreamMoves() {
	if !c.metaLeader() {
		clear(c.destDown)
		return
	}
	type move struct {
		k               streamKey
		from, to        raftnode.ServerID
		usable, removed bool
	}
	var moves []move
	c.meta.View(func(st *meta.State) {
		off := c.offlineIn(st)
		for _, acc := range st.Accounts() {
			for _, sa := range st.Streams(acc) {
				if from, to, ok := singleStreamMove(sa); ok {
					sv, known := st.Server(to)
					removed := !known || sv.Removed
					moves = append(moves, move{streamKey{sa.Account, sa.Name}, from, to, !removed && !off[to], removed})
				}
			}
		}
	})
	now := time.Now()
	seen := map[streamKey]bool{}
	for _, m := range moves {
		seen[m.k] = true
		if m.usable {
			delete(c.destDown, m.k)
		} else if _, ok := c.destDown[m.k]; !ok {
			if c.destDown == nil {
				c.destDown = map[streamKey]time.Time{}
			}
			c.destDown[m.k] = now
		}
		if c.moving(m.k) {
			continue // its mover runs here: it decides
		}
		key := staleKey{k: m.k, consumer: "\x00single"}
		switch {
		case m.usable && c.singleAsked.due(key, now, staleRetry):
			k, from, to := m.k, m.from, m.to
			if c.runMover(singleMoveKey{k, from}, func() {
				if err := c.moveSingleStream(k, from, to); err != nil {
					c.cfg.Logf("jscluster: stream %s > %s of one replica: its move from %s to %s not finished: %v", k.account, k.name, from, to, err)
				}
			}, func() {}) {
				c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica runs on %s and %s (its move was interrupted): the move goes on", k.account, k.name, from, to)
			}
		case !m.usable && now.Sub(c.destDown[m.k]) >= destDownWait && c.singleAsked.due(key, now, staleRetry):
			why := errDestDown
			if m.removed {
				why = errDestRemoved
			}
			c.rollBackSingle(m.k, m.from, m.to, why, m.removed)
		}
	}
	for k := range c.destDown {
		if !seen[k] {
			delete(c.destDown, k)
		}
	}
}
