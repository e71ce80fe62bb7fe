package config

import (
	"fmt"
	"time"
)

// Process holds what concerns the server process rather than clients:
// its PID file, profiling, and lame duck mode (docs/configuration.md,
// Keys: pid_file, ports_file_dir, prof_port, lame_duck_*).
type Process struct {
	PidFile  string `key:"pid_file"`  // file the PID is written to at start (-P); "" = none
	ProfPort int    `key:"prof_port"` // Go pprof on 127.0.0.1:<port> (--profile); 0 = off, -1 = a free port
	// LameDuckDuration and LameDuckGracePeriod time lame duck mode
	// (SIGUSR2): clients are closed over the duration, after the grace
	// period.
	LameDuckDuration    time.Duration `key:"lame_duck_duration"`     // 0 = 2m; at least 30s
	LameDuckGracePeriod time.Duration `key:"lame_duck_grace_period"` // 0 = 10s
	// PortsFileDir is where <exe>_<pid>.ports is written at start, listing
	// the listeners' URLs as JSON, and removed at shutdown; "" = none.
	PortsFileDir string `key:"ports_file_dir"`
}

// processKeys are nats-server v2.15.2's process keys.
var processKeys = keyTable{
	"pid_file":               pidFileKey,
	"pidfile":                pidFileKey,
	"prof_port":              profPortKey,
	"prof_block_rate":        ignoredIfSet("cairn's profiler does not sample blocking"),
	"ports_file_dir":         portsFileDirKey,
	"lame_duck_duration":     lameDuckDurationKey,
	"lame_duck_grace_period": lameDuckGracePeriodKey,
}

func pidFileKey(c *Config, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		c.Process.PidFile = s
	}
}

func profPortKey(c *Config, it item, r *report) {
	n, ok := r.int64Of(it)
	if !ok {
		return
	}
	port, ok := checkPort(it, n, r)
	if ok {
		c.Process.ProfPort = port
	}
}

// lameDuckDurationKey checks the value as nats-server does: a duration
// string of at least 30 seconds.
func lameDuckDurationKey(c *Config, it item, r *report) {
	d, ok := lameDuckDuration(it, r)
	if !ok {
		return
	}
	if d < 30*time.Second {
		r.errorf(it, "invalid lame_duck_duration of %v, minimum is 30 seconds", d)
		return
	}
	c.Process.LameDuckDuration = d
}

func lameDuckGracePeriodKey(c *Config, it item, r *report) {
	d, ok := lameDuckDuration(it, r)
	if !ok {
		return
	}
	if d < 0 {
		r.errorf(it, "invalid lame_duck_grace_period, needs to be positive")
		return
	}
	c.Process.LameDuckGracePeriod = d
}

func portsFileDirKey(c *Config, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		c.Process.PortsFileDir = s
	}
}

// lameDuckDuration reads a lame duck setting: unlike other durations,
// nats-server takes only a string here.
func lameDuckDuration(it item, r *report) (time.Duration, bool) {
	s, ok := r.stringOf(it)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		r.errorf(it, "error parsing %s: %v", it.key, err)
		return 0, false
	}
	return d, true
}

// validate checks the grace period against the duration, with their
// defaults.
func (p Process) validate() error {
	d, g := p.LameDuckDuration, p.LameDuckGracePeriod
	if d == 0 {
		d = DefaultLameDuckDuration
	}
	if g == 0 {
		g = DefaultLameDuckGracePeriod
	}
	if g >= d {
		return fmt.Errorf("lame duck grace period (%v) should be strictly lower than lame duck duration (%v)", g, d)
	}
	return nil
}
