package jscluster

import (
	"encoding/json"
	"slices"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// Which replicas a scale-down keeps (docs/cluster.md, "Scaling"): the
// meta leader orders a group's servers by what it knows of them and
// keeps the first ones, as nats-server v2.15.2's stream leader picks the
// peers it scales down to (jetstream_cluster.go selectScaleDownPeers,
// sortScaleDownPeers): the group's leader, then online peers with the
// least lag, then offline ones. Keeping a down server's replica over a
// live one left a stream of three scaled to two with one live voter of
// two, without a quorum until that server came back (a new-user
// trial). The group's leader then removes the replicas that leave, one
// that is down first (nextMembership).

// groupView is what the meta leader knows of a group's servers when it
// scales the group down: the server leading it ("" when unknown), those
// it has no route to (offline), and those known not to hold every
// committed entry or not heard from lately (behind: known on the
// group's leader only).
type groupView struct {
	leader  raftnode.ServerID
	offline map[raftnode.ServerID]bool
	behind  map[raftnode.ServerID]bool
}

// keepRank is where server s stands in the order a scale-down keeps a
// group's servers under view v, lower first: 0 the group's leader
// (online), 1 online and not known to be behind, 2 online and behind,
// 3 offline.
func keepRank(s raftnode.ServerID, v groupView) int {
	switch {
	case v.offline[s]:
		return 3
	case s == v.leader:
		return 0
	case v.behind[s]:
		return 2
	}
	return 1
}

// keepOrder returns servers, a group's in assignment order, in the
// order a scale-down keeps them under view v (keepRank), assignment
// order among equals; servers itself is not changed.
func keepOrder(servers []raftnode.ServerID, v groupView) []raftnode.ServerID {
	out := slices.Clone(servers)
	slices.SortStableFunc(out, func(a, b raftnode.ServerID) int { return keepRank(a, v) - keepRank(b, v) })
	return out
}

// localView is the view of group this server's own replica gives: on
// its leader, every replica's progress (behind: not a voter yet, short
// of the commit index or not heard from within the contact window, as
// stream info's current), on a follower the leader it knows and whether
// it is current itself; with the servers this server has no route to.
// It reports whether this server's replica leads the group.
func (c *Cluster) localView(group raftnode.GroupID) (groupView, bool) {
	v := groupView{offline: c.offline(), behind: map[raftnode.ServerID]bool{}}
	st, err := c.node.Status(group)
	if err != nil {
		return v, false
	}
	if st.Role != raftnode.Leader {
		v.leader = st.LeaderServer
		if !st.Current {
			v.behind[c.name] = true
		}
		return v, false
	}
	v.leader = c.name
	for _, rs := range st.Replicas {
		if rs.Server != c.name && (rs.Learner || rs.Match < st.Commit || !rs.Active) {
			v.behind[rs.Server] = true
		}
	}
	return v, true
}

// streamKeepOrder returns the servers of stream sa in the order its
// scale-down keeps them (keepOrder). When this server's replica does not
// lead the stream, it asks the leader for the stream's info ($JSC.SI,
// at most scaleAskWait), which names the leader and each replica's
// current and offline as the leader sees them; without an answer (no
// leader, or none in reach) it goes by its own replica's view and the
// routes.
func (c *Cluster) streamKeepOrder(sa meta.StreamAssignment) []raftnode.ServerID {
	v, leads := c.localView(sa.Group)
	if !leads && len(sa.Replicas) > 1 {
		k := streamKey{sa.Account, sa.Name}
		b := c.requestAll([]string{streamInfoSubject(k)}, nil, scaleAskWait)[0]
		var si jetstream.StreamInfo
		if b != nil && json.Unmarshal(b, &si) == nil && si.Config.Name == sa.Name && si.Cluster != nil && si.Cluster.Leader != "" {
			v.leader = raftnode.ServerID(si.Cluster.Leader)
			v.behind = map[raftnode.ServerID]bool{}
			for _, p := range si.Cluster.Replicas {
				s := raftnode.ServerID(p.Name)
				if !p.Current {
					v.behind[s] = true
				}
				if p.Offline {
					v.offline[s] = true
				}
			}
		}
	}
	return keepOrder(meta.Servers(sa.Replicas), v)
}
