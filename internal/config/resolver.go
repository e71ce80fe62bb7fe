package config

import (
	"os"
	"strings"
	"time"
)

// ResolverDir is the resolver block of the nats-based account resolvers
// (docs/security.md, "The nats-based resolvers"; nats-server v2.15.2
// opts.go "resolver" as a map, accounts.go NewDirAccResolver and
// NewCacheDirAccResolver):
//
//	resolver {
//	  type: full            # or cache
//	  dir: "./jwt"          # the account JWTs, one file <public key>.jwt each
//	  allow_delete: false   # full: $SYS.REQ.CLAIMS.DELETE removes JWTs
//	  hard_delete: false    # full, with allow_delete: remove the file rather than rename it to .jwt.deleted
//	  limit: 1000           # full: most JWTs kept (0: no limit); cache: most cached (default 1000)
//	  ttl: "2m"             # cache: how long a fetched JWT is kept (0: until it expires)
//	  interval: "2m"        # full: how often the servers compare their JWTs (default 1m)
//	  timeout: "1.9s"       # how long a lookup from the other servers may take
//	}
//
// The zero value is no such resolver.
type ResolverDir struct {
	// Full: every account JWT is kept (type full); otherwise the
	// directory caches the JWTs fetched from the other servers (type
	// cache).
	Full bool
	// Dir is the directory of the JWTs.
	Dir string
	// AllowDelete and HardDelete: full only (see above).
	AllowDelete, HardDelete bool
	// Limit is the most JWTs kept, as written (0: the default).
	Limit int64
	// TTL (cache), Interval (full) and Timeout, as written (0: the
	// default).
	TTL, Interval, Timeout time.Duration
}

// Resolver defaults (nats-server v2.15.2 NewDirAccResolver,
// NewCacheDirAccResolver, DEFAULT_ACCOUNT_FETCH_TIMEOUT).
const (
	DefaultResolverInterval = time.Minute
	DefaultResolverTimeout  = 1900 * time.Millisecond
	DefaultCacheLimit       = 1000
)

// SyncInterval returns how often a full resolver compares its JWTs with
// the other servers'.
func (d *ResolverDir) SyncInterval() time.Duration {
	if d.Interval <= 0 {
		return DefaultResolverInterval
	}
	return d.Interval
}

// FetchTimeout returns how long a lookup from the other servers may take.
func (d *ResolverDir) FetchTimeout() time.Duration {
	if d.Timeout == 0 {
		return DefaultResolverTimeout
	}
	return d.Timeout
}

// MaxJWTs returns the most JWTs the directory keeps, 0 for no limit.
func (d *ResolverDir) MaxJWTs() int64 {
	switch {
	case d.Full:
		return max(d.Limit, 0)
	case d.Limit <= 0:
		return DefaultCacheLimit
	}
	return d.Limit
}

// resolverBlock reads a resolver block with nats-server's checks and
// texts, each reported at the resolver key. A type of MEM or MEMORY is
// the MEMORY resolver.
func resolverBlock(c *Config, it item, m map[string]any, r *report) {
	errs := len(r.errs)
	var d ResolverDir
	var typ string
	var del, hardSet bool
	for _, e := range entries(m, it) {
		switch e.key {
		case "dir":
			d.Dir, _ = r.stringOf(e)
		case "type":
			typ, _ = r.stringOf(e)
		case "allow_delete":
			del, _ = r.boolOf(e)
		case "hard_delete":
			hardSet = true
			d.HardDelete, _ = r.boolOf(e)
		case "limit":
			d.Limit, _ = r.int64Of(e)
		case "ttl":
			d.TTL = resolverDuration(it, e, r)
		case "interval":
			d.Interval = resolverDuration(it, e, r)
		case "timeout":
			d.Timeout = resolverDuration(it, e, r)
		}
	}
	if len(r.errs) > errs {
		return
	}
	d.AllowDelete = del
	switch strings.ToUpper(typ) {
	case "CACHE":
		checkResolverDir(it, d.Dir, r)
		if d.Interval != 0 {
			r.errorf(it, "CACHE does not accept sync")
		}
		if del {
			r.errorf(it, "CACHE does not accept allow_delete")
		}
		if hardSet {
			r.errorf(it, "CACHE does not accept hard_delete")
		}
	case "FULL":
		d.Full = true
		checkResolverDir(it, d.Dir, r)
		if d.TTL != 0 {
			r.errorf(it, "FULL does not accept ttl")
		}
		if hardSet && !del {
			r.errorf(it, "hard_delete has no effect without delete")
		}
	case "MEM", "MEMORY":
		c.Operator.Resolver, c.Operator.ResolverDir = "MEMORY", ResolverDir{}
		return
	default:
		r.errorf(it, "error parsing account resolver, should be MEM or  URL(\"url\") or a map containing dir and type state=[FULL|CACHE])")
		return
	}
	if d.Timeout < 0 || (d.Timeout == 0 && hasKey(m, "timeout")) {
		r.errorf(it, "Fetch timeout %v is too smal", d.Timeout)
	}
	if len(r.errs) > errs {
		return
	}
	c.Operator.Resolver, c.Operator.ResolverDir = strings.ToUpper(typ), d
}

// resolverDuration reads one of the resolver's durations: a string for
// time.ParseDuration, with nats-server's texts (a wrong type at the
// value, a bad duration at the resolver key it).
func resolverDuration(it, e item, r *report) time.Duration {
	s, ok := r.stringOf(e)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		r.errorf(it, "%v", err)
	}
	return d
}

// checkResolverDir is nats-server's check of the resolver's dir: set, and
// when it exists a directory its owner may write. A missing one is made
// at start. nats-server makes it while it reads the file and reports
// that failure too (mkdir), which cairn repeats for an empty dir and for
// a file.
func checkResolverDir(it item, dir string, r *report) {
	if dir == "" {
		r.errorf(it, "dir has no value and needs to point to a directory")
		r.errorf(it, "mkdir : no such file or directory")
		return
	}
	if info, _ := os.Stat(dir); info != nil && (!info.IsDir() || info.Mode().Perm()&(1<<7) == 0) {
		r.errorf(it, "dir needs to point to an accessible directory")
		if !info.IsDir() {
			r.errorf(it, "mkdir %s: not a directory", dir)
		}
	}
}

// hasKey reports whether a block has key.
func hasKey(m map[string]any, key string) bool {
	for k := range m {
		if k == key {
			return true
		}
	}
	return false
}
