package raftnode

import (
	"fmt"
	"strings"
	"sync"
)

// A leader that loses its leadership without asking (no transfer, step
// down or hand-over of this server's) was deposed: a higher term was
// heard (the other replicas elected a leader after not hearing from this
// one for an election timeout: a stalled round loop, a slow network) or
// its CheckQuorum found a majority silent (or a membership change removed
// it). raft says so only at its
// debug level for a higher term, so the node logs, at Config.Infof and
// once per round however many groups it lost in it, which groups, why,
// and how long its round loop had not run before the round (in ticks):
// an operator can tell a stalled server from a lost network. Trial 35 of
// issue 15 lost a meta leader and three stream leaders at once under CPU
// load with nothing in the log.

// deposal is one group's leadership lost in a round (group.roleChange).
type deposal struct {
	group    GroupID
	from, to uint64    // the term it led, the term after
	leader   ReplicaID // the leader raft knows after (0: none yet)
	removed  bool      // this replica is no voter of the group's configuration any more
}

// deposals collects a round's deposals from the groups, which run on the
// worker pool; RunRound logs them at the round's end (logDeposed).
type deposals struct {
	mu   sync.Mutex
	list []deposal
}

func (d *deposals) add(x deposal) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
}

func (d *deposals) take() []deposal {
	d.mu.Lock()
	defer d.mu.Unlock()
	list := d.list
	d.list = nil
	return list
}

// maxDeposalsNamed is how many groups a deposal line names; the rest are
// counted.
const maxDeposalsNamed = 5

// logDeposed logs the groups the round that started at tick began
// deposed, if any. idle is the number of ticks between the end of the
// previous round and the start of this one.
func (n *Node) logDeposed(idle uint64) {
	list := n.deposed.take()
	if len(list) == 0 {
		return
	}
	n.cfg.Infof("raftnode: %s", deposalLine(list, idle, n.cfg.TickInterval.String()))
}

// deposalLine formats a round's deposals (logDeposed).
func deposalLine(list []deposal, idle uint64, tick string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "this server lost the leadership of %d group(s) without a transfer:", len(list))
	for i, d := range list {
		if i == maxDeposalsNamed {
			fmt.Fprintf(&b, " and %d more", len(list)-i)
			break
		}
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " group %d %s", d.group, d.reason())
	}
	fmt.Fprintf(&b, "; the round loop had not run for %d ticks of %s before that round", idle, tick)
	return b.String()
}

// reason says why the group's leadership went.
func (d deposal) reason() string {
	if d.to > d.from {
		lead := "no leader yet"
		if d.leader != 0 {
			lead = fmt.Sprintf("leader replica %d", d.leader)
		}
		return fmt.Sprintf("(term %d: a higher term %d was heard, %s)", d.from, d.to, lead)
	}
	if d.removed {
		return fmt.Sprintf("(term %d: removed from the group's voters)", d.from)
	}
	return fmt.Sprintf("(term %d: CheckQuorum heard from no majority for an election timeout)", d.from)
}
