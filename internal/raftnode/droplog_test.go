package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A proposal raft drops past MaxUncommittedBytes leaves a log line in a
// group that fails it (a replicated consumer's: its log sees the
// dropped batch, consumerlog Dropped), one per dropLogEvery however many
// batches raft drops, so an operator sees it; in a group that holds such
// proposals (a stream's, HoldPastUncommitted) the drop is routine and
// leaves none. Before, the line was silenced in every group.
func TestUncommittedDropLogged(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			var mu sync.Mutex
			var lines []string
			c := newTestCluster(t, 3, func(cfg *Config) {
				cfg.MaxUncommittedBytes = 16 << 10
				cfg.Logf = func(f string, v ...any) {
					mu.Lock()
					defer mu.Unlock()
					if s := fmt.Sprintf(f, v...); strings.Contains(s, uncommittedDrop) {
						lines = append(lines, s)
					}
				}
			})
			for i, tn := range c.nodes {
				tn.sms[1] = newHashSM(tn.fs, "sm", 1)
				gc := GroupConfig{ID: 1, Replica: ReplicaID(i + 1), Incarnation: tn.n.Incarnation(), Peers: c.peers(0), HoldPastUncommitted: hold}
				if err := tn.n.AddGroup(gc, tn.sms[1]); err != nil {
					t.Fatal(err)
				}
			}
			c.elect(0, 1)
			for _, s := range []ServerID{"s2", "s3"} {
				c.net.Partition("s1", s)
			}
			dropped := 0
			for range 3 { // three bursts past the limit, each in rounds of its own
				var ps []*Proposal
				for i := range 20 {
					p, err := c.nodes[0].n.Propose(1, bytes.Repeat([]byte{byte('a' + i)}, 1<<10))
					if err != nil {
						t.Fatal(err)
					}
					ps = append(ps, p)
				}
				c.stabilize()
				for _, p := range ps {
					select {
					case <-p.Done():
						if _, err := p.Result(); errors.Is(err, ErrDropped) {
							dropped++
						}
					default:
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case hold && (dropped != 0 || len(lines) != 0):
				t.Errorf("held: %d proposals dropped, lines %q; want none", dropped, lines)
			case !hold && (dropped < 21 || len(lines) != 1):
				t.Errorf("%d proposals dropped, lines %q; want more than one burst's and one line", dropped, lines)
			}
		})
	}
}

// dropLog logs the first drop, then at most one every dropLogEvery with
// how many were not logged since.
func TestDropLogEvery(t *testing.T) {
	now := time.Unix(1000, 0)
	d := &dropLog{now: func() time.Time { return now }}
	var got []string
	l := raftLogger{logf: func(f string, v ...any) { got = append(got, fmt.Sprintf(f, v...)) }, group: 7, drops: d}
	drop := "%x appending new entries to log would exceed uncommitted entry size limit; dropping proposal"
	for _, step := range []time.Duration{0, time.Second, 30 * time.Second, 29 * time.Second, time.Second} {
		now = now.Add(step)
		l.Warningf(drop, 2)
	}
	l.Warningf("%x something else", 2)
	want := []string{
		"raft group 7: 2 appending new entries to log would exceed uncommitted entry size limit; dropping proposal (the proposal fails; logged at most every 1m0s)",
		"raft group 7: 2 appending new entries to log would exceed uncommitted entry size limit; dropping proposal (the proposal fails; logged at most every 1m0s, 2 more since the last)",
		"raft group 7: 2 something else",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	held := raftLogger{logf: func(f string, v ...any) { t.Errorf("logged "+f, v...) }, group: 7, drops: newDropLog(true)}
	held.Warningf(drop, 2)
}

// raft's line about a leader CheckQuorum made a follower is debug only:
// raftnode logs the deposal itself at [INF] with its reason (trial 36
// saw 14 of them at [WRN] from one server stopped with its peers);
// raft's other warnings stay warnings.
func TestQuorumStepDownLineIsDebug(t *testing.T) {
	var logged, debugged []string
	l := raftLogger{
		logf:   func(f string, v ...any) { logged = append(logged, fmt.Sprintf(f, v...)) },
		debugf: func(f string, v ...any) { debugged = append(debugged, fmt.Sprintf(f, v...)) },
		group:  29,
	}
	l.Warningf("%x stepped down to follower since quorum is not active", uint64(2))
	l.Warningf("%x something else", uint64(2))
	if len(debugged) != 1 || debugged[0] != "raft group 29: 2 stepped down to follower since quorum is not active" {
		t.Errorf("debug lines %q", debugged)
	}
	if len(logged) != 1 || logged[0] != "raft group 29: 2 something else" {
		t.Errorf("logged lines %q", logged)
	}
	l.debugf = nil
	l.Warningf("%x stepped down to follower since quorum is not active", uint64(2)) // dropped, no panic
}

// raft's line about a campaign asked of a learner (a wiped server's new
// replica being caught up) is debug only: raft ignores the campaign
// (trial 38 saw it at [WRN]).
func TestUnpromotableLineIsDebug(t *testing.T) {
	var logged, debugged []string
	l := raftLogger{
		logf:   func(f string, v ...any) { logged = append(logged, fmt.Sprintf(f, v...)) },
		debugf: func(f string, v ...any) { debugged = append(debugged, fmt.Sprintf(f, v...)) },
		group:  3,
	}
	l.Warningf("%x is unpromotable and can not campaign", uint64(4))
	if len(logged) != 0 || len(debugged) != 1 || debugged[0] != "raft group 3: 4 is unpromotable and can not campaign" {
		t.Errorf("logged %q, debug %q", logged, debugged)
	}
}
