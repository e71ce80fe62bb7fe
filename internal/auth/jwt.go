package auth

import (
	"net"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/nats-io/jwt/v2"
)

// Operator mode (decentralized JWT authentication; docs/security.md;
// nats-server v2.15.2 auth.go processClientOrLeafAuthentication): the
// accounts are JWTs issued by a trusted operator (or one of its signing
// keys), preloaded from the configuration; a client presents a user JWT
// issued by its account (or one of the account's signing keys) and signs
// the nonce with the user's key. Its permissions, allowed connection
// types, source networks and time windows come from the user JWT; an
// account or user JWT that expires ends the connection then; a user the
// account revoked (at or after the JWT's issue time) is refused.

// jwtMode is a Directory's operator mode.
type jwtMode struct {
	trusted  map[string]bool
	accounts map[string]*jwt.AccountClaims // by public key
	// removed are accounts a nats-based resolver deleted (SetRemoved):
	// their clients' sessions end as expired.
	removed map[string]bool
}

// newJWTMode builds operator mode from the operator's account JWTs
// (o.Preload: the preloaded ones, or a nats-based resolver's). With a
// nats-based resolver, a system account without a JWT is a bootstrapping
// one, as in nats-server v2.15.2 (server.go NewServer, "Using
// bootstrapping system account"): issued by the first operator, with no
// limits and no signing keys, so that users its own key issued can log in
// and push its JWT.
func newJWTMode(o *config.Operator, cache *ClaimsCache) *jwtMode {
	m := &jwtMode{trusted: o.TrustedKeys(), accounts: map[string]*jwt.AccountClaims{}}
	decode := jwt.DecodeAccountClaims
	if cache != nil {
		decode = cache.begin()
		defer cache.end()
	}
	for k, t := range o.Preload {
		if ac, err := decode(t); err == nil && m.trusted[ac.Issuer] && ac.Subject == k {
			m.accounts[k] = ac
		}
	}
	if sys := o.SystemAccount; sys != "" && o.Resolver != "MEMORY" && m.accounts[sys] == nil && len(o.JWTs) > 0 {
		if oc, err := jwt.DecodeOperatorClaims(o.JWTs[0]); err == nil {
			ac := jwt.NewAccountClaims(sys)
			ac.Issuer = oc.Subject
			m.accounts[sys] = ac
		}
	}
	return m
}

// SetRemoved names the accounts a nats-based resolver deleted: a client
// of one that is checked again (Recheck) gets AccountRemoved. It must be
// called before the directory is used.
func (d *Directory) SetRemoved(keys []string) {
	if d.jwt == nil || len(keys) == 0 {
		return
	}
	d.jwt.removed = map[string]bool{}
	for _, k := range keys {
		d.jwt.removed[k] = true
	}
}

// JWTAccount returns the account of a user JWT (its issuer_account, or
// its issuer), "" when token is not a user JWT.
func JWTAccount(token string) string {
	juc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return ""
	}
	if juc.IssuerAccount != "" {
		return juc.IssuerAccount
	}
	return juc.Issuer
}

// NewOperatorDirectory builds the directory of operator mode (checked by
// Config.Validate). cache, when not nil, keeps the account JWTs decoded
// from one directory to the next (a resolver's change of one JWT then
// decodes that one only).
func NewOperatorDirectory(o *config.Operator, timeout time.Duration, cache *ClaimsCache) *Directory {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Directory{jwt: newJWTMode(o, cache), timeout: timeout}
}

// ClaimsCache keeps decoded account JWTs (their signatures checked) by
// their text, for the directories built one after another from a
// resolver's account JWTs: building one keeps the JWTs it used and drops
// the others. It is safe for concurrent use; the claims are shared and
// never modified.
type ClaimsCache struct {
	mu         sync.Mutex
	have, used map[string]*jwt.AccountClaims
}

// begin locks the cache for a build and returns its decoding function.
func (c *ClaimsCache) begin() func(string) (*jwt.AccountClaims, error) {
	c.mu.Lock()
	c.used = map[string]*jwt.AccountClaims{}
	return func(tok string) (*jwt.AccountClaims, error) {
		ac := c.have[tok]
		if ac == nil {
			var err error
			if ac, err = jwt.DecodeAccountClaims(tok); err != nil {
				return nil, err
			}
		}
		c.used[tok] = ac
		return ac, nil
	}
}

// end keeps what the build used and unlocks.
func (c *ClaimsCache) end() {
	c.have, c.used = c.used, nil
	c.mu.Unlock()
}

// AccountClaims returns the preloaded account JWTs by public key, nil
// outside operator mode.
func (d *Directory) AccountClaims() map[string]*jwt.AccountClaims {
	if d == nil || d.jwt == nil {
		return nil
	}
	return d.jwt.accounts
}

// Expiry texts, sent as -ERR when a JWT expires while connected
// (nats-server client.go authExpired, accountAuthExpired).
const (
	UserExpired    = "User Authentication Expired"
	AccountExpired = "Account Authentication Expired"
)

// authenticateJWT is Authenticate in operator mode.
func (m *jwtMode) authenticateJWT(cr *Credentials, now time.Time) (*User, bool) {
	if cr.JWT == "" {
		return nil, false
	}
	juc, err := jwt.DecodeUserClaims(cr.JWT)
	if err != nil {
		return nil, false
	}
	vr := jwt.CreateValidationResults()
	juc.Validate(vr)
	if vr.IsBlocking(true) {
		return nil, false
	}
	issuer := juc.Issuer
	if juc.IssuerAccount != "" {
		issuer = juc.IssuerAccount
	}
	acc := m.accounts[issuer]
	switch {
	case acc == nil, !m.trusted[acc.Issuer]:
		return nil, false
	case juc.IssuerAccount == "" && juc.Issuer != acc.Subject:
		return nil, false
	case juc.IssuerAccount != "" && !acc.SigningKeys.Contains(juc.Issuer):
		return nil, false
	case acc.Expires > 0 && now.Unix() >= acc.Expires:
		return nil, false
	case juc.Expires > 0 && now.Unix() >= juc.Expires:
		// Expired from the instant of exp. jwt's Validate passes a JWT
		// during the second exp names (now > exp), and nats-server then
		// takes the client and ends it at once ("User Authentication
		// Expired"); cairn refuses it: see docs/compatibility.md.
		return nil, false
	case juc.BearerToken && acc.Limits.DisallowBearer:
		return nil, false
	case !connTypeAllowed(juc.AllowedConnectionTypes, cr.ConnType):
		return nil, false
	case !juc.BearerToken && !VerifyNonce(juc.Subject, cr.Sig, cr.Nonce):
		return nil, false
	case acc.IsClaimRevoked(juc):
		return nil, false
	case !srcAllowed(juc.Src, cr.IP), !timesAllowed(juc.Times, juc.Locale, now):
		return nil, false
	}
	if juc.IssuerAccount != "" {
		if scope, _ := acc.SigningKeys.GetScope(juc.Issuer); scope != nil {
			return nil, false // scoped signing keys (permission templates) are not supported yet
		}
	}
	u := &User{
		Name:    juc.Subject,
		Account: acc.Subject,
		Nkey:    true,
		Perms:   NewPerms(jwtPermissions(&juc.Permissions)),
		Limits:  &UserLimits{Subs: clamp32(juc.Limits.Subs), Payload: clamp32(juc.Limits.Payload)},
	}
	u.Expires, u.ExpiredText = expiry(juc.Expires, acc.Expires)
	if juc.Expires > 0 {
		u.ClaimExpires = time.Unix(juc.Expires, 0)
	}
	u.NameTag, u.IssuerKey = juc.Name, acc.Subject
	if juc.IssuerAccount != "" {
		u.IssuerKey = juc.Issuer
	}
	if len(juc.Tags) > 0 {
		u.Tags = append([]string(nil), juc.Tags...)
	}
	if !juc.BearerToken {
		u.JWT = cr.JWT
	}
	return u, true
}

// accountOf returns the account of the user JWT of cr, "" when there is
// none.
func (m *jwtMode) accountOf(cr *Credentials) string {
	if cr.JWT == "" {
		return ""
	}
	return JWTAccount(cr.JWT)
}

// revoked reports whether the account of the user JWT of cr revokes it,
// or disallows the bearer token it is (nats-server
// updateAccountClaimsWithRefresh: "User Authentication Revoked").
func (m *jwtMode) revoked(cr *Credentials) bool {
	juc, err := jwt.DecodeUserClaims(cr.JWT)
	if err != nil {
		return false
	}
	issuer := juc.Issuer
	if juc.IssuerAccount != "" {
		issuer = juc.IssuerAccount
	}
	acc := m.accounts[issuer]
	return acc != nil && (acc.IsClaimRevoked(juc) || (juc.BearerToken && acc.Limits.DisallowBearer))
}

// clamp32 is nats-server's clampInt64ToInt32: a JWT limit beyond the
// int32 range becomes its nearest bound.
func clamp32(n int64) int32 {
	return int32(min(max(n, -1<<31), 1<<31-1))
}

// expiry returns the earlier of a user's and its account's expiry, with
// the text of the one that comes first; zero when neither expires.
func expiry(user, account int64) (time.Time, string) {
	switch {
	case user == 0 && account == 0:
		return time.Time{}, ""
	case account == 0 || (user != 0 && user <= account):
		return time.Unix(user, 0), UserExpired
	}
	return time.Unix(account, 0), AccountExpired
}

// jwtPermissions converts a user JWT's permissions: empty lists restrict
// nothing; a response permission turns the blanket publish allow off, as
// in a configuration file.
func jwtPermissions(p *jwt.Permissions) *config.Permissions {
	conv := func(jp jwt.Permission) *config.SubjectPermission {
		if len(jp.Allow) == 0 && len(jp.Deny) == 0 {
			return nil
		}
		sp := &config.SubjectPermission{Deny: []string(jp.Deny)}
		if len(jp.Allow) > 0 {
			sp.Allow = []string(jp.Allow)
		}
		return sp
	}
	out := &config.Permissions{Publish: conv(p.Pub), Subscribe: conv(p.Sub)}
	if p.Resp != nil {
		out.Response = &config.ResponsePermission{MaxMsgs: p.Resp.MaxMsgs, Expires: p.Resp.Expires}
		if out.Response.MaxMsgs == 0 {
			out.Response.MaxMsgs = config.DefaultResponseMaxMsgs
		}
		if out.Response.Expires == 0 {
			out.Response.Expires = config.DefaultResponseExpires
		}
		if out.Publish == nil {
			out.Publish = &config.SubjectPermission{}
		}
		if out.Publish.Allow == nil {
			out.Publish.Allow = []string{}
		}
	}
	if out.Publish == nil && out.Subscribe == nil && out.Response == nil {
		return nil
	}
	return out
}

// connTypeAllowed reports whether ct is among the JWT's allowed
// connection types (none listed: any).
func connTypeAllowed(types jwt.StringList, ct string) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if strings.EqualFold(t, ct) {
			return true
		}
	}
	return false
}

// srcAllowed reports whether the client's IP is in one of the JWT's
// source networks (none listed: any; nats-server validateSrc).
func srcAllowed(src jwt.CIDRList, ip string) bool {
	if len(src) == 0 {
		return true
	}
	addr := net.ParseIP(ip)
	if addr == nil {
		return false
	}
	for _, c := range src {
		if _, n, err := net.ParseCIDR(c); err == nil && n.Contains(addr) {
			return true
		}
	}
	return false
}

// timesAllowed reports whether now is within one of the JWT's daily time
// windows ("15:04:05" start and end, in locale, local time when empty;
// none listed: always; nats-server validateTimes). An unreadable window
// or locale refuses.
func timesAllowed(times []jwt.TimeRange, locale string, now time.Time) bool {
	if len(times) == 0 {
		return true
	}
	loc := time.Local
	if locale != "" {
		l, err := time.LoadLocation(locale)
		if err != nil {
			return false
		}
		loc = l
	}
	now = now.In(loc)
	for _, r := range times {
		start, err1 := time.ParseInLocation("15:04:05", r.Start, loc)
		end, err2 := time.ParseInLocation("15:04:05", r.End, loc)
		if err1 != nil || err2 != nil {
			continue
		}
		day := func(t time.Time) time.Time {
			return time.Date(now.Year(), now.Month(), now.Day(), t.Hour(), t.Minute(), t.Second(), 0, loc)
		}
		s, e := day(start), day(end)
		if !e.After(s) {
			if !now.Before(s) || now.Before(e) { // a window across midnight
				return true
			}
			continue
		}
		if !now.Before(s) && now.Before(e) {
			return true
		}
	}
	return false
}
