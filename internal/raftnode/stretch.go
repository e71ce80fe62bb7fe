package raftnode

import (
	"fmt"
	"time"
)

// Election timeouts that follow the round loop's pauses (docs/cluster.md,
// "Election timeouts that follow the disk").
//
// One round loop serves every group of a server, and it waits for the
// WAL's write and fsync: a disk whose fsync takes a second holds every
// group's heartbeats and answers for that second. On a machine whose
// servers share a disk (or a starved CPU), every server stalls at once,
// and the first to resume would time out the others' leaders. The node
// therefore keeps the longest pause of its loop over the last minute, in
// ticks between the starts of two rounds of the loop, and stretches the
// raft clock of every group that has a leader by
//
//	stretch = clamp(2 × longest pause / ElectionTicks, 1, maxStretch)
//
// so that its election timeout, heartbeat interval and CheckQuorum
// window stay at least twice the longest recent pause (at most
// maxStretch times the configured ones). A group with no leader (a
// follower that forgot its leader's dead server, a candidate) ticks at
// the configured pace, so a failover, once begun, is as fast as before;
// so does a node whose loop never paused. The liveness of peer servers
// (no beat for more than ElectionTicks) stretches alike. Only the pause
// a node saw on its own loop counts: a leader whose disk alone is slow
// still loses its groups to followers with faster disks, which is what
// an operator wants.
//
// A pause is counted in ticks: a process stopped or starved of CPU
// misses its ticks as well as its rounds, and steps neither, so it has
// nothing to stretch.

// maxStretch bounds the stretch, in thousandths: four times the
// configured election timeout (4 to 8 s with the defaults; nats-server
// v2.15.2 elects after 4 to 9 s, raft.go minElectionTimeoutDefault).
const maxStretch = 4000

// pauseBuckets and pauseWindowTime: the longest pause is kept over the
// last minute, in 6 buckets of 10 s.
const (
	pauseBuckets    = 6
	pauseWindowTime = time.Minute
)

// pauseWindow keeps the longest pause (ticks) noted in each of the last
// pauseBuckets buckets of width ticks. A state machine: the caller gives
// the tick count.
type pauseWindow struct {
	width uint64               // ticks per bucket (at least 1)
	index [pauseBuckets]uint64 // the bucket number (tick / width) each slot holds
	max   [pauseBuckets]uint64 // its longest pause
}

// newPauseWindow returns a window of pauseWindowTime for ticks of tick.
func newPauseWindow(tick time.Duration) pauseWindow {
	w := uint64(pauseWindowTime / pauseBuckets / max(tick, time.Millisecond))
	return pauseWindow{width: max(w, 1)}
}

// note records a pause of gap ticks that ended at tick now.
func (w *pauseWindow) note(now, gap uint64) {
	b := now / w.width
	s := b % pauseBuckets
	if w.index[s] != b {
		w.index[s], w.max[s] = b, 0
	}
	w.max[s] = max(w.max[s], gap)
}

// longest returns the longest pause noted in the buckets of the last
// window before tick now (the current one included).
func (w *pauseWindow) longest(now uint64) uint64 {
	b := now / w.width
	var m uint64
	for s := range pauseBuckets {
		if w.index[s] <= b && b-w.index[s] < pauseBuckets {
			m = max(m, w.max[s])
		}
	}
	return m
}

// stretchFor returns the stretch, in thousandths, for a longest pause of
// pause ticks and an election timeout of election ticks.
func stretchFor(pause uint64, election int) uint64 {
	s := 2000 * pause / uint64(max(election, 1))
	return min(max(s, 1000), maxStretch)
}

// stretchTicks converts k ticks of the node into raft ticks of a group
// under stretch s (thousandths), carrying the remainder in *carry
// (thousandths of a node tick).
func stretchTicks(k, s uint64, carry *uint64) uint64 {
	if s <= 1000 {
		*carry = 0
		return k
	}
	acc := *carry + 1000*k
	steps := acc / s
	*carry = acc - steps*s
	return steps
}

// noteLoopRound records the start of a round of the loop at tick now:
// the ticks since the last one are a pause of the loop (a round's own
// length and the gap before the next). It updates the node's stretch
// and logs a rise of at least half the configured timeouts over the last
// one logged, or none (at most once per stretchLogEvery), or the return
// to none. Called under roundMu.
func (n *Node) noteLoopRound(now uint64) {
	if n.lastRoundTick != 0 && now > n.lastRoundTick {
		n.loopPauses.note(now, now-n.lastRoundTick)
	}
	n.lastRoundTick = now
	pause := n.loopPauses.longest(now)
	s := stretchFor(pause, n.cfg.ElectionTicks)
	old := n.stretch.Swap(s)
	switch {
	case s > old && s >= max(n.stretchLogged, 1000)+500 && now >= n.stretchLogAt: // from 1.5 times on
		n.stretchLogged, n.stretchLogAt = s, now+uint64(stretchLogEvery/max(n.cfg.TickInterval, time.Millisecond))
		n.cfg.Infof("raftnode: %s", stretchLine(pause, s, n.cfg.TickInterval, n.ElectionTimeout()))
	case s == 1000 && old > 1000:
		n.stretchLogged = 1000
		n.cfg.Infof("raftnode: election timeouts back to %s: the round loop paused no more than %s in the last %s",
			n.ElectionTimeout(), time.Duration(pause)*n.cfg.TickInterval, pauseWindowTime)
	}
}

// stretchLogEvery is the least time between two lines about a rise.
const stretchLogEvery = 10 * time.Second

// stretchLine formats the line about a rise of the stretch.
func stretchLine(pause, s uint64, tick, election time.Duration) string {
	e := time.Duration(s) * election / 1000
	return fmt.Sprintf("the round loop paused %s (a slow disk or CPU): election timeouts of groups with a leader are now %s to %s (%.1f times %s) until no such pause is seen for %s",
		time.Duration(pause)*tick, e, 2*e, float64(s)/1000, election, pauseWindowTime)
}

// Stretch returns the factor, in thousandths, by which the node's groups
// that have a leader now stretch their election timeout, heartbeats and
// CheckQuorum window (1000: none; at most maxStretch), from the round
// loop's longest pause in the last minute (docs/cluster.md, "Election
// timeouts that follow the disk").
func (n *Node) Stretch() uint64 { return max(n.stretch.Load(), 1000) }
