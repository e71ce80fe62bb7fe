package jscluster

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Step-down (docs/cluster.md, "Step-down"): the leader of a group hands
// its leadership to another replica through raft's leadership transfer
// (raftnode.Node.TransferLeader: the leader brings the target up to date,
// then tells it to campaign at once), or, without a placement, to its
// most up-to-date active follower (raftnode.Node.StepDown). The
// successor is chosen as nats-server v2.15.2 chooses it
// (getStepDownPreferredPlacement, raft.StepDown).

var (
	_ jsapi.Leaders       = (*account)(nil)
	_ jsapi.SystemCluster = (*Cluster)(nil)
)

// StreamLeaderStepDown implements jsapi.Leaders on the server whose
// replica leads the stream (Answers): a stream with one replica answers
// success and stays where it is, as in nats-server; a replicated one
// hands its leadership over (stepDown). Errors: 10059 when the meta group
// holds no such stream (the meta leader answers then), 10008 when this
// replica no longer leads, the placement's and stepDown's.
func (a *account) StreamLeaderStepDown(name string, placement func() (*stream.Placement, *jserr.Error)) *jserr.Error {
	c := a.c
	k := streamKey{a.name, name}
	sa, _, ok, _ := c.assignment(k)
	if !ok {
		return jserr.New(jserr.StreamNotFound)
	}
	if len(sa.Replicas) == 1 {
		return nil
	}
	r := c.replicaOf(k)
	if r == nil || !r.leads.Load() {
		return jserr.New(jserr.ClusterNotAvail)
	}
	p, err := placement()
	if err != nil {
		return err
	}
	return c.stepDownVia(sa.Group, p, c.quietStepDown(a, k, r))
}

// stepDownFlush bounds the flush of the routes a stream's step-down
// waits for (quietStepDown): a peer that does not answer within it
// leaves a publish it routed here before it learned of the withdrawal
// unanswered, as before.
const stepDownFlush = time.Second

// quietStepDown returns the via of replica r's step-down of stream k
// (stepDownVia): before the transfer is asked, the stream stops taking
// publishes without leaving one unanswered, as a lame duck's hand-over
// does (quiesceStream: its subscriptions withdrawn from the other
// servers, the routes flushed, then dropped, and what it took
// proposed), so that no publish is routed here after the subscriptions
// went, where nobody would answer it and its client would wait for its
// whole timeout (docs/cluster.md, "Step-down"). The new leader
// subscribes once it leads; a publish sent meanwhile finds no
// responders, which clients retry at once. If the replica still leads
// once raftnode says the transfer ended (none found a successor, or raft
// abandoned it every time), the stream subscribes again
// (resumeIfStayed).
func (c *Cluster) quietStepDown(acc *account, k streamKey, r *replica) func(func() error) error {
	return func(ask func() error) error {
		c.quiesceStreamWithin(acc, k, stepDownFlush)
		err := ask()
		go c.resumeIfStayed(acc, k, r)
		return err
	}
}

// resumeWait bounds how long resumeIfStayed follows a step-down's
// transfer (raftnode asks it up to three times, an election timeout
// each).
const resumeWait = 30 * time.Second

// resumeIfStayed follows the transfer a step-down of stream k asked of
// replica r, polling its group every 5 ms: when raftnode says no transfer
// is under way or to be asked again (raftnode.Brief.Transferring) and the
// replica still leads, its stream subscribes again (SetStreamLeader,
// under leadState.subMu, as OnLeader: a leadership lost meanwhile
// leaves it unsubscribed). It ends as soon as the replica no longer
// leads, its group is gone, the cluster layer stops, or after
// resumeWait (the stream subscribes then if the replica leads).
func (c *Cluster) resumeIfStayed(acc *account, k streamKey, r *replica) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(resumeWait)
	for time.Now().Before(deadline) {
		b, err := c.node.Brief(r.sa.Group)
		if err != nil || b.Role != raftnode.Leader {
			return
		}
		if !b.Transferring {
			break
		}
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
	}
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if !r.leads.Load() {
		return
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s' stays with this server after its step-down: it takes publishes again", k.account, k.name)
	if err := acc.js.SetStreamLeader(k.name, true); err != nil {
		c.cfg.Logf("jscluster: stream %s > %s: subscribe again after a step-down: %v", k.account, k.name, err)
	}
}

// MetaLeader reports whether this server leads the meta group
// (jsapi.SystemCluster).
func (c *Cluster) MetaLeader() bool { return c.metaLeader() }

// MetaLeaderStepDown hands the meta group's leadership to another
// server (jsapi.SystemCluster), chosen as a stream's step-down chooses.
func (c *Cluster) MetaLeaderStepDown(p *stream.Placement) *jserr.Error {
	return c.stepDown(meta.MetaGroup, p)
}

// members returns the servers of the meta group: from the leader's view
// of its replicas, this server included, and the catalogue's servers not
// removed whose replica runs under another name (a server renamed over
// its store: its old name stays a member, offline, as nats-server v2.15.2
// keeps the old name's peer; rename.go).
func (c *Cluster) members(st raftnode.GroupStatus) []raftnode.ServerID {
	out := []raftnode.ServerID{c.name}
	in := map[raftnode.ReplicaID]bool{st.Replica: true}
	for _, rs := range st.Replicas {
		in[rs.Replica] = true
		if rs.Server != c.name {
			out = append(out, rs.Server)
		}
	}
	for _, m := range c.metaMembers() {
		if in[m.ID] && !slices.Contains(out, m.Server) {
			out = append(out, m.Server)
		}
	}
	return out
}

// stepDown hands the leadership of group, which this server's replica
// leads, to the replica p chooses (nats-server v2.15.2
// getStepDownPreferredPlacement, then raft.StepDown):
//
//   - no placement: the most up-to-date active follower
//     (raftnode.Node.StepDown); with none, the leader stays and the
//     answer is still success, as nats-server's;
//   - preferred: the replica on that server; 10005 `preferred server "x"
//     not known` when no replica is there, `preferred server "x" is
//     already leader` when it is this one; a preferred replica that is
//     not active is passed over for the most up-to-date active one, as
//     nats-server passes over an unhealthy one;
//   - otherwise the active replicas on servers with a route, in the
//     placement's cluster and having every one of its tags
//     (case-insensitive): the most up-to-date of them (nats-server takes
//     any); 10005 `no replacement peer connected` when there is none.
//
// Errors of the Raft layer (the replica no longer leads, is fenced) are
// 10041 with their text.
func (c *Cluster) stepDown(group raftnode.GroupID, p *stream.Placement) *jserr.Error {
	return c.stepDownVia(group, p, nil)
}

// stepDownVia is stepDown with the transfer asked through via (nil: at
// once): a replicated consumer's leader asks it once what it delivered
// is queued to its log (consumerlog.Log.HandOver).
func (c *Cluster) stepDownVia(group raftnode.GroupID, p *stream.Placement, via func(func() error) error) *jserr.Error {
	st, err := c.node.Status(group)
	if err != nil {
		return raftError(err)
	}
	if st.Role != raftnode.Leader || st.Fenced != nil {
		return jserr.New(jserr.ClusterNotAvail)
	}
	stepDown := func() error { return c.node.StepDown(group) }
	if p == nil {
		return raftError(through(via, stepDown))
	}
	var to raftnode.ReplicaStatus
	if p.Preferred != "" {
		if p.Preferred == string(c.name) {
			return noPeers(fmt.Sprintf("preferred server %q is already leader", p.Preferred))
		}
		i := slices.IndexFunc(st.Replicas, func(rs raftnode.ReplicaStatus) bool { return string(rs.Server) == p.Preferred })
		if i < 0 {
			return noPeers(fmt.Sprintf("preferred server %q not known", p.Preferred))
		}
		if to = st.Replicas[i]; !to.Active || to.Learner {
			return raftError(through(via, stepDown))
		}
	} else {
		cands := c.successors(st, p)
		if len(cands) == 0 {
			return noPeers("no replacement peer connected")
		}
		to = cands[0]
	}
	return raftError(through(via, func() error { return c.node.TransferLeader(group, to.Replica) }))
}

// through calls ask, through via when there is one.
func through(via func(func() error) error, ask func() error) error {
	if via == nil {
		return ask()
	}
	return via(ask)
}

// successors returns the replicas of the group (st, the leader's view)
// that may take its leadership under placement p (neither cluster nor
// tags: any), most up-to-date first, then by server name.
func (c *Cluster) successors(st raftnode.GroupStatus, p *stream.Placement) []raftnode.ReplicaStatus {
	off := c.offline()
	var out []raftnode.ReplicaStatus
	c.meta.View(func(ms *meta.State) {
		for _, rs := range st.Replicas {
			if rs.Server == c.name || !rs.Active || rs.Learner || off[rs.Server] {
				continue
			}
			sv, ok := ms.Server(rs.Server)
			if !ok || (p.Cluster != "" && sv.Cluster != p.Cluster) || !hasTags(sv.Tags, p.Tags) {
				continue
			}
			out = append(out, rs)
		}
	})
	slices.SortFunc(out, func(a, b raftnode.ReplicaStatus) int {
		return cmp.Or(cmp.Compare(b.Match, a.Match), cmp.Compare(a.Server, b.Server))
	})
	return out
}

// hasTags reports whether tags holds every one of want, ignoring case.
func hasTags(tags, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(tags, func(t string) bool { return strings.EqualFold(t, w) }) {
			return false
		}
	}
	return true
}

// noPeers is 10005 with text (nats-server NewJSClusterNoPeersError).
func noPeers(text string) *jserr.Error {
	return jserr.New(jserr.ClusterNoPeers, jserr.Sub("err", text))
}

// raftError is nil for nil, else 10041 with err's text (nats-server
// NewJSRaftGeneralError).
func raftError(err error) *jserr.Error {
	if err == nil {
		return nil
	}
	return jserr.New(jserr.RaftGeneral, jserr.Sub("err", err.Error()))
}

var _ jsapi.Peers = (*account)(nil)

// StreamRemovePeer implements jsapi.Peers on the meta leader (Answers),
// as nats-server v2.15.2 jsStreamRemapPeerRequest with requireReplicas:
// 10059 when the meta group holds no such stream, 10040 when no replica
// of it is on peer (a server name, or nats-server's peer ID of one, as
// nats-server accepts either); otherwise a replacement server is placed
// as a create places (meta.Place: the stream's other servers kept, peer
// excluded) and the replica moved there (meta.MoveReplica: the new
// replica added as a learner, caught up by a stream snapshot, promoted
// while the old one is removed: docs/cluster.md, "Replacing a
// replica"), and with it the replicas its replicated consumers had on
// peer (moveConsumers); its consumers of one replica on peer move first,
// with their state, to one of its servers that stays, and the answer
// then comes at once, the replica moving after them (moveSinglesThen:
// docs/cluster.md, "Moving consumers of one replica"). A stream of one
// replica, file or memory, moves with its messages and its consumers' state
// (evacuateSingle: docs/cluster.md, "Moving a stream of one replica"),
// answered at once. No server to take it, or a stream of one replica
// that cannot move (a consumer of a file stream kept in memory, its
// server offline), or one moving between two servers named by the
// other one: 10075 "peer remap failed", as nats-server when no
// replacement is available.
func (a *account) StreamRemovePeer(name, peer string) *jserr.Error {
	c := a.c
	sa, _, ok, _ := c.assignment(streamKey{a.name, name})
	if !ok {
		return jserr.New(jserr.StreamNotFound)
	}
	i := slices.IndexFunc(sa.Replicas, func(r meta.Replica) bool { return string(r.Server) == peer || peerHash(r.Server) == peer })
	if i < 0 {
		return jserr.New(jserr.ClusterPeerNotMember)
	}
	old := sa.Replicas[i]
	if len(sa.Replicas) == 1 {
		return c.evacuateSingle(sa, old.Server) // with its data and its consumers' state (singlestream.go)
	}
	if f, _, moving := singleStreamMove(sa); moving {
		if f == old.Server {
			return nil // moving off it already
		}
		return jserr.New(jserr.PeerRemap)
	}
	var cfg stream.Config
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		return jserr.New(jserr.PeerRemap)
	}
	to, ok := c.replacement(sa, cfg, old.Server)
	if !ok {
		return jserr.New(jserr.PeerRemap)
	}
	move := func() *jserr.Error {
		if _, err := c.propose(&meta.MoveReplica{Account: a.name, Stream: name, Replica: old.ID, To: to}); err != nil {
			return err
		}
		c.cfg.Infof("JetStream cluster: stream '%s > %s': its replica on %s moves to %s", a.name, name, old.Server, to)
		c.moveConsumers(a.name, name, old.Server, to)
		return nil
	}
	// Its consumers of one replica there move first, with their state,
	// to a server that stays; the replica follows (singles.go).
	if c.moveSinglesThen(sa, old.Server, func() {
		if err := move(); err != nil {
			c.cfg.Logf("jscluster: stream %s > %s: its replica on %s not moved to %s: %v", a.name, name, old.Server, to, err)
		}
	}) {
		return nil
	}
	return move()
}

// replacement places the server that takes stream sa's replica on server
// gone (its config cfg), as a create places (meta.Place: the stream's
// other servers kept, gone excluded); false when there is none (logged).
func (c *Cluster) replacement(sa meta.StreamAssignment, cfg stream.Config, gone raftnode.ServerID) (raftnode.ServerID, bool) {
	to, perr := c.place(sa, cfg, gone)
	if perr != nil {
		c.cfg.Logf("jscluster: stream %s > %s: no replacement for the replica on %s: %v", sa.Account, sa.Name, gone, perr)
		return "", false
	}
	return to, true
}

// place is replacement without the log line; the error is placement's
// (10005), or 10075 when it placed too few servers. The stream's
// Excluded servers (an evacuation's, meta.ExcludeServer) are kept out
// as gone is.
func (c *Cluster) place(sa meta.StreamAssignment, cfg stream.Config, gone raftnode.ServerID) (raftnode.ServerID, *jserr.Error) {
	var keep []raftnode.ServerID
	for _, r := range sa.Replicas {
		if r.Server != gone {
			keep = append(keep, r.Server)
		}
	}
	var servers []raftnode.ServerID
	var perr *jserr.Error
	c.meta.View(func(st *meta.State) {
		pr := c.placeRequest(st, len(sa.Replicas), cfg.Placement)
		pr.Existing, pr.Exclude = keep, excludedFor(sa, gone)
		servers, perr = meta.Place(st, pr)
	})
	if perr != nil {
		return "", perr
	}
	if len(servers) != len(sa.Replicas) {
		return "", jserr.New(jserr.PeerRemap)
	}
	return servers[len(servers)-1], nil
}
