package jscluster

import (
	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/raftnode"
)

var _ jsapi.ConsumerLeaderless = (*account)(nil)

// A replica whose group has lost its leader (a majority of its servers
// stopped or cut off) still answers the info requests naming it, as
// nats-server v2.15.2's members of a leaderless group do
// (jetstream_api.go jsStreamInfoRequest and jsConsumerInfoRequest,
// isGroupLeaderless), rather than leave the client to time out: a stream
// info with what this replica holds (its cluster part without a leader,
// docs/monitoring.md), a consumer info request 10008. A group that has
// known no leader for less than leaderlessAfter is in an election and
// stays silent, so that no such answer races the new leader's.
//
// Only a replica that holds what its group committed answers so
// (raftnode GroupStatus.HoldsCommitted: a voter that led or was caught
// up with a leader). A replica that joined empty and was not promoted
// yet (a learner, or one no leader reached: the new replica of a
// stream whose lost voter the survivor has yet to force out,
// lostvoter.go) stays silent: its own state would show the stream
// without the messages it holds (`Messages: 0` and itself current, a
// new-user trial). nats-server v2.15.2's isGroupLeaderless
// (jetstream_cluster.go) keeps a replica that never had a leader silent
// for lostQuorumInterval (10 s) after its creation; cairn keeps it so
// until it caught up, since its group may well stay leaderless longer.

// groupLeaderless reports whether this server's replica of group g has
// known no leader for leaderlessAfter and holds what the group
// committed, so that it may answer for the group.
func (c *Cluster) groupLeaderless(g raftnode.GroupID) bool {
	st, err := c.node.Status(g)
	return err == nil && st.Fenced == nil && st.Leader == 0 && st.Leaderless >= leaderlessAfter && st.HoldsCommitted
}

// holdsCommitted reports whether this server's replica of group g holds
// what the group committed (raftnode GroupStatus.HoldsCommitted), led
// or not.
func (c *Cluster) holdsCommitted(g raftnode.GroupID) bool {
	st, err := c.node.Status(g)
	return err == nil && st.HoldsCommitted
}

// readyHere reports whether this server's replica of group g holds what
// the group committed (holdsCommitted) and, when it was elected, has
// applied it (raftnode GroupStatus.LeaderReady): its stream's state is
// not behind what was acknowledged.
func (c *Cluster) readyHere(g raftnode.GroupID) bool {
	st, err := c.node.Status(g)
	elected := st.Leader != 0 && st.LeaderServer == c.name
	return err == nil && st.HoldsCommitted && (!elected || st.LeaderReady)
}

// answersLeaderless reports whether this server answers a STREAM.INFO
// request for its replica r although r does not lead: its group is
// leaderless, and r is still in the stream's assignment (stillAssigned).
func (c *Cluster) answersLeaderless(key string, r *replica) bool {
	return key == "STREAM.INFO" && r.log != nil && c.stillAssigned(r.mine()) && c.groupLeaderless(r.sa.Group)
}

// stillAssigned reports whether a replica whose ID in its assignment is
// mine (0: none) may answer for its leaderless group: a replica that
// left its assignment (a scale-down, a move, a peer removal while its
// server was down) knows no leader because its group's leader removed
// it, not because the group lost its quorum, and its state is behind the
// group's (a trial: two servers back after a scale-down from five to
// three answered half of the stream's info requests with 300 messages
// fewer, no leader and the old replica list, until their replicas
// retired 8 to 10 s later); nor may any replica of a server removed
// while it was down (removedown.go). The assignment is this server's
// view, so it counts only once its meta replica caught up with its
// leader, or has known none for leaderlessAfter (a majority lost: the
// view is the last it had): a server just restarted holds the
// assignments of before its stop (metaSettled).
func (c *Cluster) stillAssigned(mine raftnode.ReplicaID) bool {
	return mine != 0 && !c.removedAnswered.Load() && c.metaSettled()
}

// metaSettled reports whether this server's meta replica applied what
// its leader committed, or has known no leader for leaderlessAfter.
func (c *Cluster) metaSettled() bool {
	st, err := c.node.Status(meta.MetaGroup)
	return err == nil && st.Fenced == nil && (st.CaughtUp || st.Leader == 0 && st.Leaderless >= leaderlessAfter)
}

// ConsumerLeaderless implements jsapi.ConsumerLeaderless: this server
// holds a replica of the replicated consumer and its group is
// leaderless, so a CONSUMER.INFO request gets 10008 from here.
func (a *account) ConsumerLeaderless(streamName, name string) bool {
	cr, ca := a.c.assignedOf(consumerKey{a.name, streamName, name})
	if cr == nil || cr.leads.Load() {
		return false
	}
	// ca is the copy assignedOf took under Cluster.mu: cr.ca is the run
	// goroutine's to change (keepConsumer), and an API worker read it here
	// while a scale-up changed it (a data race, found under -race in CI).
	mine, _ := meta.On(ca.Replicas, a.c.name)
	return a.c.stillAssigned(mine.ID) && a.c.groupLeaderless(ca.Group)
}
