package jscluster

import (
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

// groupLeaderless reports whether this server's replica of group g has
// known no leader for leaderlessAfter.
func (c *Cluster) groupLeaderless(g raftnode.GroupID) bool {
	st, err := c.node.Status(g)
	return err == nil && st.Fenced == nil && st.Leader == 0 && st.Leaderless >= leaderlessAfter
}

// answersLeaderless reports whether this server answers a STREAM.INFO
// request for its replica r although r does not lead: its group is
// leaderless.
func (c *Cluster) answersLeaderless(key string, r *replica) bool {
	return key == "STREAM.INFO" && r.log != nil && c.groupLeaderless(r.sa.Group)
}

// ConsumerLeaderless implements jsapi.ConsumerLeaderless: this server
// holds a replica of the replicated consumer and its group is
// leaderless, so a CONSUMER.INFO request gets 10008 from here.
func (a *account) ConsumerLeaderless(streamName, name string) bool {
	cr, ca := a.c.assignedOf(consumerKey{a.name, streamName, name})
	return cr != nil && !cr.leads.Load() && a.c.groupLeaderless(ca.Group)
}
