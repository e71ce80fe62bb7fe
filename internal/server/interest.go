package server

import (
	"sort"

	"github.com/cairnmq/cairn/internal/route"
)

// Local interest crosses routes as RS+ and RS- (docs/routes.md), per
// account. Only the subscriptions of client connections and of service
// imports count, with the shadows of those of an account that imports
// streams (shadow.go): JetStream's internal subscriptions stay local, since each server
// keeps its own streams until streams are replicated. Every change is counted and written to every
// registered route under cluster.mu, so each peer receives the changes in
// the order they happened (nats-server #8233), and a route registering
// concurrently receives either the whole interest including the change or
// the interest before it followed by the change (nats-server #138).

// announced reports whether sub is interest the peers are told about: a
// client's subscription, a service import's (imports.go), a system
// request subscription (sysreq.go) or a clustered JetStream's not
// withdrawn. A stream import's subscription is not: the importing
// account's subscriptions are announced in the exporter instead, as
// their shadows (shadow.go).
func announced(sub *subscription) bool {
	if sub.client == nil {
		return sub.shared() && !sub.withdrawn.Load() && sub.interest == nil
	}
	return sub.client.route == nil
}

// withdrawInterest stops announcing a shared internal subscription to the
// peers (RS- once no other local subscription has its subject) while it
// stays in the subject index, delivered what they route until they
// learned it (InternalSub.Withdraw); once only, and not for a
// subscription already removed.
func (s *Server) withdrawInterest(sub *subscription) {
	if s.cl == nil || !sub.shared() {
		return
	}
	cl := s.cl
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if sub.removed.Load() || !announced(sub) {
		return
	}
	cl.lineBuf = cl.lineBuf[:0]
	cl.removeInterestLocked(sub.acc.name, sub.subject, sub.queue)
	sub.withdrawn.Store(true)
	s.sendInterestLocked()
}

// interestOfLocked returns the interest counts of an account. cluster.mu
// is held.
func (cl *cluster) interestOfLocked(acc string) *route.Interest {
	in := cl.interest[acc]
	if in == nil {
		in = route.NewInterest(acc)
		cl.interest[acc] = in
	}
	return in
}

// appendAllInterestLocked appends every account's interest (a route that
// registers gets it whole), accounts in name order. cluster.mu is held.
func (cl *cluster) appendAllInterestLocked(dst []byte) []byte {
	names := make([]string, 0, len(cl.interest))
	for n := range cl.interest {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		dst = cl.interest[n].AppendAll(dst)
	}
	return dst
}

// interestAdded announces a new local subscription to the peers.
func (s *Server) interestAdded(sub *subscription) {
	if s.cl == nil || !announced(sub) {
		return
	}
	cl := s.cl
	cl.mu.Lock()
	cl.lineBuf = cl.lineBuf[:0]
	cl.addInterestLocked(sub.acc.name, sub.subject, sub.queue)
	s.sendInterestLocked()
	cl.mu.Unlock()
}

// interestRemoved withdraws local subscriptions from the peers.
func (s *Server) interestRemoved(subs ...*subscription) {
	if s.cl == nil || len(subs) == 0 {
		return
	}
	cl := s.cl
	cl.mu.Lock()
	cl.lineBuf = cl.lineBuf[:0]
	for _, sub := range subs {
		if announced(sub) {
			cl.removeInterestLocked(sub.acc.name, sub.subject, sub.queue)
		}
	}
	s.sendInterestLocked()
	cl.mu.Unlock()
}

// sendInterestLocked writes cluster.lineBuf to every registered route.
// cluster.mu is held.
func (s *Server) sendInterestLocked() {
	cl := s.cl
	if len(cl.lineBuf) == 0 {
		return
	}
	for _, r := range cl.routes {
		r.enqueueRoute(cl.lineBuf)
	}
	if cap(cl.lineBuf) > 64<<10 {
		cl.lineBuf = nil
	}
}
