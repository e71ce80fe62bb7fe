package server

import (
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/jwtstore"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// The nats-based account resolvers (docs/security.md, "The nats-based
// resolvers"; nats-server v2.15.2 accounts.go DirAccResolver,
// CacheDirAccResolver): in operator mode with resolver { type: full } or
// { type: cache }, the account JWTs are kept in a directory
// (internal/jwtstore) and change while the server runs:
//
//   - at start the directory is opened (made when missing), the
//     resolver_preload JWTs are stored in it when newer than the ones
//     there, and every JWT in it is an account (a reload stores the
//     preloads again);
//   - a system account user pushes a JWT ($SYS.REQ.CLAIMS.UPDATE and the
//     per-account subjects, claimsapi.go), deletes JWTs
//     ($SYS.REQ.CLAIMS.DELETE), looks them up and lists them;
//   - a client whose account the server does not know has it fetched from
//     the other servers ($SYS.REQ.ACCOUNT.<acc>.CLAIMS.LOOKUP) before it
//     is authenticated (fetch.go);
//   - full resolvers compare their directories every interval and take
//     the newer JWTs from each other ($SYS.REQ.CLAIMS.PACK).
//
// Every change of the account JWTs is applied as a reload of those
// accounts would be (applyAccountJWTs): a new directory and account table
// are built and swapped in under Server.secMu, which also serializes the
// configuration reloads, and the clients of the changed accounts are
// checked again on their read loops: revoked users are closed with
// -ERR 'User Authentication Revoked', new limits apply, the clients of a
// deleted account get -ERR 'Account Authentication Expired'.
//
// The account JWT set (jwts) is owned by whoever holds Server.secMu. The
// store has its own lock.

// resolver is a nats-based account resolver.
type resolver struct {
	s     *Server // set by New
	log   *logger.Logger
	cfg   config.ResolverDir
	store *jwtstore.Store // nil for the MEMORY resolver (memory.go)
	// jwts are the account JWTs by public key, the accounts of the
	// directory in force; guarded by Server.secMu.
	jwts map[string]string
	// q carries the claims requests to the resolver's goroutine
	// (claimsapi.go).
	q chan sysRequest
	// fetches are the lookups in flight (fetch.go), by account; guarded
	// by fmu.
	fmu     sync.Mutex
	fetches map[string]*fetchCall
	nextIn  uint64 // reply inboxes made; guarded by fmu
}

// newResolver opens the directory of a nats-based resolver and stores the
// preloaded JWTs in it; for the MEMORY resolver, it keeps the preloaded
// JWTs (store nil). It returns the directory's error (it cannot be made
// or read).
func newResolver(log *logger.Logger, op *config.Operator) (*resolver, error) {
	if op.Resolver == "MEMORY" {
		return &resolver{log: log, jwts: maps.Clone(op.Preload)}, nil
	}
	cfg := op.ResolverDir
	o := jwtstore.Options{Limit: cfg.MaxJWTs()}
	switch {
	case !cfg.Full:
		o.Evict, o.TTL, o.Delete = true, cfg.TTL, jwtstore.HardDelete
	case cfg.AllowDelete && cfg.HardDelete:
		o.Delete = jwtstore.HardDelete
	case cfg.AllowDelete:
		o.Delete = jwtstore.RenameDeleted
	}
	st, err := jwtstore.Open(cfg.Dir, o)
	if err != nil {
		return nil, fmt.Errorf("%w: resolver dir: %v", ErrInvalidOptions, err)
	}
	r := &resolver{log: log, cfg: cfg, store: st, jwts: map[string]string{}, fetches: map[string]*fetchCall{}}
	r.storePreloads(op.Preload)
	for _, k := range st.Keys() {
		if tok, err := st.Load(k); err == nil && nkeys.IsValidPublicAccountKey(k) {
			r.jwts[k] = tok
		}
	}
	return r, nil
}

// storePreloads stores the preloaded JWTs that are newer than the ones in
// the directory (nats-server configureResolver: Store, saveIfNewer) and
// returns the keys whose JWT changed.
func (r *resolver) storePreloads(preload map[string]string) []string {
	keys := make([]string, 0, len(preload))
	for k := range preload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var changed []string
	for _, k := range keys {
		ok, err := r.store.SaveIfNewer(k, preload[k])
		if err != nil {
			r.log.Warnf("Preloaded account %s not stored in the resolver's directory: %v", k, err)
		}
		if ok {
			changed = append(changed, k)
		}
	}
	return changed
}

// withJWTs returns op with the resolver's account JWTs in place of its
// preloads. Server.secMu is held (or the server is not running yet).
func (r *resolver) withJWTs(op config.Operator) config.Operator {
	op.Preload = maps.Clone(r.jwts)
	return op
}

// accountChange is a change of the account JWT set: JWTs stored (by
// key) and accounts deleted.
type accountChange struct {
	stored  map[string]string
	deleted []string
}

func (ch *accountChange) empty() bool { return len(ch.stored) == 0 && len(ch.deleted) == 0 }

// applyAccountJWTs puts a change of the account JWTs in force: the
// directory and account table are built again with the new JWTs, the
// clients of the accounts changed are checked again. It runs on the
// resolver's goroutine or a client's read loop (a fetch); it waits for a
// configuration reload in progress.
func (s *Server) applyAccountJWTs(ch accountChange) {
	if ch.empty() {
		return
	}
	s.secMu.Lock()
	defer s.secMu.Unlock()
	r := s.res
	touched := map[string]bool{}
	for k, tok := range ch.stored {
		r.jwts[k] = tok
		touched[k] = true
	}
	for _, k := range ch.deleted {
		delete(r.jwts, k)
		touched[k] = true
	}
	cur := s.security()
	next := *cur
	next.operator = r.withJWTs(cur.operator)
	next.dir = newDirectory(&cur.dirAuth, &next.operator, cur.tlsCfg.VerifyAndMap, cur.claims)
	next.dir.SetRemoved(ch.deleted)
	accs, err := s.prepareAccountsFor(&next.auth, next.dir, true)
	if err != nil {
		s.log.Errorf("Account JWT update not applied: %v", err)
		return
	}
	accs.apply(s)
	s.sec.Store(&next)
	s.recheckClientsOf(touched)
}

// recheckClientsOf asks the read loop of every client of the accounts
// named in accs to check it again (reload.go).
func (s *Server) recheckClientsOf(accs map[string]bool) {
	for _, c := range s.clientList() {
		c.mu.Lock()
		acc := c.meta.account
		c.mu.Unlock()
		if accs[acc] {
			c.recheck.Store(true)
			c.wake()
		}
	}
}

// Errors of a pushed JWT cairn refuses where nats-server v2.15.2 stores
// it (docs/compatibility.md): one not issued by a trusted operator (or
// its signing keys) is "account validation failed" (nats-server's
// ErrAccountValidation text), one issued before the JWT stored is
// errOlderJWT.
var (
	errUntrustedJWT = fmt.Errorf("account validation failed")
	errOlderJWT     = fmt.Errorf("jwt is older than the stored one")
)

// checkPushed checks a pushed account JWT beyond its decoding: issued by
// a trusted key and, with strict signing key usage, not by the operator
// itself; issued no earlier than the stored one.
func (s *Server) checkPushed(ac *jwt.AccountClaims) error {
	op := s.security().operator
	if !op.TrustedKeys()[ac.Issuer] {
		return errUntrustedJWT
	}
	if s.res.store == nil {
		return nil
	}
	if stored, err := s.res.store.Load(ac.Subject); err == nil {
		if old, err := jwt.DecodeGeneric(stored); err == nil && old.IssuedAt > ac.IssuedAt {
			return errOlderJWT
		}
	}
	return nil
}

// strictIssuer reports whether the issuer of ac is the operator itself
// while the operator requires its signing keys (nats-server
// getOperatorKeys, StrictSigningKeyUsage).
func (s *Server) strictIssuer(ac *jwt.AccountClaims) bool {
	for _, t := range s.security().operator.JWTs {
		if oc, err := jwt.DecodeOperatorClaims(t); err == nil {
			return oc.StrictSigningKeyUsage && ac.Issuer == oc.Subject
		}
	}
	return false
}

// claimValidate is nats-server's check of a pushed JWT's claims, without
// the time checks (claimValidate: IsBlocking(false)).
func claimValidate(ac *jwt.AccountClaims) error {
	vr := &jwt.ValidationResults{}
	ac.Validate(vr)
	if vr.IsBlocking(false) {
		return fmt.Errorf("validation errors: %v", vr.Errors())
	}
	return nil
}

// expireLoop removes from the directory the JWTs whose time is up (a
// cache's ttl, a JWT's expiry), as nats-server's expiration tracker does,
// at most every minute (or half the ttl), until shutdown.
func (r *resolver) expireLoop() {
	every := time.Minute
	if t := r.cfg.TTL; t > 0 && t/2 < every {
		every = max(t/2, time.Second)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-r.s.quit:
			return
		case now := <-tick.C:
			if gone := r.store.Expire(now); len(gone) > 0 {
				r.s.log.Debugf("Resolver - removed %d expired JWTs from %s", len(gone), r.store.Dir())
			}
		}
	}
}
