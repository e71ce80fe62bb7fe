package server

import (
	"net/url"
	"slices"
	"strings"
)

// markSelfURL records that the explicit route u leads to this server.
func (s *Server) markSelfURL(u *url.URL) {
	s.cl.mu.Lock()
	if s.cl.selfURLs == nil {
		s.cl.selfURLs = map[string]bool{}
	}
	s.cl.selfURLs[strings.ToLower(u.Host)] = true
	s.cl.mu.Unlock()
}

// ClusterMembers returns the names of the servers the explicit routes
// (Options.Cluster.Routes) name, this server's own included, sorted and
// without repeats, and complete true once every explicit route has led
// either to this server itself or to a registered route; before that,
// complete is false and names holds what is known. When every server of
// a new cluster names the same servers, this is the voter set its
// JetStream meta group is bootstrapped with; otherwise it tells a server
// that its routes differ from its peers' (docs/cluster.md, "Growing
// the meta group"). nil, false when clustering is off; a server without
// explicit routes is complete on its own.
func (s *Server) ClusterMembers() (names []string, complete bool) {
	if s.cl == nil {
		return nil, false
	}
	configured, self, connected := s.ClusterRoutes()
	names = append([]string{s.opts.ServerName}, connected...)
	slices.Sort(names)
	return slices.Compact(names), self+len(connected) == len(configured)
}

// ClusterRoutes returns what became of the explicit routes
// (Options.Cluster.Routes) so far: configured, their addresses (host:port)
// in the configuration's order; self, how many of them led to this
// server itself; connected, the names of the servers the others lead to
// over a registered route, in the configuration's order (a route not
// resolved yet is in neither). The JetStream cluster layer logs them
// while it waits to enter its meta group. All empty when clustering is
// off.
func (s *Server) ClusterRoutes() (configured []string, self int, connected []string) {
	if s.cl == nil {
		return nil, 0, nil
	}
	for _, u := range s.opts.Cluster.Routes {
		configured = append(configured, u.Host)
		s.cl.mu.Lock()
		isSelf := s.cl.selfURLs[strings.ToLower(u.Host)]
		s.cl.mu.Unlock()
		if isSelf {
			self++
			continue
		}
		r := s.routeAt(u)
		if r == nil {
			continue
		}
		s.cl.mu.Lock()
		name := r.route.info.Name
		s.cl.mu.Unlock()
		connected = append(connected, name)
	}
	return configured, self, connected
}
