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
	if why := c.singleStreamBlocked(sa, *cfg, from); why != "" {
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
// earlier).
func (c *Cluster) startSingleStreamMove(k streamKey, from, to raftnode.ServerID) bool {
	return c.runMover(singleMoveKey{k, from}, func() {
		if err := c.moveSingleStream(k, from, to); err != nil {
			c.cfg.Logf("jscluster: stream %s > %s of one replica: not moved from %s to %s: %v", k.account, k.name, from, to, err)
		}
	}, func() {})
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
