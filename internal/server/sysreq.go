package server

import (
	"errors"
	"fmt"
)

// The system account's request API (docs/monitoring.md, "The system
// account's request API"; nats-server v2.15.2 events.go
// initEventTracking): the server subscribes, in the system account, to
//
//	$SYS.REQ.SERVER.PING          (every server answers: STATSZ)
//	$SYS.REQ.SERVER.PING.<X>      (every server answers)
//	$SYS.REQ.SERVER.<id>.<X>      (only the server with that id answers)
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
	enqueue := func(subj, reply string, _, data []byte) {
		if reply == "" {
			return // nowhere to answer (nats-server zReq does not answer either)
		}
		if len(data) > sysRequestMaxBody {
			s.log.Debugf("System request on %s dropped: %d bytes of options", subj, len(data))
			return
		}
		select {
		case q <- sysRequest{subject: subj, reply: reply, body: append([]byte(nil), data...)}:
		default:
			s.log.Debugf("System request queue full (%d): dropped a request on %s", sysRequestQueue, subj)
		}
	}
	for _, subj := range []string{"$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.*", fmt.Sprintf("$SYS.REQ.SERVER.%s.*", s.id)} {
		if _, err := s.subscribeIn(acc, subj, "", enqueue, subKindSystem); err != nil {
			return fmt.Errorf("server: subscribe to %s: %w", subj, err)
		}
	}
	if !s.goroutine(func() { s.answerSystemRequests(acc, q, h) }) {
		return errShuttingDown
	}
	return nil
}

// answerSystemRequests answers the queued requests until shutdown.
func (s *Server) answerSystemRequests(acc *account, q <-chan sysRequest, h SysRequestHandler) {
	for {
		select {
		case <-s.quit:
			return
		case r := <-q:
			if reply, ok := h(r.subject, r.body); ok {
				s.publishIn(acc, r.reply, r.reply, "", nil, reply, pubNormal)
			}
		}
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
