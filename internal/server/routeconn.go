package server

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/cairnmq/cairn/internal/route"
	"github.com/cairnmq/cairn/internal/subject"
)

// routeOutcome says how a route connection ended, for its dialer.
type routeOutcome uint8

const (
	outcomeClosed    routeOutcome = iota // closed before or after registering
	outcomeSelf                          // the URL leads to this server
	outcomeDuplicate                     // another connection to the same peer is kept
)

// routeConn is the route side of a client whose peer is another server
// (a connection kind of the server). Its read loop is the client's; it
// implements route.Handler.
type routeConn struct {
	c         *client
	parser    *route.Parser
	url       *url.URL // the URL dialed; nil when accepted
	solicited bool     // this server dialed the connection
	explicit  bool     // the URL is one of Options.Cluster.Routes
	done      chan struct{}

	// Owned by the read loop.
	connectSeen bool
	infoSeen    bool

	// Guarded by cluster.mu.
	remoteID   string      // the peer's server_id, once known
	info       *route.Info // the peer's first INFO, its ip filled in; set before registering
	registered bool        // in cluster.routes
	outcome    routeOutcome
	dupOf      string // outcomeDuplicate: the peer whose other connection is kept
	ldm        bool   // the peer announced lame duck mode (peerLameDuck)
	// dialedToo and explicitToo: this server dialed the peer too (from
	// one of Options.Cluster.Routes, explicitToo) and that connection
	// lost the duplicate race to this one (registerRoute), or its
	// dialer of a configured route found this one up and waits on it
	// (adoptRoute): it dials again once this one ends, so /routez shows
	// it solicited (and configured), as nats-server v2.15.2 upgrades
	// the route it keeps (route.go handleDuplicateRoute,
	// upgradeRouteToSolicited).
	dialedToo, explicitToo bool
	// connUser and connPass are the credentials of an accepted route's
	// CONNECT, checked again when a reload changes the cluster's
	// (ReloadCluster).
	connUser, connPass string

	headers bool // the peer understands HMSG; set before registering, read by publishers after
}

// Errors that close a route; the peer gets the -ERR of those with a text
// (nats-server v2.15.2 route.go, errors.go).
var (
	errRouteAuth     = &route.Error{Text: "Authorization Violation"}
	errClientOnRoute = &route.Error{Text: "attempted to connect to route port"}
)

// routeRefusal is an error that closes a route for a reason of its own,
// not a protocol violation: nats-server v2.15.2 route.go closes these with
// closeConnection(reason), so the close is logged with that reason
// ("Router connection closed: Duplicate Route") and not as a Parse Error.
// The close is quiet: a cause worth logging was logged where found. err,
// when not nil, is the -ERR sent first.
type routeRefusal struct {
	reason CloseReason
	err    *route.Error
}

// Error names the reason, and the -ERR text if any.
func (e *routeRefusal) Error() string {
	if e.err != nil {
		return e.reason.String() + ": " + e.err.Error()
	}
	return e.reason.String()
}

// Unwrap returns the -ERR to send, for protocolError.
func (e *routeRefusal) Unwrap() error {
	if e.err == nil {
		return nil
	}
	return e.err
}

// The route refusals without -ERR (nats-server v2.15.2 processRouteInfo,
// addRoute).
var (
	// errRouteToSelf: the peer's INFO names this server.
	errRouteToSelf = &routeRefusal{reason: ReasonDuplicateRoute}
	// errRouteDuplicate: another connection to the same peer is kept
	// (registerRoute).
	errRouteDuplicate = &routeRefusal{reason: ReasonDuplicateRoute}
	// errRouteNameConflict: the peer's INFO names another cluster.
	errRouteNameConflict = &routeRefusal{reason: ReasonClusterNameConflict}
	// errRouteServerName: the peer has this server's name.
	errRouteServerName = &routeRefusal{reason: ReasonDuplicateServerName}
	// errRouteShutdown: the server shuts down while the route registers.
	errRouteShutdown = &routeRefusal{reason: ReasonServerShutdown}
)

// startRoute makes nc a route connection and starts its goroutines. A
// dialed route (u not nil) sends CONNECT and INFO first; an accepted one
// has sent INFO already and parses pre, the bytes read with its first line.
// It returns nil when the server is shutting down.
func (s *Server) startRoute(nc net.Conn, u *url.URL, explicit bool, pre []byte) *client {
	c := newClient(s, nc, s.nextCID.Add(1))
	c.tag = "rid"
	c.out.route = true // set before its goroutines start
	rc := &routeConn{c: c, url: u, solicited: u != nil, explicit: explicit, done: make(chan struct{})}
	rc.parser = route.NewParser(s.routeParserConfig(), rc)
	c.route, c.parser, c.pre = rc, nil, pre
	c.opts = connectOpts{Echo: true, Headers: true}
	s.cl.mu.Lock()
	if s.cl.closing {
		s.cl.mu.Unlock()
		_ = nc.Close()
		close(rc.done)
		return nil
	}
	s.cl.conns[c.cid] = c
	s.cl.mu.Unlock()
	if rc.solicited {
		c.out.appendBytes(route.AppendConnect(nil, s.routeConnect(u)))
		c.out.appendBytes(route.AppendInfo(nil, s.routeInfo(true)))
	}
	c.log.Noticef("%s - rid:%d - Route connection created", c.addr, c.cid)
	c.lastIn.Store(time.Now().UnixNano())
	c.pings.startRoute(c, min(s.limits().PingInterval, routeMaxPingInterval))
	c.out.signal()
	if !s.goroutine(c.writeLoop) {
		s.abortRoute(c)
		return nil
	}
	if !s.goroutine(c.readLoop) {
		c.closeNow() // the writer ends
		s.abortRoute(c)
		return nil
	}
	return c
}

// abortRoute forgets a route whose read loop never started (shutdown
// began meanwhile).
func (s *Server) abortRoute(c *client) {
	c.pings.stop()
	c.closeNow()
	s.cl.mu.Lock()
	delete(s.cl.conns, c.cid)
	s.cl.mu.Unlock()
	close(c.route.done)
}

// routeConnect is the CONNECT a dialing server sends, with the URL's
// credentials (nats-server v2.15.2 sendRouteConnect).
func (s *Server) routeConnect(u *url.URL) *route.Connect {
	s.cl.mu.Lock()
	name, dynamic := s.cl.name, s.cl.dynamic
	s.cl.mu.Unlock()
	cn := &route.Connect{Echo: true, Headers: true, TLS: s.cl.tls != nil, Name: s.id, Cluster: name, Dynamic: dynamic}
	if u.User != nil {
		cn.User = u.User.Username()
		cn.Pass, _ = u.User.Password()
	}
	return cn
}

// startRoute arms a route's keep-alive: the first PING within
// routeFirstPing plus up to a fifth more, then every ping interval, at
// most routeMaxPingInterval (tick; nats-server v2.15.2 setFirstPingTimer
// and adjustPingInterval for routes).
func (p *pingState) startRoute(c *client, interval time.Duration) {
	first := min(interval, routeFirstPing)
	first += rand.N(first/5 + 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = first
	p.timer = time.AfterFunc(first, func() { p.tick(c) })
}

var _ route.Handler = (*routeConn)(nil)

// ProcessConnect checks the dialing peer's CONNECT: a client that dialed
// the cluster port, a gateway, bad credentials or another cluster's name
// close the connection with nats-server's -ERR (route.go
// processRouteConnect).
func (rc *routeConn) ProcessConnect(arg []byte) error {
	c, s := rc.c, rc.c.srv
	if c.log.TraceEnabled() {
		c.traceIn("CONNECT", redactConnect(arg))
	}
	if rc.connectSeen || rc.solicited {
		return nil
	}
	cn, err := route.ParseConnect(arg)
	if err != nil {
		return &route.Error{}
	}
	switch {
	case cn.Lang != "":
		return errClientOnRoute
	case cn.Gateway != "":
		return &route.Error{Text: fmt.Sprintf("Rejecting connection from gateway %q on the Route port", cn.Gateway)}
	case !s.routeAuthOK(cn):
		c.routeAuthFailed(cn.User)
		return errRouteAuth
	}
	if err := s.checkClusterName(cn.Cluster, cn.Dynamic, cn.Name); err != nil {
		c.log.Errorf("%s - rid:%d - %s", c.addr, c.cid, err.Text)
		return &routeRefusal{reason: ReasonClusterNameConflict, err: err}
	}
	rc.connectSeen = true
	rc.headers = cn.Headers
	s.cl.mu.Lock()
	rc.connUser, rc.connPass = cn.User, cn.Pass
	s.cl.mu.Unlock()
	return nil
}

// routeAuthOK checks a CONNECT's credentials when the cluster requires
// them.
func (s *Server) routeAuthOK(cn *route.Connect) bool {
	o := s.clusterSet()
	return o.username == "" || (cn.User == o.username && cn.Pass == o.password)
}

// checkClusterName accepts a peer's cluster name, adopting it when this
// server's name was generated and the peer's is configured or larger
// (nats-server v2.15.2 processRouteConnect, processRouteInfo); the other
// routes are then closed, to be formed again under the new name. It
// returns the rejection to send otherwise.
func (s *Server) checkClusterName(peer string, peerDynamic bool, peerID string) *route.Error {
	cl := s.cl
	cl.mu.Lock()
	if peer == cl.name {
		cl.mu.Unlock()
		return nil
	}
	if !cl.dynamic || (peerDynamic && cl.name >= peer) {
		ours := cl.name
		cl.mu.Unlock()
		return &route.Error{Text: fmt.Sprintf("Rejecting connection, cluster name %q does not match %q", peer, ours)}
	}
	cl.name, cl.dynamic = peer, peerDynamic
	var others []*client
	for id, r := range cl.routes {
		if id != peerID {
			others = append(others, r)
		}
	}
	cl.mu.Unlock()
	s.log.Noticef("Cluster name updated to %s", peer)
	for _, r := range others {
		r.setReason(ReasonClusterNameConflict) // nats-server removeAllRoutesExcept
		r.closeNow()
	}
	return nil
}

// ProcessInfo handles the peer's first INFO (it registers the route) and
// later ones: an INFO about another server is gossip, to be dialed.
func (rc *routeConn) ProcessInfo(arg []byte) error {
	in, err := route.ParseInfo(arg)
	if err != nil {
		return &route.Error{}
	}
	if !rc.infoSeen {
		rc.infoSeen = true
		return rc.firstInfo(in)
	}
	rc.c.srv.cl.mu.Lock()
	id := rc.remoteID
	rc.c.srv.cl.mu.Unlock()
	switch {
	case in.ID != id && in.ID != "":
		rc.c.srv.implicitRoute(in)
	case in.LameDuckMode:
		rc.c.srv.peerLameDuck(rc)
	}
	return nil
}

// peerLameDuck handles the INFO of a peer entering lame duck mode: its
// client URLs leave the connect_urls this server's clients get, at once,
// so that clients leaving the peer are not sent back to it (nats-server
// v2.15.2 processRouteInfo: removeConnectURLsAndSendINFOToClients), and
// ClusterPeers reports it in lame duck mode.
func (s *Server) peerLameDuck(rc *routeConn) {
	cl := s.cl
	cl.mu.Lock()
	rc.ldm = true
	changed := false
	if rc.registered && rc.info != nil && len(rc.info.ConnectURLs) > 0 {
		changed = s.dropPeerURLsLocked(rc.info)
		info := *rc.info
		info.ConnectURLs = nil // dropped once: removeRoute must not drop them again
		rc.info = &info
	}
	cl.mu.Unlock()
	if changed {
		s.sendAsyncInfo()
	}
}

// firstInfo checks the peer and registers the route (nats-server v2.15.2
// processRouteInfo).
func (rc *routeConn) firstInfo(in *route.Info) error {
	c, s := rc.c, rc.c.srv
	if in.ID == s.id {
		s.cl.mu.Lock()
		rc.outcome = outcomeSelf
		s.cl.mu.Unlock()
		return errRouteToSelf
	}
	if in.Cluster != "" {
		if err := s.checkClusterName(in.Cluster, in.Dynamic, in.ID); err != nil {
			c.log.Errorf("%s - rid:%d - %s", c.addr, c.cid, err.Text)
			return errRouteNameConflict // nats-server closes here without -ERR
		}
	}
	if !rc.solicited && in.Name == s.opts.ServerName {
		c.log.Errorf("%s - rid:%d - Remote server has a duplicate name: %q", c.addr, c.cid, in.Name)
		return errRouteServerName
	}
	if in.RouteAccount != "" {
		return &route.Error{Text: fmt.Sprintf("Not possible to have a dedicated route for account %q between those servers", in.RouteAccount)}
	}
	info := *in
	info.Nonce = ""
	if info.IP == "" {
		host := c.ip
		if host == "" {
			host = in.Host
		}
		info.IP = (&url.URL{Scheme: "nats-route", Host: net.JoinHostPort(host, strconv.Itoa(in.Port)), Path: "/"}).String()
	}
	if rc.solicited {
		rc.headers = in.Headers
	}
	return s.registerRoute(c, &info)
}

// registerRoute adds a route to its peer, or refuses a duplicate: when two
// connections join the same pair of servers (both dialed at once), both
// servers keep the one dialed by the server with the smaller server_id,
// so they keep the same one. A registered route gets this server's whole
// interest, its peer is announced to the other peers (gossip, unless this
// server dialed it because of gossip), and clients learn the peer's client
// URLs. It returns nil when c was registered, else the refusal that
// closes c: errRouteDuplicate, or errRouteShutdown. The connection that
// is not kept closes with the reason Duplicate Route on both servers, as
// in nats-server v2.15.2 (route.go addRoute, processRouteInfo).
func (s *Server) registerRoute(c *client, info *route.Info) error {
	cl, rc := s.cl, c.route
	cl.mu.Lock()
	if cl.closing {
		cl.mu.Unlock()
		return errRouteShutdown
	}
	rc.remoteID, rc.info = info.ID, info
	if old := cl.routes[info.ID]; old != nil {
		if !s.preferRoute(c, old) {
			rc.outcome, rc.dupOf = outcomeDuplicate, info.ID
			old.route.inherit(rc)
			cl.mu.Unlock()
			c.log.Debugf("%s - rid:%d - Detected duplicate remote route %q", c.addr, c.cid, info.ID)
			return errRouteDuplicate
		}
		old.route.registered = false
		old.route.outcome, old.route.dupOf = outcomeDuplicate, info.ID
		rc.inherit(old.route)
		delete(cl.routes, info.ID)
		s.dropPeerURLsLocked(old.route.info)
		old.log.Debugf("%s - rid:%d - Replaced by a duplicate remote route %q", old.addr, old.cid, info.ID)
		old.setReason(ReasonDuplicateRoute)
		old.closeNow()
	}
	cl.routes[info.ID] = c
	rc.registered = true
	c.out.appendBytes(cl.appendAllInterestLocked(nil))
	c.out.signal()
	if rc.solicited && !rc.explicit {
		// Dialed because of gossip: whoever told us told the others.
	} else {
		gossip := route.AppendInfo(nil, info)
		for id, r := range cl.routes {
			if id != info.ID {
				r.enqueueRoute(gossip)
			}
		}
	}
	changed := s.addPeerURLsLocked(info)
	cl.mu.Unlock()
	c.log.Debugf("%s - rid:%d - Registering remote route %q", c.addr, c.cid, info.ID)
	if changed {
		s.sendAsyncInfo()
	}
	s.peersChanged()
	return nil
}

// inherit takes over what lost, the connection to the same peer that
// lost the duplicate race to rc, says of this server's dialing: whether
// it dialed the peer, from a configured route (dialedToo, explicitToo).
// cl.mu is held.
func (rc *routeConn) inherit(lost *routeConn) {
	rc.dialedToo = rc.dialedToo || lost.solicited || lost.dialedToo
	rc.explicitToo = rc.explicitToo || (lost.solicited && lost.explicit) || lost.explicitToo
}

// preferRoute reports whether the new connection c replaces old, a
// registered route to the same peer: the connection dialed by the server
// with the smaller server_id wins; between two dialed by the same server,
// the older stays. Both servers reach the same answer. cl.mu is held.
func (s *Server) preferRoute(c, old *client) bool {
	dialer := func(r *client) string {
		if r.route.solicited {
			return s.id
		}
		return r.route.remoteID
	}
	a, b := dialer(old), dialer(c)
	return a != b && b < a
}

// removeRoute runs once when a route connection ends: it unregisters it,
// withdraws the peer's client URLs from clients' INFO and wakes the dialer.
func (s *Server) removeRoute(c *client) {
	cl, rc := s.cl, c.route
	cl.mu.Lock()
	changed, unregistered := false, false
	if rc.registered && cl.routes[rc.remoteID] == c {
		delete(cl.routes, rc.remoteID)
		rc.registered, unregistered = false, true
		changed = s.dropPeerURLsLocked(rc.info)
	}
	delete(cl.conns, c.cid)
	s.ctr.routesClosed.addConn(c)
	cl.mu.Unlock()
	close(rc.done)
	name := ""
	if rc.info != nil {
		name = " - Remote: " + rc.info.Name
	}
	// As nats-server v2.15.2 logs it (client.go closeConnection): the
	// reason, then the peer.
	c.log.Noticef("%s - rid:%d - Router connection closed: %s%s", c.addr, c.cid, CloseReason(c.reason.Load()), name)
	if changed {
		s.sendAsyncInfo()
	}
	if unregistered {
		s.peersChanged()
	}
}

// enqueueRoute queues protocol bytes on a route from any goroutine (a
// route is never closed for its pending bytes: outbound.route).
func (c *client) enqueueRoute(b []byte) {
	if !c.out.appendBytes(b) {
		c.closeSlowConsumer()
		return
	}
	c.out.signal()
}

// pingRoute sends the route a PING and returns the number of PONGs that
// answer it and those before (pingState.sent); false when the route is
// too far behind to take it (it is closed as a slow consumer).
func (c *client) pingRoute() (uint64, bool) {
	p := &c.pings
	p.mu.Lock()
	if !c.out.appendBytes([]byte(route.PingLine)) {
		p.mu.Unlock()
		c.closeSlowConsumer()
		return 0, false
	}
	p.sent++
	sent := p.sent
	p.mu.Unlock()
	c.out.signal()
	return sent, true
}

// waitPong waits until the route has received want PONGs or has closed
// (nothing more arrives from it), or until deadline; it reports false
// for the deadline.
func (c *client) waitPong(want uint64, deadline *time.Timer) bool {
	p := &c.pings
	for {
		p.mu.Lock()
		if p.recvd >= want || p.stopped {
			p.mu.Unlock()
			return true
		}
		if p.wake == nil {
			p.wake = make(chan struct{})
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-deadline.C:
			return false
		}
	}
}

// FlushRoutes sends every registered route a PING and waits, at most
// timeout, for their PONGs: each peer then has processed everything this
// server sent it before (an interest withdrawn: InternalSub.Withdraw),
// and everything it routed here before that has been delivered. It
// reports whether every route answered in time; a route that closes
// meanwhile, or is closed as a slow consumer by the PING, counts as
// flushed, since nothing more arrives from it.
func (s *Server) FlushRoutes(timeout time.Duration) bool {
	if s.cl == nil {
		return true
	}
	s.cl.mu.Lock()
	routes := make([]*client, 0, len(s.cl.routes))
	for _, r := range s.cl.routes {
		routes = append(routes, r)
	}
	s.cl.mu.Unlock()
	want := make([]uint64, len(routes))
	for i, r := range routes {
		want[i], _ = r.pingRoute()
	}
	ok := true
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i, r := range routes {
		if want[i] > 0 && !r.waitPong(want[i], deadline) {
			ok = false
		}
	}
	return ok
}

// ProcessPing answers PONG.
func (rc *routeConn) ProcessPing() error {
	rc.c.traceIn("PING")
	rc.c.enqueueString(route.PongLine)
	return nil
}

// ProcessPong records the answer to a PING.
func (rc *routeConn) ProcessPong() error {
	rc.c.traceIn("PONG")
	rc.c.pings.pong(rc.c)
	return nil
}

// ProcessErr logs the peer's -ERR; the route then closes (nats-server
// v2.15.2 processErr).
func (rc *routeConn) ProcessErr(text []byte) error {
	rc.c.log.Errorf("%s - rid:%d - Route Error %s", rc.c.addr, rc.c.cid, text)
	return nil
}

// ProcessSub stores the peer's interest: a remote subscription in the
// account's sublist, one per subject and queue group, whose weight is
// updated by a later RS+ for the same group (nats-server v2.15.2
// processRemoteSub). An account this server does not have is ignored.
func (rc *routeConn) ProcessSub(account, subj, queue []byte, weight int) error {
	c := rc.c
	c.traceIn("RS+", account, subj, queue)
	acc := c.srv.account(string(account))
	if acc == nil {
		return nil
	}
	key := remoteKey(account, subj, queue)
	c.mu.Lock()
	old := c.subs[key]
	c.mu.Unlock()
	if old != nil {
		old.qw.Store(int32(weight))
		return nil
	}
	if !subject.ValidSubjectBytes(subj) || (queue != nil && !subject.ValidQueueBytes(queue)) {
		c.enqueueString(string(route.AppendErr(nil, "Invalid Subscription")))
		return nil
	}
	sub := &subscription{client: c, acc: acc, subject: string(subj), queue: string(queue), sid: []byte(key)}
	sub.qw.Store(int32(weight))
	if err := acc.sl.Insert(sub.subject, sub.queue, sub); err != nil {
		return nil
	}
	c.mu.Lock()
	c.subs[key] = sub
	c.mu.Unlock()
	return nil
}

// ProcessUnsub removes the peer's interest.
func (rc *routeConn) ProcessUnsub(account, subj, queue []byte) error {
	c := rc.c
	c.traceIn("RS-", account, subj, queue)
	key := remoteKey(account, subj, queue)
	c.mu.Lock()
	sub := c.subs[key]
	delete(c.subs, key)
	c.mu.Unlock()
	if sub != nil {
		_ = sub.acc.sl.Remove(sub.subject, sub.queue, sub)
	}
	return nil
}

// remoteKey names a remote subscription in its route's subs map.
func remoteKey(account, subj, queue []byte) string {
	if queue == nil {
		return string(account) + " " + string(subj)
	}
	return string(account) + " " + string(subj) + " " + string(queue)
}

// ProcessMsg delivers a message from a peer to local subscribers only (one
// hop): every plain subscription, and one member of each queue group the
// peer chose this server for. A JetStream delivery keeps its stored subject
// after '@' in the reply (nats-server v2.15.2 jsAckDeliverIdx).
func (rc *routeConn) ProcessMsg(m *route.Msg) error {
	c := rc.c
	if c.log.TraceEnabled() {
		c.traceRouteMsg(m)
	}
	c.nIn++
	c.bIn += int64(len(m.Payload))
	acc := c.srv.account(string(m.Account))
	if acc == nil {
		return nil
	}
	c.acc = acc
	subj, reply := m.Subject, m.Reply
	if i := jsAckDeliverIdx(reply); i >= 0 && i < len(reply)-1 {
		subj, reply = reply[i+1:], reply[:i]
	}
	hdrLen := m.HdrLen
	if hdrLen == 0 {
		hdrLen = -1
	}
	hdrLen, msg := c.takeAPIClient(m.Subject, hdrLen, m.Payload)
	if hdrLen > 0 {
		var skip bool
		if hdrLen, msg, skip = c.initTrace(m.Subject, hdrLen, msg); skip {
			return nil
		}
	}
	c.queueFilter = m.Queues
	c.deliverAllAs(m.Subject, subj, reply, hdrLen, msg)
	c.queueFilter = nil
	c.sendTrace()
	return nil
}

// jsAckDeliverIdx returns the index of the '@' that separates a JetStream
// ack reply from the stored subject of a delivery sent over a route, or -1:
// the reply starts with "$JS.ACK." and the '@' follows at least eight dots
// (nats-server v2.15.2 client.go jsAckDeliverIdx).
func jsAckDeliverIdx(reply []byte) int {
	if len(reply) <= len(jsAckPrefix) || !bytes.HasPrefix(reply, jsAckPrefix) {
		return -1
	}
	dots := 0
	for i, b := range reply {
		switch b {
		case '.':
			dots++
		case '@':
			if dots >= 8 {
				return i
			}
		}
	}
	return -1
}

// routeCloseErr reports whether err ends a route quietly (its reason was
// logged already, or there is nothing to say): nats-server v2.15.2 logs a
// refused route's credentials (routeAuthFailed), a peer's -ERR
// (ProcessErr) and a cluster name conflict once, then only the close with
// its reason.
func routeCloseErr(err error) bool {
	var rr *routeRefusal
	return errors.As(err, &rr) || errors.Is(err, errRouteAuth) || errors.Is(err, route.ErrPeerErr)
}

// routeAuthFailed logs a route refused for its credentials as nats-server
// v2.15.2 authViolation does ([ERR] `authentication error - User "u"`,
// or `authentication error` alone when the CONNECT had no user; never the
// password); the close follows, logged with its reason (Authentication
// Failure).
func (c *client) routeAuthFailed(user string) {
	who := ""
	if user != "" {
		who = fmt.Sprintf(" - User %q", user)
	}
	c.log.Errorf("%s - rid:%d - authentication error%s", c.addr, c.cid, who)
}
