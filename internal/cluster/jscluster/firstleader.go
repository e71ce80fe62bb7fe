package jscluster

import (
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// First leaders (docs/cluster.md, "First leaders"): a new replicated
// stream's or consumer's group elects at once, rather than after an
// election timeout, because one of its first replicas campaigns as soon
// as it starts the group. nats-server v2.15.2 has the meta leader pick
// that replica at random among the group's online servers and record it
// in the assignment (raftGroup.Preferred, setPreferredMember); cairn
// derives it from the assignment on every server (firstCampaigner), so
// that the meta group's operations keep their format and a server of an
// earlier build, which does not know the rule, can still apply them.

// firstCampaigner returns the server whose replica makes the first
// campaign of new group g, whose first replicas (its bootstrap voters)
// are on servers voters, as a server that sees the servers offline as
// offline judges it. The voters are taken in name order, so that the
// choice does not depend on the placement's order; the turn of g is
// (g + mix(g / n)) mod n: n groups in a row (a burst of creates) take
// every server once, and the offset drawn from g / n keeps a regular
// pattern of creates (a stream and its two consumers, each time) from
// putting every stream's first leader on one server. From that turn
// the first server not offline is chosen; when every one is (a view
// this server cannot have of itself), the turn's. "" for no voters.
func firstCampaigner(g raftnode.GroupID, voters []raftnode.ServerID, offline map[raftnode.ServerID]bool) raftnode.ServerID {
	if len(voters) == 0 {
		return ""
	}
	names := slices.Clone(voters)
	slices.Sort(names)
	n := uint64(len(names))
	turn := (uint64(g) + mix64(uint64(g)/n)) % n
	for i := range n {
		if s := names[(turn+i)%n]; !offline[s] {
			return s
		}
	}
	return names[turn]
}

// mix64 is splitmix64's finalizer: a fixed, well-spread hash of x.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// initialVoters returns the servers of the replicas in rs whose IDs are
// at most initial: a group's bootstrap voters (replica IDs 1 to its
// initial count) that its assignment still names.
func initialVoters(rs []meta.Replica, initial uint64) []raftnode.ServerID {
	var out []raftnode.ServerID
	for _, r := range rs {
		if uint64(r.ID) <= initial {
			out = append(out, r.Server)
		}
	}
	return out
}

// campaignsFirst reports whether this server's replica of stream sa,
// one of its group's bootstrap voters, is the one that campaigns as soon
// as the group starts (firstCampaigner over the servers it sees
// offline). A stream scaled up from one replica has one such voter, its
// first replica, which thus campaigns (scaleUpFromOne).
func (c *Cluster) campaignsFirst(sa meta.StreamAssignment) bool {
	return firstCampaigner(sa.Group, initialVoters(sa.Replicas, initialReplicas(sa)), c.offline()) == c.name
}

// consumerCampaignsFirst is campaignsFirst for consumer ca (its initial
// count of replicas: ConsumerAssignment.Initial).
func (c *Cluster) consumerCampaignsFirst(ca meta.ConsumerAssignment) bool {
	return firstCampaigner(ca.Group, initialVoters(ca.Replicas, uint64(max(ca.Initial, 0))), c.offline()) == c.name
}

// campaignFresh makes this server's replica of group g, just started,
// campaign, and campaign again each housekeeping tick while the group
// has no leader, for freshCampaigns (recampaignFresh): a campaign whose
// votes reached replicas that had not started the group yet is lost.
// The run goroutine's.
func (c *Cluster) campaignFresh(g raftnode.GroupID) {
	_ = c.node.Campaign(g)
	if c.fresh == nil {
		c.fresh = map[raftnode.GroupID]time.Time{}
	}
	c.fresh[g] = time.Now().Add(freshCampaigns)
}

// freshCampaigns is how long the replica that made a new group's first
// campaign campaigns again (each housekeeping tick) while the group has
// no leader: a campaign whose votes reached replicas that had not started
// the group yet is lost, and the group would otherwise wait an election
// timeout (about 1 s) before anyone campaigns.
const freshCampaigns = 2 * time.Second

// recampaignFresh, on the run goroutine's housekeeping tick, campaigns
// again for each group in c.fresh that has no leader yet, and forgets
// those that have one or whose time is up.
func (c *Cluster) recampaignFresh() {
	now := time.Now()
	for g, until := range c.fresh {
		st, err := c.node.Status(g)
		switch {
		case err != nil || now.After(until) || st.Leader != 0:
			delete(c.fresh, g)
		default:
			_ = c.node.Campaign(g)
		}
	}
}
