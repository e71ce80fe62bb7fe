package raftnode

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// infoLog records the lines a node logs at Infof.
type infoLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *infoLog) infof(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// matching returns the lines that contain s.
func (l *infoLog) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// deposedCluster is three nodes leading groups 1 and 2 from node 0,
// whose Infof lines log records.
func deposedCluster(t *testing.T, log *infoLog) *testCluster {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.DisableQuiescence = true
		if cfg.Server == serverName(0) {
			cfg.Infof = log.infof
		}
	})
	c.addGroup(1, 0)
	c.addGroup(2, 10)
	c.elect(0, 1)
	c.elect(0, 2)
	c.tick(5)
	return c
}

const lostLine = "lost the leadership"

// TestDeposedByHigherTermLogged: a leader whose round loop stalls (ticks
// pass, no round runs) while the other replicas elect a leader logs, in
// the round that learns the higher term, one line naming both groups,
// the higher term and how long the loop had not run. Before, nothing was
// logged (raft reports a higher term at its debug level): trial 35 lost
// four leaders at once under CPU load with no line saying why.
func TestDeposedByHigherTermLogged(t *testing.T) {
	var log infoLog
	c := deposedCluster(t, &log)
	term := c.status(0, 1).Term
	for range 40 { // node 0 stalls; nodes 1 and 2 go on
		c.nodes[0].n.Tick()
		for _, i := range []int{1, 2} {
			c.nodes[i].n.Tick()
			c.nodes[i].n.RunRound()
		}
		c.net.DeliverAll()
	}
	if got := log.matching(lostLine); len(got) != 0 {
		t.Fatalf("logged before node 0 ran a round: %q", got)
	}
	c.tick(3)
	if c.status(0, 1).Role == Leader || c.status(0, 2).Role == Leader {
		t.Fatal("node 0 still leads after the others elected")
	}
	got := log.matching(lostLine)
	if len(got) != 1 {
		t.Fatalf("lines %q, want one", got)
	}
	for _, want := range []string{"2 group(s)", "group 1 (term", "group 2 (term", fmt.Sprintf("term %d: a higher term", term), "had not run for 41 ticks"} { // 40 stalled, and the tick before the round {
		if !strings.Contains(got[0], want) {
			t.Fatalf("line %q lacks %q", got[0], want)
		}
	}
}

// TestDeposedByCheckQuorumLogged: a leader cut off from both followers
// steps down by CheckQuorum in its own term, and says so.
func TestDeposedByCheckQuorumLogged(t *testing.T) {
	var log infoLog
	c := deposedCluster(t, &log)
	for _, i := range []int{1, 2} {
		c.net.Partition(serverName(0), serverName(i))
	}
	for range 60 {
		if len(log.matching(lostLine)) > 0 {
			break
		}
		c.tick(1)
	}
	got := log.matching(lostLine)
	if len(got) == 0 || !strings.Contains(got[0], "CheckQuorum") {
		t.Fatalf("lines %q, want one naming CheckQuorum", got)
	}
}

// TestTransferNotLoggedAsDeposed: a leadership handed over on request is
// no deposal.
func TestTransferNotLoggedAsDeposed(t *testing.T) {
	var log infoLog
	c := deposedCluster(t, &log)
	if err := c.nodes[0].n.TransferLeader(1, 2); err != nil {
		t.Fatal(err)
	}
	c.tick(20)
	if l := c.leader(1); l != 1 {
		t.Fatalf("leader node %d after the transfer, want 1", l)
	}
	if got := log.matching(lostLine); len(got) != 0 {
		t.Fatalf("logged %q for a transfer", got)
	}
}
