package server

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/protocol"
)

// Limits are the options a running server can change (SetLimits), for a
// configuration reload: those nats-server v2.15.2 reloads
// (server/reload.go: max_payload, max_control_line, max_connections,
// ping_interval, ping_max, write_deadline, client_advertise) and
// max_pending, which nats-server does not reload. Zero values mean the
// defaults of Options.
type Limits struct {
	MaxPayload      int
	MaxControlLine  int
	MaxPending      int64
	MaxConnections  int // negative: refuse every new client
	PingInterval    time.Duration
	MaxPingsOut     int
	WriteDeadline   time.Duration
	ClientAdvertise string
}

// limits are the Limits in force, defaults filled in. A Server keeps the
// current ones behind an atomic pointer: any goroutine reads them without
// a lock, SetLimits replaces them whole.
type limits Limits

// limitsOf returns the limits of validated options.
func limitsOf(o *Options) *limits {
	return &limits{
		MaxPayload:      o.MaxPayload,
		MaxControlLine:  o.MaxControlLine,
		MaxPending:      o.MaxPending,
		MaxConnections:  o.MaxConnections,
		PingInterval:    o.PingInterval,
		MaxPingsOut:     o.MaxPingsOut,
		WriteDeadline:   o.WriteDeadline,
		ClientAdvertise: o.ClientAdvertise,
	}
}

// limits returns the limits in force.
func (s *Server) limits() *limits { return s.lim.Load() }

// parserConfig is the protocol parser's share of the limits.
func (l *limits) parserConfig() protocol.Config {
	return protocol.Config{MaxControlLine: l.MaxControlLine, MaxPayload: l.MaxPayload}
}

// SetLimits changes the limits of a running server, as nats-server applies
// them on a reload: new connections get the new INFO (max_payload, and
// host and port from client_advertise); connected clients get the new
// max_payload, max_control_line and max_pending from their next read or
// delivery on, and the new ping settings from their next PING; when
// max_connections is lowered below the number of clients, the newest are
// closed with -ERR 'maximum connections exceeded'. It returns an error
// wrapping ErrInvalidOptions, and changes nothing, when the limits are
// invalid (Options.Validate).
func (s *Server) SetLimits(l Limits) error {
	o := s.opts
	o.MaxPayload, o.MaxControlLine, o.MaxPending = l.MaxPayload, l.MaxControlLine, l.MaxPending
	o.MaxConnections, o.PingInterval, o.MaxPingsOut = l.MaxConnections, l.PingInterval, l.MaxPingsOut
	o.WriteDeadline, o.ClientAdvertise = l.WriteDeadline, l.ClientAdvertise
	if err := o.Validate(); err != nil {
		return err
	}
	nl := limitsOf(&o)
	s.mu.Lock()
	s.lim.Store(nl)
	clients := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	for _, c := range clients {
		c.out.setLimit(nl.MaxPending)
	}
	for _, r := range s.routeConns() {
		r.out.setLimit(nl.MaxPending)
	}
	s.closeExcess(clients, nl.MaxConnections)
	return nil
}

// closeExcess closes the newest clients beyond limit (nats-server
// maxConnExceeded, after a reload lowered max_connections).
func (s *Server) closeExcess(clients []*client, limit int) {
	limit = max(limit, 0) // negative: none may stay
	if len(clients) <= limit {
		return
	}
	slices.SortFunc(clients, func(a, b *client) int { return cmp.Compare(b.cid, a.cid) })
	excess := clients[:len(clients)-limit]
	for _, c := range excess {
		c.maxConnExceeded()
	}
	s.log.Noticef("Closed %d connections to fall within max_connections", len(excess))
}

// maxConnExceeded sends -ERR 'maximum connections exceeded' and closes
// the client once it is flushed.
func (c *client) maxConnExceeded() {
	c.setReason(ReasonMaxConnectionsExceeded)
	c.log.Errorf("%s - cid:%d - Maximum connections exceeded", c.addr, c.cid)
	c.out.appendBytes(protocol.AppendErr(nil, "maximum connections exceeded"))
	c.out.markClosing()
}

// refreshLimits gives the parser the limits in force if they changed
// since the last read, its payload limit lowered to the client's user's
// and account's (acclimits.go). It runs on the read loop.
func (c *client) refreshLimits() {
	if l := c.srv.limits(); l != c.lim {
		c.lim = l
		if c.parser != nil { // a route's parser keeps the limits it started with
			pc := l.parserConfig()
			pay := c.payloadLimit(l)
			pc.MaxPayload, pc.ExactPayload = int(pay), true
			c.mpay.Store(pay)
			c.parser.SetLimits(pc)
		}
	}
}

// validAdvertise checks Options.ClientAdvertise.
func validAdvertise(a string) error {
	if a == "" {
		return nil
	}
	if _, _, err := config.AdvertiseHostPort(a, DefaultPort); err != nil {
		return fmt.Errorf("%w: client_advertise %q: %v", ErrInvalidOptions, a, err)
	}
	return nil
}
