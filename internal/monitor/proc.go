package monitor

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cpuSampler measures the process's CPU use between two /varz requests,
// as a percentage of one core (nats-server's pse reports the same unit),
// and its resident memory, from /proc/self/stat on Linux; elsewhere both
// are 0.
type cpuSampler struct {
	mu      sync.Mutex
	at      time.Time // when the last sample was taken
	cpu     float64   // CPU seconds used by the process at that time
	percent float64   // the last percentage computed
}

// minSampleGap is the shortest interval a percentage is computed over:
// scrapes closer together get the previous figure.
const minSampleGap = 500 * time.Millisecond

// sample returns the CPU percentage and the resident bytes.
func (c *cpuSampler) sample(start time.Time) (float64, int64) {
	cpu, rss, ok := readProcStat()
	if !ok {
		return 0, 0
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() { // first sample: the average since start
		c.at, c.cpu = start, 0
	}
	if gap := now.Sub(c.at); gap >= minSampleGap {
		c.percent = round1((cpu - c.cpu) / gap.Seconds() * 100)
		c.at, c.cpu = now, cpu
	}
	return c.percent, rss
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// clockTicks is the kernel's USER_HZ, which /proc reports CPU times in;
// 100 on every Linux platform Go supports.
const clockTicks = 100

// readProcStat reads the process's CPU seconds (user plus system) and
// resident bytes from /proc/self/stat.
func readProcStat() (cpu float64, rss int64, ok bool) {
	if runtime.GOOS != "linux" {
		return 0, 0, false
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, false
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3; utime 14, stime 15, rss 24 (pages).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return 0, 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	pages, err3 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	return float64(utime+stime) / clockTicks, pages * int64(os.Getpagesize()), true
}
