package server

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"reflect"
	"sort"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/protocol"
)

// Reloading the security settings (docs/security.md, "Reloading";
// nats-server v2.15.2 reload.go reloadAuthorization, recheckPinnedCerts,
// client.go processSubsOnConfigReload). ReloadSecurity builds the new
// directory, TLS and accounts first, so that a setting that cannot be
// applied leaves everything as it was, then swaps them in and checks
// every client connected before:
//
//   - the read loop of each client is asked to check it again
//     (client.recheck) and, when it is blocked in Read, interrupted by a
//     read deadline in the past (wake); a read that ends that way is not
//     an error. So everything about a client's identity (its user,
//     session, permissions and limits) keeps one owner, its read loop.
//   - the read loop checks the client's session against the new directory
//     (auth.Directory.Recheck): a client whose user is gone or moved to
//     another account is closed without a word (reason "Client Closed"), one
//     whose credentials fail gets -ERR 'Authorization Violation'
//     ("Authentication Failure"), one whose user JWT its account now
//     revokes -ERR 'User Authentication Revoked' ("Credentials
//     Revoked"). The others take their new user: permissions, limits,
//     JWT expiry; each subscription the new permissions no longer allow
//     is removed with -ERR 'Permissions Violation for Subscription to
//     "<subject>" (sid "<sid>")' (with ` using queue "<queue>"` before the
//     sid for a queue subscription), and the connection stays open.
//   - with new pinned_certs, clients whose certificate is not pinned are
//     closed without a word ("TLS Handshake Failure").
//
// A client waiting for its CONNECT on a server that requires
// authentication, or in its TLS handshake, is not checked: it
// authenticates against the new directory, with the TLS it was accepted
// with. On a server without authentication a client is anonymous from its
// first byte (auth.AnonymousSession), and checked like the others.

// SecurityOptions are the options a reload may change in the security of
// the client listener (ReloadSecurity): the authorization block,
// no_auth_user and accounts (Auth), operator mode's preloaded accounts
// (Operator) and the tls block (TLS).
type SecurityOptions struct {
	Auth     config.Auth
	Operator config.Operator
	TLS      config.TLS
}

// ErrReloadUnsupported is wrapped by the errors of ReloadSecurity for a
// change cairn does not make while it runs; the server is left as it
// was. Its text names the setting.
var ErrReloadUnsupported = errors.New("config reload not supported")

// ReloadSecurity applies new security settings to the running server:
// PrepareSecurity, then Apply. Its errors are PrepareSecurity's; they
// reach no client (cmd/cairn logs them as "Failed to reload server
// configuration: ...").
func (s *Server) ReloadSecurity(so SecurityOptions) error {
	r, err := s.PrepareSecurity(so)
	if err != nil {
		return err
	}
	r.Apply()
	return nil
}

// SecurityReload is a reload of the security settings, built and checked
// by PrepareSecurity, not yet in force.
type SecurityReload struct {
	s         *Server
	cur, next *security
	accounts  *accountsReload
	released  bool // Apply or Release ran: Server.secMu is unlocked
}

// PrepareSecurity builds new security settings without applying them. It
// returns an error, changing nothing, for a change cairn does not make
// while it runs (ErrReloadUnsupported: turning operator mode on or off,
// other trusted operators, verify_and_map, the system account, a
// no_auth_user other than removed with its user, see
// checkSecurityReload; on a JetStream server a change of an account's
// JetStream, see prepareAccounts) or settings that do not load
// (ErrInvalidOptions: a TLS certificate). Only one reload may be
// prepared and applied at a time: until Apply or Release, the changes of
// a nats-based resolver's account JWTs wait. With such a resolver, the
// preloaded JWTs newer than the stored ones are stored (as nats-server
// stores them at a reload), and the accounts are the resolver's.
func (s *Server) PrepareSecurity(so SecurityOptions) (*SecurityReload, error) {
	s.secMu.Lock()
	r, err := s.prepareSecurityLocked(so)
	if err != nil {
		s.secMu.Unlock()
		return nil, err
	}
	return r, nil
}

func (s *Server) prepareSecurityLocked(so SecurityOptions) (*SecurityReload, error) {
	cur := s.security()
	if err := checkSecurityReload(cur, &so); err != nil {
		return nil, err
	}
	if s.res != nil && s.res.store != nil {
		if so.Operator.ResolverDir != s.opts.Operator.ResolverDir {
			return nil, fmt.Errorf("%w for resolver: cairn applies the resolver block at start only", ErrReloadUnsupported)
		}
		for _, k := range s.res.storePreloads(so.Operator.Preload) {
			if tok, err := s.res.store.Load(k); err == nil {
				s.res.jwts[k] = tok
			}
		}
		so.Operator = s.res.withJWTs(so.Operator)
	}
	next, err := newSecurity(&so.Auth, &so.Operator, &so.TLS, cur)
	if err != nil {
		return nil, err
	}
	accs, err := s.prepareAccounts(&so.Auth, next.dir)
	if err != nil {
		return nil, err
	}
	return &SecurityReload{s: s, cur: cur, next: next, accounts: accs}, nil
}

// Release gives up a prepared reload that will not be applied (another
// part of the configuration failed). It does nothing after Apply.
func (r *SecurityReload) Release() {
	if !r.released {
		r.released = true
		r.s.secMu.Unlock()
	}
}

// Apply puts the prepared settings in force: new clients meet them at
// once, connected clients are checked again (see the comment at the top
// of this file).
func (r *SecurityReload) Apply() {
	defer r.Release()
	s, cur, next := r.s, r.cur, r.next
	// The accounts first: a client the new directory lets in finds its
	// account (one whose account a reload removed fails: setSession).
	r.accounts.apply(s)
	if s.res != nil && s.res.store == nil {
		// The MEMORY resolver's accounts are the preloads again
		// (nats-server configureResolver stores them over the pushed ones).
		s.res.jwts = maps.Clone(next.operator.Preload)
	}
	s.sec.Store(next)
	if !reflect.DeepEqual(cur.tlsCfg.PinnedCerts, next.tlsCfg.PinnedCerts) {
		s.recheckPinnedCerts(next.tls)
	}
	if authChanged(cur, next) {
		s.recheckClients()
	}
}

// checkSecurityReload refuses the changes cairn does not make while it
// runs, with nats-server's text where nats-server refuses them too.
func checkSecurityReload(cur *security, so *SecurityOptions) error {
	old, op := &cur.operator, &so.Operator
	oldSys, newSys := config.SystemAccountName(&cur.auth, old), config.SystemAccountName(&so.Auth, op)
	switch {
	case old.Enabled() != op.Enabled():
		return fmt.Errorf("%w for operator: cairn turns operator mode on or off only at a restart", ErrReloadUnsupported)
	case !reflect.DeepEqual(old.JWTs, op.JWTs):
		// nats-server refuses it too (TrustedOperators).
		return fmt.Errorf("%w for operator (the trusted operators)", ErrReloadUnsupported)
	case old.Resolver != op.Resolver:
		return fmt.Errorf("config reload does not support moving to or from an account resolver")
	case oldSys != newSys:
		return fmt.Errorf("%w for system_account: old=%s, new=%s", ErrReloadUnsupported, oldSys, newSys)
	case cur.tlsCfg.VerifyAndMap != so.TLS.VerifyAndMap:
		// nats-server refuses it too (TLSMap).
		return fmt.Errorf("%w for tls.verify_and_map: old=%v, new=%v", ErrReloadUnsupported, cur.tlsCfg.VerifyAndMap, so.TLS.VerifyAndMap)
	}
	return checkNoAuthUserReload(&cur.auth, &so.Auth)
}

// checkNoAuthUserReload refuses a change of no_auth_user, except its
// removal together with its user's, as nats-server v2.15.2 does
// (reload.go diffOptions, "noauthuser").
func checkNoAuthUserReload(cur, next *config.Auth) error {
	if cur.NoAuthUser == next.NoAuthUser {
		return nil
	}
	if cur.NoAuthUser != "" && next.NoAuthUser == "" {
		kept := false
		for i := range next.Users {
			kept = kept || next.Users[i].ID() == cur.NoAuthUser
		}
		if !kept {
			return nil
		}
	}
	return fmt.Errorf("%w for no_auth_user: old=%s, new=%s", ErrReloadUnsupported, cur.NoAuthUser, next.NoAuthUser)
}

// authChanged reports whether the reload changes who may connect (not
// only the authentication timeout): then every client is checked again.
func authChanged(cur, next *security) bool {
	a, b := cur.auth, next.auth
	a.Timeout, b.Timeout = 0, 0
	return !reflect.DeepEqual(a, b) || !reflect.DeepEqual(cur.operator, next.operator) ||
		cur.implicitNoAuth != next.implicitNoAuth
}

// recheckClients asks the read loop of every client to check it again.
func (s *Server) recheckClients() {
	for _, c := range s.clientList() {
		c.recheck.Store(true)
		c.wake()
	}
}

// wake interrupts the client's read loop if it is blocked in Read, with a
// read deadline in the past; a read loop that has not started yet checks
// client.recheck before its first Read. Any goroutine may call it.
func (c *client) wake() {
	if c.reading.Load() {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// woken reports whether a read ended because wake set a deadline: a
// timeout (the read loop sets no deadline of its own).
func woken(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// maybeRecheck checks the client again when a reload asked for it. It
// runs on the read loop; the error closes the connection.
func (c *client) maybeRecheck() error {
	if !c.recheck.Load() || !c.recheck.Swap(false) { // a load first: no write per read batch
		return nil
	}
	err := c.recheckAuth()
	c.flushReceivers() // the -ERRs of the subscriptions it removed
	return err
}

// Errors that close a client after a reload.
var (
	// errMoved closes a client whose user is gone or in another account,
	// without an -ERR.
	errMoved = &protocol.Error{Close: true}
	// errRevoked closes a client whose user JWT its account revoked.
	errRevoked = &protocol.Error{Text: auth.RevokedText, Close: true}
	// errAccountRemoved closes a client whose account a nats-based
	// resolver deleted.
	errAccountRemoved = &protocol.Error{Text: auth.AccountExpired, Close: true}
)

// recheckAuth checks the client's session against the directory in force
// and applies the verdict. It runs on the read loop.
func (c *client) recheckAuth() error {
	if c.route != nil || c.session == nil {
		return nil // not authenticated yet: it will be against the new directory
	}
	ses, v := c.srv.security().dir.Recheck(c.session)
	switch v {
	case auth.Moved:
		c.setReason(ReasonClientClosed)
		c.log.Debugf("%s - cid:%d - %s is no longer in the configuration or has moved account: closing", c.addr, c.cid, c.authUserText())
		return errMoved
	case auth.Failed:
		return c.authFailed(&c.opts, true)
	case auth.Revoked:
		c.setReason(ReasonRevocation)
		c.log.Debugf("%s - cid:%d - %s", c.addr, c.cid, auth.RevokedText)
		return errRevoked
	case auth.AccountRemoved:
		c.setReason(ReasonAuthenticationExpired)
		c.log.Debugf("%s - cid:%d - %s", c.addr, c.cid, auth.AccountExpired)
		return errAccountRemoved
	}
	c.uncount() // counted again in its account, as nats-server registers it again
	if err := c.setSession(ses, true); err != nil {
		return err
	}
	c.recheckSubs()
	return nil
}

// recheckSubs removes the subscriptions the client's permissions no
// longer allow, telling the client (nats-server processSubsOnConfigReload:
// the -ERR names the sid), and gives the others the delivery filter of
// the new permissions. It runs on the read loop.
func (c *client) recheckSubs() {
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.subs))
	for _, sub := range c.subs {
		subs = append(subs, sub)
	}
	c.mu.Unlock()
	sort.Slice(subs, func(i, j int) bool { return string(subs[i].sid) < string(subs[j].sid) })
	for _, sub := range subs {
		if c.maySubscribe([]byte(sub.subject), []byte(sub.queue)) {
			sub.deny.Store(c.denyFilter(sub.subject, sub.queue))
			continue
		}
		c.removeSub(sub)
		who := c.authUserText()
		if sub.queue != "" {
			c.sendErr(fmt.Sprintf("Permissions Violation for Subscription to %q using queue %q (sid %q)", sub.subject, sub.queue, sub.sid))
			c.log.Noticef("Removed sub %q using queue %q (sid %q) for %s - not authorized", sub.subject, sub.queue, sub.sid, who)
		} else {
			c.sendErr(fmt.Sprintf("Permissions Violation for Subscription to %q (sid %q)", sub.subject, sub.sid))
			c.log.Noticef("Removed sub %q (sid %q) for %s - not authorized", sub.subject, sub.sid, who)
		}
	}
}

// authUserText names the client's user as nats-server's getAuthUser
// does in log lines: `Nkey "<key>"`, `User "<name>"`, `JWT User "<key>"`,
// `Token "[REDACTED]"` or `User "N/A"`. Never a secret. It runs on the
// read loop.
func (c *client) authUserText() string {
	u := c.user
	switch {
	case u != nil && u.Nkey && c.opts.JWT == "":
		return fmt.Sprintf("Nkey %q", u.Name)
	case u != nil && u.Name != "" && !u.Nkey:
		return fmt.Sprintf("User %q", u.Name)
	case c.opts.User != "":
		return fmt.Sprintf("User %q", c.opts.User)
	case c.opts.JWT != "" && u != nil:
		return fmt.Sprintf("JWT User %q", u.Name)
	case c.opts.Token != "":
		return fmt.Sprintf("Token %q", "[REDACTED]")
	}
	return `User "N/A"`
}

// recheckPinnedCerts closes the TLS clients whose certificate the new
// pinned_certs do not pin, without an -ERR (nats-server
// recheckPinnedCerts: "TLS Handshake Failure").
func (s *Server) recheckPinnedCerts(st *tlsState) {
	var pinned map[string]bool
	if st != nil {
		pinned = st.pinned
	}
	n := 0
	for _, c := range s.clientList() {
		if !c.reading.Load() {
			continue // still in its handshake, checked against the TLS it started with
		}
		// A client without a certificate (a plain one too) is not pinned.
		if pinnedCert(pinned, c.cert) {
			continue
		}
		c.setReason(ReasonTLSHandshakeError)
		c.out.markClosing()
		n++
	}
	if n > 0 {
		s.log.Noticef("Disconnect %d clients due to pinned certs reload", n)
	}
}
