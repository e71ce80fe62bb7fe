package auth

import "crypto/subtle"

// Checking connected clients again (a configuration reload; nats-server
// v2.15.2 reload.go reloadAuthorization, clientHasMovedToDifferentAccount,
// isClientAuthorized). A reload that changes the authentication does not
// spare the clients already connected: each is checked against the new
// directory with the credentials it connected with, in nats-server's
// order:
//
//  1. Outside operator mode, a client known by an nkey (the one its
//     CONNECT sent, or the no_auth_user's) or else by a user name (its
//     CONNECT's, the no_auth_user's, or the one its certificate mapped
//     to) whose user no longer exists, or now belongs to another
//     account, has moved: nats-server closes it without a word (reason
//     "Client Closed"), and its client reconnects. This holds for every
//     client that sent a user name, even when the new configuration has
//     no users at all (a single user/password is not a table of users,
//     nor is no authentication): nats-server closes those too.
//  2. Otherwise its credentials are authenticated again against the new
//     directory. A client let in as the no_auth_user with no credentials
//     is checked as that user with the password configured when it
//     connected: it stays while that password is unchanged (nats-server
//     keeps that password as the client's). In operator mode the user
//     JWT is checked again against its account's current JWT: a user the
//     account now revokes (or a bearer token it now disallows) is
//     Revoked, any other failure (its account is gone, expired, no longer
//     trusts the signer) Failed.
//  3. A client that passes gets its new user: permissions, limits,
//     connection types.

// Session is one client's authentication, kept by the server for as long
// as the client is connected, so that a reload can check it again
// (Recheck). It holds the credentials the client presented, secrets
// included, as nats-server keeps them in the client's CONNECT options;
// they are never formatted.
type Session struct {
	User *User // who the client is
	// creds are the credentials the client presented, with the nonce it
	// was sent.
	creds Credentials
	// nkey and name are who the client is known as, as nats-server sets
	// the client's CONNECT options once it authenticated: the nkey it
	// sent or the no_auth_user's; the user name it sent, the
	// no_auth_user's or the one its certificate mapped to. "" in
	// operator mode.
	nkey, name string
	// noAuth: the client sent no credentials and became the
	// no_auth_user.
	noAuth bool
	// secret is the configured password or token the client was checked
	// against, "" for none (an nkey, a certificate, a JWT, no
	// authentication).
	secret string
}

// AnonymousSession is the session of a client of a server that requires
// no authentication, from its first byte: a reload that requires
// authentication checks it too, CONNECT or not (nats-server checks every
// client).
func AnonymousSession() *Session { return &Session{User: Anonymous} }

// Verdict is the outcome of checking a session again (Recheck).
type Verdict int

// Verdicts of Recheck.
const (
	// Keep: the client may stay, as the session's user (perhaps with
	// new permissions or limits).
	Keep Verdict = iota
	// Moved: the client's user is gone or in another account; it is
	// closed without an error (nats-server closeConnection(ClientClosed)).
	Moved
	// Failed: its credentials no longer authenticate; it gets
	// -ERR 'Authorization Violation' and is closed.
	Failed
	// Revoked: its user JWT is revoked by its account (or is a bearer
	// token the account now disallows); it gets -ERR 'User
	// Authentication Revoked' and is closed (nats-server
	// updateAccountClaimsWithRefresh).
	Revoked
	// AccountRemoved: a nats-based resolver deleted its account; it gets
	// -ERR 'Account Authentication Expired' and is closed (nats-server
	// accounts.go removeCb, expiredTimeout).
	AccountRemoved
)

// RevokedText is the -ERR a client whose user JWT its account revoked
// gets (nats-server accounts.go).
const RevokedText = "User Authentication Revoked"

// Recheck checks a session of a client connected before the directory
// was built (see the comment at the top of this file) and returns the
// client's new session with Keep, or the verdict that closes it. Secrets
// that did not change are not compared again.
func (d *Directory) Recheck(s *Session) (*Session, Verdict) {
	if d.jwt == nil {
		switch {
		case s.nkey != "":
			if u := d.nkeys[s.nkey]; u == nil || u.Account != s.User.Account {
				return nil, Moved
			}
		case s.name != "":
			if u := d.users[s.name]; u == nil || u.Account != s.User.Account {
				return nil, Moved
			}
		}
	}
	if !d.Required() {
		return &Session{User: Anonymous, creds: s.creds}, Keep
	}
	if d.jwt != nil {
		if d.jwt.removed[d.jwt.accountOf(&s.creds)] {
			return nil, AccountRemoved
		}
		if d.jwt.revoked(&s.creds) {
			return nil, Revoked
		}
		if ns, ok := d.login(&s.creds, ""); ok {
			return ns, Keep
		}
		return nil, Failed
	}
	if s.noAuth {
		return d.recheckNoAuth(s)
	}
	if ns, ok := d.login(&s.creds, s.secret); ok {
		return ns, Keep
	}
	return nil, Failed
}

// recheckNoAuth checks again a client that became the no_auth_user
// without credentials: as nats-server, by the user's name (or nkey) and
// the password it had then. The user exists in the account it had
// (Recheck checked that).
func (d *Directory) recheckNoAuth(s *Session) (*Session, Verdict) {
	ct := s.creds.ConnType
	if s.nkey != "" {
		// nats-server skips the signature of the no_auth_user only; any
		// other nkey needs one, and this client sent none.
		if u := d.nkeys[s.nkey]; s.nkey == d.noAuthUser && u.allows(ct) {
			return &Session{User: u, creds: s.creds, nkey: s.nkey, noAuth: true}, Keep
		}
		return nil, Failed
	}
	u := d.users[s.name]
	if d.tlsMap || !u.allows(ct) || subtle.ConstantTimeCompare([]byte(u.secret), []byte(s.secret)) != 1 {
		return nil, Failed
	}
	return &Session{User: u, creds: s.creds, name: s.name, noAuth: true, secret: u.secret}, Keep
}
