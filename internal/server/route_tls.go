package server

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

// TLS on the cluster port (the cluster block's tls; docs/routes.md, "TLS";
// nats-server v2.15.2 route.go createRoute, client.go doTLSHandshake).
// With it, every connection of the cluster port starts with a TLS
// handshake, before any byte of the route protocol, on both sides:
//
//	dialer                                         acceptor (cluster port)
//	  | ---------------- TCP connect ----------------> |
//	  | <======== TLS handshake (both certificates) ==> |  within tls.timeout (2 s)
//	  | <-------- INFO {..."tls_required":true,         |
//	  |            "tls_verify":true...}  (inside TLS)  |
//	  | -------- CONNECT / RAFT ... (inside TLS) -----> |
//
// The acceptor is the TLS server, the dialer the TLS client, and each
// requires and verifies the other's certificate against ca_file (the
// system's roots without one), whatever verify says: routes are mutual.
// The dialer checks the acceptor's certificate against the host it
// dialed; when that is an IP address (routes learned from gossip, the Raft
// transport's peers), against the first host name among the explicit
// routes, if any, as nats-server does (saveRouteTLSName), until a
// certificate fails to match that name. insecure skips the dialer's check
// (not the acceptor's) and is warned about at start. A connection that
// fails the handshake (plain text, an unknown CA, a name that does not
// match, an unpinned certificate, silence) is closed without a word and
// logged at error level on both sides, with the subject and SHA-256 of
// each certificate that could not be verified.

// routeTLS is the cluster port's TLS, built once by New; nil without.
type routeTLS struct {
	conf    *tls.Config // config.TLS.RouteConfig: mutual verification
	timeout time.Duration
	pinned  map[string]bool // hex SHA-256 of allowed peer SPKIs; nil: any
	expiry  time.Time       // NotAfter of this server's certificate

	mu   sync.Mutex
	name string // host name used to verify a peer dialed by IP; guarded by mu
}

// clusterTLSInsecureWarning is logged at start when the cluster's tls
// block says insecure (nats-server v2.15.2 route.go).
const clusterTLSInsecureWarning = "TLS certificate chain and hostname of solicited routes will not be verified. DO NOT USE IN PRODUCTION!"

// newRouteTLS builds the cluster port's TLS from the cluster options, or
// nil when the cluster block has no tls. Its errors are config's
// (certificate and CA files).
func newRouteTLS(o *ClusterOptions) (*routeTLS, error) {
	conf, err := o.TLS.RouteConfig()
	if err != nil || conf == nil {
		return nil, err
	}
	rt := &routeTLS{conf: conf, timeout: o.TLS.Timeout}
	if rt.timeout <= 0 {
		rt.timeout = config.DefaultTLSTimeout
	}
	if leaf := conf.Certificates[0].Leaf; leaf != nil {
		rt.expiry = leaf.NotAfter
	}
	if o.TLS.PinnedCerts != nil {
		rt.pinned = map[string]bool{}
		for _, p := range o.TLS.PinnedCerts {
			rt.pinned[p] = true
		}
	}
	for _, u := range o.Routes {
		if net.ParseIP(u.Hostname()) == nil {
			rt.name = u.Hostname()
			break
		}
	}
	return rt, nil
}

// accept runs the acceptor's side of the handshake on nc, within the
// timeout, and returns the TLS connection.
func (rt *routeTLS) accept(nc net.Conn) (*tls.Conn, error) {
	return rt.handshake(tls.Server(nc, rt.conf))
}

// dial runs the dialer's side of the handshake on nc, dialed to host (a
// name or an IP address), and returns the TLS connection.
func (rt *routeTLS) dial(nc net.Conn, host string) (*tls.Conn, error) {
	conf := rt.conf.Clone()
	conf.ServerName = host
	rt.mu.Lock()
	name := rt.name
	rt.mu.Unlock()
	if name != "" && net.ParseIP(host) != nil {
		conf.ServerName = name
	}
	tc, err := rt.handshake(tls.Client(nc, conf))
	var he x509.HostnameError
	if err != nil && conf.ServerName == name && errors.As(err, &he) {
		// The saved name is not that of this peer's certificate: dial
		// by IP from now on (nats-server resets routeTLSName the same
		// way, issue #1256).
		rt.mu.Lock()
		if rt.name == name {
			rt.name = ""
		}
		rt.mu.Unlock()
	}
	return tc, err
}

// handshake runs tc's handshake within the timeout and checks the pinned
// certificates. On failure, the connection is closed.
func (rt *routeTLS) handshake(tc *tls.Conn) (*tls.Conn, error) {
	_ = tc.SetDeadline(time.Now().Add(rt.timeout))
	err := tc.Handshake()
	if err == nil && !pinnedOK(rt.pinned, tc.ConnectionState()) {
		err = errNotPinned
	}
	if err != nil {
		_ = tc.NetConn().Close()
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// RouteTLSError is a failed TLS handshake on the cluster port. Its text is
// what nats-server v2.15.2 logs (client.go doTLSHandshake, "TLS route
// handshake error: <error>"), followed by the subject and SHA-256 of each
// certificate that could not be verified.
type RouteTLSError struct{ Err error }

// Error returns the log text: "TLS route handshake error: <error>" and
// the unverified certificates.
func (e *RouteTLSError) Error() string {
	return "TLS route handshake error: " + e.Err.Error() + unverifiedDetail(e.Err)
}

// Unwrap returns the crypto/tls or x509 error.
func (e *RouteTLSError) Unwrap() error { return e.Err }

// unverifiedDetail lists the certificates of a verification failure, as
// nats-server adds them to its log line: " (<subject> SHA-256: <hex>; ...)".
func unverifiedDetail(err error) string {
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) || len(ve.UnverifiedCertificates) == 0 {
		return ""
	}
	subjs := make([]string, len(ve.UnverifiedCertificates))
	for i, cert := range ve.UnverifiedCertificates {
		sum := sha256.Sum256(cert.Raw)
		subjs[i] = fmt.Sprintf("%s SHA-256: %s", cert.Subject, hex.EncodeToString(sum[:]))
	}
	return " (" + strings.Join(subjs, "; ") + ")"
}

// SecureClusterConn runs the dialer's side of the cluster port's TLS
// handshake on nc, a connection this server dialed to addr ("host:port"),
// and returns the connection to speak on: nc itself when the cluster
// block has no tls. The Raft transport calls it on the connections it
// dials, so that they are held to the routes' TLS (docs/routes.md, "The
// cluster port"). On failure nc is closed and the error is a
// *RouteTLSError.
func (s *Server) SecureClusterConn(nc net.Conn, addr string) (net.Conn, error) {
	if s.cl == nil || s.cl.tls == nil {
		return nc, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	tc, err := s.cl.tls.dial(nc, host)
	if err != nil {
		return nil, &RouteTLSError{Err: err}
	}
	return tc, nil
}

// dialRouteTLS secures a route dialed to u; nc is closed on failure.
func (s *Server) dialRouteTLS(nc net.Conn, u *url.URL) (net.Conn, error) {
	tc, err := s.cl.tls.dial(nc, u.Hostname())
	if err != nil {
		return nil, &RouteTLSError{Err: err}
	}
	return tc, nil
}

// ClusterSecurity is what /varz cluster reports of the cluster port's
// security (nats-server v2.15.2 ClusterOptsVarz).
type ClusterSecurity struct {
	TLSRequired bool // the cluster block has tls
	TLSVerify   bool // peers' certificates are verified: with TLS, always
	// TLSTimeout is the TLS handshake's deadline (tls.timeout; 2 s, also
	// without TLS, as nats-server reports it).
	TLSTimeout time.Duration
	// AuthTimeout is how long an accepted connection may take to send
	// its first line after the handshake: 2 s, or the TLS timeout plus 1 s
	// with TLS (nats-server getDefaultAuthTimeout).
	AuthTimeout time.Duration
	// TLSCertNotAfter is when this server's cluster certificate expires;
	// zero without TLS.
	TLSCertNotAfter time.Time
}

// ClusterSecurity returns the cluster port's security settings; the zero
// value when clustering is off.
func (s *Server) ClusterSecurity() ClusterSecurity {
	if s.cl == nil {
		return ClusterSecurity{}
	}
	sec := ClusterSecurity{TLSTimeout: config.DefaultTLSTimeout, AuthTimeout: s.cl.firstLineTimeout()}
	if rt := s.cl.tls; rt != nil {
		sec.TLSRequired, sec.TLSVerify, sec.TLSTimeout, sec.TLSCertNotAfter = true, true, rt.timeout, rt.expiry
	}
	return sec
}

// firstLineTimeout is how long an accepted cluster-port connection may
// take to send its first line once the TLS handshake (if any) is done.
func (cl *cluster) firstLineTimeout() time.Duration {
	if cl.tls != nil {
		return cl.tls.timeout + time.Second
	}
	return clusterHandshakeTimeout
}
