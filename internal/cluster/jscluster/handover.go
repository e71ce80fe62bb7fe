package jscluster

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Handing the leadership over before the server stops (docs/cluster.md,
// "Lame duck mode and shutdown"), as nats-server v2.15.2 does in
// lameDuckMode (transferRaftLeaders) and Shutdown (stepdownRaftNodes):
// every group this server leads, the meta group's, its replicated
// streams' and consumers', is handed by raft's leadership transfer to
// its most up-to-date active follower on a server with a route and not
// in lame duck mode, the successor a step-down without placement
// chooses (stepdown.go). Unlike
// nats-server, which waits a fixed second in lame duck mode and not at
// all at shutdown, the server waits until each transfer took and this
// replica applied every entry it proposed as leader (so that their
// proposers answered, raftnode keeping their waiters across a transfer),
// or until the transfer failed, with a deadline.

// HandOverResult says what HandOver did; each group it led is counted
// once, in the first of Moved, NoneLeft, NoSuccessor, Lost and Failed
// that holds (handover.outcome), as its servers stood when HandOver
// ended.
type HandOverResult struct {
	// Led is the number of groups this server led; Moved those whose
	// leadership another replica was seen to take on a server that had
	// not announced it is leaving (the lame duck route INFO a server
	// sends in lame duck mode and at shutdown: route.Peer.LameDuck);
	// NoneLeft those whose other voters' servers all announced leaving,
	// or have no route (a cluster stopped at once), whoever took them;
	// NoSuccessor those with no active follower to take it while a
	// server of theirs stays (a follower down or behind); Lost those
	// this replica stopped leading with no other replica seen to take
	// over (CheckQuorum: its peers went silent).
	Led, Moved, NoneLeft, NoSuccessor, Lost int
	// Failed names the other groups: their transfer was refused,
	// abandoned or still under way at the deadline, or it went to a
	// server that is leaving while another of theirs stays.
	Failed []string
	// NoPeers: HandOver ended before the deadline because no peer with
	// a route and not in lame duck mode (or shutting down) was left to
	// take a group.
	NoPeers bool
	// Took is how long HandOver ran.
	Took time.Duration
}

// handOverPoll is how often HandOver looks at the groups' status while
// it waits.
const handOverPoll = 5 * time.Millisecond

// handOverPatience is how long a stream leader handing its leadership
// over, or quiescing for its conversion to one replica, proposes the
// publishes it took before answering the rest 503
// (jetstream.JetStream.StreamHandOver): a quarter of the default election
// timeout, short beside nats.go's retry of a 503 (twice, 250 ms apart),
// so that a leader stopped during a burst hands over within about half a
// second rather than after proposing a full ingest queue (up to 128 MiB)
// at its disk's pace.
const handOverPatience = 250 * time.Millisecond

// handover is one group HandOver hands over.
type handover struct {
	group raftnode.GroupID
	what  string               // for the log: "meta", "stream A > S", "consumer A > S > C"
	js    *jetstream.JetStream // a stream's engine (nil for the others)
	name  string               // a stream's name
	// via asks a replicated consumer's transfer through the consumer
	// (consumerlog.Log.HandOver; nil for the others).
	via func(func() error) error
	// ready reports, for a replicated consumer, that its successor is
	// known to serve from every server (consumerlog.Log.SuccessorReady;
	// nil for the others): its old leader then ends the pull requests
	// that waited on it and forwards what it took meanwhile.
	ready func() bool
	// seen: the transfer was seen under way (GroupStatus.Transferee);
	// lost: LastIndex when the leadership was first seen gone (0: not
	// yet); term: the term this replica led; took: another replica was
	// seen leading after it, on server successor; alone: no successor;
	// done: nothing more to wait for.
	seen, took, alone, done bool
	lost, term              uint64
	successor               raftnode.ServerID
	// asked is when its transfer was asked: the two election timeouts
	// after which a transfer never seen under way, or a leadership lost
	// with no new leader seen, is given up count from it, not from
	// HandOver's start (trial 38: a stream leader stopped during a burst
	// spent 1.9 s having its stream propose what it took, then gave up
	// on the stream at its first look, deposed by the transferee's
	// campaign and not yet told the new leader: docs/cluster.md, "Lame
	// duck mode and shutdown").
	asked time.Time
	// others are the servers of the group's other voters when HandOver
	// began (the leader's view).
	others []raftnode.ServerID
}

// handOverOutcome is where HandOverResult counts a group.
type handOverOutcome int

const (
	outcomeMoved handOverOutcome = iota
	outcomeNoneLeft
	outcomeNoSuccessor
	outcomeLost
	outcomeFailed
)

// outcome is where HandOver counts h, staying being the servers with a
// route that have not announced they are leaving, as HandOver ended: a
// transfer counts only when its successor stays (trial 37: a server
// stopped with the rest of its cluster counted "handed over for 1 of 1"
// to a server exiting in the same millisecond); a group none of whose
// other voters' servers stays has no other server left, whatever the
// transfer did (its followers were active but leaving: "without an
// active follower" sent operators looking for a lagging replica).
func (h *handover) outcome(staying map[raftnode.ServerID]bool) handOverOutcome {
	switch {
	case h.took && staying[h.successor]:
		return outcomeMoved
	case !slices.ContainsFunc(h.others, func(s raftnode.ServerID) bool { return staying[s] }):
		return outcomeNoneLeft
	case h.took:
		return outcomeFailed // to a server that leaves too, while one stays
	case h.alone:
		return outcomeNoSuccessor
	case h.lost != 0:
		return outcomeLost
	}
	return outcomeFailed
}

// HandOver hands over the leadership of every Raft group this server
// leads and waits, at most timeout, until each transfer took and this
// replica applied every entry it had proposed, or failed. A replicated
// stream's leader first stops taking publishes without dropping one on
// its way: its subscriptions are withdrawn from the cluster
// (jetstream.JetStream.StreamWithdraw), the routes flushed
// (Host.FlushRoutes), then the subscriptions dropped and what the stream
// took proposed (jetstream.JetStream.StreamHandOver). Publishes sent
// meanwhile find no subscriber (503, which clients retry) until the new
// leader subscribes. Call it before the server stops JetStream (lame duck mode,
// shutdown); the streams it handed over stay unsubscribed even where a
// transfer failed. It returns at once when this server leads nothing,
// or once the Cluster is closed.
func (c *Cluster) HandOver(timeout time.Duration) HandOverResult {
	start := time.Now()
	deadline := start.Add(timeout)
	hs := c.ledGroups()
	res := HandOverResult{Led: len(hs)}
	if len(hs) == 0 {
		return res
	}
	c.cfg.Infof("JetStream cluster: handing over the leadership of %s", logger.Count(len(hs), "Raft group"))
	c.quiesceStreams(hs, deadline)
	for _, h := range hs {
		if !c.transfer(h) {
			h.alone, h.done = true, true
		}
		h.asked = time.Now()
	}
	res.NoPeers = c.waitHandOvers(hs, deadline)
	staying := c.stayingPeers()
	for _, h := range hs {
		switch h.outcome(staying) {
		case outcomeMoved:
			res.Moved++
		case outcomeNoneLeft:
			res.NoneLeft++
		case outcomeNoSuccessor:
			res.NoSuccessor++
		case outcomeLost:
			res.Lost++
		default:
			res.Failed = append(res.Failed, h.what)
		}
	}
	res.Took = time.Since(start)
	info, warn := handOverLines(res)
	for _, l := range info {
		c.cfg.Infof("%s", l)
	}
	for _, l := range warn {
		c.cfg.Logf("%s", l)
	}
	return res
}

// handOverLines are the lines HandOver logs of res: info at [INF],
// warn at [WRN] (one per group that did not move while a server of its
// could have taken it). When no other server was left for any group it
// led (a cluster stopped at once), the one line says so, without the
// per-group accounting; otherwise that accounting, and the groups with
// no other server left on a line of their own.
func handOverLines(res HandOverResult) (info, warn []string) {
	if res.NoneLeft < res.Led {
		info = append(info, fmt.Sprintf("JetStream cluster: leadership handed over for %d of %s in %v (%d without an active follower, %d lost without a successor)",
			res.Moved, logger.Count(res.Led, "Raft group"), res.Took.Round(time.Millisecond), res.NoSuccessor, res.Lost))
	}
	if res.NoneLeft > 0 {
		info = append(info, fmt.Sprintf("JetStream cluster: no other server is left to take the leadership of %s (the servers of their other replicas are leaving too, or unreachable)", logger.Count(res.NoneLeft, "Raft group")))
	}
	for _, what := range res.Failed {
		warn = append(warn, fmt.Sprintf("JetStream cluster: the leadership of %s did not move before the server stops", what))
	}
	return info, warn
}

// stayingPeers returns the servers with a route that have not announced
// they are leaving (lame duck mode, or shutting down).
func (c *Cluster) stayingPeers() map[raftnode.ServerID]bool {
	staying := map[raftnode.ServerID]bool{}
	for _, p := range c.host.ClusterPeers() {
		if !p.LameDuck {
			staying[raftnode.ServerID(p.Name)] = true
		}
	}
	return staying
}

// peerLeft reports whether a server with a route and not leaving (lame
// duck mode, or shutting down: both announce it on the routes) is left
// to take a leadership.
func (c *Cluster) peerLeft() bool {
	for _, p := range c.host.ClusterPeers() {
		if !p.LameDuck {
			return true
		}
	}
	return false
}

// ledGroups returns the groups this server's replicas lead now.
func (c *Cluster) ledGroups() []*handover {
	c.mu.Lock()
	if c.closed || !c.started {
		c.mu.Unlock()
		return nil
	}
	var hs []*handover
	for k, r := range c.replicas {
		if r.log != nil {
			var js *jetstream.JetStream
			if acc := c.accounts[k.account]; acc != nil {
				js = acc.js
			}
			hs = append(hs, &handover{group: r.sa.Group, what: fmt.Sprintf("stream %s > %s", k.account, k.name), js: js, name: k.name})
		}
	}
	for k, cr := range c.creplicas {
		h := &handover{group: cr.ca.Group, what: fmt.Sprintf("consumer %s > %s > %s", k.account, k.stream, k.name)}
		if cr.log != nil {
			h.via, h.ready = cr.log.HandOver, cr.log.SuccessorReady
		}
		hs = append(hs, h)
	}
	c.mu.Unlock()
	hs = append(hs, &handover{group: meta.MetaGroup, what: "meta"})
	led := hs[:0]
	for _, h := range hs {
		if st, err := c.node.Status(h.group); err == nil && st.Role == raftnode.Leader && st.Fenced == nil {
			h.term = st.Term
			for _, rs := range st.Replicas {
				if rs.Server != c.name && !rs.Learner {
					h.others = append(h.others, rs.Server)
				}
			}
			led = append(led, h)
		}
	}
	return led
}

// quiesceStreams has each led stream stop taking publishes and propose
// those it took, the streams at once: their subscriptions are withdrawn
// from the other servers (StreamWithdraw), the routes flushed, so that
// every publish routed here before the peers learned it has reached its
// stream, then the subscriptions are dropped and what the streams took
// proposed (StreamHandOver). It waits until deadline at the latest (a
// stream still busy ends on its own, at the latest when it stops).
func (c *Cluster) quiesceStreams(hs []*handover, deadline time.Time) {
	var streams []*handover
	for _, h := range hs {
		if h.js != nil {
			streams = append(streams, h)
		}
	}
	if len(streams) == 0 {
		return
	}
	for _, h := range streams {
		if err := h.js.StreamWithdraw(h.name); err != nil {
			c.cfg.Logf("jscluster: %s: withdraw its subscriptions: %v", h.what, err)
		}
	}
	if !c.host.FlushRoutes(time.Until(deadline)) {
		c.cfg.Logf("jscluster: a route did not answer its flush: a publish on its way may go unanswered")
	}
	var wg sync.WaitGroup
	for _, h := range streams {
		wg.Go(func() {
			if err := h.js.StreamHandOver(h.name, handOverPatience); err != nil {
				c.cfg.Logf("jscluster: %s: hand over: %v", h.what, err)
			}
		})
	}
	quiet := make(chan struct{})
	go func() { wg.Wait(); close(quiet) }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-quiet:
	case <-t.C:
	}
}

// transfer asks the group's leadership transfer to its most up-to-date
// active follower on a server with a route; false when it has none (or
// no longer leads). A replicated consumer's is asked through the
// consumer (handover.via): it stops delivering, and what it delivered
// is queued ahead of the transfer.
func (c *Cluster) transfer(h *handover) bool {
	st, err := c.node.Status(h.group)
	if err != nil || st.Role != raftnode.Leader {
		return false
	}
	cands := c.successors(st, &stream.Placement{})
	if len(cands) == 0 {
		return false
	}
	return through(h.via, func() error { return c.node.HandOver(h.group, cands[0].Replica) }) == nil
}

// waitHandOvers polls the groups' status until every handover is done or
// deadline: done when another replica took the leadership and this one
// applied through the log it had then (its kept proposals resolved),
// when it stepped down with no election under way (CheckQuorum), when
// the group is gone, or when a transfer seen under way ended with this
// replica still leading (raft abandons it after an election timeout);
// one never seen under way, or lost with no new leader seen, is given up
// two election timeouts after its transfer was asked (stretched as the
// node's groups stretch theirs: raftnode.Node.Stretch). It gives up on them all at once, and
// reports true, when no peer is left to take a group (every other
// server leaving or gone: a cluster stopped at once), so that the server
// does not wait out the deadline for groups nobody can take.
func (c *Cluster) waitHandOvers(hs []*handover, deadline time.Time) bool {
	// Two election timeouts as this node's loop stretches them: on a
	// loaded machine (rounds of 0.6 to 1.1 s) a transferee's election
	// took 2 s to reach the old leader, which had just given up on it.
	abandon := 2 * c.node.ElectionTimeout() * time.Duration(c.node.Stretch()) / 1000
	t := time.NewTicker(handOverPoll)
	defer t.Stop()
	for {
		pending := false
		now := time.Now()
		for _, h := range hs {
			if !h.done {
				st, err := c.node.Status(h.group)
				h.update(st, err, h.late(now, abandon))
				pending = pending || !h.done
			}
		}
		if !pending || time.Now().After(deadline) {
			return false
		}
		if !c.peerLeft() {
			return true
		}
		<-t.C
	}
}

// late reports whether abandon (two election timeouts) passed between
// h's transfer being asked and now.
func (h *handover) late(now time.Time, abandon time.Duration) bool {
	return now.Sub(h.asked) > abandon
}

// update updates h from its group's status st (err: the group is gone);
// late: two election timeouts passed since its transfer was asked
// (handover.late).
func (h *handover) update(st raftnode.GroupStatus, err error, late bool) {
	switch {
	case err != nil:
		h.done = true
	case st.Role != raftnode.Leader:
		if h.lost == 0 {
			h.lost = max(st.LastIndex, 1)
		}
		if st.Leader != 0 && st.Leader != st.Replica {
			h.took, h.successor = true, st.LeaderServer
		}
		switch {
		case h.took:
			h.done = st.Applied >= h.lost && (h.ready == nil || h.ready())
		case st.Term == h.term || late:
			h.done = true // stepped down with no election (CheckQuorum), or no new leader seen
		}
	case st.Transferee != 0:
		h.seen = true
	case h.seen || late:
		h.done = true // abandoned, or never started
	}
}
