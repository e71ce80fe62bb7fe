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
// campaign, and campaign again while the group has no leader, for
// freshCampaigns (recampaignFresh): a campaign whose votes reached
// replicas that had not started the group yet is lost, and those start
// it within milliseconds of one another (they apply the assignment at
// about the same time). The run goroutine's.
func (c *Cluster) campaignFresh(g raftnode.GroupID) {
	_ = c.node.Campaign(g)
	if c.fresh == nil {
		c.fresh = map[raftnode.GroupID]freshGroup{}
	}
	now := time.Now()
	c.fresh[g] = freshGroup{until: now.Add(freshCampaigns), next: now.Add(firstRetry), wait: firstRetry}
	c.armFresh(now)
}

// freshGroup is when a new group's first campaigner campaigns again.
type freshGroup struct {
	until time.Time     // no more after
	next  time.Time     // the next campaign
	wait  time.Duration // the pause before next: firstRetry, doubled each time up to recampaign
}

// freshCampaigns is how long the replica that made a new group's first
// campaign campaigns again while the group has no leader, after
// firstRetry, then twice as long each time up to recampaign: the group
// would otherwise wait an election timeout (about 1 s) before anyone
// campaigns. A campaign again while the first one's votes are on their
// way costs a round of votes (raft's pre-vote starts over), no more:
// the pauses grow past any round trip between the servers.
const (
	freshCampaigns = 2 * time.Second
	firstRetry     = 25 * time.Millisecond
)

// recampaignFresh, on the run goroutine when freshTick fires, campaigns
// again for each group in c.fresh that has no leader yet and is due,
// forgets those that have one or whose time is up, and sets freshTick
// for the next one due.
func (c *Cluster) recampaignFresh() {
	now := time.Now()
	for g, f := range c.fresh {
		st, err := c.node.Status(g)
		switch {
		case err != nil || now.After(f.until) || st.Leader != 0:
			delete(c.fresh, g)
		case !now.Before(f.next):
			_ = c.node.Campaign(g)
			f.wait = min(2*f.wait, recampaign)
			f.next = now.Add(f.wait)
			c.fresh[g] = f
		}
	}
	c.armFresh(now)
}

// armFresh sets freshTick to fire when the first group of c.fresh is
// due (nil when none is left).
func (c *Cluster) armFresh(now time.Time) {
	c.freshTick = nil
	var first time.Time
	for _, f := range c.fresh {
		if first.IsZero() || f.next.Before(first) {
			first = f.next
		}
	}
	if !first.IsZero() {
		c.freshTick = time.After(max(first.Sub(now), 0))
	}
}
