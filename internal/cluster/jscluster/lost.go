package jscluster

import (
	"errors"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// A replica that lost its state (docs/cluster.md, "Memory streams"):
// a memory stream's replica keeps its messages in memory and replays its
// group's log from the server's WAL after a restart; one that was caught
// up by a stream snapshot (a replacement, a scale-up, a peer removal)
// has a log that starts at the snapshot, and raftnode fences it
// (raftnode.ErrStateLost). Its server tells the meta leader, through the
// system account:
//
//	$SYS.JSC.STREAM.REPLICA.LOST   no reply: replicaLostMsg, repeated every
//	                               staleRetry while the replica stays fenced
//
// The meta leader keeps the reports (lostState) and, on its housekeeping
// tick, decides per stream (decideLost, a pure function of the
// assignment, the reports, whether the group has a leader and the
// clock):
//
//   - the group has a leader (asked on $JSC.SI, gather.go): each lost
//     replica is replaced the normal way, a meta.MoveReplica to the same
//     server (a new replica ID caught up by a snapshot), at most every
//     staleRetry per replica (a repeat changes nothing: 10040);
//   - no leader, a replicated memory stream, and the lost replicas a
//     majority of the assignment for resetAfter: the group can never
//     elect a leader again (a fenced replica neither votes nor
//     campaigns) and no replacement can be carried out without one, so
//     the stream is reset (meta.ResetStream: a new group, every replica
//     and consumer empty, config kept), as nats-server v2.15.2 brings
//     such a stream back empty; logged at [WRN];
//   - otherwise nothing (a minority lost while the group elects, or its
//     servers are down: it is replaced once a leader answers). A file
//     stream is never reset.
const replicaLost = "$SYS.JSC.STREAM.REPLICA.LOST"

// replicaLostMsg is the body of $SYS.JSC.STREAM.REPLICA.LOST: the
// replica, its group and its server.
type replicaLostMsg struct {
	Account string             `json:"account"`
	Stream  string             `json:"stream"`
	Group   raftnode.GroupID   `json:"group"`
	Replica raftnode.ReplicaID `json:"replica"`
	Server  raftnode.ServerID  `json:"server"`
}

const (
	// lostFresh is how long a report stands: its server repeats it
	// every staleRetry while the replica stays fenced.
	lostFresh = 3 * staleRetry
	// resetAfter is how long the lost replicas must have been a
	// majority, with no leader answering, before the stream is reset:
	// several election timeouts (1 to 2 s: docs/cluster.md decision
	// 10) for a quorum of replicas that hold the state, if the group has
	// one, to elect a leader, and a second report from each lost
	// replica.
	resetAfter = staleRetry
	// lostProbeEvery spaces the meta leader's questions whether a group
	// with lost replicas has a leader.
	lostProbeEvery = 2 * time.Second
)

// lostAction is what the meta leader does about a stream's lost replicas.
type lostAction int

const (
	lostWait    lostAction = iota // nothing yet
	lostReplace                   // MoveReplica each lost replica to its server
	lostReset                     // ResetStream
)

// lostReport is the latest report of one replica: its group, its
// server, when it came (the meta leader's clock).
type lostReport struct {
	group  raftnode.GroupID
	server raftnode.ServerID
	at     time.Time
}

// standing returns the replicas of assignment sa whose report stands at
// now: of sa's group, from the server sa places that replica on, at most
// lostFresh old; in assignment order.
func standing(sa meta.StreamAssignment, reports map[raftnode.ReplicaID]lostReport, now time.Time) []raftnode.ReplicaID {
	var out []raftnode.ReplicaID
	for _, r := range sa.Replicas {
		rep, ok := reports[r.ID]
		if ok && rep.group == sa.Group && rep.server == r.Server && now.Sub(rep.at) <= lostFresh {
			out = append(out, r.ID)
		}
	}
	return out
}

// majoritySince returns since when the lost replicas have been a
// majority of sa's: prev if they already were (prev not zero), now if
// they just became one, the zero time if they are not.
func majoritySince(sa meta.StreamAssignment, lost []raftnode.ReplicaID, prev, now time.Time) time.Time {
	switch {
	case 2*len(lost) <= len(sa.Replicas):
		return time.Time{}
	case prev.IsZero():
		return now
	}
	return prev
}

// decideLost decides about stream sa's lost replicas (standing), a
// majority since since (zero: not a majority), at now; leader: the
// stream's group has a leader (one of its replicas answered as such).
// A reset needs a replicated memory stream, no leader, and a majority
// lost for resetAfter.
func decideLost(sa meta.StreamAssignment, lost []raftnode.ReplicaID, since, now time.Time, leader bool) lostAction {
	switch {
	case len(lost) == 0:
		return lostWait
	case leader:
		return lostReplace
	case len(sa.Replicas) < 2 || !memoryOf(sa), 2*len(lost) <= len(sa.Replicas):
		return lostWait
	case since.IsZero() || now.Sub(since) < resetAfter:
		return lostWait
	}
	return lostReset
}

// memoryOf reports whether stream sa stores in memory.
func memoryOf(sa meta.StreamAssignment) bool {
	var cfg struct {
		Storage stream.StorageType `json:"storage"`
	}
	return decodeJSON(sa.Config, &cfg) && cfg.Storage == stream.MemoryStorage
}

// lostStream is what the meta leader holds of one stream's lost
// replicas.
type lostStream struct {
	reports map[raftnode.ReplicaID]lostReport
	// majority: since when the standing reports are a majority (zero:
	// they are not).
	majority time.Time
	// probing: an actOnLost runs; probed: when the last one started.
	probing bool
	probed  time.Time
	// moved: when a replacement was last proposed, per replica.
	moved retryMemo
}

// lostState is the meta leader's record of the lost replicas, by
// stream: the report handler (on a publisher's goroutine) writes it, the
// run goroutine and actOnLost read it; mu is a leaf.
type lostState struct {
	mu      sync.Mutex
	streams map[streamKey]*lostStream
}

// askReplaceLost, on the run goroutine, reports each replica of this
// server whose group raftnode fenced with raftnode.ErrStateLost to the
// meta leader, at most every staleRetry per replica, and only while a
// meta leader is known (a report nobody hears would wait a round).
func (c *Cluster) askReplaceLost() {
	if st, err := c.node.Status(meta.MetaGroup); err != nil || st.Leader == 0 {
		return
	}
	c.mu.Lock()
	var lost []*replica
	for _, r := range c.replicas {
		if r.log != nil {
			lost = append(lost, r)
		}
	}
	c.mu.Unlock()
	now := time.Now()
	c.askReplaceDamaged(now)
	for _, r := range lost {
		st, err := c.node.Brief(r.sa.Group)
		if err != nil || st.Fenced == nil || !errors.Is(st.Fenced, raftnode.ErrStateLost) {
			continue
		}
		key := staleKey{k: streamKey{r.sa.Account, r.sa.Name}, id: r.mine()}
		if !c.lostAsked.due(key, now, staleRetry) {
			continue
		}
		m := replicaLostMsg{Account: r.sa.Account, Stream: r.sa.Name, Group: r.sa.Group, Replica: key.id, Server: c.name}
		if c.askMeta(replicaLost, m) {
			c.cfg.Infof("JetStream cluster: replica %d of stream '%s > %s' lost its state at the restart (caught up by a snapshot before): reported to the meta leader", key.id, r.sa.Account, r.sa.Name)
		}
	}
}

// onReplicaLost, on the meta leader, records the report of a
// $SYS.JSC.STREAM.REPLICA.LOST request (on the publisher's goroutine):
// handleLost acts on it.
func (c *Cluster) onReplicaLost(_, _ string, _, data []byte) {
	var m replicaLostMsg
	if !c.metaRequest(data, &m) || m.Stream == "" || m.Replica == 0 || m.Group == 0 {
		return
	}
	k := streamKey{m.Account, m.Stream}
	now := c.cfg.Now()
	l := &c.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams == nil {
		l.streams = map[streamKey]*lostStream{}
	}
	ls := l.streams[k]
	if ls == nil {
		ls = &lostStream{reports: map[raftnode.ReplicaID]lostReport{}}
		l.streams[k] = ls
	}
	ls.reports[m.Replica] = lostReport{group: m.Group, server: m.Server, at: now}
}

// handleLost, on the run goroutine of the meta leader, brings each
// stream with lost replicas up to date (standing reports, since when
// they are a majority) and, at most every lostProbeEvery per stream,
// starts actOnLost for it. Not leading the meta group, it forgets the
// reports (the next meta leader gathers its own).
func (c *Cluster) handleLost() {
	l := &c.lost
	if !c.metaLeader() {
		l.mu.Lock()
		l.streams = nil
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	keys := make([]streamKey, 0, len(l.streams))
	for k := range l.streams {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	now := c.cfg.Now()
	for _, k := range keys {
		sa, _, assigned, _ := c.assignment(k)
		l.mu.Lock()
		ls := l.streams[k]
		if ls == nil {
			l.mu.Unlock()
			continue
		}
		var lost []raftnode.ReplicaID
		if assigned {
			lost = standing(sa, ls.reports, now)
			ls.majority = majoritySince(sa, lost, ls.majority, now)
		}
		if len(lost) == 0 && !ls.probing {
			delete(l.streams, k)
		}
		start := len(lost) > 0 && !ls.probing && now.Sub(ls.probed) >= lostProbeEvery
		if start {
			ls.probing, ls.probed = true, now
		}
		since := ls.majority
		l.mu.Unlock()
		if start {
			go c.actOnLost(k, sa, lost, since)
		}
	}
}

// actOnLost (its own goroutine, one per stream at a time) asks whether
// stream k's group has a leader, then carries out decideLost's decision.
func (c *Cluster) actOnLost(k streamKey, sa meta.StreamAssignment, lost []raftnode.ReplicaID, since time.Time) {
	defer func() {
		c.lost.mu.Lock()
		if ls := c.lost.streams[k]; ls != nil {
			ls.probing = false
		}
		c.lost.mu.Unlock()
	}()
	leader := c.hasLeader(k, sa)
	now := c.cfg.Now()
	switch decideLost(sa, lost, since, now, leader) {
	case lostReplace:
		for _, id := range lost {
			c.replaceLost(k, sa, id, now)
		}
	case lostReset:
		c.resetStream(k, sa, len(lost))
	}
}

// replaceLost proposes the replacement of replica id of stream k (as
// assigned in sa) by a new replica on the same server, at most every
// staleRetry.
func (c *Cluster) replaceLost(k streamKey, sa meta.StreamAssignment, id raftnode.ReplicaID, now time.Time) {
	var to raftnode.ServerID
	for _, r := range sa.Replicas {
		if r.ID == id {
			to = r.Server
		}
	}
	c.lost.mu.Lock()
	due := false
	if ls := c.lost.streams[k]; ls != nil {
		due = ls.moved.due(staleKey{k: k, id: id}, now, staleRetry)
	}
	c.lost.mu.Unlock()
	if !due || to == "" {
		return
	}
	if _, jerr := c.propose(&meta.MoveReplica{Account: k.account, Stream: k.name, Replica: id, To: to}); jerr != nil {
		c.cfg.Logf("jscluster: replacing replica %d of stream %s > %s on %s: %v", id, k.account, k.name, to, jerr)
		return
	}
	c.cfg.Infof("JetStream cluster: replacing replica %d of stream '%s > %s' on %s (it lost its state, or its store is damaged)", id, k.account, k.name, to)
}

// resetStream proposes the ResetStream of stream k (group sa.Group),
// lost of whose replicas lost their state, and logs it at [WRN].
func (c *Cluster) resetStream(k streamKey, sa meta.StreamAssignment, lost int) {
	if _, jerr := c.propose(&meta.ResetStream{Account: k.account, Stream: k.name, Group: sa.Group}); jerr != nil {
		c.cfg.Logf("jscluster: resetting memory stream %s > %s: %v", k.account, k.name, jerr)
		return
	}
	c.cfg.Logf("JetStream cluster: memory stream '%s > %s' was reset and starts over EMPTY: %d of its %d replicas lost their messages when their servers restarted "+
		"(they had been caught up by a snapshot, and a memory stream keeps its messages only in memory), so it could never elect a leader again; "+
		"every message it held is lost, its config is kept, and its consumers start again from the beginning (their delivery and acknowledgement state is lost)",
		k.account, k.name, lost, len(sa.Replicas))
}

// hasLeader reports whether stream k's group (sa.Group) has a leader:
// this server's replica leads it or follows a leader, or another
// server's replica answers $JSC.SI as its leader (at most listInfoWait).
func (c *Cluster) hasLeader(k streamKey, sa meta.StreamAssignment) bool {
	if r := c.replicaOf(k); r != nil && r.log != nil && r.sa.Group == sa.Group {
		if r.leads.Load() {
			return true
		}
		if st, err := c.node.Status(sa.Group); err == nil && st.Fenced == nil && st.Leader != 0 {
			return true
		}
	}
	return c.askStreamInfos([]streamKey{k}, streamInfoAsk{})[0] != nil
}

// lostServers returns, on the meta leader, the servers of stream sa
// whose replica stands reported lost or damaged (standing): a new
// consumer is placed there last (meta.ConsumerPlaceRequest.Unfit).
func (c *Cluster) lostServers(sa meta.StreamAssignment) map[raftnode.ServerID]bool {
	l := &c.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.streams[streamKey{sa.Account, sa.Name}]
	if ls == nil {
		return nil
	}
	out := map[raftnode.ServerID]bool{}
	for _, id := range standing(sa, ls.reports, c.cfg.Now()) {
		out[ls.reports[id].server] = true
	}
	return out
}
