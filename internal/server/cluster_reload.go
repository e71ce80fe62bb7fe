package server

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"

	"github.com/cairnmq/cairn/internal/route"
)

// Reloading the cluster block (docs/configuration.md, "Reloading";
// nats-server v2.15.2 reload.go clusterOption, routesOption). The
// settings a reload may change live in clusterSettings, replaced whole
// (cluster.set) and read where they are used, so a change reaches the
// next connection, dial or INFO; routes up stay up, as in nats-server,
// but for those dialed to a route the reload removes.

// clusterSettings are the cluster settings a reload may change.
type clusterSettings struct {
	routes             []*url.URL // explicit routes, dialed for as long as listed
	advertise          string
	noAdvertise        bool
	connectRetries     int
	username, password string
}

func settingsOf(o *ClusterOptions) *clusterSettings {
	return &clusterSettings{routes: slices.Clone(o.Routes), advertise: o.Advertise, noAdvertise: o.NoAdvertise,
		connectRetries: o.ConnectRetries, username: o.Username, password: o.Password}
}

// clusterSet returns the cluster settings in force.
func (s *Server) clusterSet() *clusterSettings { return s.cl.set.Load() }

// ReloadCluster applies a reload's cluster block: the explicit routes
// (a new one is dialed at once; a removed one is dialed no more and its
// dialed connection is closed, "Removed route <url>" in the log),
// advertise, no_advertise and connect_retries (for the next route INFO,
// route and dial), and the authorization (the credentials new route and
// Raft connections must carry, and those this server presents; routes
// up stay), as nats-server v2.15.2 applies them. Its errors, changing
// nothing, wrap ErrReloadUnsupported for turning clustering on or off or
// changing the cluster's name, host, port or tls, and ErrInvalidOptions
// for settings Options.Validate refuses.
func (s *Server) ReloadCluster(o ClusterOptions) error {
	cur := s.opts.Cluster
	switch {
	case s.cl == nil || !o.enabled():
		if s.cl == nil && !o.enabled() {
			return nil
		}
		return fmt.Errorf("%w for cluster: cairn starts or stops clustering only at start", ErrReloadUnsupported)
	case o.Name != cur.Name, o.Host != "" && o.Host != cur.Host, o.Port != cur.Port:
		return fmt.Errorf("%w for cluster name, host or port: cairn sets them at start only", ErrReloadUnsupported)
	case !reflect.DeepEqual(o.TLS, cur.TLS):
		return fmt.Errorf("%w for cluster.tls: cairn applies the cluster's TLS at start only", ErrReloadUnsupported)
	}
	o.Host = cur.Host
	if err := o.validate(); err != nil {
		return err
	}
	next := settingsOf(&o)
	cl := s.cl
	cl.mu.Lock()
	if cl.closing {
		cl.mu.Unlock()
		return nil
	}
	old := cl.set.Swap(next)
	var removed, added []*url.URL
	for _, u := range old.routes {
		if !slices.ContainsFunc(next.routes, func(v *url.URL) bool { return sameRoute(u, v) }) {
			removed = append(removed, u)
		}
	}
	for _, u := range next.routes {
		if !slices.ContainsFunc(old.routes, func(v *url.URL) bool { return sameRoute(u, v) }) {
			added = append(added, u)
		}
	}
	var closing []*client
	for _, u := range removed {
		if stop, ok := cl.dialers[u.String()]; ok {
			close(stop)
			delete(cl.dialers, u.String())
		}
		for _, c := range cl.conns {
			if c.route.url != nil && sameRoute(c.route.url, u) {
				closing = append(closing, c)
			}
		}
	}
	var unauthorized []*client
	if next.username != old.username || next.password != old.password {
		unauthorized = s.unauthorizedRoutesLocked(next)
	}
	cl.mu.Unlock()
	for _, c := range closing {
		c.setReason(ReasonRouteRemoved)
		c.closeNow()
		s.log.Noticef("Removed route %s", c.route.url.Redacted())
	}
	for _, c := range unauthorized {
		c.routeAuthFailed(c.route.connUser)
		c.setReason(ReasonAuthenticationViolation)
		c.out.appendBytes(route.AppendErr(nil, errRouteAuth.Text))
		c.out.markClosing()
	}
	for _, u := range added {
		s.startExplicit(u)
	}
	return nil
}

// sameRoute reports whether two route URLs are the same route: the same
// host and port, and the same credentials (nats-server urlsAreEqual).
func sameRoute(a, b *url.URL) bool {
	return a.Host == b.Host && a.User.String() == b.User.String()
}

// startExplicit starts the dialer of the explicit route u, which stops at
// shutdown or when a reload removes u.
func (s *Server) startExplicit(u *url.URL) {
	stop := make(chan struct{})
	s.cl.mu.Lock()
	if s.cl.closing {
		s.cl.mu.Unlock()
		return
	}
	s.cl.dialers[u.String()] = stop
	s.cl.mu.Unlock()
	s.goroutine(func() { s.solicitExplicit(u, stop) })
}

// unauthorizedRoutesLocked returns the accepted routes whose CONNECT
// credentials set no longer accepts (nats-server v2.15.2
// reloadAuthorization closes them with an authorization violation); the
// routes this server dialed stay, and those not registered yet meet the
// new credentials at their CONNECT. cluster.mu is held.
func (s *Server) unauthorizedRoutesLocked(set *clusterSettings) []*client {
	var out []*client
	for _, c := range s.cl.conns {
		rc := c.route
		if rc.solicited || !rc.registered || set.username == "" || (rc.connUser == set.username && rc.connPass == set.password) {
			continue
		}
		out = append(out, c)
	}
	return out
}
