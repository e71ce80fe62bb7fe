package raftnode

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/vfs"
)

// The longest pause is kept for 50 to 60 s (6 buckets of 10 s, 100
// ticks each at 100 ms), then forgotten.
func TestPauseWindowForgetsAfterAMinute(t *testing.T) {
	w := newPauseWindow(100 * time.Millisecond)
	if w.width != 100 {
		t.Fatalf("bucket width %d ticks, want 100", w.width)
	}
	w.note(150, 11)
	w.note(160, 3)
	for _, c := range []struct{ now, want uint64 }{{160, 11}, {599, 11}, {699, 11}, {700, 0}, {750, 0}} {
		if got := w.longest(c.now); got != c.want {
			t.Errorf("longest at tick %d: %d, want %d", c.now, got, c.want)
		}
	}
	w.note(700, 4)
	w.note(1290, 6)
	if got := w.longest(1290); got != 6 {
		t.Errorf("longest at tick 1290: %d, want 6 (the 4 at 700 is out)", got)
	}
}

// The stretch keeps the election timeout at least twice the longest
// pause, between 1 and 4 times the configured one; its ticks carry the
// remainder so that none is lost over many rounds.
func TestStretchForAndTicks(t *testing.T) {
	for _, c := range []struct {
		pause, want uint64
	}{{0, 1000}, {5, 1000}, {6, 1200}, {11, 2200}, {20, 4000}, {300, 4000}} {
		if got := stretchFor(c.pause, 10); got != c.want {
			t.Errorf("stretchFor(%d, 10) = %d, want %d", c.pause, got, c.want)
		}
	}
	var carry, total uint64
	for range 100 {
		total += stretchTicks(1, 2500, &carry)
	}
	if total != 40 {
		t.Errorf("100 node ticks at a stretch of 2.5: %d raft ticks, want 40", total)
	}
	if got := stretchTicks(7, 1000, &carry); got != 7 || carry != 0 {
		t.Errorf("no stretch: %d ticks, carry %d; want 7, 0", got, carry)
	}
}

// A stretch does not slow a failover once begun: after the loops paused
// (a stretch of 4), the followers of a leader whose server is reported
// gone forget it and elect at the configured pace. Without the exception
// for leaderless groups they would need up to four times as many ticks.
func TestStretchLeaderlessElectsAtPace(t *testing.T) {
	const trials = 40
	var took []int
	for range trials {
		c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
		c.addGroup(1, 0)
		c.elect(0, 1)
		c.tick(3)
		for range 25 { // every loop stalls: a stretch of 4
			for _, tn := range c.nodes {
				tn.n.Tick()
			}
		}
		c.tick(3)
		if s := c.nodes[1].n.Stretch(); s != maxStretch {
			t.Fatalf("stretch after a pause of 26 ticks: %d, want %d", s, maxStretch)
		}
		c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
		c.nodes[1].n.PeerUnreachable("s1")
		c.nodes[2].n.PeerUnreachable("s1")
		c.stabilize()
		ticks := 0
		for c.leader(1) < 0 {
			if ticks > 200 {
				t.Fatalf("no leader %d ticks after the leader's server was reported gone", ticks)
			}
			c.tick(1)
			ticks++
		}
		took = append(took, ticks)
	}
	slices.Sort(took)
	t.Logf("a new leader %d ticks (median) after the old one's server was reported gone", took[trials/2])
	if took[trials/2] > 6 { // split votes make a few take long
		t.Fatalf("a new leader %d ticks (median) after the old one's server was reported gone, want at most 6 (the configured election timeout: 10)", took[trials/2])
	}
}

// A peer server's silence counts as death only after the stretched
// election timeout: with a stretch of 4, 30 ticks without a beat are
// not enough (unstretched, 11 are), 45 are.
func TestStretchLiveness(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.tick(3)
	for range 25 {
		for _, tn := range c.nodes {
			tn.n.Tick()
		}
	}
	c.tick(2)
	n := c.nodes[1].n
	if n.Stretch() != maxStretch {
		t.Fatalf("stretch %d, want %d", n.Stretch(), maxStretch)
	}
	c.net.Cut(serverName(2), serverName(1)) // s2 no longer hears s3
	for i := 1; i <= 45; i++ {
		c.tick(1)
		if dead := n.isDead(serverName(2)); dead && i <= 30 || !dead && i == 45 {
			t.Fatalf("after %d silent ticks: dead %v", i, dead)
		}
	}
}

// A rise of the stretch is logged once it reaches 1.5 times the
// configured timeouts, not for the small rises of a loaded machine: a
// node's first rise to 1.2 was logged ("now 1.2s to 2.4s (1.2 times
// 1s)") where later ones of the same size were not.
func TestStretchLogged(t *testing.T) {
	var lines []string
	cfg := Config{TickInterval: 100 * time.Millisecond, ElectionTicks: 10,
		Infof: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}
	n := &Node{cfg: cfg, loopPauses: newPauseWindow(cfg.TickInterval)}
	n.stretch.Store(1000)
	n.noteLoopRound(100)
	n.noteLoopRound(106) // a pause of 6 ticks: 1.2 times
	if n.Stretch() != 1200 || len(lines) != 0 {
		t.Fatalf("stretch %d, lines %q; want 1200 and none", n.Stretch(), lines)
	}
	n.noteLoopRound(116) // 10 ticks: 2 times
	if n.Stretch() != 2000 || len(lines) != 1 || !strings.Contains(lines[0], "(2.0 times 1s)") {
		t.Fatalf("stretch %d, lines %q; want 2000 and one line of 2.0 times", n.Stretch(), lines)
	}
}
