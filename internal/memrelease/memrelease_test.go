package memrelease

import (
	"runtime"
	"testing"
	"time"
)

const mib = 1 << 20

// feed gives d one sample a second from t0: held and allocated per
// second as the functions of the second say, and returns the seconds
// at which it said to release.
// After a release the heap holds 10 MiB until held says less.
func feed(d *Decider, t0 time.Time, secs int, held func(int) uint64, rate func(int) uint64) []int {
	var out []int
	var alloc uint64
	released := false
	for i := range secs {
		alloc += rate(i)
		h := held(i)
		if released {
			h = min(h, 10*mib)
		}
		s := Sample{At: t0.Add(time.Duration(i) * time.Second), Allocated: alloc, Held: h}
		if d.Observe(s) {
			out = append(out, i)
			released = true
			d.Released(Sample{At: s.At, Allocated: alloc, Held: 10 * mib})
		}
	}
	return out
}

func constant(v uint64) func(int) uint64 { return func(int) uint64 { return v } }

// After a burst (heap 300 MiB, 100 MiB/s allocated up to the sample of
// second 39) the process goes quiet (0.5 MiB/s): the Decider releases
// once, a whole Quiet (5 s) after the burst's last sample, and not again
// while nothing grows.
func TestReleaseOnceAfterBurst(t *testing.T) {
	d := NewDecider(Policy{})
	held := func(i int) uint64 {
		if i < 10 {
			return 10 * mib // before the burst
		}
		return 300 * mib // the burst and after (no collection runs)
	}
	rate := func(i int) uint64 {
		if i >= 10 && i < 40 {
			return 100 * mib
		}
		return mib / 2
	}
	if got := feed(d, time.Unix(1000, 0), 120, held, rate); len(got) != 1 || got[0] != 44 {
		t.Fatalf("released at seconds %v, want [44]", got)
	}
}

// A process under steady load never looks quiet, however much it holds.
func TestNoReleaseUnderLoad(t *testing.T) {
	d := NewDecider(Policy{})
	if got := feed(d, time.Unix(0, 0), 300, func(i int) uint64 {
		if i < 5 {
			return 8 * mib
		}
		return 400 * mib
	}, constant(40*mib)); len(got) != 0 {
		t.Fatalf("released at seconds %v under 40 MiB/s of allocation", got)
	}
}

// A quiet process whose heap stays within twice what it held at the
// start (or after the last release), plus MinGrowth, is left to the
// runtime: a million acks pending, 70 MiB live, cycling between 70 and
// 140 MiB held as the collector's goal allows.
func TestNoReleaseWithinTheGoal(t *testing.T) {
	d := NewDecider(Policy{})
	if got := feed(d, time.Unix(1, 0), 600, func(i int) uint64 {
		return 70*mib + uint64(i%100)*700<<10 // up to 139 MiB
	}, constant(700<<10)); len(got) != 0 {
		t.Fatalf("released at seconds %v a heap within its collection goal", got)
	}
}

// A release that leaves much live (a burst's Raft log, compacted about
// 20 s after it) is followed by one more FollowUp later if the process
// stayed quiet, and by no third; one that leaves little is not; a busy
// spell cancels the follow-up.
func TestFollowUp(t *testing.T) {
	t0 := time.Unix(0, 0)
	run := func(after uint64, busyAt int) []int {
		d := NewDecider(Policy{})
		var alloc uint64
		held := uint64(8 * mib)
		var out []int
		for i := range 200 {
			switch {
			case i >= 10 && i < 20: // the burst
				alloc += 100 * mib
				held = 300 * mib
			case i == busyAt:
				alloc += 200 * mib
			default:
				alloc += mib / 2
			}
			s := Sample{At: t0.Add(time.Duration(i) * time.Second), Allocated: alloc, Held: held}
			if d.Observe(s) {
				out = append(out, i)
				if len(out) == 1 {
					held = after // what the burst left live
				} else {
					held = 8 * mib
				}
				d.Released(Sample{At: s.At, Allocated: alloc, Held: held})
			}
		}
		return out
	}
	if got := run(80*mib, -1); len(got) != 2 || got[0] != 24 || got[1] != 54 {
		t.Errorf("80 MiB left live: released at seconds %v, want [24 54]", got)
	}
	if got := run(20*mib, -1); len(got) != 1 || got[0] != 24 {
		t.Errorf("20 MiB left live: released at seconds %v, want [24]", got)
	}
	if got := run(80*mib, 40); len(got) != 1 || got[0] != 24 {
		t.Errorf("80 MiB left live, busy at 40: released at seconds %v, want [24]", got)
	}
}

// The base follows the held heap down (the runtime's own collection and
// scavenger returned it): growth counts from the least held since.
func TestBaseFollowsHeapDown(t *testing.T) {
	d := NewDecider(Policy{})
	d.Released(Sample{At: time.Unix(0, 0), Held: 200 * mib})
	held := func(i int) uint64 {
		switch {
		case i < 20:
			return 8 * mib // the runtime returned it by itself
		case i < 30:
			return 120 * mib // a smaller burst
		}
		return 120 * mib
	}
	rate := func(i int) uint64 {
		if i >= 20 && i < 30 {
			return 50 * mib
		}
		return 0
	}
	// 120 MiB is past 2*8+64: released once the smaller burst is 5 s
	// over; with the base left at 200 it never would be.
	if got := feed(d, time.Unix(1, 0), 60, held, rate); len(got) != 1 || got[0] != 34 {
		t.Fatalf("released at seconds %v, want [34]", got)
	}
}

// The Decider waits for a whole Quiet of samples, however the samples
// are spaced.
func TestWaitsForAWholeQuiet(t *testing.T) {
	d := NewDecider(Policy{Quiet: 10 * time.Second})
	t0 := time.Unix(0, 0)
	if d.Observe(Sample{At: t0, Held: 8 * mib}) {
		t.Fatal("released on the first sample")
	}
	if d.Observe(Sample{At: t0.Add(9 * time.Second), Held: 300 * mib}) {
		t.Fatal("released before a whole Quiet")
	}
	if !d.Observe(Sample{At: t0.Add(10 * time.Second), Held: 300 * mib}) {
		t.Fatal("no release after a whole quiet Quiet")
	}
}

// A Releaser returns a quiet process's heap once it grew past the goal:
// 256 MiB made live, then dropped, leave the collector's goal at about
// 512 MiB, which the test's little allocation never reaches, so without
// the release the heap stays held until the runtime's forced collection,
// 2 minutes later.
func TestReleaserReturnsHeap(t *testing.T) {
	r := NewReleaser(Policy{Quiet: time.Second}, t.Logf)
	t0 := time.Unix(0, 0)
	if r.Step(t0) {
		t.Fatal("released before the burst")
	}
	burst := make([][]byte, 256)
	for i := range burst {
		burst[i] = make([]byte, mib)
		burst[i][0] = 1
	}
	runtime.GC() // the goal is now twice the 256 MiB live
	runtime.KeepAlive(burst)
	burst = nil
	if h := ReadSample(t0).Held; h < 200*mib {
		t.Fatalf("the burst holds only %d MiB", h>>20)
	}
	if r.Step(t0.Add(time.Second)) {
		t.Fatal("released while the burst allocated")
	}
	if !r.Step(t0.Add(2 * time.Second)) {
		t.Fatalf("no release after a quiet second, %d MiB held", ReadSample(t0).Held>>20)
	}
	if h := ReadSample(t0).Held; h > 64*mib {
		t.Fatalf("the heap still holds %d MiB after the release", h>>20)
	}
	if r.Step(t0.Add(10 * time.Second)) {
		t.Fatal("released again with nothing grown")
	}
}
