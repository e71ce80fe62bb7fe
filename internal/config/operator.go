package config

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/nats-io/jwt/v2"
)

// Operator is decentralized (JWT) authentication, operator mode
// (docs/security.md, "JWT: operator mode"; nats-server v2.15.2 opts.go
// "operator", "resolver", "resolver_preload", jwt.go
// validateTrustedOperators): the operators whose accounts are trusted, and
// the accounts themselves, preloaded from the file (the MEMORY resolver).
// Users present a user JWT signed by their account (or one of its signing
// keys) and sign the server's nonce with their nkey. JWTs are kept as the
// strings the file gives; every one was decoded and checked at load.
type Operator struct {
	// JWTs are the operator JWTs (operator: a file or the JWT inline).
	JWTs []string `key:"operator"`
	// Resolver is the account resolver: "MEMORY" (resolver: MEMORY, the
	// accounts are the preloaded ones), "FULL" or "CACHE" (a resolver
	// block: the nats-based resolvers, their account JWTs in a directory;
	// ResolverDir).
	Resolver string `key:"resolver"`
	// ResolverDir is the resolver block of the FULL and CACHE resolvers
	// (resolver.go); zero for MEMORY.
	ResolverDir ResolverDir `key:"resolver_dir"`
	// Preload maps account public keys to their account JWTs
	// (resolver_preload).
	Preload map[string]string `key:"resolver_preload"`
	// SystemAccount is system_account, or the operator's.
	SystemAccount string `key:"system_account"`
}

// Enabled reports whether operator mode is on.
func (o *Operator) Enabled() bool { return len(o.JWTs) > 0 }

// operatorKeys are the top-level keys of operator mode.
var operatorKeys = keyTable{
	"operator":                 operatorKey,
	"operators":                operatorKey,
	"root":                     operatorKey,
	"roots":                    operatorKey,
	"root_operator":            operatorKey,
	"root_operators":           operatorKey,
	"resolver":                 resolverKey,
	"account_resolver":         resolverKey,
	"accounts_resolver":        resolverKey,
	"resolver_preload":         preloadKey,
	"resolver_tls":             unsupportedYet,
	"resolver_pinned_accounts": unsupportedYet,
	"trusted":                  unsupportedYet,
	"trusted_keys":             unsupportedYet,
}

// jwtPrefix starts every JWT (base64 of `{"typ":"JWT",`...), which is how
// an inline JWT is told from a file name (nats-server jwtPrefix).
const jwtPrefix = "eyJ"

// operatorKey reads operator: file names or inline JWTs.
func operatorKey(c *Config, it item, r *report) {
	var names []string
	switch v := it.val.(type) {
	case string:
		names = []string{v}
	case []any:
		for _, e := range v {
			s, ok := unwrap(it.key, e, it).val.(string)
			if !ok {
				r.errorf(it, "error parsing operators: unsupported type %T where string is expected", e)
				return
			}
			names = append(names, s)
		}
	default:
		r.errorf(it, "error parsing operators: unsupported type %T", it.val)
		return
	}
	for _, n := range names {
		token, oc, err := readOperatorJWT(n)
		if err != nil {
			r.errorf(it, "error parsing operator JWT: %v", err)
			continue
		}
		c.Operator.JWTs = append(c.Operator.JWTs, token)
		if c.Operator.SystemAccount == "" {
			c.Operator.SystemAccount = oc.SystemAccount
		}
	}
}

// readOperatorJWT reads an operator JWT from a file or inline, and checks
// that it is a self-signed operator JWT (nats-server readOperatorJWT).
func readOperatorJWT(s string) (string, *jwt.OperatorClaims, error) {
	token := s
	if data, err := os.ReadFile(s); err == nil {
		token = string(data)
	} else if !strings.HasPrefix(s, jwtPrefix) {
		return "", nil, err
	}
	token = strings.TrimSpace(token)
	if i := strings.Index(token, "-----BEGIN"); i >= 0 {
		// A decorated JWT (as nsc writes): the JWT between the markers.
		if tok, err := jwt.ParseDecoratedJWT([]byte(token)); err == nil {
			token = tok
		}
	}
	oc, err := jwt.DecodeOperatorClaims(token)
	if err != nil {
		return "", nil, err
	}
	if oc.Issuer != oc.Subject {
		return "", nil, fmt.Errorf("operator JWT is not self-signed")
	}
	return token, oc, nil
}

// memResolver is how nats-server recognises the MEMORY resolver.
var memResolver = regexp.MustCompile(`(?i)^\s*(MEM|MEMORY)\s*$`)

// resolverKey reads resolver: MEMORY, or a resolver block (resolver.go);
// the URL resolver is not supported yet.
func resolverKey(c *Config, it item, r *report) {
	switch v := it.val.(type) {
	case map[string]any:
		resolverBlock(c, it, v, r)
		return
	case string:
		if memResolver.MatchString(v) {
			c.Operator.Resolver, c.Operator.ResolverDir = "MEMORY", ResolverDir{}
			return
		}
	}
	r.errorf(it, "field %q is not supported by cairn yet: only resolver: MEMORY and the resolver blocks of type full and cache are", it.key)
}

// preloadKey reads resolver_preload: account public keys to account JWTs.
func preloadKey(c *Config, it item, r *report) {
	m, ok := it.val.(map[string]any)
	if !ok {
		r.errorf(it, "preload should be a map of account_public_key:account_jwt")
		return
	}
	c.Operator.Preload = map[string]string{}
	for _, e := range entries(m, it) {
		s, ok := e.val.(string)
		if !ok {
			r.errorf(e, "preload map value should be a string JWT")
			continue
		}
		ac, err := jwt.DecodeAccountClaims(s)
		if err != nil {
			r.errorf(e, "invalid account JWT")
			continue
		}
		if ac.Subject != e.key {
			r.errorf(e, "account JWT preloaded as %q is the JWT of %q", e.key, ac.Subject)
			continue
		}
		c.Operator.Preload[e.key] = s
	}
}

// validate checks operator mode against the rest of the configuration
// (nats-server validateTrustedOperators, validateNoAuthUser), and that
// every preloaded account was issued by a trusted operator.
func (o *Operator) validate(a *Auth) error {
	if !o.Enabled() {
		return nil
	}
	switch {
	case o.Resolver == "":
		return fmt.Errorf("operators require an account resolver to be configured")
	case o.Resolver != "MEMORY" && o.SystemAccount == "":
		return fmt.Errorf("using nats based account resolver - the system account needs to be specified in configuration or the operator jwt")
	case len(a.Accounts) > 0:
		return fmt.Errorf("operators do not allow Accounts to be configured directly")
	case len(a.Users) > 0:
		return fmt.Errorf("operators do not allow users to be configured directly")
	case a.NoAuthUser != "":
		return fmt.Errorf("no_auth_user not compatible with Trusted Operator")
	case a.Token != "" || a.User != "":
		return fmt.Errorf("operators do not allow authorization to be configured directly")
	}
	trusted := o.TrustedKeys()
	keys := make([]string, 0, len(o.Preload))
	for k := range o.Preload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ac, _ := jwt.DecodeAccountClaims(o.Preload[k])
		if !trusted[ac.Issuer] {
			return fmt.Errorf("account JWT of %s is not issued by a trusted operator", k)
		}
	}
	return nil
}

// TrustedKeys returns the keys that may issue accounts: each operator's
// own and its signing keys.
func (o *Operator) TrustedKeys() map[string]bool {
	out := map[string]bool{}
	for _, t := range o.JWTs {
		oc, err := jwt.DecodeOperatorClaims(t)
		if err != nil {
			continue
		}
		out[oc.Subject] = true
		for _, k := range oc.SigningKeys {
			out[k] = true
		}
	}
	return out
}
