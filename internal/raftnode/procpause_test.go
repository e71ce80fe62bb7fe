package raftnode

import (
	"strings"
	"testing"
	"time"
)

// A process stopped for 3 s during a round's fsync (trial 38's SIGSTOP)
// is named as paused, in the line and beside the fsync, rather than the
// fsync being blamed; a round that was slow on its own is not.
func TestRoundLineNamesProcessPause(t *testing.T) {
	const tick = 100 * time.Millisecond
	t0 := time.Unix(1000, 0)
	var p procPause
	for i := range 5 { // the ticker runs every 100 ms
		p.tick(t0.Add(time.Duration(i)*tick), tick)
	}
	start := t0.Add(450 * time.Millisecond)
	var took [len(roundPhases)]time.Duration
	took[0], took[1], took[4] = 2*time.Millisecond, 4*time.Millisecond, 3018*time.Millisecond // prepare, write, fsync
	d := 3024 * time.Millisecond
	end := start.Add(d)
	// The round ends as the process resumes, before the ticker ran: the
	// gap since its last tick (at 400 ms) is still open.
	pf, pt := p.within(start, end, tick)
	line := roundLine("the round loop's round", 1, start, d, took, "", pf, pt)
	// The pause counts from the tick that did not come (500 ms): the
	// round's first 50 ms ran.
	for _, want := range []string{
		"the round loop's round of 1 group took 3.024s, 2.974s of it with the whole process paused",
		", write 4ms, frames 0s",
		", fsync 3.018s (2.974s of it paused), send the rest 0s",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("open gap: %q lacks %q", line, want)
		}
	}
	// The ticker ran at the resume: the gap is recorded, and the same
	// round's line says the same.
	p.tick(end.Add(time.Millisecond), tick)
	pf2, pt2 := p.within(start, end, tick)
	if pf2 != pf || pt2 != pt {
		t.Errorf("recorded gap: paused %v-%v, the open gap said %v-%v", pf2, pt2, pf, pt)
	}
	// A slow fsync with the ticker running: no pause named.
	var q procPause
	for i := range 40 {
		q.tick(t0.Add(time.Duration(i)*tick), tick)
	}
	pf, pt = q.within(start, end, tick)
	line = roundLine("the round loop's round", 2, start, d, took, "", pf, pt)
	if strings.Contains(line, "paused") || !strings.Contains(line, "of 2 groups took 3.024s, prepare 2ms, write 4ms, frames 0s, send appends 0s, fsync 3.018s,") {
		t.Errorf("slow fsync: %q", line)
	}
	// No tick seen yet (a test's ticks): nothing known.
	var none procPause
	if pf, pt := none.within(start, end, tick); !pf.IsZero() || !pt.IsZero() {
		t.Errorf("no ticker: %v-%v", pf, pt)
	}
}

// The deposal line after a pause of the process says so beside the
// loop's longest pause.
func TestDeposalLineNamesProcessPause(t *testing.T) {
	list := []deposal{{group: 1, from: 2, to: 3}}
	line := deposalLine(list, 3012*time.Millisecond, 2*time.Second, 2*time.Second)
	if !strings.Contains(line, "lost the leadership of 1 group without a transfer") ||
		!strings.Contains(line, "longest pause in the last 2s: 3.012s, the whole process paused for 2s in that time") {
		t.Errorf("%q", line)
	}
	if line := deposalLine(list, time.Second, 2*time.Second, 0); strings.Contains(line, "paused for") {
		t.Errorf("no pause: %q", line)
	}
}
