package server

import (
	"fmt"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
)

// security is who may connect to the client listener and how: the
// authentication directory and TLS, built from the options by New and
// again by a reload (reload.go). It is immutable; the server holds the
// one in force behind an atomic pointer (Server.sec), and each new client
// keeps the TLS it was accepted with.
type security struct {
	dir *auth.Directory
	tls *tlsState // nil without TLS
	// implicitNoAuth: clients sending no credentials join $G by a user
	// the server made, as nats-server does when the system account is the
	// only account (config.SystemAccountOnly); INFO still says
	// auth_required. implicitUser is that user's name ("nats-" and 8
	// random characters), kept across reloads so that its clients stay.
	implicitNoAuth bool
	implicitUser   string
	// dirAuth is the authorization the directory was built from (auth
	// with the implicit user and the default timeout), kept so that a
	// change of the account JWTs builds the directory again
	// (resolver.go).
	dirAuth config.Auth
	// claims keeps the decoded account JWTs from one directory to the
	// next (auth.ClaimsCache), shared by the securities that follow.
	claims *auth.ClaimsCache
	// The configuration this was built from; Auth without the implicit
	// user.
	auth     config.Auth
	operator config.Operator
	tlsCfg   config.TLS
}

// newSecurity builds the security of a configuration; prev, when not
// nil, is the one in force (a reload), whose implicit no_auth_user is
// kept. Its errors wrap ErrInvalidOptions (a TLS certificate that does
// not load).
func newSecurity(a *config.Auth, op *config.Operator, t *config.TLS, prev *security) (*security, error) {
	tlsSt, err := newTLSState(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	authCfg := *a
	if authCfg.Timeout == 0 && tlsSt != nil {
		authCfg.Timeout = tlsSt.timeout() + time.Second // nats-server getDefaultAuthTimeout
	}
	sec := &security{tls: tlsSt, auth: *a, operator: *op, tlsCfg: *t}
	if config.SystemAccountOnly(a, op) {
		u := implicitNoAuthUser()
		if prev != nil && prev.implicitUser != "" {
			u.Name = prev.implicitUser
		}
		authCfg.Users = append(slices.Clip(authCfg.Users), u)
		authCfg.NoAuthUser = u.Name
		sec.implicitNoAuth, sec.implicitUser = true, u.Name
	}
	sec.dirAuth = authCfg
	sec.claims = &auth.ClaimsCache{}
	if prev != nil {
		sec.claims = prev.claims
	}
	sec.dir = newDirectory(&authCfg, op, t.VerifyAndMap, sec.claims)
	return sec, nil
}

// security returns the security in force.
func (s *Server) security() *security { return s.sec.Load() }

// authRequiredInfo is INFO's auth_required: clients must authenticate,
// that is authentication is configured and there is no no_auth_user for
// clients sending no credentials (one the server made itself still
// counts as required, as nats-server says).
func (sec *security) authRequiredInfo() bool {
	d := sec.dir
	return d.Required() && (d.NoAuthUser() == "" || sec.implicitNoAuth)
}
