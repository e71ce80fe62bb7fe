package server

import (
	"errors"
	"sync"

	"github.com/cairnmq/cairn/internal/protocol"
)

// CloseReason says why a connection closed: the reason /connz?state=closed
// reports (nats-server v2.15.2 monitor.go ClosedState.String). The first
// cause recorded wins; later ones (the read error that follows a close)
// are ignored.
type CloseReason int32

// Close reasons, with nats-server's texts (String).
const (
	ReasonUnknown CloseReason = iota
	ReasonClientClosed
	ReasonSlowConsumerPendingBytes
	ReasonSlowConsumerWriteDeadline
	ReasonWriteError
	ReasonReadError
	ReasonParseError
	ReasonStaleConnection
	ReasonProtocolViolation
	ReasonBadClientProtocolVersion
	ReasonMaxConnectionsExceeded
	ReasonMaxPayloadExceeded
	ReasonMaxControlLineExceeded
	ReasonNoRespondersRequiresHeaders
	ReasonServerShutdown
	ReasonWrongPort
	ReasonDuplicateRoute
	ReasonRouteRemoved
	ReasonClusterNameConflict
	ReasonDuplicateServerName
	ReasonAuthenticationViolation
	ReasonMsgHeaderViolation
	ReasonMaxAccountConnectionsExceeded
	ReasonMaxSubscriptionsExceeded
	ReasonAuthenticationTimeout
	ReasonAuthenticationExpired
	ReasonTLSHandshakeError
	ReasonRevocation
	ReasonKicked
)

var reasonTexts = [...]string{
	ReasonUnknown:                       "Unknown State",
	ReasonClientClosed:                  "Client Closed",
	ReasonSlowConsumerPendingBytes:      "Slow Consumer (Pending Bytes)",
	ReasonSlowConsumerWriteDeadline:     "Slow Consumer (Write Deadline)",
	ReasonWriteError:                    "Write Error",
	ReasonReadError:                     "Read Error",
	ReasonParseError:                    "Parse Error",
	ReasonStaleConnection:               "Stale Connection",
	ReasonProtocolViolation:             "Protocol Violation",
	ReasonBadClientProtocolVersion:      "Bad Client Protocol Version",
	ReasonMaxConnectionsExceeded:        "Maximum Connections Exceeded",
	ReasonMaxPayloadExceeded:            "Maximum Message Payload Exceeded",
	ReasonMaxControlLineExceeded:        "Maximum Control Line Exceeded",
	ReasonNoRespondersRequiresHeaders:   "No Responders Requires Headers",
	ReasonServerShutdown:                "Server Shutdown",
	ReasonWrongPort:                     "Incorrect Port",
	ReasonDuplicateRoute:                "Duplicate Route",
	ReasonRouteRemoved:                  "Route Removed",
	ReasonClusterNameConflict:           "Cluster Name Conflict",
	ReasonDuplicateServerName:           "Duplicate Server Name",
	ReasonAuthenticationViolation:       "Authentication Failure",
	ReasonMsgHeaderViolation:            "Message Header Violation",
	ReasonMaxAccountConnectionsExceeded: "Maximum Account Connections Exceeded",
	ReasonMaxSubscriptionsExceeded:      "Maximum Subscriptions Exceeded",
	ReasonAuthenticationTimeout:         "Authentication Timeout",
	ReasonAuthenticationExpired:         "Authentication Expired",
	ReasonTLSHandshakeError:             "TLS Handshake Failure",
	ReasonRevocation:                    "Credentials Revoked",
	ReasonKicked:                        "Kicked",
}

// String returns nats-server's text for the reason.
func (r CloseReason) String() string {
	if r < 0 || int(r) >= len(reasonTexts) {
		return reasonTexts[ReasonUnknown]
	}
	return reasonTexts[r]
}

// setReason records why the connection closes, unless a reason was
// recorded already.
func (c *client) setReason(r CloseReason) {
	c.reason.CompareAndSwap(int32(ReasonUnknown), int32(r))
}

// protocolReason maps an error that closes a connection to its reason,
// as nats-server's closeConnection calls name them.
func protocolReason(err error) CloseReason {
	var rr *routeRefusal
	switch {
	case errors.As(err, &rr):
		return rr.reason // a route to self, a duplicate route, ... (routeconn.go)
	case errors.Is(err, protocol.ErrMaxPayload):
		return ReasonMaxPayloadExceeded
	case errors.Is(err, errAccountConns):
		return ReasonMaxAccountConnectionsExceeded
	case errors.Is(err, errSubsAtConnect):
		return ReasonMaxSubscriptionsExceeded
	case errors.Is(err, protocol.ErrControlLine):
		return ReasonMaxControlLineExceeded
	case errors.Is(err, errInvalidProtocol):
		return ReasonBadClientProtocolVersion
	case errors.Is(err, errNoRespHeaders):
		return ReasonNoRespondersRequiresHeaders
	case errors.Is(err, errHeadersNotSupported), errors.Is(err, protocol.ErrNoHeaders):
		return ReasonMsgHeaderViolation
	case errors.Is(err, errClientOnRoute):
		return ReasonWrongPort
	case errors.Is(err, errRouteAuth), errors.Is(err, errAuthViolation):
		return ReasonAuthenticationViolation
	case errors.Is(err, errBadConnect), errors.Is(err, protocol.ErrClientErr):
		return ReasonProtocolViolation
	}
	return ReasonParseError
}

// DefaultMaxClosedClients is how many closed connections /connz keeps
// (nats-server's max_closed_clients default, DEFAULT_MAX_CLOSED_CLIENTS).
const DefaultMaxClosedClients = 10000

// MaxClosedSubs bounds the subscriptions kept per closed connection, so
// that the ring of closed connections has a bounded size (nats-server
// keeps them all; docs/compatibility.md).
const MaxClosedSubs = 128

// closedRing keeps the last closed client connections, oldest first once
// full. Its mutex is a leaf.
type closedRing struct {
	mu   sync.Mutex
	buf  []ConnInfo
	next int  // where the next one goes
	full bool // buf has wrapped
	max  int
}

func (r *closedRing) add(ci ConnInfo) {
	if r.max <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < r.max {
		r.buf = append(r.buf, ci)
		return
	}
	r.buf[r.next] = ci
	r.next = (r.next + 1) % r.max
	r.full = true
}

// list returns a copy of the closed connections, oldest first.
func (r *closedRing) list() []ConnInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ConnInfo, 0, len(r.buf))
	if r.full {
		out = append(out, r.buf[r.next:]...)
		return append(out, r.buf[:r.next]...)
	}
	return append(out, r.buf...)
}
