package jscluster

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// A placement change of a stream of one replica (docs/cluster.md,
// "Moving a stream of one replica"). nats-server v2.15.2 moves such a
// stream to a server matching its new placement (`nats stream edit S
// --tag az:2`), with its messages and its consumers' state. cairn moves
// it as SERVER.EVACUATE does (singlestream.go), the update itself being
// step 1: StreamUpdate places the destination as a replicated stream's
// move places its servers (moveServers: the stream's server stays when
// it satisfies the new placement, and then nothing moves; 10005 when no
// server matches), and proposes an UpdateStream carrying the new config
// and naming the stream's server and the destination (num_replicas
// still 1, so that an interrupted move is found and finished by
// finishSingleStreamMoves); a mover then runs steps 2 and 3
// (moveSingleStream). The answer waits, at most scaleWait, for the
// stream's group to lead with the new config (waitPlaced). The move is
// not recorded (no meta.MoveStream: no `desired` block, no cancel),
// unlike nats-server's; one rolled back (rollBackSingle) leaves the
// stream on its server under the new placement until an update names
// another placement, as a replicated stream stays when the mover of its
// consumers of one replica stops (docs/cluster.md, "Moving consumers of
// one replica").

// singlePlaced returns the servers step 1 of the move of stream sa, of
// one replica, to server dest names: its server, then dest. 10069
// "stream placement can not be changed" (logged why) when it cannot
// move (singleStreamBlocked: its server offline, a
// consumer kept in memory or not settled), where nats-server moves it.
func (c *Cluster) singlePlaced(k streamKey, sa meta.StreamAssignment, cfg *stream.Config, dest raftnode.ServerID) ([]raftnode.ServerID, *jserr.Error) {
	from := sa.Replicas[0].Server
	if why := c.singleStreamBlocked(sa, from); why != "" {
		c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica stays on %s under its old placement: %s", k.account, k.name, from, why)
		return nil, placementRefused()
	}
	return []raftnode.ServerID{from, dest}, nil
}

// placementRefused is the refusal of a placement change cairn does
// not carry out: 10069 "stream placement can not be changed".
func placementRefused() *jserr.Error {
	return jserr.New(jserr.StreamUpdate, jserr.Sub("err", "stream placement can not be changed"))
}

// startSingleStreamMove runs the move of stream k, of one replica, from
// server from to server to (moveSingleStream, step 1 proposed or not)
// on a mover of this meta leader, its failure logged. It reports
// whether a mover of the stream's move from from runs (started now or
// earlier). A mover of that key already running may be an earlier
// move's off from, ending (its step 3 settling) while the stream came
// back to from: the request is then noted (singleAgain) and taken up
// once that mover ends (retakeSingle), rather than answered and lost.
func (c *Cluster) startSingleStreamMove(k streamKey, from, to raftnode.ServerID) bool {
	key := singleMoveKey{k, from}
	c.mu.Lock()
	if c.singleMoves[key] {
		if c.singleAgain == nil {
			c.singleAgain = map[singleMoveKey]bool{}
		}
		c.singleAgain[key] = true
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	return c.runMover(key, func() {
		if err := c.moveSingleStream(k, from, to); err != nil {
			c.cfg.Logf("jscluster: stream %s > %s of one replica: not moved from %s to %s: %v", k.account, k.name, from, to, err)
		}
	}, func() {})
}

// retakeSingle, on the meta leader, takes up a request to move stream
// key.k off server key.from that came while a mover of key ran
// (startSingleStreamMove), once that mover ended: a move from key.from
// found interrupted goes on (its step 1 proposed by a placement change
// meanwhile), and a stream on key.from alone moves as evacuateSingle
// moves it (placed again: what the request placed may no longer fit).
// A stream no longer on key.from (the mover's own move through, or
// another) is left as it is. A move rolled back by the mover that ran
// is thus tried once more, as the request asked.
func (c *Cluster) retakeSingle(key singleMoveKey) {
	select {
	case <-c.quit:
		return
	default:
	}
	if !c.metaLeader() {
		return // the next meta leader's housekeeping takes up a move whose step 1 applied
	}
	sa, _, ok, _ := c.assignment(key.k)
	if !ok {
		return
	}
	if f, t, moving := singleStreamMove(sa); moving {
		if f == key.from {
			c.startSingleStreamMove(key.k, f, t)
		}
		return
	}
	if len(sa.Replicas) == 1 && sa.Replicas[0].Server == key.from {
		c.cfg.Infof("JetStream cluster: stream '%s > %s' of one replica: the move off %s asked while another mover of it ran goes on", key.k.account, key.k.name, key.from)
		_ = c.evacuateSingle(sa, key.from) // what stays is logged
	}
}

// waitPlaced waits, at most scaleWait, until the leader of stream k,
// just moving with config cfg (step 1 applied), runs in its group with
// cfg's placement, and returns its info (nil after scaleWait). Step 1 stops
// the stream of one replica and starts its group's first replica from
// its files (scaleUpFromOne): until that replica leads nobody answers
// about the stream, and the STREAM.INFO the nats CLI sends after its
// `stream edit` would time out, so the answer waits, as waitScaled's.
func (c *Cluster) waitPlaced(a *account, k streamKey, cfg stream.Config) *jetstream.StreamInfo {
	deadline := time.Now().Add(scaleWait)
	for {
		if r := c.replicaOf(k); r != nil && r.leads.Load() && r.log != nil && c.hasConfig(a, cfg) {
			if si, err := a.js.StreamInfo(k.name, jetstream.InfoOptions{}); err == nil {
				c.announceStream(r)
				return si
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		if b := c.requestAll([]string{streamInfoSubject(k)}, nil, min(scaleAskWait, left))[0]; b != nil {
			var si jetstream.StreamInfo
			if json.Unmarshal(b, &si) == nil && si.Config.Name == k.name && si.Cluster != nil && si.Cluster.Leader != "" &&
				si.Cluster.RaftGroup != "" && reflect.DeepEqual(si.Config.Placement, cfg.Placement) {
				return &si
			}
		}
		select {
		case <-c.quit:
			return nil
		case <-time.After(min(scalePoll, time.Until(deadline))):
		}
	}
}
