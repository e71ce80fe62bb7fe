package config

import (
	"fmt"
	"time"
)

// Limits are the limits of the client protocol (docs/protocol.md section 1.9).
// Zero values mean nats-server's defaults, which the server fills in.
type Limits struct {
	MaxPayload     int           `key:"max_payload"`       // bytes per message payload; 0 = 1 MiB
	MaxPending     int64         `key:"max_pending"`       // outbound bytes buffered per client before it is a slow consumer; 0 = 64 MiB
	MaxControlLine int           `key:"max_control_line"`  // bytes per protocol line; 0 = 4096
	MaxConnections int           `key:"max_connections"`   // open client connections; 0 = 65536; negative = none accepted (the file's max_connections: 0)
	MaxSubs        int           `key:"max_subscriptions"` // subscriptions per client connection; 0 = no limit
	PingInterval   time.Duration `key:"ping_interval"`     // idle time before the server PINGs a client; 0 = 2m
	MaxPingsOut    int           `key:"ping_max"`          // unanswered PINGs before 'Stale Connection'; 0 = 2
	WriteDeadline  time.Duration `key:"write_deadline"`    // longest a socket write may block; 0 = 10s
}

// limitKeys are the protocol limit keys of nats-server v2.15.2
// (server/opts.go processConfigFileLine).
var limitKeys = keyTable{
	"max_payload":             maxPayloadKey,
	"max_pending":             maxPendingKey,
	"max_control_line":        maxControlLineKey,
	"max_connections":         maxConnectionsKey,
	"max_conn":                maxConnectionsKey,
	"ping_interval":           pingIntervalKey,
	"ping_max":                pingMaxKey,
	"write_deadline":          writeDeadlineKey,
	"write_timeout":           writeTimeoutKey,
	"max_subscriptions":       maxSubsKey,
	"max_subs":                maxSubsKey,
	"max_sub_tokens":          unsupportedYet,
	"max_subscription_tokens": unsupportedYet,
}

func maxPayloadKey(c *Config, it item, r *report) {
	n, ok := r.intOf(it)
	if !ok {
		return
	}
	c.Limits.MaxPayload = n
}

func maxPendingKey(c *Config, it item, r *report) {
	n, ok := r.int64Of(it)
	if !ok {
		return
	}
	if n < 0 {
		r.errorf(it, "%s value can not be negative", it.key)
		return
	}
	c.Limits.MaxPending = n
}

func maxControlLineKey(c *Config, it item, r *report) {
	if n, ok := r.intOf(it); ok {
		c.Limits.MaxControlLine = n
	}
}

// maxConnectionsKey: an explicit 0 refuses every client in nats-server
// (it becomes -1), a trap worth a warning.
func maxConnectionsKey(c *Config, it item, r *report) {
	n, ok := r.int64Of(it)
	if !ok {
		return
	}
	if n > 1<<31-1 {
		r.errorf(it, "%s value is too big", it.key)
		return
	}
	if n <= 0 {
		r.warnf(it, "%s %d refuses every client connection (as in nats-server)", it.key, n)
		n = -1
	}
	c.Limits.MaxConnections = int(n)
}

// maxSubsKey is the subscriptions a client connection may hold, 0 for no
// limit (nats-server v2.15.2 opts.go max_subscriptions, client.go
// applyAccountLimits). A negative value is kept: as in nats-server, it
// leaves a client no subscription at all, and closes it at CONNECT.
func maxSubsKey(c *Config, it item, r *report) {
	n, ok := r.int64Of(it)
	if !ok {
		return
	}
	if n > 1<<31-1 {
		r.errorf(it, "%s value is too big", it.key)
		return
	}
	c.Limits.MaxSubs = int(max(n, -1<<31))
}

func pingIntervalKey(c *Config, it item, r *report) {
	if d, ok := positiveDuration(it, r); ok {
		c.Limits.PingInterval = d
	}
}

func pingMaxKey(c *Config, it item, r *report) {
	if n, ok := r.intOf(it); ok {
		c.Limits.MaxPingsOut = n
	}
}

func writeDeadlineKey(c *Config, it item, r *report) {
	if d, ok := positiveDuration(it, r); ok {
		c.Limits.WriteDeadline = d
	}
}

// positiveDuration reads a duration that must not be negative (0 is the
// default).
func positiveDuration(it item, r *report) (time.Duration, bool) {
	d, ok := r.durationOf(it)
	if ok && d < 0 {
		r.errorf(it, "%s can not be negative", it.key)
		return 0, false
	}
	return d, ok
}

// writeTimeoutKey: cairn closes a client whose write times out, which is
// nats-server's "default" (and "close") policy for clients; "retry" keeps
// the connection, which cairn does not do.
func writeTimeoutKey(_ *Config, it item, r *report) {
	s, ok := r.stringOf(it)
	if !ok {
		return
	}
	switch s {
	case "default", "close":
	case "retry":
		r.errorf(it, "write_timeout %q is not supported by cairn yet: a client whose write times out is closed", s)
	default:
		r.errorf(it, "write_timeout must be 'default', 'close' or 'retry'")
	}
}

// validate checks max_payload against max_pending, with their defaults.
func (l Limits) validate() error {
	payload, pending := int64(l.MaxPayload), l.MaxPending
	if payload == 0 {
		payload = DefaultMaxPayload
	}
	if pending == 0 {
		pending = DefaultMaxPending
	}
	if payload > pending {
		return fmt.Errorf("max_payload (%d) cannot be higher than max_pending (%d)", payload, pending)
	}
	return nil
}
