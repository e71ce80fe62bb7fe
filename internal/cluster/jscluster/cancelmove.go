package jscluster

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// A stream's move in flight (docs/cluster.md, "Moving a stream"):
//
//  1. The meta leader proposes a move as a meta.MoveStream, which
//     records its origin (the replicas and placement the stream had) in
//     the assignment (meta.StreamAssignment.Move). While it is recorded,
//     a second move or a scale gets 10124 (StreamUpdate), stream info
//     shows nats-server's cluster.desired block (desiredInfo), and
//     $JS.API.STREAM.CANCEL_MOVE turns it back (StreamCancelMove). A
//     scale between replicated counts is recorded the same way
//     (meta.ScaleStream, marked a scale): a move then gets 10226, a
//     scale stacks, and a cancel returns the stream to the origin's
//     replica count (cancelScale).
//  2. A cancel asks the stream's leader which replicas its group holds
//     ($JSC.SM.<account>.<stream>, answered by the leader alone:
//     onGroupMembers) and proposes a meta.CancelMove naming them: an
//     origin replica still in the group goes back to being assigned
//     (its server keeps it running: reconcile), one that left is
//     replaced by a new replica on its server.
//  3. Once the stream's group holds its assigned replicas alone, all
//     voters, its leader tells the meta leader ($SYS.JSC.STREAM.MOVED,
//     no reply, repeated every moveDoneRetry while the record stays:
//     reportMoves), which proposes a meta.EndMove (onMoveDone) unless
//     consumers of one replica still move ahead of the stream (moving)
//     or a consumer still has a replica off the stream's servers.

const (
	// groupMembersPrefix starts the subject on which the leader of a
	// stream's group answers membersMsg.
	groupMembersPrefix = "$JSC.SM."
	// moveDoneSubject carries moveDoneMsg to the meta leader.
	moveDoneSubject = "$SYS.JSC.STREAM.MOVED"
	// moveDoneRetry spaces a stream leader's repeats of moveDoneMsg.
	moveDoneRetry = time.Second
	// membersWait bounds the meta leader's wait for the group's members,
	// membersAsk each of its asks.
	membersWait = 2 * time.Second
	membersAsk  = 250 * time.Millisecond
	// consumersMovedWait bounds a cancel's wait for the stream's
	// replicated consumers to be through with their moves.
	consumersMovedWait = 3 * time.Second
)

// membersMsg is the answer on groupMembersPrefix: the group the leader
// leads and the replica IDs of its configuration (voters and learners).
type membersMsg struct {
	Group    raftnode.GroupID     `json:"group"`
	Replicas []raftnode.ReplicaID `json:"replicas"`
}

// moveDoneMsg is the body of moveDoneSubject: the stream, the move it
// ends (its start), and the servers its group converged on.
type moveDoneMsg struct {
	Account string              `json:"account"`
	Stream  string              `json:"stream"`
	Created int64               `json:"created"`
	Servers []raftnode.ServerID `json:"servers"`
}

// StreamCancelMove implements jsapi.Movers on the meta leader, in
// nats-server v2.15.2's order (jsStreamCancelMoveRequest): 10059 when
// the meta group holds no such stream, 10129 "stream reconfiguration
// not in progress" when no move or scale is recorded; a recorded scale
// is turned back by cancelScale; for a move the CancelMove is
// proposed (10008 when the stream's replicated consumers are not
// through with their own moves within consumersMovedWait, when the
// group's leader does not say which replicas it holds within
// membersWait, or when the meta group cannot decide), the
// stream's replicated consumers follow it back (consumersBack), and
// the answer carries the stream's info with the origin's placement in
// its config and the desired block naming the origin's servers.
func (a *account) StreamCancelMove(name string) (*jetstream.StreamInfo, *jserr.Error) {
	c := a.c
	if !c.metaLeader() {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	k := streamKey{a.name, name}
	if jerr := c.moveRecorded(k); jerr != nil {
		return nil, jerr
	}
	if sa, _, _, _ := c.assignment(k); sa.Scaling() {
		return a.cancelScale(k, sa)
	}
	if !c.consumersMoved(k) {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	// Read again after the wait: the config and the group it proposes
	// from are the assignment's now.
	if jerr := c.moveRecorded(k); jerr != nil {
		return nil, jerr
	}
	sa, _, _, _ := c.assignment(k)
	var cfg stream.Config
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	cfg.Placement = nil
	if len(sa.Move.Placement) > 0 {
		var p stream.Placement
		if err := json.Unmarshal(sa.Move.Placement, &p); err != nil {
			return nil, jserr.New(jserr.ClusterNotAvail)
		}
		cfg.Placement = &p
	}
	body, err := json.Marshal(&cfg)
	if err != nil {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	members, ok := c.groupMembers(k, sa.Group)
	if !ok {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	res, jerr := c.propose(&meta.CancelMove{Account: a.name, Name: name, Config: body, Created: sa.Move.Created, Members: members})
	if jerr != nil {
		return nil, jerr
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s': move cancelled, back to %v", a.name, name, meta.Servers(res.Stream.Replicas))
	if res.PrevStream != nil {
		c.consumersBack(*res.PrevStream, meta.Servers(res.Stream.Replicas))
	}
	return a.cancelAnswer(k, *res.Stream, cfg), nil
}

// cancelScale is StreamCancelMove of stream k's recorded scale (its
// assignment sa), as nats-server v2.15.2 rolls a scale back to its
// origin: the config takes the origin's replica count, and the
// CancelMove the origin's replicas (10008 when the group's leader does
// not say which replicas it holds within membersWait, or when the meta
// group cannot decide); the stream's consumers scale back with it
// (scaleConsumers), and the answer, once the stream's leader runs with
// the origin's count (waitScaled), carries the stream's info with the
// desired block naming the origin's servers (docs/cluster.md,
// "Scaling", "A scale in flight").
func (a *account) cancelScale(k streamKey, sa meta.StreamAssignment) (*jetstream.StreamInfo, *jserr.Error) {
	c := a.c
	var cfg stream.Config
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	cfg.Replicas = len(sa.Move.Replicas)
	body, err := json.Marshal(&cfg)
	if err != nil {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	members, ok := c.groupMembers(k, sa.Group)
	if !ok {
		return nil, jserr.New(jserr.ClusterNotAvail)
	}
	res, jerr := c.propose(&meta.CancelMove{Account: k.account, Name: k.name, Config: body, Created: sa.Move.Created, Members: members})
	if jerr != nil {
		return nil, jerr
	}
	c.cfg.Infof("JetStream cluster: stream '%s > %s': scale cancelled, back to %d replicas on %v", k.account, k.name, cfg.Replicas, meta.Servers(res.Stream.Replicas))
	c.scaleConsumers(a, *res.Stream, &cfg)
	c.waitScaled(a, k, cfg.Replicas)
	return a.cancelAnswer(k, *res.Stream, cfg), nil
}

// cancelAnswer is the stream info a cancel answers with, stream k now
// assigned sa with config cfg: the info of this server's replica if it
// keeps one, its leader's otherwise (the assignment's when neither
// answers), with the config and the desired block as the meta group
// now holds them (the stream's leader may not have applied the cancel
// yet).
func (a *account) cancelAnswer(k streamKey, sa meta.StreamAssignment, cfg stream.Config) *jetstream.StreamInfo {
	c := a.c
	si := a.infoOf(sa)
	if _, here := meta.On(sa.Replicas, c.name); here && c.replicaOf(k) != nil {
		if local, err := a.js.StreamInfo(k.name, jetstream.InfoOptions{}); err == nil {
			si = local
		}
	} else if b := c.requestAll([]string{streamInfoSubject(k)}, nil, membersWait)[0]; b != nil {
		var led jetstream.StreamInfo
		if json.Unmarshal(b, &led) == nil && led.Cluster != nil {
			si = &led
		}
	}
	// As the meta group now holds it: the stream's leader may not have
	// applied the cancel yet.
	si.Config = cfg
	if si.Cluster != nil {
		si.Cluster.Desired = c.desiredInfo(sa)
	}
	return si
}

// consumersBack, on the meta leader after a CancelMove of stream sa
// (its assignment before the cancel) to servers applied, moves the
// replicas its replicated consumers have on each server the stream
// leaves back to the server it returns to, paired in order as
// moveConsumerPairs pairs them, on a mover's goroutine (runMover: the
// move stays in flight meanwhile). Each consumer's replica there moves
// once the consumer's group holds its assigned replicas alone
// (consumerConverged): its replicas' moves there are through, and the
// replicas they replaced are out of the group (a MoveConsumer back
// before that would start a new replica on a server whose old one
// still votes, and stop that one: two such servers and the consumer has
// no quorum). One not through within singleMoveWait is left there,
// logged.
func (c *Cluster) consumersBack(sa meta.StreamAssignment, servers []raftnode.ServerID) {
	k := streamKey{sa.Account, sa.Name}
	gone, came := serverDiff(meta.Servers(sa.Replicas), servers)
	if len(gone) == 0 || len(came) == 0 {
		return
	}
	c.runMover(singleMoveKey{k: k, from: cancelMover}, func() {
		for i := range min(len(gone), len(came)) {
			var cas []meta.ConsumerAssignment
			c.meta.View(func(st *meta.State) { cas = st.Consumers(k.account, k.name) })
			for _, ca := range cas {
				if _, on := meta.On(ca.Replicas, gone[i]); !on || len(ca.Replicas) < 2 {
					continue
				}
				ck := consumerKey{ca.Account, ca.Stream, ca.Name}
				if err := c.waitFor(func() bool { return c.consumerConverged(ck) }); err != nil {
					c.cfg.Logf("jscluster: consumer %s > %s > %s: its replica on %s not moved back to %s with its stream: %v", ca.Account, ca.Stream, ca.Name, gone[i], came[i], err)
					continue
				}
				c.moveConsumerBack(ck, gone[i], came[i])
			}
		}
	}, func() {})
}

// moveRecorded returns 10059 when the meta group holds no stream k,
// 10129 "stream reconfiguration not in progress" when it records no
// move of it.
func (c *Cluster) moveRecorded(k streamKey) *jserr.Error {
	sa, _, ok, _ := c.assignment(k)
	switch {
	case !ok:
		return jserr.New(jserr.StreamNotFound)
	case sa.Move == nil:
		return jserr.New(jserr.StreamReconfigureNotInProgress)
	}
	return nil
}

// consumersMoved waits, at most consumersMovedWait, until every
// replicated consumer of stream k holds its assigned replicas alone
// (consumerConverged): their replicas moved with the stream's
// (moveConsumerPairs) are through, so that consumersBack can move them
// back without a consumer's old replica still voting on the server its
// new one goes to. A consumer's move is a state snapshot, done in a
// second or less; the stream's own replicas may still be catching up.
func (c *Cluster) consumersMoved(k streamKey) bool {
	deadline := time.Now().Add(consumersMovedWait)
	for {
		var cas []meta.ConsumerAssignment
		c.meta.View(func(st *meta.State) { cas = st.Consumers(k.account, k.name) })
		done := true
		for _, ca := range cas {
			if len(ca.Replicas) > 1 && !c.consumerConverged(consumerKey{ca.Account, ca.Stream, ca.Name}) {
				done = false
				break
			}
		}
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-c.quit:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// consumerConverged reports whether consumer k's leader (this server's
// replica, or the server answering $JSC.CI) runs on a server of its
// assignment and reports every other assigned replica current and no
// longer pending. Every promotion of a new replica removes one that
// leaves (membership.go nextMembership), so the replicas its moves
// replaced are then out of its group.
func (c *Cluster) consumerConverged(k consumerKey) bool {
	ca, _, ok, _ := c.consumerAssignment(k)
	if !ok {
		return true // deleted meanwhile: nothing to move
	}
	var ci *jetstream.ClusterInfo
	if cr := c.creplicaOf(k); cr != nil && cr.log != nil && cr.leads.Load() {
		ci = c.consumerClusterInfo(k)
	} else if r, err := c.remoteConsumerInfo(k, nil, time.Second); err == nil && r.Info != nil {
		ci = r.Info.Cluster
	}
	if ci == nil || !slices.Contains(meta.Servers(ca.Replicas), raftnode.ServerID(ci.Leader)) {
		return false
	}
	for _, r := range ca.Replicas {
		if string(r.Server) != ci.Leader && !slices.ContainsFunc(ci.Replicas, func(p *jetstream.PeerInfo) bool {
			return p.Name == string(r.Server) && p.Current && !p.Pending
		}) {
			return false
		}
	}
	return true
}

// cancelMover names consumersBack's mover among a stream's movers
// (singleMoveKey.from: no server has this name).
const cancelMover raftnode.ServerID = "\x00cancel"

// moveConsumerBack proposes the MoveConsumer of consumer k's replica on
// server from to server to, if it still has one there and none on to.
func (c *Cluster) moveConsumerBack(k consumerKey, from, to raftnode.ServerID) {
	ca, _, ok, _ := c.consumerAssignment(k)
	r, on := meta.On(ca.Replicas, from)
	if _, there := meta.On(ca.Replicas, to); !ok || !on || there {
		return
	}
	if _, jerr := c.propose(&meta.MoveConsumer{Account: k.account, Stream: k.stream, Name: k.name, Replica: r.ID, To: to}); jerr != nil {
		c.cfg.Logf("jscluster: consumer %s > %s > %s: its replica on %s not moved back to %s: %v", k.account, k.stream, k.name, from, to, jerr)
		return
	}
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s': its replica on %s moves back to %s", k.account, k.stream, k.name, from, to)
}

// groupMembers asks the leader of stream k's group for the replicas the
// group holds, every membersAsk (a leadership handed over during the
// move leaves a moment with no leader to answer): false when no leader
// of group answered within membersWait.
func (c *Cluster) groupMembers(k streamKey, group raftnode.GroupID) ([]raftnode.ReplicaID, bool) {
	deadline := time.Now().Add(membersWait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false
		}
		var m membersMsg
		b := c.requestAll([]string{groupMembersPrefix + k.account + "." + k.name}, nil, min(membersAsk, left))[0]
		if b != nil && json.Unmarshal(b, &m) == nil && m.Group == group && len(m.Replicas) > 0 {
			return m.Replicas, true
		}
		select {
		case <-c.quit:
			return nil, false
		case <-time.After(min(10*time.Millisecond, time.Until(deadline))):
		}
	}
}

// onGroupMembers answers a groupMembersPrefix request when this server's
// replica leads the stream's group, apart from the publisher's
// goroutine.
func (c *Cluster) onGroupMembers(subject, reply string, _, _ []byte) {
	toks := strings.Split(strings.TrimPrefix(subject, groupMembersPrefix), ".")
	if reply == "" || len(toks) != 2 {
		return
	}
	r := c.replicaOf(streamKey{toks[0], toks[1]})
	if r == nil || r.log == nil || !r.leads.Load() {
		return
	}
	group := r.sa.Group
	go func() {
		st, err := c.node.Status(group)
		if err != nil || st.Role != raftnode.Leader {
			return
		}
		m := membersMsg{Group: group}
		for _, rs := range st.Replicas {
			m.Replicas = append(m.Replicas, rs.Replica)
		}
		if b, err := json.Marshal(m); err == nil {
			c.publishSystem(reply, "", b)
		}
	}()
}

// desiredInfo is the cluster.desired block of stream sa's info while a
// move is recorded (nats-server v2.15.2 clusterInfo): when it began,
// the cluster, the servers it goes to (the assignment's), and the
// replica count and placement a cancel returns it to. nil when no move
// is recorded.
func (c *Cluster) desiredInfo(sa meta.StreamAssignment) *consumer.DesiredClusterInfo {
	if sa.Move == nil {
		return nil
	}
	off := c.offline()
	d := &consumer.DesiredClusterInfo{
		Created: time.Unix(0, sa.Move.Created).UTC(),
		Name:    c.host.ClusterName(),
		Origin:  &consumer.DesiredClusterInfoOrigin{Replicas: len(sa.Move.Replicas), Placement: slices.Clone(sa.Move.Placement)},
	}
	for _, r := range sa.Replicas {
		d.Replicas = append(d.Replicas, &consumer.DesiredPeerInfo{Name: string(r.Server), Offline: off[r.Server], Peer: peerHash(r.Server)})
	}
	return d
}

// reportMoves, on the run goroutine, tells the meta leader of each
// stream whose group this server leads, with a move recorded, once the
// group holds the assigned replicas alone, all voters (step 3 above),
// at most every moveDoneRetry per stream.
func (c *Cluster) reportMoves() {
	c.mu.Lock()
	var keys []streamKey
	for k, r := range c.replicas {
		if r.log != nil && r.leads.Load() {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	now := time.Now()
	for _, k := range keys {
		sa, _, ok, _ := c.assignment(k)
		if !ok || sa.Move == nil || !c.converged(sa) || !c.movesAsked.due(staleKey{k: k}, now, moveDoneRetry) {
			continue
		}
		c.askMeta(moveDoneSubject, moveDoneMsg{Account: k.account, Stream: k.name, Created: sa.Move.Created, Servers: meta.Servers(sa.Replicas)})
	}
}

// converged reports whether this server leads stream sa's group and
// the group's configuration is sa's replicas, all voters, none joining.
func (c *Cluster) converged(sa meta.StreamAssignment) bool {
	st, err := c.node.Status(sa.Group)
	if err != nil || st.Role != raftnode.Leader || st.Joint || len(st.Replicas) != len(sa.Replicas) {
		return false
	}
	for _, rs := range st.Replicas {
		if rs.Learner || rs.Joining || !slices.ContainsFunc(sa.Replicas, func(r meta.Replica) bool { return r.ID == rs.Replica }) {
			return false
		}
	}
	return true
}

// onMoveDone, on the meta leader, proposes the EndMove a moveDoneMsg
// asks for when the assignment still records that move on those
// servers, no consumer of one replica moves ahead of it (moving), and
// every consumer of the stream is on the stream's servers; apart from
// the publisher's goroutine.
func (c *Cluster) onMoveDone(_, _ string, _, data []byte) {
	var m moveDoneMsg
	if !c.metaRequest(data, &m) || m.Account == "" || m.Stream == "" || len(m.Servers) == 0 {
		return
	}
	k := streamKey{m.Account, m.Stream}
	sa, _, ok, _ := c.assignment(k)
	if !ok || sa.Move == nil || sa.Move.Created != m.Created || !sameSet(meta.Servers(sa.Replicas), m.Servers) || c.moving(k) {
		return
	}
	if !sa.Scaling() && c.unmovedConsumer(sa) != "" {
		return // a scale's consumers scale on their own (scaleConsumers)
	}
	what := "move"
	if sa.Scaling() {
		what = "scale"
	}
	go func() {
		if _, jerr := c.propose(&meta.EndMove{Account: m.Account, Name: m.Stream, Created: m.Created, Servers: m.Servers}); jerr == nil {
			c.cfg.Infof("JetStream cluster: stream '%s > %s': %s done, on %v", m.Account, m.Stream, what, m.Servers)
		}
	}()
}

// returning reports whether this server's running replica cur of a
// stream is replica id of its group, still a member: a cancelled move
// assigns it here again (meta.CancelMove), and it stays as it is.
func (c *Cluster) returning(cur *replica, id raftnode.ReplicaID) bool {
	if cur.log == nil {
		return false
	}
	st, err := c.node.Status(cur.sa.Group)
	return err == nil && st.Replica == id && st.Member && st.Fenced == nil
}
