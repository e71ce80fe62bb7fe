package raftnode

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/logger"
)

// A leader that loses its leadership without asking (no transfer, step
// down or hand-over of this server's) was deposed: a higher term was
// heard (the other replicas elected a leader after not hearing from this
// one for an election timeout: a stalled round loop, a slow network) or
// its CheckQuorum found a majority silent (or a membership change removed
// it). raft says so only at its
// debug level for a higher term, so the node logs, at Config.Infof and
// once per round however many groups it lost in it, which groups, why,
// and the round loop's longest pause (between two rounds, or a round's
// own length) within two election timeouts: an operator can tell a
// stalled server from a lost network. Trial 35 of
// issue 15 lost a meta leader and three stream leaders at once under CPU
// load with nothing in the log.

// deposal is one group's leadership lost in a round (group.roleChange).
type deposal struct {
	group    GroupID
	label    string    // GroupConfig.Label ("": none)
	from, to uint64    // the term it led, the term after
	leader   ReplicaID // the leader raft knows after (0: none yet)
	server   ServerID  // the leader's server, if known
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

// pauseMax is the round loop's longest pause seen lately: a gap between
// two rounds or a round's own length, on Config.Now's clock (the ticks
// cannot tell: a stalled process misses them, and a long round counts
// none).
type pauseMax struct {
	at time.Time     // when it ended
	d  time.Duration // how long
}

// note records a pause of d ending at now; the pause kept is replaced
// by a longer one, or by any once it is older than window.
func (p *pauseMax) note(now time.Time, d time.Duration, window time.Duration) {
	if d >= p.d || now.Sub(p.at) > window {
		p.at, p.d = now, d
	}
}

// logDeposed logs the groups the round deposed, if any, with the round
// loop's longest pause within window before now.
func (n *Node) logDeposed(window time.Duration) {
	list := n.deposed.take()
	if len(list) == 0 {
		return
	}
	pause := n.pauses.d
	if n.cfg.Now().Sub(n.pauses.at) > window {
		pause = 0
	}
	now := time.Now()
	pf, pt := n.procPause.within(now.Add(-window-pause), now, n.cfg.TickInterval) // the whole of a pause that ended in the window
	n.cfg.Infof("raftnode: %s", deposalLine(list, pause, window, pt.Sub(pf)))
}

// deposalLine formats a round's deposals (logDeposed); paused is how long
// the whole process was paused within window (procpause.go), which
// explains the loop's pause rather than the round's steps.
func deposalLine(list []deposal, pause, window, paused time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "this server lost the leadership of %s without a transfer:", logger.Count(len(list), "group"))
	for i, d := range list {
		if i == maxDeposalsNamed {
			fmt.Fprintf(&b, " and %d more", len(list)-i)
			break
		}
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " group %d", d.group)
		if d.label != "" {
			fmt.Fprintf(&b, " (%s)", d.label)
		}
		fmt.Fprintf(&b, " %s", d.reason())
	}
	fmt.Fprintf(&b, "; the round loop's longest pause in the last %v: %v", window, pause.Round(time.Millisecond))
	if paused > 0 {
		fmt.Fprintf(&b, ", the whole process paused for %v in that time (its ticker stalled too: a SIGSTOP, a frozen VM or no CPU)", paused.Round(time.Millisecond))
	}
	return b.String()
}

// reason says why the group's leadership went.
func (d deposal) reason() string {
	if d.to > d.from {
		lead := "no leader yet"
		switch {
		case d.server != "":
			lead = "new leader on " + string(d.server) // a replica ID means nothing to an operator
		case d.leader != 0:
			lead = fmt.Sprintf("new leader replica %d (its server not known here)", d.leader)
		}
		return fmt.Sprintf("(term %d: a higher term %d was heard, %s)", d.from, d.to, lead)
	}
	if d.removed {
		return fmt.Sprintf("(term %d: removed from the group's voters)", d.from)
	}
	return fmt.Sprintf("(term %d: CheckQuorum heard from no majority for an election timeout)", d.from)
}

// serverOf returns the server of replica r as the group knows it ("":
// unknown, or r is 0). It takes g.mu.
func (g *group) serverOf(r ReplicaID) ServerID {
	if r == 0 {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.peers[r]
}
