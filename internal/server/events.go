package server

import (
	"fmt"
	"time"
)

// The system account's events (docs/monitoring.md, "Events"; nats-server
// v2.15.2 events.go): with a system account and ServeSystemEvents, the
// server publishes, in the system account,
//
//	$SYS.SERVER.<id>.STATSZ          every statsz interval; the first
//	                                 after 250ms, the interval doubling
//	                                 from there up to the configured one
//	                                 (nats-server startStatszTimer)
//	$SYS.ACCOUNT.<acc>.CONNECT       a client authenticated (each CONNECT)
//	$SYS.ACCOUNT.<acc>.DISCONNECT    a client closed: an authenticated one
//	                                 in its account, any other in $G (the
//	                                 account every client starts in)
//	$SYS.ACCOUNT.<acc>.SERVER.CONNS  and $SYS.SERVER.ACCOUNT.<acc>.CONNS:
//	                                 the account's connection count
//	                                 changed (not for $G)
//	$SYS.SERVER.<id>.CLIENT.AUTH.ERR a client failed to authenticate
//	                                 (nats-server sendAuthErrorEvent)
//	$SYS.SERVER.<id>.LAMEDUCK        lame duck mode began (ldm.go)
//	$SYS.SERVER.<id>.SHUTDOWN        Shutdown began (before clients close)
//
// and, in the account the failing client was in ($G: nats-server
// sendAccountAuthErrorEvent, for the account's owner), the same failed
// authentication on $SYS.ACCOUNT.CLIENT.AUTH.ERR when its credentials
// were refused (not when it sent something other than CONNECT first, or
// a CONNECT naming an account: nats-server sends only the server's event
// then). An authentication error event has the DISCONNECT payload with
// the reason "Authentication Failure"; the client's user is the name or
// nkey it gave, "[REDACTED]" for a token, never a password, token or
// signature. The DISCONNECT of the closed connection follows.
//
// The payloads are built by a SystemEvents (the monitoring package, which
// owns the JSON shapes). A client's read loop must not block or build
// JSON, so connect and disconnect events go through a bounded queue
// (sysEventQueue) to one goroutine, which also runs the statsz timer; a
// full queue drops the event (logged at debug), as a slow subscriber
// would miss it. STATSZ and the client events are built only when
// someone subscribes to them (so that a flood of failed logins costs no
// JSON), as nats-server does for STATSZ on a standalone server; in a
// cluster they are always published (peers may subscribe).

// StatszInterval is nats-server v2.15.2's default statsz heartbeat
// interval (events.go statsHBInterval).
const StatszInterval = 10 * time.Second

// statszFirst is the delay of the first STATSZ after start.
const statszFirst = 250 * time.Millisecond

// sysEventQueue bounds the client events waiting to be published.
const sysEventQueue = 1024

// ClientEvent is a client connection that authenticated (Connect true),
// that closed, or that failed to authenticate (AuthError): a snapshot of
// the connection, with Stop and Reason set unless Connect.
type ClientEvent struct {
	Connect bool
	// AuthError marks a failed authentication, published on
	// $SYS.SERVER.<id>.CLIENT.AUTH.ERR; with AccountAuthError also on
	// $SYS.ACCOUNT.CLIENT.AUTH.ERR in the client's account. Its payload
	// is a disconnect's.
	AuthError, AccountAuthError bool
	Conn                        ConnInfo
	// AccountConns is the client account's connection count right after
	// the event (the SERVER.CONNS event's; counted when it happens, as
	// nats-server does, not when the queued event is published).
	AccountConns int
}

// SystemEvents builds the payloads of the system account's events; its
// methods run on the server's event goroutine, or for Shutdown on the
// goroutine calling Server.Shutdown or LameDuck, and return the JSON to
// publish. A client's goroutine builds none: the connection count of a
// SERVER.CONNS event is taken with the event (ClientEvent.AccountConns).
type SystemEvents interface {
	// Statsz is the payload of $SYS.SERVER.<id>.STATSZ (a ServerStatsMsg).
	Statsz() []byte
	// Client is the payload of a CONNECT or DISCONNECT advisory.
	Client(ev ClientEvent) []byte
	// AccountConns is the payload of $SYS.ACCOUNT.<acc>.SERVER.CONNS (an
	// AccountNumConns) for an account with conns connections.
	AccountConns(account string, conns int) []byte
	// Shutdown is the payload of $SYS.SERVER.<id>.SHUTDOWN and of
	// $SYS.SERVER.<id>.LAMEDUCK (a ServerInfo).
	Shutdown() []byte
}

// sysEvents is the state of ServeSystemEvents.
type sysEvents struct {
	b      SystemEvents
	q      chan ClientEvent
	statsz time.Duration
}

// ServeSystemEvents publishes the system account's events with payloads
// from b until Shutdown, the statsz heartbeat every statsz (0 means
// StatszInterval). It returns ErrNoSystemAccount without a system
// account, ErrAlreadyServing when called twice.
func (s *Server) ServeSystemEvents(b SystemEvents, statsz time.Duration) error {
	if s.sysacc == nil {
		return ErrNoSystemAccount
	}
	if statsz <= 0 {
		statsz = StatszInterval
	}
	ev := &sysEvents{b: b, q: make(chan ClientEvent, sysEventQueue), statsz: statsz}
	s.mu.Lock()
	if s.sysEv != nil {
		s.mu.Unlock()
		return ErrAlreadyServing
	}
	s.sysEv = ev
	s.mu.Unlock()
	if !s.goroutine(func() { s.publishEvents(ev) }) {
		return errShuttingDown
	}
	return nil
}

// events returns the event state, nil when events are not served or
// Shutdown began.
func (s *Server) events() *sysEvents {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sysEv
}

// clientEvent queues a client event; it never blocks.
func (s *Server) clientEvent(ev ClientEvent) {
	e := s.events()
	if e == nil {
		return
	}
	select {
	case e.q <- ev:
	default:
		s.log.Debugf("System event queue full (%d): dropped a client event of cid:%d", sysEventQueue, ev.Conn.CID)
	}
}

// publishEvents is the event goroutine.
func (s *Server) publishEvents(ev *sysEvents) {
	interval := statszFirst
	t := time.NewTimer(interval)
	defer t.Stop()
	statszSubj := fmt.Sprintf("$SYS.SERVER.%s.STATSZ", s.id)
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			interval = min(interval*2, ev.statsz)
			t.Reset(interval)
			if s.wantsEvent(statszSubj) {
				s.publishIn(s.sysacc, statszSubj, statszSubj, "", nil, ev.b.Statsz(), pubNormal)
			}
		case ce := <-ev.q:
			if ce.AuthError {
				s.authErrorEvent(ev.b, &ce)
				continue
			}
			kind := "DISCONNECT"
			if ce.Connect {
				kind = "CONNECT"
			}
			subj := fmt.Sprintf("$SYS.ACCOUNT.%s.%s", ce.Conn.Account, kind)
			if s.wantsEvent(subj) {
				s.publishIn(s.sysacc, subj, subj, "", nil, ev.b.Client(ce), pubNormal)
			}
			if ce.Conn.Account != s.gacc.name {
				subjs := []string{
					fmt.Sprintf("$SYS.SERVER.ACCOUNT.%s.CONNS", ce.Conn.Account),
					fmt.Sprintf("$SYS.ACCOUNT.%s.SERVER.CONNS", ce.Conn.Account),
				}
				if s.wantsEvent(subjs[0]) || s.wantsEvent(subjs[1]) {
					conns := ev.b.AccountConns(ce.Conn.Account, ce.AccountConns)
					for _, subj := range subjs {
						s.publishIn(s.sysacc, subj, subj, "", nil, conns, pubNormal)
					}
				}
			}
		}
	}
}

// authErrorEvent publishes a failed authentication: in the client's
// account first, then in the system account (nats-server's order).
func (s *Server) authErrorEvent(b SystemEvents, ce *ClientEvent) {
	if acc := s.account(ce.Conn.Account); acc != nil && ce.AccountAuthError {
		const subj = "$SYS.ACCOUNT.CLIENT.AUTH.ERR"
		if s.cl != nil || s.hasInterestIn(acc, subj) {
			s.publishIn(acc, subj, subj, "", nil, b.Client(*ce), pubNormal)
		}
	}
	subj := fmt.Sprintf("$SYS.SERVER.%s.CLIENT.AUTH.ERR", s.id)
	if s.wantsEvent(subj) {
		s.publishIn(s.sysacc, subj, subj, "", nil, b.Client(*ce), pubNormal)
	}
}

// wantsEvent reports whether an event on subj of the system account may
// have a receiver: a subscriber here, or in a cluster one on a peer.
func (s *Server) wantsEvent(subj string) bool {
	return s.cl != nil || s.hasInterestIn(s.sysacc, subj)
}

// lameDuckEvent publishes $SYS.SERVER.<id>.LAMEDUCK (nats-server
// sendLDMShutdownEventLocked); LameDuck calls it before it stops
// accepting clients. The events go on.
func (s *Server) lameDuckEvent() {
	ev := s.events()
	if ev == nil {
		return
	}
	subj := fmt.Sprintf("$SYS.SERVER.%s.LAMEDUCK", s.id)
	s.publishIn(s.sysacc, subj, subj, "", nil, ev.b.Shutdown(), pubNormal)
}

// shutdownEvent publishes $SYS.SERVER.<id>.SHUTDOWN and stops the events
// (nats-server sendShutdownEvent); Shutdown calls it before the clients
// are closed, so that their buffered copies are flushed.
func (s *Server) shutdownEvent() {
	s.mu.Lock()
	ev := s.sysEv
	s.sysEv = nil
	s.mu.Unlock()
	if ev == nil {
		return
	}
	subj := fmt.Sprintf("$SYS.SERVER.%s.SHUTDOWN", s.id)
	s.publishIn(s.sysacc, subj, subj, "", nil, ev.b.Shutdown(), pubNormal)
}
