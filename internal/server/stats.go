package server

import (
	"errors"
	"net"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/subject"
)

// This file gives the monitoring endpoints (internal/monitor) what they
// report about connections, routes and subscriptions. Counting costs the
// delivery path atomics only, never a lock: a reader counts what it
// received in plain fields and adds them to the connection's atomics once
// per read batch; a delivery counts into the receiver's outbound atomics
// while it holds the outbound lock it already holds (outbound.go); a
// snapshot reads the atomics and takes only locks off the delivery path
// (Server.mu, cluster.mu, client.mu).

// ConnInfo is a snapshot of one connection, in the units of nats-server
// v2.15.2's /connz ConnInfo (monitor.go). Stop and Reason are set for a
// closed connection only.
type ConnInfo struct {
	CID          uint64
	IP           string
	Port         int
	Start        time.Time
	LastActivity time.Time
	Stop         time.Time
	Reason       string
	RTT          time.Duration // 0 until a PING was answered
	Pending      int64         // bytes queued for the socket
	InMsgs       int64
	OutMsgs      int64
	InBytes      int64 // header and payload bytes
	OutBytes     int64
	Stalls       int64 // times its publishes were slowed by a backed-up receiver
	NumSubs      int
	Subs         []SubInfo // only when asked for; at most MaxClosedSubs for a closed one
	Name         string
	Lang         string
	Version      string
	User         string // the authenticated user's name or nkey; "" for none
	Account      string // the client's account
	// JWT, IssuerKey and Tags describe a user of a JWT (auth.User's
	// fields of those names: the JWT unless a bearer token, the key that
	// signed it, its tags); empty otherwise. /connz?auth=true shows them.
	JWT       string
	IssuerKey string
	Tags      []string
}

// SubInfo is one subscription of a connection (nats-server's SubDetail).
type SubInfo struct {
	Account string // the account whose subject index holds it
	Subject string
	Queue   string
	Sid     string
	Msgs    int64 // messages delivered to it
	Max     int64 // auto-unsubscribe limit, 0 for none
	CID     uint64
}

// RouteInfo is a snapshot of one registered route (nats-server's /routez
// RouteInfo). DidSolicit: this server dialed the connection, or dials
// the peer when it ends (its own connection lost the duplicate race to
// it, or its dialer of a configured route found it up); IsConfigured:
// the same, from one of its configured routes, as nats-server v2.15.2
// reports the route it keeps.
type RouteInfo struct {
	ConnInfo
	RemoteID     string
	RemoteName   string
	DidSolicit   bool
	IsConfigured bool
}

// Stats are the server-wide counters of /varz. In and Out count messages
// and header plus payload bytes received from and sent to connections of
// every kind; the Client ones count client connections only.
type Stats struct {
	Start            time.Time
	Connections      int
	TotalConnections uint64
	Routes           int
	Remotes          int // servers with a route up (nats-server v2.15.2 numRemotes: len(s.routes))
	InMsgs           int64
	InBytes          int64
	OutMsgs          int64
	OutBytes         int64
	InClientMsgs     int64
	InClientBytes    int64
	OutClientMsgs    int64
	OutClientBytes   int64
	SlowConsumers    int64
	SlowClients      uint64
	SlowRoutes       uint64
	StaleConnections int64
	StaleClients     uint64
	StaleRoutes      uint64
	Stalls           int64
	Subscriptions    int
	ClusterName      string
	ClusterPort      int
	ConnectURLs      []string
}

// traffic sums the counters of connections.
type traffic struct {
	inMsgs, inBytes, outMsgs, outBytes atomic.Int64
}

func (t *traffic) addConn(c *client) {
	t.inMsgs.Add(c.inMsgs.Load())
	t.inBytes.Add(c.inBytes.Load())
	t.outMsgs.Add(c.out.msgs.Load())
	t.outBytes.Add(c.out.bytes.Load())
}

// counters are the server's totals, updated without locks.
type counters struct {
	clientsClosed traffic // totals of the client connections that closed
	routesClosed  traffic // totals of the route connections that closed
	totalClients  atomic.Uint64
	slowClients   atomic.Uint64
	slowRoutes    atomic.Uint64
	staleClients  atomic.Uint64
	staleRoutes   atomic.Uint64
	stalls        atomic.Int64
}

// countIn adds what the read loop received in this batch to the
// connection's counters (one atomic add per counter per batch).
func (c *client) countIn() {
	if c.nIn == 0 {
		return
	}
	c.inMsgs.Add(c.nIn)
	c.inBytes.Add(c.bIn)
	c.nIn, c.bIn = 0, 0
}

// countSlow counts a slow consumer of c's kind.
func (c *client) countSlow() {
	c.srv.slowConsumers.Add(1)
	if c.route != nil {
		c.srv.ctr.slowRoutes.Add(1)
	} else {
		c.srv.ctr.slowClients.Add(1)
	}
}

// countStale counts a stale connection of c's kind.
func (c *client) countStale() {
	if c.route != nil {
		c.srv.ctr.staleRoutes.Add(1)
	} else {
		c.srv.ctr.staleClients.Add(1)
	}
}

// snapshot fills a ConnInfo from c; subs adds its subscriptions, at most
// limit of them when limit > 0.
func (c *client) snapshot(subs bool, limit int) ConnInfo {
	ci := ConnInfo{
		CID:          c.cid,
		Start:        c.started,
		LastActivity: time.Unix(0, c.lastIn.Load()).UTC(),
		RTT:          time.Duration(c.rtt.Load()),
		Pending:      c.out.pending.Load(),
		InMsgs:       c.inMsgs.Load(),
		InBytes:      c.inBytes.Load(),
		OutMsgs:      c.out.msgs.Load(),
		OutBytes:     c.out.bytes.Load(),
		Stalls:       c.stalls.Load(),
	}
	ci.IP, ci.Port = c.remoteIPPort()
	c.mu.Lock()
	ci.NumSubs = len(c.subs)
	ci.Name, ci.Lang, ci.Version = c.meta.name, c.meta.lang, c.meta.version
	ci.User, ci.Account = c.meta.user, c.meta.account
	if u := c.meta.authUser; u != nil {
		ci.JWT, ci.IssuerKey, ci.Tags = u.JWT, u.IssuerKey, u.Tags
	}
	if ci.Account == "" {
		ci.Account = c.srv.gacc.name
	}
	if subs {
		ci.Subs = subInfos(c.subs, c.cid, limit)
	}
	c.mu.Unlock()
	return ci
}

// remoteIPPort returns the peer's IP and port.
func (c *client) remoteIPPort() (string, int) {
	_, p, _ := splitHostPort(c.addr)
	return c.ip, p
}

func splitHostPort(hp string) (string, int, error) {
	for i := len(hp) - 1; i >= 0; i-- {
		if hp[i] == ':' {
			p, err := strconv.Atoi(hp[i+1:])
			return hp[:i], p, err
		}
	}
	return hp, 0, nil
}

// subInfos lists subscriptions sorted by sid, at most limit when limit > 0.
// The caller holds the client's mu.
func subInfos(subs map[string]*subscription, cid uint64, limit int) []SubInfo {
	out := make([]SubInfo, 0, len(subs))
	for _, sub := range subs {
		out = append(out, sub.info(cid))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sid < out[j].Sid })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (sub *subscription) info(cid uint64) SubInfo {
	return SubInfo{
		Account: sub.acc.name, Subject: sub.subject, Queue: sub.queue, Sid: string(sub.sid),
		Msgs: sub.delivered.Load(), Max: sub.max.Load(), CID: cid,
	}
}

// clientList returns the open client connections.
func (s *Server) clientList() []*client {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, c)
	}
	return out
}

// Connections returns a snapshot of the open client connections, sorted
// by connection id, with their subscriptions when subs is set.
func (s *Server) Connections(subs bool) []ConnInfo {
	clients := s.clientList()
	out := make([]ConnInfo, 0, len(clients))
	for _, c := range clients {
		out = append(out, c.snapshot(subs, 0))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CID < out[j].CID })
	return out
}

// ClosedConnections returns the most recently closed client connections,
// oldest first: at most Options.MaxClosedClients of them, each with at
// most MaxClosedSubs subscriptions.
func (s *Server) ClosedConnections() []ConnInfo { return s.closed.list() }

// Routes returns a snapshot of the registered routes, sorted by
// connection id, with the peers' interest when subs is set.
func (s *Server) Routes(subs bool) []RouteInfo {
	if s.cl == nil {
		return nil
	}
	s.cl.mu.Lock()
	type reg struct {
		c          *client
		id, name   string
		solicited  bool
		configured bool
	}
	regs := make([]reg, 0, len(s.cl.routes))
	for id, c := range s.cl.routes {
		rc := c.route
		r := reg{c: c, id: id, solicited: rc.solicited || rc.dialedToo, configured: rc.explicit || rc.explicitToo}
		if c.route.info != nil {
			r.name = c.route.info.Name
		}
		regs = append(regs, r)
	}
	s.cl.mu.Unlock()
	out := make([]RouteInfo, 0, len(regs))
	for _, r := range regs {
		out = append(out, RouteInfo{
			ConnInfo: r.c.snapshot(subs, 0), RemoteID: r.id, RemoteName: r.name,
			DidSolicit: r.solicited, IsConfigured: r.configured,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CID < out[j].CID })
	return out
}

// Subscriptions returns the subscriptions of client connections, sorted
// by connection id and sid; when test is not empty, only those a message
// published to the literal subject test would reach.
func (s *Server) Subscriptions(test string) []SubInfo {
	var out []SubInfo
	for _, c := range s.clientList() {
		c.mu.Lock()
		for _, sub := range c.subs {
			if test == "" || subject.Match(test, sub.subject) {
				out = append(out, sub.info(c.cid))
			}
		}
		c.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CID != out[j].CID {
			return out[i].CID < out[j].CID
		}
		return out[i].Sid < out[j].Sid
	})
	return out
}

// SublistStats returns the subject indexes' statistics summed over the
// accounts, MaxFanout their largest (nats-server's SublistStats, which
// its /subsz sums over accounts the same way).
func (s *Server) SublistStats() SublistStats {
	var out SublistStats
	for _, acc := range s.accountTable() {
		out.add(acc.sublistStats())
	}
	return out
}

// sublistStats returns the counters of acc's subject index.
func (acc *account) sublistStats() SublistStats {
	st := acc.sl.Stats()
	return SublistStats{
		NumSubs: st.Count, NumCache: st.Cached, NumInserts: st.Inserts, NumRemoves: st.Removes,
		NumMatches: st.Matches, CacheHits: st.CacheHits, MaxFanout: st.MaxFanout, TotalFanout: st.TotalFanout,
	}
}

// add sums st into out, MaxFanout the larger.
func (out *SublistStats) add(st SublistStats) {
	out.NumSubs += st.NumSubs
	out.NumCache += st.NumCache
	out.NumInserts += st.NumInserts
	out.NumRemoves += st.NumRemoves
	out.NumMatches += st.NumMatches
	out.CacheHits += st.CacheHits
	out.MaxFanout = max(out.MaxFanout, st.MaxFanout)
	out.TotalFanout += st.TotalFanout
}

// numSubscriptions returns the subscriptions of every account.
func (s *Server) numSubscriptions() int {
	n := 0
	for _, acc := range s.accountTable() {
		n += acc.sl.Count()
	}
	return n
}

// SublistStats are the subject index's counters since start.
type SublistStats struct {
	NumSubs    int
	NumCache   int
	NumInserts uint64
	NumRemoves uint64
	NumMatches uint64
	CacheHits  uint64
	// MaxFanout and TotalFanout are the largest and the summed sizes of
	// the cached match results.
	MaxFanout   int
	TotalFanout int
}

// Stats returns the server-wide counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Start:            s.start,
		TotalConnections: s.ctr.totalClients.Load(),
		SlowConsumers:    s.slowConsumers.Load(),
		SlowClients:      s.ctr.slowClients.Load(),
		SlowRoutes:       s.ctr.slowRoutes.Load(),
		StaleClients:     s.ctr.staleClients.Load(),
		StaleRoutes:      s.ctr.staleRoutes.Load(),
		Stalls:           s.ctr.stalls.Load(),
		Subscriptions:    s.numSubscriptions(),
	}
	st.StaleConnections = int64(st.StaleClients + st.StaleRoutes)
	var cl traffic
	s.mu.Lock()
	st.Connections = len(s.clients)
	addTraffic(&cl, &s.ctr.clientsClosed)
	for _, c := range s.clients {
		cl.addConn(c)
	}
	s.mu.Unlock()
	st.InClientMsgs, st.InClientBytes = cl.inMsgs.Load(), cl.inBytes.Load()
	st.OutClientMsgs, st.OutClientBytes = cl.outMsgs.Load(), cl.outBytes.Load()
	rt := s.routeTraffic(&st)
	st.InMsgs, st.InBytes = st.InClientMsgs+rt.inMsgs.Load(), st.InClientBytes+rt.inBytes.Load()
	st.OutMsgs, st.OutBytes = st.OutClientMsgs+rt.outMsgs.Load(), st.OutClientBytes+rt.outBytes.Load()
	return st
}

func addTraffic(dst, src *traffic) {
	dst.inMsgs.Add(src.inMsgs.Load())
	dst.inBytes.Add(src.inBytes.Load())
	dst.outMsgs.Add(src.outMsgs.Load())
	dst.outBytes.Add(src.outBytes.Load())
}

// routeTraffic sums the routes' counters and fills the cluster fields.
func (s *Server) routeTraffic(st *Stats) *traffic {
	var rt traffic
	if s.cl == nil {
		return &rt
	}
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	st.Routes = len(s.cl.routes)
	st.Remotes = len(s.cl.routes) // one route per server: no pooling
	st.ClusterName = s.cl.name
	st.ClusterPort = s.cl.port
	addTraffic(&rt, &s.ctr.routesClosed)
	for _, c := range s.cl.conns {
		rt.addConn(c)
	}
	return &rt
}

// recordClosed keeps a closed client connection for /connz?state=closed
// and adds its counters to the totals, and returns what it kept. It runs
// once, from teardown, with the subscriptions the connection had.
func (s *Server) recordClosed(c *client, subs []*subscription) ConnInfo {
	ci := c.snapshot(false, 0)
	ci.Stop = time.Now().UTC()
	ci.Reason = CloseReason(c.reason.Load()).String()
	ci.NumSubs = len(subs)
	if len(subs) > 0 {
		m := make(map[string]*subscription, len(subs))
		for _, sub := range subs {
			m[string(sub.sid)] = sub
		}
		ci.Subs = subInfos(m, c.cid, MaxClosedSubs)
	}
	s.closed.add(ci)
	return ci
}

// ConnectURLs returns the client URLs INFO connect_urls lists (every
// server of the cluster), or nil.
func (s *Server) ConnectURLs() []string { return s.baseInfo().ConnectURLs }

// Ready returns nil when the server accepts clients, or why not (before
// Start, after Shutdown began or in lame duck mode).
func (s *Server) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ln == nil:
		return errNotStarted
	case s.shuttingDown:
		return errShuttingDown
	case s.ldm:
		return errLameDuck
	}
	return nil
}

var (
	errNotStarted   = errors.New("server not started")
	errShuttingDown = errors.New("server is shutting down")
	errLameDuck     = errors.New("server is in lame duck mode: it accepts no new clients")
)

// ListenAddrs returns the client listener's addresses, host:port: its
// host, or every global unicast address of the machine for a listener on
// all interfaces (as nats-server's ports file lists them).
func (s *Server) ListenAddrs() []string {
	return ExpandHostPort(s.opts.Host, s.port)
}

// ClusterListenAddrs is ListenAddrs for the cluster listener; nil without
// one.
func (s *Server) ClusterListenAddrs() []string {
	if a := s.ClusterAddr(); a != nil {
		return ExpandHostPort(s.opts.Cluster.Host, a.Port)
	}
	return nil
}

// ExpandHostPort returns host:port, or for an unspecified host (0.0.0.0,
// ::) one host:port per global unicast address of the machine, with
// 127.0.0.1 when there is none.
func ExpandHostPort(host string, port int) []string {
	p := strconv.Itoa(port)
	ip := net.ParseIP(host)
	if host != "" && (ip == nil || !ip.IsUnspecified()) {
		return []string{net.JoinHostPort(host, p)}
	}
	var out []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			out = append(out, net.JoinHostPort(n.IP.String(), p))
		}
	}
	if len(out) == 0 {
		out = []string{net.JoinHostPort("127.0.0.1", p)}
	}
	return out
}
