package jscluster

import (
	"fmt"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// The lines a server without a voters record logs while it enters the
// meta group (bootstrap, joinOrBootstrap; docs/cluster.md, "Growing the
// meta group"). A brand-new cluster's first start is routine: the
// servers wait for their routes, one of them starts the meta group with
// the servers the routes name, and the others, already among its voters,
// enter it once its leader reaches them. Only a server that enters a
// meta group that ran without it (a server added to a running cluster,
// or one on a wiped store) joins it "as a new replica".

// waitRelog is how long a server may wait to enter the meta group before
// it logs its routes again (once): a first start takes a few seconds;
// one still waiting after this names what it is waiting for.
const waitRelog = 10 * time.Second

// waitingLine is the [INF] line of a server without a voters record
// that waits to enter the meta group: the routes its configuration
// names (configured, host:port), how many led to this server itself
// (self) and the servers the others reached so far (connected), as
// Host.ClusterRoutes returns them; waited is how long it has waited (0:
// the first line). The meta group starts once every route is resolved
// and the routed servers agree on the set (or by the seed rule).
func waitingLine(configured []string, self int, connected []string, waited time.Duration) string {
	var b strings.Builder
	b.WriteString("JetStream cluster: ")
	if waited > 0 {
		fmt.Fprintf(&b, "still waiting to enter the meta group after %v", waited.Round(time.Second))
	} else {
		b.WriteString("waiting to enter the meta group")
	}
	if len(configured) == 0 {
		b.WriteString(": no routes configured; it starts alone unless a server routes here within 2s")
		return b.String()
	}
	fmt.Fprintf(&b, " until its routes connect: %d configured (%s)", len(configured), strings.Join(configured, ", "))
	switch self {
	case 0:
	case 1:
		b.WriteString(", 1 of them to this server itself")
	default:
		fmt.Fprintf(&b, ", %d of them to this server itself", self)
	}
	others := len(configured) - self
	switch {
	case len(connected) == 0:
		b.WriteString(", connected to none yet")
	case self > 0:
		fmt.Fprintf(&b, ", connected to %s (%d of the other %d)", strings.Join(connected, ", "), len(connected), others)
	default:
		fmt.Fprintf(&b, ", connected to %s (%d of %d)", strings.Join(connected, ", "), len(connected), others)
	}
	return b.String()
}

// invitedLine is the [INF] line of a server without a voters record
// whose meta replica the leader on server from already sends to (raftnode
// Invitation); known is the catalogue from's transport hello carried,
// self and inc this server's name and store. join reports a real join:
// from's meta group ran before and did not know this server, whose
// replica the leader adds as a new member (learner, then voter). A hello
// without a catalogue is of a meta group that had catalogued nobody yet
// when from dialed (a running group's leader catalogues itself first):
// a cluster forming, whose first voters this server's replica is among
// (the bootstrap rule) or which adds it as the seed rule's others; one
// that knows this server by this store (its voters record was lost) is
// its own group. Neither is joining "as a new replica".
func invitedLine(from raftnode.ServerID, known map[raftnode.ServerID]raftnode.Incarnation, self raftnode.ServerID, inc raftnode.Incarnation) (line string, join bool) {
	if len(known) == 0 {
		return fmt.Sprintf("JetStream cluster: %s started the new cluster's meta group first: this server enters it (its members are logged once this server's replica applied them)", from), false
	}
	if k, ok := known[self]; ok && k == inc {
		return fmt.Sprintf("JetStream cluster: %s leads a meta group that knows this server by this store: this server enters it again (its voters record was missing)", from), false
	}
	return fmt.Sprintf("JetStream cluster: %s adds this server to its meta group: joining it", from), true
}

// joinedLine is the [INF] line startMeta logs when this server's replica
// is not yet among the meta group's members it applied: for a real join
// (join), that it joins as a new replica; nothing otherwise (the members
// line follows once its replica applied them: logMetaMembers).
func joinedLine(rec votersFile, join bool) string {
	if !join {
		return ""
	}
	return fmt.Sprintf("JetStream cluster: joining the meta group as a new replica (the voters record of the join names %v); its members are logged once this server's replica applied them", rec.Voters)
}
