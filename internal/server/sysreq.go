package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

// The system account's request API (docs/monitoring.md, "The system
// account's request API"; nats-server v2.15.2 events.go
// initEventTracking): the server subscribes, in the system account, to
//
//	$SYS.REQ.SERVER.PING          (every server answers: STATSZ)
//	$SYS.REQ.SERVER.PING.<X>      (every server answers)
//	$SYS.REQ.SERVER.<id>.<X>      (only the server with that id answers)
//	$SYS.REQ.ACCOUNT.<acc>.<X>    (every server answers about its part
//	                               of the account)
//	$SYS.REQ.USER.<acc>.INFO      (not announced: the requester's server
//	                               answers)
//
// and every other account imports from the system account (nats-server
// addSystemAccountImports): $SYS.REQ.ACCOUNT.PING.CONNZ and
// $SYS.REQ.SERVER.PING.CONNZ as $SYS.REQ.ACCOUNT.<acc>.CONNZ,
// $SYS.REQ.ACCOUNT.PING.STATZ as $SYS.REQ.ACCOUNT.<acc>.STATZ, and
// $SYS.REQ.USER.INFO as $SYS.REQ.USER.<acc>.INFO, so that a user asks
// about its own account. A USER.INFO request reaches the handler with
// the Nats-Request-Info JSON the import added (who asked) as its body.
//
// and answers each request with what a SysRequestHandler (the monitoring
// package's SysRequest) builds, published in the system account to the
// request's reply subject. Only clients of the system account can send
// these requests, since accounts are separate subject namespaces.
//
// The subscriptions are announced to the peers like a client's, so that
// a PING reaches every server of a cluster and each answers, as
// `nats server ls` expects. A subscription's handler runs on the
// publisher's goroutine and must not block: it copies the request into a
// bounded queue, and one goroutine answers the queued requests in order
// (nats-server's internal receive queue). When the queue is full the
// request is dropped and the requester times out, as it would if the
// server were too busy to answer; so is a request whose options exceed
// sysRequestMaxBody (they are a few hundred bytes of JSON), which keeps
// the queue's memory under sysRequestQueue * sysRequestMaxBody.

// SysRequestHandler answers one request: the subject it was sent to and
// its payload (JSON options, or empty). It returns the reply's payload,
// or ok false to stay silent (a filter this server does not match). It
// runs on the server's system request goroutine, one request at a time.
type SysRequestHandler func(subject string, body []byte) (reply []byte, ok bool)

// sysRequestQueue is how many requests may wait for an answer, and
// sysRequestMaxBody the largest request payload queued (bytes).
const (
	maxProfilez       = 2 // PROFILEZ requests answered at once, each on its own goroutine
	sysRequestQueue   = 256
	sysRequestMaxBody = 64 << 10
)

// sysRequest is a request waiting for its answer.
type sysRequest struct {
	subject, reply string
	body           []byte
}

// ErrNoSystemAccount is returned by ServeSystemRequests when the server
// has no system account (no_system_account, or operator mode without
// one).
var ErrNoSystemAccount = errors.New("server: no system account")

// ErrAlreadyServing is returned by a second call of ServeSystemRequests.
var ErrAlreadyServing = errors.New("server: system requests are already served")

// ServeSystemRequests subscribes the system account to the $SYS request
// subjects and answers them with h until Shutdown. It returns
// ErrNoSystemAccount without a system account, ErrAlreadyServing when
// called twice, or the subscription's error.
func (s *Server) ServeSystemRequests(h SysRequestHandler) error {
	acc := s.sysacc
	if acc == nil {
		return ErrNoSystemAccount
	}
	s.mu.Lock()
	if s.sysReqs != nil {
		s.mu.Unlock()
		return ErrAlreadyServing
	}
	q := make(chan sysRequest, sysRequestQueue)
	s.sysReqs = q
	s.mu.Unlock()
	enqueue := func(subj, reply string, hdr, data []byte) {
		if reply == "" {
			return // nowhere to answer (nats-server zReq does not answer either)
		}
		if len(data) > sysRequestMaxBody {
			s.log.Debugf("System request on %s dropped: %d bytes of options", subj, len(data))
			return
		}
		if isUserInfo(subj) {
			data = requestInfo(hdr)
		}
		select {
		case q <- sysRequest{subject: subj, reply: reply, body: append([]byte(nil), data...)}:
		default:
			s.log.Debugf("System request queue full (%d): dropped a request on %s", sysRequestQueue, subj)
		}
	}
	for _, subj := range []string{"$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.*", fmt.Sprintf("$SYS.REQ.SERVER.%s.*", s.id), "$SYS.REQ.ACCOUNT.*.*"} {
		if _, err := s.subscribeIn(acc, subj, "", enqueue, subKindSystem); err != nil {
			return fmt.Errorf("server: subscribe to %s: %w", subj, err)
		}
	}
	if _, err := s.subscribeIn(acc, "$SYS.REQ.USER.*.INFO", "", enqueue, subKindInternal); err != nil {
		return fmt.Errorf("server: subscribe to $SYS.REQ.USER.*.INFO: %w", err)
	}
	if !s.goroutine(func() { s.answerSystemRequests(acc, q, h) }) {
		return errShuttingDown
	}
	return nil
}

// answerSystemRequests answers the queued requests until shutdown.
func (s *Server) answerSystemRequests(acc *account, q <-chan sysRequest, h SysRequestHandler) {
	profiling := make(chan struct{}, maxProfilez)
	for {
		select {
		case <-s.quit:
			return
		case r := <-q:
			if !strings.HasSuffix(r.subject, ".PROFILEZ") {
				s.answerSystemRequest(acc, r, h)
				continue
			}
			select { // a CPU profile takes seconds: its own goroutine, as nats-server's
			case profiling <- struct{}{}:
				if !s.goroutine(func() { s.answerSystemRequest(acc, r, h); <-profiling }) {
					return
				}
			default:
				s.log.Debugf("System request on %s dropped: %d profiles are being taken", r.subject, cap(profiling))
			}
		}
	}
}

// answerSystemRequest answers one request.
func (s *Server) answerSystemRequest(acc *account, r sysRequest, h SysRequestHandler) {
	if reply, ok := h(r.subject, r.body); ok {
		s.publishIn(acc, r.reply, r.reply, "", nil, reply, pubNormal)
	}
}

// SystemAccount returns the name of the system account, "" when there is
// none.
func (s *Server) SystemAccount() string {
	if s.sysacc == nil {
		return ""
	}
	return s.sysacc.name
}

// isUserInfo reports whether subj is $SYS.REQ.USER.<acc>.INFO.
func isUserInfo(subj string) bool {
	const p = "$SYS.REQ.USER."
	return len(subj) > len(p)+len(".INFO") && subj[:len(p)] == p && subj[len(subj)-len(".INFO"):] == ".INFO"
}

// requestInfo returns the value of the Nats-Request-Info header of a
// header block, nil without one.
func requestInfo(hdr []byte) []byte {
	for _, l := range bytes.Split(hdr, []byte("\r\n")) {
		if v, ok := bytes.CutPrefix(l, []byte(requestInfoHeader+":")); ok {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// systemExports are the services the system account exports
// (nats-server v2.15.2 addSystemAccountExports, less $SYS.DEBUG.SUBSCRIBERS
// and $JS.API.>, which cairn does not route through the system account:
// docs/compatibility.md): the account-scoped CONNZ and STATZ, answered by
// every server of a cluster (so their responses are streamed), and
// USER.INFO, answered by the requester's server.
var systemExports = []config.Export{
	{Service: true, Subject: "$SYS.REQ.ACCOUNT.*.CONNZ", ResponseType: "stream"},
	{Service: true, Subject: "$SYS.REQ.ACCOUNT.*.STATZ", ResponseType: "stream"},
	{Service: true, Subject: "$SYS.REQ.USER.*.INFO"},
}

// startSystemImports gives every account but the system account the
// system account's account-scoped services (above), and the system
// account its own USER.INFO (nats-server registerSystemImports,
// addSystemAccountExports). It runs in Start, after startImports.
func (s *Server) startSystemImports() error {
	sys := s.sysacc
	if sys == nil {
		return nil
	}
	sys.sysExports = systemExports
	for _, acc := range s.accountsSorted() {
		if err := s.addSystemImports(acc); err != nil {
			return err
		}
	}
	return nil
}

// addSystemImports gives acc the imports of the system account's services
// every account has (its CONNZ, STATZ and USER.INFO); none without a
// system account.
func (s *Server) addSystemImports(acc *account) error {
	sys := s.sysacc
	if sys == nil {
		return nil
	}
	imports := []config.Import{
		{Service: true, Account: sys.name, To: "$SYS.REQ.ACCOUNT.PING.CONNZ", Subject: "$SYS.REQ.ACCOUNT." + acc.name + ".CONNZ"},
		{Service: true, Account: sys.name, To: "$SYS.REQ.SERVER.PING.CONNZ", Subject: "$SYS.REQ.ACCOUNT." + acc.name + ".CONNZ"},
		{Service: true, Account: sys.name, To: "$SYS.REQ.ACCOUNT.PING.STATZ", Subject: "$SYS.REQ.ACCOUNT." + acc.name + ".STATZ"},
		{Service: true, Account: sys.name, To: "$SYS.REQ.USER.INFO", Subject: "$SYS.REQ.USER." + acc.name + ".INFO", Share: true},
	}
	if acc == sys {
		imports = imports[3:]
	}
	for _, im := range imports {
		if _, err := s.importService(acc, sys, &im); err != nil {
			return fmt.Errorf("server: system import %s into %s: %w", im.To, acc.name, err)
		}
	}
	acc.sysImports = imports
	return nil
}

// UserDetail is what $SYS.REQ.USER.INFO reports of a connected client's
// user beyond its name and account (nats-server v2.15.2 events.go
// UserInfo).
type UserDetail struct {
	// NameTag is the user JWT's name, "" without a JWT (user_name).
	NameTag string
	// Permissions are the user's as nats-server lists them
	// (auth.Perms.Listed), nil when it has none; shared, not to be
	// modified.
	Permissions *config.Permissions
	// Expires is when the user's JWT expires, zero when it does not or
	// without a JWT.
	Expires time.Time
}

// ClientUser returns the detail of the user of the open client
// connection cid (the "id" of a system service request's
// Nats-Request-Info); ok is false when no such client is open or it has
// not authenticated.
func (s *Server) ClientUser(cid uint64) (d UserDetail, ok bool) {
	s.mu.Lock()
	c := s.clients[cid]
	s.mu.Unlock()
	if c == nil {
		return d, false
	}
	c.mu.Lock()
	u := c.meta.authUser
	c.mu.Unlock()
	if u == nil {
		return d, false
	}
	return UserDetail{NameTag: u.NameTag, Permissions: u.Perms.Listed(), Expires: u.ClaimExpires}, true
}
