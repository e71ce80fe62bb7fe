package server

import (
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/route"
)

// This file dials peers. Each explicit route (Options.Cluster.Routes) has
// a dialer goroutine for as long as the server runs: it dials, waits while
// the route lives, and dials again a second later, so a restarted peer is
// found again; a URL that leads to this server itself is dropped. A route
// learned from a peer's gossip (implicit) is dialed once, plus
// ConnectRetries more times, by a goroutine that ends when it gives up
// (nats-server v2.15.2 route.go connectToRoute, reConnectToRoute).

// errorReportEvery is how often a dialer that keeps failing logs at error
// level; the other failures are logged at debug level.
const errorReportEvery = 60

// solicitExplicit dials u until the server shuts down or u turns out to be
// this server. While a route to the server at u's address is up (the peer
// dialed first), it does not dial: a second connection would only be a
// duplicate, and replacing the first would briefly drop the peer's
// interest. It stands behind that route instead, and dials when it ends,
// so the route counts as solicited from a configured route (adoptRoute).
func (s *Server) solicitExplicit(u *url.URL, stop <-chan struct{}) {
	for attempts := 0; ; {
		if r := s.adoptRoute(u); r != nil {
			if !s.waitRoute(r, stop) || !s.pause(routeConnectDelay+rand.N(routeJitter), stop) {
				return
			}
			continue
		}
		if stopped(stop) {
			return
		}
		c, ok := s.dialOnce(u, true, &attempts)
		switch {
		case !ok:
			if !s.pause(routeConnectDelay, stop) {
				return
			}
			continue
		case c == nil, !s.waitRouteEnd(c, stop):
			return // shutting down, or the route removed
		case c.route.outcome == outcomeSelf:
			s.log.Debugf("Detected route to self, ignoring %q", u.Redacted())
			s.markSelfURL(u)
			return
		}
		if !s.pause(routeConnectDelay+rand.N(routeJitter), stop) {
			return
		}
	}
}

// stopped reports whether stop is closed (a reload removed the route).
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// implicitRoute dials a server a peer told us about, unless it is this
// server, a route to it exists or is being dialed, or an explicit route
// names its address (nats-server v2.15.2 processImplicitRoute).
func (s *Server) implicitRoute(in *route.Info) {
	cl := s.cl
	u, err := url.Parse(in.IP)
	if in.ID == s.id || err != nil || u.Host == "" || s.isExplicit(in, u) {
		return
	}
	cl.mu.Lock()
	if cl.routes[in.ID] != nil || cl.pending[in.ID] || cl.closing {
		cl.mu.Unlock()
		return
	}
	cl.pending[in.ID] = true
	cl.mu.Unlock()
	if user, pass := s.ClusterCredentials(); in.AuthRequired && user != "" {
		u.User = url.UserPassword(user, pass)
	}
	if !s.goroutine(func() { s.solicitImplicit(u, in.ID) }) {
		cl.mu.Lock()
		delete(cl.pending, in.ID)
		cl.mu.Unlock()
	}
}

// isExplicit reports whether an explicit route names the server of in,
// by its advertised host and port or the address it was reached at.
func (s *Server) isExplicit(in *route.Info, u *url.URL) bool {
	port := strconv.Itoa(in.Port)
	a := strings.ToLower(net.JoinHostPort(in.Host, port))
	b := strings.ToLower(net.JoinHostPort(u.Hostname(), port))
	for _, r := range s.clusterSet().routes {
		if h := strings.ToLower(r.Host); h == a || h == b {
			return true
		}
	}
	return false
}

// solicitImplicit dials u, giving up after 1+ConnectRetries failed dials in
// a row; a route that was up and closes is dialed again the same way.
func (s *Server) solicitImplicit(u *url.URL, id string) {
	defer func() {
		s.cl.mu.Lock()
		delete(s.cl.pending, id)
		s.cl.mu.Unlock()
	}()
	for {
		attempts := 0
		c := s.dialRouteLimited(u, &attempts)
		if c == nil || !s.waitRouteEnd(c, nil) || c.route.outcome != outcomeClosed {
			return
		}
		if !s.pause(routeConnectDelay+rand.N(routeJitter), nil) {
			return
		}
	}
}

// dialRouteLimited dials u for an implicit route until a connection is
// made, at most 1+ConnectRetries times; it returns nil when every dial
// failed or the server is shutting down. attempts counts the failed dials.
func (s *Server) dialRouteLimited(u *url.URL, attempts *int) *client {
	for {
		if c, ok := s.dialOnce(u, false, attempts); ok {
			return c
		}
		if *attempts > s.clusterSet().connectRetries || !s.pause(routeConnectDelay, nil) {
			return nil
		}
	}
}

// dialOnce makes one dial of u. ok is false when the dial failed; c is nil
// with ok true when the server is shutting down.
func (s *Server) dialOnce(u *url.URL, explicit bool, attempts *int) (c *client, ok bool) {
	s.log.Debugf("Trying to connect to route on %s", u.Host)
	nc, err := net.DialTimeout("tcp", u.Host, routeDialTimeout)
	if err != nil {
		*attempts++
		s.logDialError(*attempts, err)
		return nil, false
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if s.cl.tls != nil {
		raw := nc
		if !s.trackShake(raw) { // so that Shutdown ends the handshake
			_ = raw.Close()
			return nil, true
		}
		nc, err = s.dialRouteTLS(raw, u)
		s.untrackShake(raw)
		if err != nil && s.clusterClosing() {
			return nil, true
		}
		if err != nil {
			*attempts++
			s.logDialError(*attempts, err)
			return nil, false
		}
	}
	*attempts = 0
	return s.startRoute(nc, u, explicit, nil), true
}

// clusterClosing reports whether Shutdown began (cluster.quit is closed).
func (s *Server) clusterClosing() bool {
	select {
	case <-s.cl.quit:
		return true
	default:
		return false
	}
}

// logDialError logs a failed dial of a route: at error level on the first
// attempt and every errorReportEvery-th, at debug level otherwise.
func (s *Server) logDialError(attempts int, err error) {
	if attempts == 1 || attempts%errorReportEvery == 0 {
		s.log.Errorf("Error trying to connect to route (attempt %d): %v", attempts, err)
	} else {
		s.log.Debugf("Error trying to connect to route (attempt %d): %v", attempts, err)
	}
}

// routeAt returns the registered route whose peer listens at u's host and
// port (its advertised address, or the address it connected from with its
// cluster port), or nil.
func (s *Server) routeAt(u *url.URL) *client {
	want := strings.ToLower(u.Host)
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	for _, r := range s.cl.routes {
		in := r.route.info
		port := strconv.Itoa(in.Port)
		if ip, err := url.Parse(in.IP); err == nil && strings.ToLower(ip.Host) == want {
			return r
		}
		if strings.ToLower(net.JoinHostPort(in.Host, port)) == want {
			return r
		}
	}
	return nil
}

// adoptRoute returns the registered route to the server at u's address
// (routeAt), or nil, and marks it as one this server would have dialed
// from u, an explicit route: /routez shows it solicited and configured,
// as nats-server v2.15.2 shows an accepted route to a configured peer
// (route.go upgradeRouteToSolicited).
func (s *Server) adoptRoute(u *url.URL) *client {
	r := s.routeAt(u)
	if r == nil {
		return nil
	}
	s.cl.mu.Lock()
	r.route.dialedToo, r.route.explicitToo = true, true
	s.cl.mu.Unlock()
	return r
}

// waitRoute waits until route r closes; it returns false when the server
// shuts down or stop closes first (nil: never).
func (s *Server) waitRoute(r *client, stop <-chan struct{}) bool {
	select {
	case <-r.route.done:
		return true
	case <-s.cl.quit:
		return false
	case <-stop:
		return false
	}
}

// waitRouteEnd waits until route c has closed; when another connection to
// the same peer was kept instead, it also waits until that one closes. It
// returns false when the server shuts down or stop closes first (nil:
// never).
func (s *Server) waitRouteEnd(c *client, stop <-chan struct{}) bool {
	select {
	case <-c.route.done:
	case <-s.cl.quit:
		return false
	case <-stop:
		return false
	}
	if c.route.outcome != outcomeDuplicate {
		return true
	}
	s.cl.mu.Lock()
	kept := s.cl.routes[c.route.dupOf]
	s.cl.mu.Unlock()
	if kept == nil {
		return true
	}
	select {
	case <-kept.route.done:
		return true
	case <-s.cl.quit:
		return false
	case <-stop:
		return false
	}
}

// pause waits d, or reports false when the server shuts down or stop
// closes first (nil: never).
func (s *Server) pause(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.cl.quit:
		return false
	case <-stop:
		return false
	}
}
