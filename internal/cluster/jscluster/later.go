package jscluster

import (
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/raftnode"
)

var (
	_ jsapi.AnswerLater = (*account)(nil)
	_ jsapi.OutOfReach  = (*account)(nil)
)

// A server that knows no leader of a group answers for the group only
// once it has known none for leaderlessAfter (metaAnswers,
// groupLeaderless). A request that arrives in between is not dropped:
// Later has the API hold it until then, so that its client hears 10008
// (or a leaderless replica's info) within 2 s rather than nothing (a
// new user's trial: `nats stream ls` against the one server left of
// three timed out, where nats-server v2.15.2 answered at once). Were a
// new leader elected meanwhile, the request is answered by it (this
// server, if it leads then) or dropped here (another server: it holds
// the same request). Only the requests that read (heldKeys) are held:
// one that changes the cluster might then be carried out twice, by an
// old leader that took it just before it lost the leadership and by the
// new one; those stay unanswered in the 2 s, as before, and the client
// retries.

// heldKeys are the endpoints whose requests Later holds: those that only
// read.
var heldKeys = map[string]bool{
	"INFO": true, "STREAM.NAMES": true, "STREAM.LIST": true, "STREAM.INFO": true,
	"CONSUMER.NAMES": true, "CONSUMER.LIST": true, "CONSUMER.INFO": true,
}

// Later implements jsapi.AnswerLater for a request this server does not
// answer now: how long until it answers it for a leaderless group, 0
// when it never will (another server answers).
func (a *account) Later(key, streamName, consumerName string) time.Duration {
	c := a.c
	if !heldKeys[key] {
		return 0
	}
	if a.forMeta(key, streamName, consumerName) {
		return c.metaAnswersIn()
	}
	switch key {
	case "STREAM.INFO":
		r := c.replicaOf(streamKey{a.name, streamName})
		if r == nil || r.log == nil || r.leads.Load() {
			return 0
		}
		return c.groupAnswersIn(r.sa.Group)
	case "CONSUMER.INFO":
		cr, ca := c.assignedOf(consumerKey{a.name, streamName, consumerName})
		if cr == nil || cr.leads.Load() {
			return 0
		}
		return c.groupAnswersIn(ca.Group)
	}
	return 0
}

// holdStep is how long a request waits for a state the housekeeping
// samples (every 250 ms), or for a leader elected here to be ready.
const holdStep = 50 * time.Millisecond

// metaAnswersIn returns how long until this server answers the meta
// group's requests without leading it (metaAnswers: it has known no meta
// leader for leaderlessAfter), or until it answers them as the leader it
// was just elected (raftnode GroupStatus.LeaderReady); 0 while another
// server leads, or while its meta replica is fenced.
func (c *Cluster) metaAnswersIn() time.Duration {
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil || st.Fenced != nil || c.metaFenced.Load() {
		return 0
	}
	if st.Leader != 0 {
		if st.LeaderServer == c.name {
			return holdStep // elected, applying the terms before its own
		}
		return 0
	}
	since := c.leaderless.Load()
	if since == 0 {
		return holdStep // not sampled by the housekeeping yet
	}
	return max(leaderlessAfter-time.Since(time.Unix(0, since)), holdStep)
}

// groupAnswersIn returns how long until this server's replica of group g
// has known no leader for leaderlessAfter, when it knows none now and
// holds what the group committed (groupLeaderless); 0 otherwise (its
// group has a leader, or it never answers for it).
func (c *Cluster) groupAnswersIn(g raftnode.GroupID) time.Duration {
	st, err := c.node.Status(g)
	if err != nil || st.Fenced != nil || st.Leader != 0 || !st.HoldsCommitted {
		return 0
	}
	return max(leaderlessAfter-st.Leaderless, holdStep)
}

// streamOutOfReach reports whether stream k is assigned with no replica
// on this server and none of its servers in reach (inReach): nobody this
// server can reach answers for it, so the meta leader does (10118), or a
// server without a meta leader (10008), as nats-server v2.15.2 answers a
// stream info when all the group's peers are offline.
func (c *Cluster) streamOutOfReach(k streamKey) bool {
	sa, _, assigned, here := c.assignment(k)
	return assigned && !here && !c.inReach(meta.Servers(sa.Replicas))
}

// consumerOutOfReach is streamOutOfReach for consumer k (10119).
func (c *Cluster) consumerOutOfReach(k consumerKey) bool {
	ca, _, assigned, here := c.consumerAssignment(k)
	return assigned && !here && !c.inReach(meta.Servers(ca.Replicas))
}

// OutOfReach implements jsapi.OutOfReach: on the meta leader, a
// STREAM.INFO or CONSUMER.INFO request naming a stream or consumer out
// of reach (streamOutOfReach, consumerOutOfReach).
func (a *account) OutOfReach(key, streamName, consumerName string) bool {
	c := a.c
	if !c.metaLeader() {
		return false
	}
	switch key {
	case "STREAM.INFO":
		return c.streamOutOfReach(streamKey{a.name, streamName})
	case "CONSUMER.INFO":
		return c.consumerOutOfReach(consumerKey{a.name, streamName, consumerName})
	}
	return false
}
