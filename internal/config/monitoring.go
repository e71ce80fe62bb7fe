package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Monitor is the HTTP monitoring listener (docs/monitoring.md):
// nats-server's http, http_port (monitor_port) and http_base_path keys and
// -m, https and https_port (-ms: served with the server's tls block),
// and max_closed_clients, the closed connections /connz keeps.
type Monitor struct {
	Host      string `key:"http"`           // "" = the client listen host
	Port      int    `key:"http_port"`      // -m; 0 = off, -1 = a free port
	HTTPSPort int    `key:"https_port"`     // -ms; 0 = off, -1 = a free port; needs the tls block, excludes http_port
	BasePath  string `key:"http_base_path"` // "" = "/"
	// MaxClosedClients is how many closed connections /connz?state=closed
	// keeps; 0 = the default (10000), negative none.
	MaxClosedClients int `key:"max_closed_clients"`
	// MetricsPrefix names the families of /metrics that follow the
	// prometheus-nats-exporter: "" gives gnatsd_* and jetstream_* (its
	// default), "nats" gives nats_* (its -prefix=nats, the Helm chart's).
	// cairn's own key, metrics_prefix.
	MetricsPrefix string `key:"metrics_prefix"`
	// Auth, when set, requires credentials on every monitoring endpoint
	// (cairn's own http_auth block; nats-server's monitoring has none).
	Auth MonitorAuth
}

// MonitorAuth is the http_auth block (docs/monitoring.md,
// "Authentication"): HTTP basic authentication with User and Password,
// and/or a bearer token; each secret plain or a bcrypt hash, as for
// clients. A request with either passes; any other gets 401 with
// WWW-Authenticate. HealthzNoAuth leaves /healthz open (Kubernetes
// probes send no credentials). The zero value requires nothing.
type MonitorAuth struct {
	User          string `key:"http_auth.user"`
	Password      string `key:"http_auth.password"`
	Token         string `key:"http_auth.token"`
	HealthzNoAuth bool   `key:"http_auth.healthz_no_auth"`
}

// Enabled reports whether the block asks for credentials.
func (a MonitorAuth) Enabled() bool { return a.User != "" || a.Token != "" }

// monitoringKeys are nats-server v2.15.2's monitoring keys.
var monitoringKeys = keyTable{
	"http":               func(c *Config, it item, r *report) { monitorListen(c, it, r, &c.Monitor.Port) },
	"https":              func(c *Config, it item, r *report) { monitorListen(c, it, r, &c.Monitor.HTTPSPort) },
	"http_port":          func(c *Config, it item, r *report) { monitorPort(it, r, &c.Monitor.Port) },
	"monitor_port":       func(c *Config, it item, r *report) { monitorPort(it, r, &c.Monitor.Port) },
	"https_port":         func(c *Config, it item, r *report) { monitorPort(it, r, &c.Monitor.HTTPSPort) },
	"http_base_path":     monitorBasePath,
	"max_closed_clients": maxClosedClientsKey,
	"metrics_prefix":     metricsPrefixKey,
	"http_auth":          httpAuthKey,
}

// httpAuthKeys are the keys of the http_auth block.
var httpAuthKeys = keyTable{
	"user":            func(c *Config, it item, r *report) { setString(&c.Monitor.Auth.User, it, r) },
	"username":        func(c *Config, it item, r *report) { setString(&c.Monitor.Auth.User, it, r) },
	"password":        func(c *Config, it item, r *report) { setString(&c.Monitor.Auth.Password, it, r) },
	"pass":            func(c *Config, it item, r *report) { setString(&c.Monitor.Auth.Password, it, r) },
	"token":           func(c *Config, it item, r *report) { setString(&c.Monitor.Auth.Token, it, r) },
	"healthz_no_auth": func(c *Config, it item, r *report) { setBool(&c.Monitor.Auth.HealthzNoAuth, it, r) },
}

// httpAuthKey reads the http_auth block: a user needs a password and a
// password a user, and the block must ask for something.
func httpAuthKey(c *Config, it item, r *report) {
	m, ok := r.mapOf(it, "http_auth")
	if !ok {
		return
	}
	c.Monitor.Auth = MonitorAuth{}
	block(c, m, it, httpAuthKeys, r)
	a := &c.Monitor.Auth
	switch {
	case a.User != "" && a.Password == "":
		r.errorf(it, "http_auth: user %q has no password", a.User)
	case a.User == "" && a.Password != "":
		r.errorf(it, "http_auth: a password needs a user")
	case !a.Enabled():
		r.errorf(it, "http_auth: set user and password, or token")
	}
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
	}
}

func monitorBasePath(c *Config, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		c.Monitor.BasePath = s
	}
}

func maxClosedClientsKey(c *Config, it item, r *report) {
	if n, ok := r.int64Of(it); ok {
		c.Monitor.MaxClosedClients = int(n)
	}
}

// metricsPrefixKey reads cairn's metrics_prefix: a Prometheus metric name
// prefix (letters, digits and underscores, not starting with a digit).
func metricsPrefixKey(c *Config, it item, r *report) {
	s, ok := r.stringOf(it)
	if !ok {
		return
	}
	if !validMetricPrefix(s) {
		r.errorf(it, "invalid metrics_prefix %q: use letters, digits and underscores, not starting with a digit", s)
		return
	}
	c.Monitor.MetricsPrefix = s
}

// validMetricPrefix reports whether s may begin a Prometheus metric name.
func validMetricPrefix(s string) bool {
	for i, ch := range s {
		switch {
		case ch == '_', ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z':
		case ch >= '0' && ch <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// validate checks the monitoring ports against each other and the TLS
// block, with nats-server v2.15.2's texts (server.go StartMonitoring).
func (m Monitor) validate(t *TLS) error {
	switch {
	case m.Port != 0 && m.HTTPSPort != 0:
		return fmt.Errorf("can't specify both HTTP (%v) and HTTPs (%v) ports", m.Port, m.HTTPSPort)
	case m.HTTPSPort != 0 && !t.Enabled():
		return errors.New("TLS cert and key required for HTTPS")
	}
	return nil
}
