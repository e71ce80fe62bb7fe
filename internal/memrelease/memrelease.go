// Package memrelease returns to the operating system the heap a burst
// left behind, once the process is quiet again (docs/memory.md, "Memory
// after bursts").
//
// Go's collector starts a cycle when the heap reaches twice what was live
// at the end of the last one (GOGC=100), and its background scavenger
// returns free pages only down to about that goal. After a burst the goal
// stays where the burst left it: the little a quiet server allocates
// takes minutes to reach it, so no cycle runs until the runtime forces one
// (every 2 minutes), and the burst's garbage and free pages stay in the
// process's RSS until then (a follower of a burst to an R3 stream held
// 280 MB for 2 minutes, with less than 10 MB live). A Decider notices
// that the heap grew well past twice what it held after the last release
// and that allocation has since dropped to almost nothing; Run then calls
// debug.FreeOSMemory (a collection, then every free page returned), once
// more 30 s later if much was still live then (a replicated stream's
// Raft log is compacted about 20 s after a burst), and waits for the next
// such growth. A server under load allocates too much to look quiet, and
// a quiet one whose live heap is large stays within twice it between
// collections: past the release that follows its load and that release's
// follow-up, neither is collected more often than the runtime would.
//
// nats-server v2.15.2 does not do this: it leaves the heap to the runtime
// (neither GOGC, a memory limit, nor FreeOSMemory).
package memrelease

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Policy is when a Decider releases; zero fields take the defaults.
type Policy struct {
	// Quiet is how long allocation must have stayed low (DefaultQuiet).
	Quiet time.Duration
	// MinGrowth is how far the held heap must have grown past twice its
	// size after the last release (DefaultMinGrowth): up to twice it, it
	// is what the collector's goal allows a heap that size.
	MinGrowth uint64
	// QuietShare: the process is quiet while it allocated less than
	// Held/QuietShare bytes in the last Quiet (DefaultQuietShare).
	QuietShare uint64
	// FollowUp is how long after a release that left at least
	// MinGrowth/2 held one more comes, if the process stayed quiet
	// (DefaultFollowUp): what a burst leaves live when it ends (a
	// replicated stream's Raft log until the replicas' next
	// checkpoints compact it, about 20 s later: docs/cluster.md, "Idle
	// groups and the WAL") is garbage soon after, and with the goal at
	// twice it no collection would run for minutes.
	FollowUp time.Duration
}

// The defaults of Policy.
const (
	DefaultQuiet      = 5 * time.Second
	DefaultMinGrowth  = 64 << 20
	DefaultQuietShare = 16
	DefaultFollowUp   = 30 * time.Second
)

func (p Policy) withDefaults() Policy {
	if p.Quiet <= 0 {
		p.Quiet = DefaultQuiet
	}
	if p.MinGrowth == 0 {
		p.MinGrowth = DefaultMinGrowth
	}
	if p.QuietShare == 0 {
		p.QuietShare = DefaultQuietShare
	}
	if p.FollowUp <= 0 {
		p.FollowUp = DefaultFollowUp
	}
	return p
}

// Sample is one reading of the heap (ReadSample).
type Sample struct {
	At time.Time
	// Allocated is the bytes allocated on the heap since the process
	// started (runtime/metrics /gc/heap/allocs:bytes), never less than an
	// earlier sample's.
	Allocated uint64
	// Held is the heap memory the process holds and has not returned:
	// objects, live or not yet swept, unused space in their spans, and
	// free pages (/memory/classes/heap/{objects,unused,free}:bytes).
	Held uint64
}

// Decider decides, from a Sample at a time in time order, when to return
// the heap. It does no I/O and reads no clock: the samples carry their
// time. Not safe for concurrent use.
type Decider struct {
	p       Policy
	base    uint64 // Held after the last release, or the least held since
	hasBase bool
	window  []Sample // the samples of the last Quiet, and the one before
	// followUp is when the follow-up of the last release is due (zero:
	// none); following says Observe asked for it.
	followUp  time.Time
	following bool
}

// NewDecider returns a Decider with Policy p.
func NewDecider(p Policy) *Decider { return &Decider{p: p.withDefaults()} }

// Observe takes the next sample and reports whether to release now. The
// samples of the last Policy.Quiet must show less than
// Held/Policy.QuietShare allocated (a busy sample cancels a follow-up),
// and either the heap held is more than Policy.MinGrowth past twice what
// it held after the last release (or the least it held since), or a
// follow-up is due (Policy.FollowUp).
func (d *Decider) Observe(s Sample) bool {
	if !d.hasBase || s.Held < d.base {
		d.base, d.hasBase = s.Held, true
	}
	d.window = append(d.window, s)
	from := s.At.Add(-d.p.Quiet)
	k := 0
	for k+1 < len(d.window) && !d.window[k+1].At.After(from) {
		k++
	}
	d.window = append(d.window[:0], d.window[k:]...)
	first := d.window[0]
	if first.At.After(from) {
		return false // not a whole Quiet seen yet
	}
	if (s.Allocated-first.Allocated)*d.p.QuietShare >= s.Held {
		d.followUp = time.Time{} // busy: the next burst's release will do
		return false
	}
	if s.Held >= 2*d.base+d.p.MinGrowth {
		d.following = false
		return true
	}
	d.following = !d.followUp.IsZero() && !s.At.Before(d.followUp)
	return d.following
}

// Released records the sample read after a release: its Held is the new
// base, a whole Quiet must pass again before the next release, and
// unless this one was a follow-up, one is due after Policy.FollowUp if
// at least MinGrowth/2 is still held.
func (d *Decider) Released(s Sample) {
	d.base, d.hasBase = s.Held, true
	d.window = append(d.window[:0], s)
	d.followUp = time.Time{}
	if !d.following && s.Held >= d.p.MinGrowth/2 {
		d.followUp = s.At.Add(d.p.FollowUp)
	}
	d.following = false
}

// metric names ReadSample reads, in this order.
var names = []string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// ReadSample reads the runtime's heap at now (runtime/metrics; no
// stop-the-world).
func ReadSample(now time.Time) Sample {
	ms := make([]metrics.Sample, len(names))
	for i, n := range names {
		ms[i].Name = n
	}
	metrics.Read(ms)
	v := func(i int) uint64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return ms[i].Value.Uint64()
	}
	return Sample{At: now, Allocated: v(0), Held: v(1) + v(2) + v(3)}
}

// Logf logs a line (the server's Debugf).
type Logf func(format string, v ...any)

// Releaser reads the heap and returns it when its Decider says so.
type Releaser struct {
	d    *Decider
	logf Logf
}

// NewReleaser returns a Releaser with Policy p that logs each release
// with logf (nil: not logged).
func NewReleaser(p Policy, logf Logf) *Releaser {
	return &Releaser{d: NewDecider(p), logf: logf}
}

// Step reads a Sample taken at now and, when the Decider says so, calls
// debug.FreeOSMemory (a collection, then every free page returned; the
// time it takes is logged) and reports true.
func (r *Releaser) Step(now time.Time) bool {
	before := ReadSample(now)
	if !r.d.Observe(before) {
		return false
	}
	start, cpu := time.Now(), releaseCPU()
	debug.FreeOSMemory()
	took, cpu := time.Since(start), releaseCPU()-cpu
	after := ReadSample(now.Add(took))
	r.d.Released(after)
	if r.logf != nil {
		r.logf("memory: heap returned to the system: %d MiB held before, %d MiB after (%v, %.0f ms of CPU)",
			before.Held>>20, after.Held>>20, took.Round(time.Millisecond), cpu*1000)
	}
	return true
}

// releaseCPU returns the runtime's estimate of the CPU seconds spent so
// far collecting and returning memory (runtime/metrics
// /cpu/classes/gc/total and /cpu/classes/scavenge/total): what a release
// costs, whatever else runs beside it.
func releaseCPU() float64 {
	ms := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/scavenge/total:cpu-seconds"}}
	metrics.Read(ms)
	var sum float64
	for _, m := range ms {
		if m.Value.Kind() == metrics.KindFloat64 {
			sum += m.Value.Float64()
		}
	}
	return sum
}

// Run steps a Releaser with Policy p every interval until stop is
// closed. One goroutine runs it per process (cmd/cairn).
func Run(stop <-chan struct{}, interval time.Duration, p Policy, logf Logf) {
	r := NewReleaser(p, logf)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			r.Step(now)
		}
	}
}
