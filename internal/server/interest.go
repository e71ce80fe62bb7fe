package server

// Local interest crosses routes as RS+ and RS- (docs/routes.md). Only the
// subscriptions of client connections count: JetStream's internal
// subscriptions stay local, since each server keeps its own streams until
// streams are replicated. Every change is counted and written to every
// registered route under cluster.mu, so each peer receives the changes in
// the order they happened (nats-server #8233), and a route registering
// concurrently receives either the whole interest including the change or
// the interest before it followed by the change (nats-server #138).

// interestAdded announces a new local subscription to the peers.
func (s *Server) interestAdded(sub *subscription) {
	if s.cl == nil || sub.client == nil || sub.client.route != nil {
		return
	}
	cl := s.cl
	cl.mu.Lock()
	cl.lineBuf = cl.interest.Add(cl.lineBuf[:0], sub.subject, sub.queue)
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
		if sub.client != nil && sub.client.route == nil {
			cl.lineBuf = cl.interest.Remove(cl.lineBuf, sub.subject, sub.queue)
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
