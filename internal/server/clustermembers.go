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
	names, complete = []string{s.opts.ServerName}, true
	for _, u := range s.opts.Cluster.Routes {
		s.cl.mu.Lock()
		self := s.cl.selfURLs[strings.ToLower(u.Host)]
		s.cl.mu.Unlock()
		if self {
			continue
		}
		r := s.routeAt(u)
		if r == nil {
			complete = false
			continue
		}
		s.cl.mu.Lock()
		name := r.route.info.Name
		s.cl.mu.Unlock()
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names), complete
}
