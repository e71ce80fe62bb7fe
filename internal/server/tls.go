package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

// TLS for client connections (docs/security.md, "TLS";
// nats-server v2.15.2 server.go createClientEx, client.go
// doTLSHandshake). With Options.TLS, a new client is not started at once:
// a goroutine of its own (tlsStart) first
//
//  1. sends the INFO in clear (tls_required, or tls_available with
//     allow_non_tls, and tls_verify when client certificates are
//     verified), unless handshake_first asks for TLS before anything (then
//     the INFO is the first thing sent inside TLS; with a fallback delay, a
//     client that sent nothing by then gets the clear INFO instead);
//  2. with allow_non_tls, looks at the client's first byte: a TLS
//     handshake record (0x16) goes on with TLS, anything else is a plain
//     client, whose bytes are kept for its parser;
//  3. runs the handshake within tls.timeout (2 s): a client that fails it
//     (plain text, a bad or unpinned certificate, silence) is closed
//     without a word, as nats-server closes it;
//  4. then starts the client's read and write loops on the TLS connection
//     and its authentication timer (which defaults to the TLS timeout plus
//     a second).
//
// What a client may cost before it authenticates is bounded: the
// handshake has a deadline, and the bytes read to sniff or fall back are
// at most 4.

// tlsState is the server's TLS setup, built once by New.
type tlsState struct {
	conf   *tls.Config
	opts   config.TLS
	pinned map[string]bool // hex SHA-256 of allowed client SPKIs; nil: any
}

// newTLSState builds the TLS setup of the options, or nil without TLS.
func newTLSState(t *config.TLS) (*tlsState, error) {
	conf, err := t.ServerConfig()
	if err != nil || conf == nil {
		return nil, err
	}
	st := &tlsState{conf: conf, opts: *t}
	if t.PinnedCerts != nil {
		st.pinned = map[string]bool{}
		for _, p := range t.PinnedCerts {
			st.pinned[p] = true
		}
	}
	return st, nil
}

func (st *tlsState) timeout() time.Duration {
	if st.opts.Timeout > 0 {
		return st.opts.Timeout
	}
	return config.DefaultTLSTimeout
}

// infoFields sets the TLS fields of an INFO.
func (st *tlsState) infoFields(in *info) {
	if st == nil {
		return
	}
	if st.opts.AllowNonTLS {
		in.TLSAvailable = true
	} else {
		in.TLSRequired = true
	}
	in.TLSVerify = st.opts.Verify || st.opts.VerifyAndMap
}

// pinnedOK reports whether the client's certificate is pinned.
func (st *tlsState) pinnedOK(cs tls.ConnectionState) bool { return pinnedOK(st.pinned, cs) }

// pinnedOK reports whether the peer's certificate is in pinned, hex
// SHA-256 sums of DER SubjectPublicKeyInfos (nats-server
// matchesPinnedCert); true when pinned is nil.
func pinnedOK(pinned map[string]bool, cs tls.ConnectionState) bool {
	var cert *x509.Certificate
	if len(cs.PeerCertificates) > 0 {
		cert = cs.PeerCertificates[0]
	}
	return pinnedCert(pinned, cert)
}

// pinnedCert reports whether cert (nil for none) is in pinned; true when
// pinned is nil.
func pinnedCert(pinned map[string]bool, cert *x509.Certificate) bool {
	if pinned == nil {
		return true
	}
	if cert == nil {
		return false
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return pinned[hex.EncodeToString(sum[:])]
}

// prefixConn replays bytes read ahead of the TLS handshake (sniffing)
// before the connection's own.
type prefixConn struct {
	net.Conn
	pre *bytes.Reader
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if p.pre != nil && p.pre.Len() > 0 {
		return p.pre.Read(b)
	}
	return p.Conn.Read(b)
}

// tlsStart runs steps 1 to 4 of the TLS flow on the client's own
// goroutine, then starts it, or closes it.
func (c *client) tlsStart() {
	st := c.tls
	raw := c.nc
	in := c.clientInfo()
	first := st.opts.HandshakeFirst
	var pre []byte
	if first && st.opts.HandshakeFirstFallback > 0 {
		pre = readSome(raw, 4, st.opts.HandshakeFirstFallback)
		first = len(pre) > 0
		if !first {
			in.TLSRequired, in.TLSAvailable = !st.opts.AllowNonTLS, st.opts.AllowNonTLS
		}
	}
	useTLS := true
	if !first {
		_ = raw.SetWriteDeadline(time.Now().Add(c.srv.limits().WriteDeadline))
		if _, err := raw.Write(appendInfo(nil, in)); err != nil {
			c.abort()
			return
		}
		_ = raw.SetWriteDeadline(time.Time{})
		if st.opts.AllowNonTLS {
			pre = readSome(raw, 1, st.timeout())
			useTLS = len(pre) > 0 && pre[0] == 0x16
		}
	}
	if !useTLS {
		c.pre = pre
		c.run()
		return
	}
	conn := tls.Server(&prefixConn{Conn: raw, pre: bytes.NewReader(pre)}, st.conf)
	_ = conn.SetDeadline(time.Now().Add(st.timeout()))
	err := conn.Handshake()
	if err == nil && !st.pinnedOK(conn.ConnectionState()) {
		err = errNotPinned
	}
	if err != nil {
		// At error level, as nats-server v2.15.2 logs it (client.go
		// "TLS handshake error"): an operator sees why clients fail.
		c.log.Errorf("%s - cid:%d - TLS handshake error: %v", c.addr, c.cid, err)
		_ = conn.Close()
		c.abort()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	cs := conn.ConnectionState()
	c.log.Debugf("%s - cid:%d - TLS handshake complete (%s, %s)", c.addr, c.cid, tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite))
	c.nc = conn
	if len(cs.PeerCertificates) > 0 {
		c.cert = cs.PeerCertificates[0]
	}
	if first {
		c.out.appendBytes(appendInfo(nil, in))
	}
	c.run()
}

// errNotPinned fails the handshake of a client whose certificate is not
// in pinned_certs (nats-server ErrCertNotPinned).
var errNotPinned = errorString("certificate not pinned")

type errorString string

func (e errorString) Error() string { return string(e) }

// readSome reads up to n bytes within d, returning what came.
func readSome(nc net.Conn, n int, d time.Duration) []byte {
	buf := make([]byte, n)
	_ = nc.SetReadDeadline(time.Now().Add(d))
	got, _ := io.ReadAtLeast(nc, buf, 1)
	_ = nc.SetReadDeadline(time.Time{})
	return buf[:got]
}

// abort forgets a client whose loops never started (a failed handshake).
func (c *client) abort() {
	c.closed.Store(true)
	_ = c.nc.Close()
	c.srv.removeClient(c)
}

// certIdentities are the names a client certificate may map to a user
// (verify_and_map; nats-server checkClientTLSCertSubject): its e-mail
// addresses, DNS names and URIs, then its subject.
func certIdentities(cert *x509.Certificate) (names []string, subject *x509.Certificate) {
	if cert == nil {
		return nil, nil
	}
	names = slices.Clone(cert.EmailAddresses)
	names = append(names, cert.DNSNames...)
	for _, u := range cert.URIs {
		names = append(names, u.String())
	}
	return names, cert
}
