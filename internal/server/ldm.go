package server

import (
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/route"
)

// Lame duck mode, as nats-server v2.15.2 enters it on SIGUSR2
// (server.go lameDuckMode): the server publishes
// $SYS.SERVER.<id>.LAMEDUCK in its system account (events.go), stops
// accepting clients, tells its peers with a route INFO whose ldm is true
// (they stop offering its URLs to their clients, and count it offline
// for JetStream, as nats-server's peers do on the LAMEDUCK event), hands
// the leadership of the Raft groups it leads to other servers
// (handOverJetStream), stops JetStream (queued publishes are stored and
// acknowledged first), tells its clients with an INFO whose ldm is true
// and whose connect_urls lists only the other servers of the cluster, waits the grace period (so that
// several servers put in lame duck mode together do not send their
// clients to each other), then closes its clients one at a time spread
// over the rest of the duration (at most a second apart), and shuts down.
// Clients reconnect to the other servers meanwhile.

// Lame duck defaults (nats-server DEFAULT_LAME_DUCK_DURATION and
// DEFAULT_LAME_DUCK_GRACE_PERIOD).
const (
	DefaultLameDuckDuration    = 2 * time.Minute
	DefaultLameDuckGracePeriod = 10 * time.Second
)

// LameDuck puts the server in lame duck mode and returns once it has
// shut down (Done is closed), or at once when it is already in lame duck
// mode or shutting down. duration and grace of 0 mean the defaults; a
// duration not above grace closes the clients over a second.
func (s *Server) LameDuck(duration, grace time.Duration) {
	if duration <= 0 {
		duration = DefaultLameDuckDuration
	}
	if grace <= 0 {
		grace = DefaultLameDuckGracePeriod
	}
	s.mu.Lock()
	if s.shuttingDown || s.ldm || s.ln == nil {
		s.mu.Unlock()
		return
	}
	s.ldm = true
	s.mu.Unlock()
	s.log.Noticef("Entering lame duck mode, stop accepting new clients")
	s.lameDuckEvent()
	_ = s.ln.Close()
	// The peers learn first (they stop offering this server to clients,
	// and their JetStream neither places on it nor hands it leadership),
	// then the leadership moves.
	s.sendLameDuckToRoutes()
	s.handOverJetStream()
	s.stopJetStream()

	clients := s.clientList()
	if len(clients) == 0 {
		s.Shutdown()
		return
	}
	rand.Shuffle(len(clients), func(i, j int) { clients[i], clients[j] = clients[j], clients[i] })
	s.sendLameDuckInfo()
	if !s.sleep(grace) {
		return
	}
	s.log.Noticef("Closing existing clients")
	spread := max(duration-grace, time.Second)
	gap := min(spread/time.Duration(len(clients)), time.Second)
	for i, c := range clients {
		c.setReason(ReasonServerShutdown)
		c.out.markClosing()
		if i == len(clients)-1 || gap <= 0 {
			continue
		}
		if !s.sleep(gap/2 + rand.N(gap/2+1)) {
			return
		}
	}
	s.Shutdown()
}

// InLameDuckMode reports whether LameDuck was called.
func (s *Server) InLameDuckMode() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ldm
}

// Done is closed once Shutdown has completed.
func (s *Server) Done() <-chan struct{} { return s.done }

// sleep waits d; it reports false when Shutdown began meanwhile.
func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.quit:
		return false
	}
}

// sendLameDuckToRoutes tells every peer, with a route INFO whose ldm is
// true, to stop offering this server's client URLs to its clients
// (nats-server sendLDMToRoutes).
func (s *Server) sendLameDuckToRoutes() {
	if s.cl == nil {
		return
	}
	in := s.routeInfo(false)
	in.LameDuckMode = true
	b := route.AppendInfo(nil, in)
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	for _, r := range s.cl.routes {
		r.enqueueRoute(b)
	}
}

// sendLameDuckInfo sends every client that takes async INFO (protocol 1)
// an INFO with ldm true and connect_urls listing the other servers only
// (nats-server sendLDMToClients).
func (s *Server) sendLameDuckInfo() {
	if s.cl != nil {
		s.cl.infoMu.Lock()
		defer s.cl.infoMu.Unlock()
	}
	base := s.lameDuckInfoLocked()
	for _, c := range s.clientList() {
		if c.asyncInfo.Load() {
			c.sendInfo(base)
		}
	}
}

// lameDuckInfoLocked is the INFO a lame duck server sends its clients:
// ldm true and connect_urls listing the other servers only. The caller
// holds cl.infoMu in a cluster.
func (s *Server) lameDuckInfoLocked() info {
	base := s.baseInfo()
	base.LameDuckMode = true
	if s.cl != nil {
		base.ConnectURLs = slices.DeleteFunc(base.ConnectURLs, func(u string) bool {
			return slices.Contains(s.cl.ownURLs, u)
		})
		if s.clusterSet().noAdvertise {
			base.ConnectURLs = nil
		}
	}
	return base
}

// sendInfo queues base, completed with the client's own fields, for the
// client; a client too far behind to take it is closed as a slow
// consumer.
func (c *client) sendInfo(base info) {
	in := base
	in.CID, in.ClientIP = c.cid, c.ip
	in.MaxPayload = int(c.mpay.Load())
	if !c.out.appendBytes(appendInfo(nil, in)) {
		c.closeSlowConsumer()
		return
	}
	c.out.signal()
}

// LameDuckClient sends one client the INFO of a lame duck server (ldm
// true, connect_urls without this server), so that it reconnects
// elsewhere, while the server goes on serving: the $SYS.REQ.SERVER.<id>.LDM
// request of nats-server v2.15.2 (LDMClientByID), which `nats server
// request ldm` sends. Its errors are nats-server's texts, answered with
// code 500: "no such client id", and "client does not support Lame Duck
// Mode or is not ready to receive the notification" for a client that
// takes no async INFO (protocol 0, or no CONNECT yet).
func (s *Server) LameDuckClient(cid uint64) error {
	c := s.clientByID(cid)
	if c == nil {
		return errors.New("no such client id")
	}
	if !c.asyncInfo.Load() {
		return errors.New("client does not support Lame Duck Mode or is not ready to receive the notification")
	}
	if s.cl != nil {
		s.cl.infoMu.Lock()
		defer s.cl.infoMu.Unlock()
	}
	c.sendInfo(s.lameDuckInfoLocked())
	return nil
}

// KickClient closes one client connection, its closed reason "Kicked":
// the $SYS.REQ.SERVER.<id>.KICK request of nats-server v2.15.2
// (DisconnectClientByID), which `nats server request kick` sends. It
// returns nats-server's error "no such client or leafnode id" (answered
// with code 500) for a connection id no open client has.
func (s *Server) KickClient(cid uint64) error {
	c := s.clientByID(cid)
	if c == nil {
		return errors.New("no such client or leafnode id")
	}
	c.log.Debugf("%s - cid:%d - kicked by a system request", c.addr, c.cid)
	c.setReason(ReasonKicked)
	c.out.markClosing()
	return nil
}

// clientByID returns the open client connection cid, nil when none.
func (s *Server) clientByID(cid uint64) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[cid]
}
