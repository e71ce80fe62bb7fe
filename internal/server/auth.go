package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/protocol"
)

// Authentication of client connections (docs/security.md; nats-server
// v2.15.2 server.go createClientEx, client.go processConnect, auth.go):
//
//  1. When the configuration requires authentication, the INFO a client
//     gets first says auth_required (unless a no_auth_user is configured)
//     and carries a nonce when nkey users exist; the client then has
//     Options.Auth.Timeout (2 s) to send a CONNECT, or it gets
//     -ERR 'Authentication Timeout' and is closed.
//  2. Until then the first byte of each operation must start a CONNECT:
//     anything else is refused at once with -ERR 'Authorization Violation'
//     and the connection closes, before any of it is buffered. With a
//     no_auth_user, such a client is authenticated as that user instead.
//  3. Every CONNECT authenticates (a second one too, and it drops the
//     client's subscriptions, as nats-server does). Wrong or missing
//     credentials, or a CONNECT naming an account, get
//     -ERR 'Authorization Violation' and the connection closes.
//
// A client's authentication phase is an atomic so that the read loop (a
// CONNECT) and the timer (the timeout) agree on which came first.

// Authentication phases of a client (client.authPhase).
const (
	authOpen     int32 = iota // no authentication required, or done
	authAwaiting              // waiting for the first CONNECT
	authTimedOut              // the timer fired first: the connection is closing
)

// errAuthViolation closes a client that failed authentication.
var errAuthViolation = &protocol.Error{Text: "Authorization Violation", Close: true}

// errAuthClosed ends the read loop of a client whose authentication timer
// fired while it was parsing; the timer sent the -ERR.
var errAuthClosed = &protocol.Error{Close: true}

// startAuth prepares a new client's authentication: the INFO fields, the
// nonce, the timer and the parser's CONNECT-first check.
func (c *client) startAuth(in *info) {
	sec := c.srv.security()
	d := sec.dir
	if !d.Required() {
		c.user, c.session = auth.Anonymous, auth.AnonymousSession()
		return
	}
	if d.NonceRequired() {
		c.nonce = auth.NewNonce()
		in.Nonce = string(c.nonce)
	}
	c.authPhase.Store(authAwaiting)
	c.parser.SetAwaitConnect(c.connectFirst)
}

// armAuthTimer starts the authentication timer of a client that must
// authenticate; with TLS, once the handshake is done (nats-server arms it
// after the handshake too).
func (c *client) armAuthTimer() {
	if c.authPhase.Load() == authAwaiting {
		c.authTimer = time.AfterFunc(c.srv.security().dir.Timeout(), c.authTimedOut)
	}
}

// authTimedOut sends -ERR 'Authentication Timeout' and closes the client
// unless its CONNECT came first (nats-server client.go authTimeout).
func (c *client) authTimedOut() {
	if !c.authPhase.CompareAndSwap(authAwaiting, authTimedOut) {
		return
	}
	c.log.Debugf("%s - cid:%d - Authentication Timeout", c.addr, c.cid)
	c.setReason(ReasonAuthenticationTimeout)
	c.out.appendBytes(protocol.AppendErr(nil, "Authentication Timeout"))
	c.out.markClosing()
}

// stopAuthTimer stops the timer once the client authenticated or closed.
func (c *client) stopAuthTimer() {
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
}

// stopTimers stops the authentication and expiry timers (teardown).
func (c *client) stopTimers() {
	c.stopAuthTimer()
	if t := c.expiryTimer; t != nil {
		t.Stop()
	}
}

// connectFirst is the parser's check of an operation sent before CONNECT
// while authentication is required: with a no_auth_user the client
// becomes that user (the same authentication a CONNECT runs, with no
// credentials); otherwise it is an authorization violation.
func (c *client) connectFirst() error {
	d := c.srv.security().dir
	if d.NoAuthUser() == "" {
		return c.authFailed(nil, false)
	}
	if !c.authPhase.CompareAndSwap(authAwaiting, authOpen) {
		return errAuthClosed
	}
	c.stopAuthTimer()
	ses, ok := d.Login(c.credentials(&connectOpts{}))
	if !ok {
		return c.authFailed(nil, true)
	}
	return c.setSession(ses, false)
}

// authenticate authenticates a CONNECT's credentials and applies the
// user; it returns the error that closes the connection.
func (c *client) authenticate(opts *connectOpts) error {
	switch c.authPhase.Load() {
	case authTimedOut:
		return errAuthClosed
	case authAwaiting:
		if !c.authPhase.CompareAndSwap(authAwaiting, authOpen) {
			return errAuthClosed
		}
		c.stopAuthTimer()
	}
	if r := c.srv.res; r != nil && r.store != nil && opts.JWT != "" {
		// An account the server does not know is looked up first
		// (fetch.go); a failure leaves it unknown, which the
		// authentication refuses.
		_ = r.fetchFor(opts.JWT)
	}
	ses, ok := c.srv.security().dir.Login(c.credentials(opts))
	if !ok {
		return c.authFailed(opts, true)
	}
	if opts.Account != "" || opts.NewAccount {
		// A dormant nats-server feature let a CONNECT choose its account
		// (CVE-2022-24450); nats-server now refuses it, with or without
		// authentication, and so does cairn.
		return c.authFailed(opts, false)
	}
	return c.setSession(ses, false)
}

// credentials are what the CONNECT presents, with the INFO nonce.
func (c *client) credentials(o *connectOpts) *auth.Credentials {
	return &auth.Credentials{
		User: o.User, Pass: o.Pass, Token: o.Token,
		Nkey: o.Nkey, Sig: o.Sig, Nonce: c.nonce,
		ConnType: config.ConnectionTypeStandard,
		Cert:     c.cert,
		JWT:      o.JWT,
		IP:       c.ip,
	}
}

// authFailed logs the failure as nats-server does ("authentication error"
// [ERR], then who the CONNECT claimed to be, as its getAuthUser names
// them: `Nkey "U..."`, `User "name"`, `Token "[REDACTED]"`, nothing for a
// JWT or no credentials; never a secret), queues
// the authentication error events (events.go; account: the credentials
// were refused, which nats-server also tells the client's account) and
// returns the error that sends -ERR 'Authorization Violation' and closes.
// opts is the CONNECT, nil when the client sent none.
func (c *client) authFailed(opts *connectOpts, account bool) error {
	who := ""
	switch {
	case opts == nil:
	case opts.Nkey != "":
		who = fmt.Sprintf(" - Nkey %q", opts.Nkey)
	case opts.User != "":
		who = fmt.Sprintf(" - User %q", opts.User)
	case opts.JWT != "":
		// nats-server names the JWT's user key, known only once the JWT
		// was verified: a refused one logs no name.
	case opts.Token != "":
		who = ` - Token "[REDACTED]"`
	}
	c.log.Errorf("%s - cid:%d - authentication error%s", c.addr, c.cid, who)
	if opts != nil {
		// What the closed connection shows (/connz?state=closed, the
		// DISCONNECT event), as nats-server keeps the CONNECT's fields.
		c.mu.Lock()
		c.meta.name, c.meta.lang, c.meta.version = opts.Name, opts.Lang, opts.Version
		c.meta.user = rawAuthUser(opts)
		c.mu.Unlock()
	}
	if c.srv.events() != nil {
		ci := c.snapshot(false, 0)
		ci.Stop = time.Now().UTC()
		ci.Reason = ReasonAuthenticationViolation.String()
		c.srv.clientEvent(ClientEvent{AuthError: true, AccountAuthError: account, Conn: ci})
	}
	return errAuthViolation
}

// rawAuthUser is who a CONNECT claims to be, as nats-server's
// getRawAuthUser names it in events: its nkey, its user name, nothing for
// a JWT (its key is known only once it is verified), "[REDACTED]" for a
// token. Never a secret.
func rawAuthUser(o *connectOpts) string {
	switch {
	case o.Nkey != "":
		return o.Nkey
	case o.User != "":
		return o.User
	case o.JWT != "":
		return ""
	case o.Token != "":
		return "[REDACTED]"
	}
	return ""
}

// setSession makes the session's user the client's identity, in its
// account with its limits; it returns the error of a limit that closes
// the client (acclimits.go; reloaded: a reload checked the client
// again). The session is kept for a reload to check again (reload.go).
// It runs on the read loop.
func (c *client) setSession(ses *auth.Session, reloaded bool) error {
	c.session = ses
	u := ses.User
	c.user = u
	c.armExpiry(u)
	acc := c.srv.account(u.Account)
	if acc == nil {
		// Its account went away with a reload while it authenticated
		// (reload.go): it may not land elsewhere.
		c.log.Errorf("%s - cid:%d - authentication error - account %q not found", c.addr, c.cid, u.Account)
		return errAuthViolation
	}
	c.acc = acc
	if err := c.applyAccountLimits(u, reloaded); err != nil {
		return err
	}
	c.mu.Lock()
	c.meta.user, c.meta.account, c.meta.authUser = u.Name, c.acc.name, u
	c.mu.Unlock()
	c.pubCache = nil
	c.replies.Store(newReplyPerms(u, time.Now))
	c.parser.SetAwaitConnect(nil)
	return nil
}

// armExpiry closes the client when its user's JWT (or its account's)
// expires, with -ERR 'User Authentication Expired' or 'Account
// Authentication Expired' (nats-server client.go setExpiration). A later
// CONNECT re-arms it.
func (c *client) armExpiry(u *auth.User) {
	if c.expiryTimer != nil {
		c.expiryTimer.Stop()
		c.expiryTimer = nil
	}
	if u.Expires.IsZero() {
		return
	}
	text := u.ExpiredText
	c.expiryTimer = time.AfterFunc(max(time.Until(u.Expires), 0), func() {
		c.log.Debugf("%s - cid:%d - %s", c.addr, c.cid, text)
		c.setReason(ReasonAuthenticationExpired)
		c.out.appendBytes(protocol.AppendErr(nil, text))
		c.out.markClosing()
	})
}

// quietClose reports whether err closes a client whose reason was logged
// already.
func quietClose(err error) bool {
	return errors.Is(err, errAuthViolation) || errors.Is(err, errAuthClosed) ||
		errors.Is(err, errAccountConns) || errors.Is(err, errSubsAtConnect) ||
		errors.Is(err, errMoved) || errors.Is(err, errRevoked) || errors.Is(err, errAccountRemoved)
}

// secretKeys are the CONNECT fields never written to a trace line.
var secretKeys = []string{"pass", "password", "auth_token", "token", "sig", "jwt"}

// redactConnect returns a CONNECT argument fit for a trace line: the
// values of secretKeys replaced by "[REDACTED]" (nats-server
// removeSecretsFromTrace). An argument that is not a JSON object is
// replaced whole, since it could hold a secret.
func redactConnect(arg []byte) []byte {
	if !bytes.Contains(arg, []byte(`"`)) {
		return arg
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(arg, &m); err != nil {
		return []byte(fmt.Sprintf("[REDACTED: %d bytes that are not a JSON object]", len(arg)))
	}
	changed := false
	for k := range m {
		for _, s := range secretKeys {
			if strings.EqualFold(k, s) {
				m[k], changed = json.RawMessage(`"[REDACTED]"`), true
			}
		}
	}
	if !changed {
		return arg
	}
	out, err := json.Marshal(m)
	if err != nil {
		return []byte("[REDACTED]")
	}
	return out
}

// Security is what /varz reports of the client listener's security
// (nats-server v2.15.2 Varz auth_required, auth_timeout, tls_required,
// tls_verify, tls_timeout).
type Security struct {
	// AuthRequired: clients must authenticate (with a no_auth_user too:
	// the server requires it, the INFO of each client says whether it
	// may skip it).
	AuthRequired bool
	// AuthTimeout is how long a client may take to send its CONNECT
	// (authorization.timeout; 2 s, or the TLS timeout plus 1 s with TLS).
	AuthTimeout time.Duration
	TLSRequired bool // clients must use TLS (not with allow_non_tls)
	TLSVerify   bool // client certificates are verified
	// TLSTimeout is the TLS handshake's deadline (tls.timeout; 2 s, also
	// without TLS, as nats-server reports it).
	TLSTimeout time.Duration
}

// Security returns the client listener's security settings.
func (s *Server) Security() Security {
	cur := s.security()
	sec := Security{AuthRequired: cur.dir.Required(), AuthTimeout: cur.dir.Timeout(), TLSTimeout: config.DefaultTLSTimeout}
	if st := cur.tls; st != nil {
		var in info
		st.infoFields(&in)
		sec.TLSRequired, sec.TLSVerify, sec.TLSTimeout = in.TLSRequired, in.TLSVerify, st.timeout()
	}
	return sec
}
