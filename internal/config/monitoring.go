package config

import (
	"net"
	"strconv"
)

// Monitor is the HTTP monitoring listener (operations.md section 2.1).
// cairn reads these settings and does not serve monitoring yet; each key
// set in a file is warned about.
type Monitor struct {
	Host      string `key:"http"`           // "" = the client listen host
	Port      int    `key:"http_port"`      // -m; 0 = off
	HTTPSPort int    `key:"https_port"`     // 0 = off
	BasePath  string `key:"http_base_path"` // "" = "/"
}

// monitorIgnored is why the monitoring keys are warned about.
const monitorIgnored = "cairn has no HTTP monitoring yet (/varz, /healthz, ...)"

// monitoringKeys are nats-server v2.15.2's monitoring keys.
var monitoringKeys = keyTable{
	"http":           func(c *Config, it item, r *report) { monitorListen(c, it, r, &c.Monitor.Port) },
	"https":          func(c *Config, it item, r *report) { monitorListen(c, it, r, &c.Monitor.HTTPSPort) },
	"http_port":      func(c *Config, it item, r *report) { monitorPort(it, r, &c.Monitor.Port) },
	"monitor_port":   func(c *Config, it item, r *report) { monitorPort(it, r, &c.Monitor.Port) },
	"https_port":     func(c *Config, it item, r *report) { monitorPort(it, r, &c.Monitor.HTTPSPort) },
	"http_base_path": monitorBasePath,
}

// monitorListen reads "host:port" or a port, as the listen key.
func monitorListen(c *Config, it item, r *report, port *int) {
	switch v := it.val.(type) {
	case int64:
		monitorPort(it, r, port)
		return
	case string:
		host, p, err := net.SplitHostPort(v)
		if err != nil {
			r.errorf(it, "could not parse address string %q", v)
			return
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			r.errorf(it, "could not parse port %q", p)
			return
		}
		if n, ok := checkPort(it, int64(n), r); ok {
			c.Monitor.Host, *port = host, n
			r.ignored(it, monitorIgnored)
		}
	default:
		r.errorf(it, "expected port or host:port, got %T", v)
	}
}

func monitorPort(it item, r *report, port *int) {
	n, ok := r.int64Of(it)
	if !ok {
		return
	}
	if n, ok := checkPort(it, n, r); ok {
		*port = n
		if n != 0 {
			r.ignored(it, monitorIgnored)
		}
	}
}

func monitorBasePath(c *Config, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		c.Monitor.BasePath = s
		r.ignored(it, monitorIgnored)
	}
}
