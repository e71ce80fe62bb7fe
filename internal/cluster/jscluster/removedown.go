package jscluster

import (
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
)

// Removed while down (docs/cluster.md, "Removing a server"). A server
// removed with SERVER.REMOVE while it runs applies its own removal and
// says so. One removed while it was down never does: its meta log ends
// before the removal, and the meta group's leader and followers ignore
// a replica outside their configuration, so it stayed a candidate for
// good, kept its stale replicas and answered for them to its clients,
// and said nothing (a trial; nats-server v2.15.2 takes it back 5
// minutes after the removal). Once it learned its removal and its
// replicas retired, it rejoins as a new replica (rejoin.go). While its
// meta replica knows no leader, it asks
//
//	$SYS.JSC.SERVER.REMOVED.<incarnation>     request, empty body: a server
//	                                          whose applied catalogue marks
//	                                          the store of that incarnation
//	                                          removed answers (an empty JSON
//	                                          object); the others stay silent
//
// at most every elsewhereEvery (ledElsewhere). The mark is for good: the
// catalogue never takes a removed store back (catalogue, grow.go), so
// one answer is proof, whatever the answering server's lag. Once
// answered, the server logs the removal at [WRN], advertises no meta
// group and no catalogue in its hellos (removedSelf), reports the
// removal in /healthz (Health), and retires every replica of a
// replicated stream or consumer it holds once its group is led
// elsewhere or another voter is heard (retireReplicas, retireConsumers:
// the removal moved or dropped them all). Its streams of one replica,
// whose data has no other copy, stay on its disk.

// removedPrefix is the subject prefix of the asks above.
const removedPrefix = "$SYS.JSC.SERVER.REMOVED."

// removedAskAfter is how long the meta replica must have known no
// leader before the server asks: a start or an election resolves
// within it.
const removedAskAfter = 2 * time.Second

// removedText is the /healthz problem and the log line of a removed
// server.
const removedText = "JetStream cluster: this server was removed from the meta group (SERVER.REMOVE): it takes no part in the cluster's JetStream any more; restarted, it rejoins the meta group as a new replica"

// learnRemoval, on the run goroutine's housekeeping, asks whether this
// server's store was removed while its meta replica has known no leader
// for removedAskAfter, and once another server answered so, marks it
// (removedAnswered) and logs it at [WRN].
func (c *Cluster) learnRemoval() {
	if c.removedAnswered.Load() || c.removedSelf() {
		return
	}
	since := c.leaderless.Load()
	if since == 0 || time.Since(time.Unix(0, since)) < removedAskAfter {
		return
	}
	if !c.ledElsewhere(removedPrefix + c.node.Incarnation().String()) {
		return
	}
	c.removedAnswered.Store(true)
	c.cfg.Logf("%s (it was removed while it was down)", removedText)
}

// onRemovedAsk answers a $SYS.JSC.SERVER.REMOVED ask when this server's
// applied catalogue marks that store removed (storeRemoved); it stays
// silent otherwise, and for a subject that names no incarnation. It runs
// on the publisher's goroutine and does not block.
func (c *Cluster) onRemovedAsk(subject, reply string, _, _ []byte) {
	inc, err := parseIncarnation(strings.TrimPrefix(subject, removedPrefix))
	if err != nil || reply == "" {
		return
	}
	removed := false
	c.meta.View(func(st *meta.State) { removed = storeRemoved(st, inc) })
	if removed {
		c.publishSystem(reply, "", []byte("{}"))
	}
}
