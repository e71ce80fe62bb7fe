package server

import (
	"net"
	"slices"
	"strconv"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/route"
)

// Clients of a clustered server learn the client URLs of every server of
// the cluster from INFO connect_urls and add them to their reconnect pool;
// when a server joins or leaves, clients that announced protocol 1 get an
// asynchronous INFO with the new list (docs/routes.md; nats-server
// v2.15.2 server.go updateServerINFOAndSendINFOToClients).

// clientConnectURLs returns this server's client URLs, host:port: the
// client_advertise address when set, else the listener's address, or for
// a listener on all interfaces every global unicast address of the
// machine's interfaces (nats-server getClientConnectURLs), as at start.
func (s *Server) clientConnectURLs() []string {
	if a := s.limits().ClientAdvertise; a != "" {
		if h, p, err := config.AdvertiseHostPort(a, s.port); err == nil {
			return []string{net.JoinHostPort(h, strconv.Itoa(p))}
		}
	}
	port := strconv.Itoa(s.port)
	ip := net.ParseIP(s.opts.Host)
	if ip == nil || !ip.IsUnspecified() {
		return []string{net.JoinHostPort(s.opts.Host, port)}
	}
	var urls []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			urls = append(urls, net.JoinHostPort(n.IP.String(), port))
		}
	}
	if len(urls) == 0 {
		s.log.Errorf("Address %q can not be resolved properly", s.opts.Host)
	}
	return urls
}

// addPeerURLsLocked counts a new peer's client URLs; it reports whether the
// list clients see changed. cluster.mu is held.
func (s *Server) addPeerURLsLocked(in *route.Info) bool {
	cl := s.cl
	if s.clusterSet().noAdvertise || in == nil || len(in.ConnectURLs) == 0 {
		return false
	}
	changed := !cl.urlsSet
	cl.urlsSet = true
	for _, u := range in.ConnectURLs {
		cl.urls[u]++
		changed = changed || cl.urls[u] == 1
	}
	return changed
}

// dropPeerURLsLocked uncounts a departed peer's client URLs; it reports
// whether the list clients see changed. cluster.mu is held.
func (s *Server) dropPeerURLsLocked(in *route.Info) bool {
	cl := s.cl
	if in == nil {
		return false
	}
	changed := false
	for _, u := range in.ConnectURLs {
		if n, ok := cl.urls[u]; ok {
			if n <= 1 {
				delete(cl.urls, u)
				changed = true
			} else {
				cl.urls[u] = n - 1
			}
		}
	}
	return changed
}

// connectURLsLocked returns INFO's connect_urls: this server's URLs first,
// then the peers', sorted; nil until a peer announced URLs. cluster.mu is
// held.
func (s *Server) connectURLsLocked() []string {
	cl := s.cl
	if !cl.urlsSet {
		return nil
	}
	peers := make([]string, 0, len(cl.urls))
	for u := range cl.urls {
		if !slices.Contains(cl.ownURLs, u) {
			peers = append(peers, u)
		}
	}
	slices.Sort(peers)
	return append(slices.Clone(cl.ownURLs), peers...)
}

// clusterInfo fills INFO's cluster and connect_urls.
func (s *Server) clusterInfo(in *info) {
	if s.cl == nil {
		return
	}
	s.cl.mu.Lock()
	in.Cluster = s.cl.name
	in.ConnectURLs = s.connectURLsLocked()
	s.cl.mu.Unlock()
}

// sendAsyncInfo sends the current INFO to every client that announced
// protocol 1 and got its connect_info INFO already (nats-server
// sendAsyncInfoToClients). cluster.infoMu keeps these updates in order
// with the connect_info INFO (handlers.go ProcessPing).
func (s *Server) sendAsyncInfo() {
	s.cl.infoMu.Lock()
	defer s.cl.infoMu.Unlock()
	base := s.baseInfo()
	s.mu.Lock()
	if s.shuttingDown {
		// The routes closing at shutdown would tell the clients that the
		// cluster shrank to this server, and nats.go would drop the other
		// servers from its reconnect pool (nats-server
		// sendAsyncInfoToClients sends nothing once shutting down).
		s.mu.Unlock()
		return
	}
	clients := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		if c.asyncInfo.Load() {
			clients = append(clients, c)
		}
	}
	s.mu.Unlock()
	for _, c := range clients {
		in := base
		in.CID, in.ClientIP = c.cid, c.ip
		in.MaxPayload = int(c.mpay.Load()) // the client's (nats-server generateClientInfoJSON)
		if !c.out.appendBytes(appendInfo(nil, in)) {
			c.closeSlowConsumer()
			continue
		}
		c.out.signal()
	}
}
