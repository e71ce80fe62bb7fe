package raftnode

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/logger"
)

// A round that took seconds may not have been slow at all: the whole
// process may have been paused meanwhile (SIGSTOP, a frozen VM, a
// starved CPU), and its line then blamed whichever step the pause fell
// in (trial 38: a server stopped for 3 s logged "fsync 3.018s" and "the
// round loop's longest pause in the last 2s: 3.012s"). The node's ticker
// goroutine, which only waits for its time.Ticker, tells them apart at
// the cost of a clock read per tick: a slow fsync or a long step blocks
// the round loop, not the ticker; a paused process stops both. procPause
// keeps when the ticker last ran and its last gap between two ticks much
// longer than TickInterval; the slow round's line and the deposal line
// say how much of their time the process was paused, and in which
// steps.

// procPauseMin is the least gap between two ticks, beyond the tick
// interval, taken as the process paused.
const procPauseMin = 250 * time.Millisecond

// procPause is the ticker's record (Node.procPause). Only the real
// ticker notes ticks (Config.Ticks, a test's channel, does not).
type procPause struct {
	last     atomic.Int64 // unix ns of the ticker's last tick (0: none yet)
	mu       sync.Mutex
	from, to int64 // the last gap (unix ns) longer than procPauseMin: the process paused
}

// tick notes a tick at now; interval is the ticker's.
func (p *procPause) tick(now time.Time, interval time.Duration) {
	t := now.UnixNano()
	last := p.last.Swap(t)
	if last == 0 || t-last-int64(interval) < int64(procPauseMin) {
		return
	}
	p.mu.Lock()
	p.from, p.to = last+int64(interval), t
	p.mu.Unlock()
}

// within returns the span of [from, to] the process was paused: its
// overlap with the last gap, or with the one still open when the ticker
// has not run for longer than procPauseMin (the round may end as the
// process resumes, before the ticker's goroutine runs). Zero when none.
func (p *procPause) within(from, to time.Time, interval time.Duration) (pf, pt time.Time) {
	last := p.last.Load()
	if last == 0 {
		return time.Time{}, time.Time{}
	}
	p.mu.Lock()
	gf, gt := p.from, p.to
	p.mu.Unlock()
	if open := last + int64(interval); to.UnixNano()-open >= int64(procPauseMin) && open > gt {
		gf, gt = open, to.UnixNano()
	}
	f, t := max(gf, from.UnixNano()), min(gt, to.UnixNano())
	if gt == 0 || t <= f {
		return time.Time{}, time.Time{}
	}
	return time.Unix(0, f), time.Unix(0, t)
}

// roundLine formats a slow round's line: where (the loop's round, or a
// group's beside it), its groups, its length d from start, each step's
// time (roundPhases order), skipped (the slow rounds not logged since
// the last line), and the span [pf, pt) of it the process was paused
// (zero: not), named in the line and beside each step it fell in.
func roundLine(where string, groups int, start time.Time, d time.Duration, took [len(roundPhases)]time.Duration, skipped string, pf, pt time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %s took %v", where, logger.Count(groups, "group"), d.Round(time.Millisecond))
	paused := pt.Sub(pf)
	if paused > 0 {
		fmt.Fprintf(&b, ", %v of it with the whole process paused (its ticker stalled too: a SIGSTOP, a frozen VM or no CPU), not a slow step", paused.Round(time.Millisecond))
	}
	at := start
	for k, name := range roundPhases {
		end := at.Add(took[k])
		fmt.Fprintf(&b, ", %s %v", name, took[k].Round(time.Millisecond))
		if paused > 0 {
			if o := minTime(end, pt).Sub(maxTime(at, pf)); o >= time.Millisecond {
				fmt.Fprintf(&b, " (%v of it paused)", o.Round(time.Millisecond))
			}
		}
		at = end
	}
	b.WriteString(skipped)
	return b.String()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
