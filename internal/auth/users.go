package auth

import (
	"crypto/subtle"
	"crypto/x509"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

// GlobalAccount is the account of every user that names none, and of
// every client when no accounts are configured (nats-server's $G).
const GlobalAccount = "$G"

// DefaultTimeout is how long a client has to send CONNECT when
// authentication is required (nats-server v2.15.2 AUTH_TIMEOUT).
const DefaultTimeout = 2 * time.Second

// User is an authenticated identity: who the client is, its account and
// its permissions. Users are immutable and shared by their connections.
type User struct {
	// Name is the user name, or the public nkey of an nkey user; "" for a
	// client of a token or of a server without authentication.
	Name    string
	Account string // the account's name; GlobalAccount by default
	Perms   *Perms // nil: everything allowed
	Nkey    bool   // Name is a public nkey
	// Expires, when not zero, is when the user's (or its account's) JWT
	// expires; the server then closes the connection with ExpiredText.
	Expires     time.Time
	ExpiredText string
	// ClaimExpires is when the user's own JWT expires (not its
	// account's), zero when it does not or for a user without a JWT:
	// $SYS.REQ.USER.INFO's expires (nats-server claimExpiration).
	ClaimExpires time.Time
	// NameTag is the user JWT's name, "" without one: $SYS.REQ.USER.INFO
	// user_name and the advisories' name_tag (nats-server c.nameTag).
	NameTag string
	// IssuerKey is the key that signed the user JWT: the account's
	// signing key, or the account's public key when the account signed
	// it; "" for a user without a JWT. Tags are the user JWT's tags. Both
	// describe the client in advisories (nats-server ClientInfo
	// issuer_key and tags; c.user.SigningKey, c.tags).
	IssuerKey string
	Tags      []string
	// JWT is the user JWT the client presented, "" for a bearer token
	// (which is a credential on its own) or a user without a JWT:
	// /connz?auth=true jwt (nats-server redactBearerJWT).
	JWT string
	// Limits, when not nil, are the user JWT's limits on the client's
	// subscriptions and payload (docs/security.md, "Limits").
	Limits *UserLimits
	secret string   // the configured password (plain or bcrypt)
	types  []string // allowed connection types; empty: any
}

// UserLimits are a user JWT's subs and payload limits (jwt/v2
// NatsLimits), -1 for none; nats-server v2.15.2 (client.go
// applyAccountLimits) keeps each as given, truncated to 32 bits, and
// takes the smallest of the user's, the account's and the server's.
type UserLimits struct {
	Subs    int32 // subscriptions per connection
	Payload int32 // bytes of a message's header and payload
}

// Anonymous is the user of every client when no authentication is
// configured: the global account, no restrictions.
var Anonymous = &User{Account: GlobalAccount}

// allows reports whether the user may connect with the connection type
// ct (nats-server connectionTypeAllowed).
func (u *User) allows(ct string) bool {
	if len(u.types) == 0 {
		return true
	}
	for _, t := range u.types {
		if t == ct {
			return true
		}
	}
	return false
}

// Credentials are what a client presents in CONNECT (docs/protocol.md 1.5),
// and the nonce the server sent it in INFO.
type Credentials struct {
	User, Pass, Token string
	Nkey, Sig         string
	Nonce             []byte
	// ConnType is the connection type (config.ConnectionTypeStandard for
	// a NATS client).
	ConnType string
	// Cert is the client's verified TLS certificate, nil without one;
	// with verify_and_map it is what identifies the user (certmap.go).
	Cert *x509.Certificate
	// JWT is the user JWT (operator mode, jwt.go), IP the client's
	// address (checked against the JWT's source networks).
	JWT, IP string
}

// empty reports whether the client sent no credentials at all.
func (c *Credentials) empty() bool {
	return c.User == "" && c.Pass == "" && c.Token == "" && c.Nkey == ""
}

// Directory is the configured authentication: a token, one user, or a
// table of users and nkey users, and the no_auth_user. It is immutable
// and safe for concurrent use; build it with NewDirectory.
type Directory struct {
	token      string
	user, pass string
	users      map[string]*User // by name
	nkeys      map[string]*User // by public nkey
	noAuthUser string
	timeout    time.Duration
	tlsMap     bool     // users are identified by their TLS certificates (certmap.go)
	jwt        *jwtMode // operator mode (jwt.go); nil otherwise
}

// NewDirectory builds the directory of a configuration (checked by
// config.Load and Config.Validate). Users are found by config.User.ID;
// the permissions of each are compiled once (NewPerms). With tlsMap
// (verify_and_map), a client is the user its certificate names.
func NewDirectory(a *config.Auth, tlsMap bool) *Directory {
	d := &Directory{
		tlsMap:     tlsMap,
		token:      a.Token,
		user:       a.User,
		pass:       a.Password,
		noAuthUser: a.NoAuthUser,
		timeout:    a.Timeout,
	}
	if d.timeout <= 0 {
		d.timeout = DefaultTimeout
	}
	if len(a.Users) > 0 {
		d.users, d.nkeys = map[string]*User{}, map[string]*User{}
	}
	for _, cu := range a.Users {
		u := &User{
			Name:    cu.ID(),
			Account: cu.Account,
			Perms:   NewPerms(cu.Permissions),
			Nkey:    cu.Nkey != "",
			secret:  cu.Password,
			types:   cu.ConnectionTypes,
		}
		if u.Account == "" {
			u.Account = GlobalAccount
		}
		if u.Nkey {
			d.nkeys[u.Name] = u
		} else {
			d.users[u.Name] = u
		}
	}
	return d
}

// Required reports whether clients must authenticate (INFO
// auth_required, before no_auth_user is considered).
func (d *Directory) Required() bool {
	return d != nil && (d.jwt != nil || d.token != "" || d.user != "" || len(d.users) > 0 || len(d.nkeys) > 0)
}

// NonceRequired reports whether INFO carries a nonce: nkey users exist
// (nats-server v2.15.2 nonceRequired).
func (d *Directory) NonceRequired() bool { return d != nil && (len(d.nkeys) > 0 || d.jwt != nil) }

// NoAuthUser returns the name of the no_auth_user, "" when none.
func (d *Directory) NoAuthUser() string {
	if d == nil {
		return ""
	}
	return d.noAuthUser
}

// Timeout is how long a client may take to send CONNECT.
func (d *Directory) Timeout() time.Duration {
	if d == nil {
		return DefaultTimeout
	}
	return d.timeout
}

// PlaintextPasswords reports whether a configured password is not a
// bcrypt hash, which the server warns about at start (nats-server
// "Plaintext passwords detected, use nkeys or bcrypt"; like it, tokens
// are not counted).
func (d *Directory) PlaintextPasswords() bool {
	if d == nil {
		return false
	}
	if d.pass != "" && !IsBcrypt(d.pass) {
		return true
	}
	for _, u := range d.users {
		if u.secret != "" && !IsBcrypt(u.secret) { // (nkey and certificate-mapped users have none)
			return true
		}
	}
	return false
}

// Authenticate returns the user cr proves to be, or false: Login without
// the session.
func (d *Directory) Authenticate(cr *Credentials) (*User, bool) {
	s, ok := d.Login(cr)
	if !ok {
		return nil, false
	}
	return s.User, true
}

// Login returns the session of the user cr proves to be, or false. It is
// the one authentication of every path: a CONNECT, and a client that
// sends anything else first while a no_auth_user is configured (with
// empty credentials), so that no path skips a check (nats-server advisory
// 2026-24). The order is nats-server v2.15.2's
// (processClientOrLeafAuthentication): nkey users, then users, then the
// token or the single user. Without required authentication every client
// is Anonymous.
func (d *Directory) Login(cr *Credentials) (*Session, bool) {
	return d.login(cr, "")
}

// login is Login; verified, when not empty, is a configured secret that
// cr's password or token was found to match before (a reload checking a
// session again), which need not be compared again when it is still the
// configured one.
func (d *Directory) login(cr *Credentials, verified string) (*Session, bool) {
	s := &Session{creds: *cr, nkey: cr.Nkey, name: cr.User}
	if !d.Required() {
		s.User = Anonymous
		return s, true
	}
	if d.jwt != nil {
		u, ok := d.jwt.authenticateJWT(cr, time.Now())
		s.User, s.nkey, s.name = u, "", ""
		return s, ok
	}
	noAuth := d.noAuthUser != "" && cr.empty()
	if len(d.nkeys) > 0 {
		key := cr.Nkey
		if noAuth && d.nkeys[d.noAuthUser] != nil {
			key, s.nkey, s.noAuth = d.noAuthUser, d.noAuthUser, true
		}
		if key != "" {
			u := d.nkeys[key]
			if u == nil || !u.allows(cr.ConnType) {
				return nil, false
			}
			if key != d.noAuthUser && !VerifyNonce(key, cr.Sig, cr.Nonce) {
				return nil, false
			}
			s.User = u
			return s, true
		}
	}
	if len(d.users) > 0 && d.tlsMap {
		u := d.mapCert(cr.Cert)
		if u == nil || !u.allows(cr.ConnType) {
			return nil, false
		}
		s.User, s.name = u, u.Name
		return s, true
	}
	if len(d.users) > 0 {
		if u := d.users[d.noAuthUser]; noAuth && u != nil {
			s.User, s.name, s.noAuth, s.secret = u, u.Name, true, u.secret
			return s, u.allows(cr.ConnType)
		}
		if cr.User != "" {
			u := d.users[cr.User]
			if u == nil || !u.allows(cr.ConnType) || !matches(u.secret, cr.Pass, verified) {
				return nil, false
			}
			s.User, s.secret = u, u.secret
			return s, true
		}
	}
	switch {
	case d.token != "":
		if matches(d.token, cr.Token, verified) {
			s.User, s.secret = &User{Account: GlobalAccount}, d.token
			return s, true
		}
	case d.user != "":
		if cr.User == d.user && matches(d.pass, cr.Pass, verified) {
			s.User, s.secret = &User{Name: d.user, Account: GlobalAccount}, d.pass
			return s, true
		}
	}
	return nil, false
}

// matches reports whether given matches the configured secret; a
// configured secret equal to verified, which given matched before, is
// not compared again (bcrypt is slow by design, and a reload checks
// every client).
func matches(configured, given, verified string) bool {
	if verified != "" && subtle.ConstantTimeCompare([]byte(configured), []byte(verified)) == 1 {
		return true
	}
	return ComparePassword(configured, given)
}
