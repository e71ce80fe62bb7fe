package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/transform"
	"github.com/nats-io/nkeys"
)

// Account is one account of the accounts block (docs/security.md,
// "Accounts"): a separate subject namespace with its own users, JetStream
// (when enabled) and the streams and services it exports to or imports from
// other accounts, as nats-server v2.15.2 reads it (server/opts.go
// parseAccounts, parseAccountExports, parseAccountImports,
// parseJetStreamForAccount). Its users are in Auth.Users with Account set.
type Account struct {
	Name string
	// JetStream, when not nil, enables JetStream for the account with
	// these limits.
	JetStream *AccountJetStream
	Exports   []Export
	Imports   []Import
	// Limits, when not nil, are the account's connection, subscription
	// and payload limits (its limits block).
	Limits *AccountLimits
	// Trace, when not nil, is where the account's messages that carry a
	// sampled W3C traceparent header are traced (msg_trace or
	// trace_dest).
	Trace *MsgTrace
}

// MsgTrace is an account's msg_trace (or trace_dest) as nats-server
// v2.15.2 reads it (opts.go parseAccountMsgTrace): a message published
// in the account with a traceparent header whose sampled flag is set,
// and no Nats-Trace-Dest, is traced to Dest, Sampling percent of the
// time (docs/protocol.md, "Message tracing").
type MsgTrace struct {
	Dest     string // a literal subject of the account
	Sampling int    // 1..100; 100 when the file gives a destination alone
}

// AccountLimits are an account's limits block (nats-server v2.15.2
// opts.go parseAccountLimits; accounts.go mconns, msubs, mpay), each -1
// (NoLimit) when not set. As nats-server keeps them, a value is used as
// given: 0 connections refuses every client of the account, 0
// subscriptions closes each at CONNECT (docs/security.md, "Limits").
type AccountLimits struct {
	MaxConnections   int32 // clients of the account on this server
	MaxSubscriptions int32 // subscriptions per client connection
	MaxPayload       int32 // bytes of a message's header and payload
}

// NoLimit is the value of an AccountLimits field that limits nothing
// (jwt.NoLimit).
const NoLimit = -1

// AccountJetStream are an account's JetStream limits; -1 is unlimited
// (nats-server JetStreamAccountLimits; jetstream: enabled sets all -1).
type AccountJetStream struct {
	MaxMemory            int64 // bytes of memory streams
	MaxStore             int64 // bytes of file streams
	MaxStreams           int
	MaxConsumers         int // per stream
	MaxAckPending        int // per consumer
	MemoryMaxStreamBytes int64
	StoreMaxStreamBytes  int64
	MaxBytesRequired     bool // every stream must set max_bytes
}

// unlimitedJetStream is jetstream: enabled.
func unlimitedJetStream() *AccountJetStream {
	return &AccountJetStream{-1, -1, -1, -1, -1, -1, -1, false}
}

// Export is a subject an account lets other accounts import: a stream
// (its messages) or a service (requests to it, and its responses).
type Export struct {
	Subject string
	Service bool // a service; otherwise a stream
	// Accounts, when not nil, are the only accounts that may import it;
	// nil is a public export.
	Accounts []string
	// ResponseType of a service: "single" (one response per request,
	// the default), "stream" or "chunked" (several).
	ResponseType string
	// ResponseThreshold is how long a service's response mapping lives
	// (response_threshold; 0 is nats-server's default, 2 minutes).
	ResponseThreshold time.Duration
	// AllowTrace lets a traced request cross into the exporting account
	// still traced (allow_trace, services only); otherwise its trace
	// stops at the import (ADR-41; docs/protocol.md, "Message tracing").
	AllowTrace bool
}

// Import is a stream or service of another account made available in
// this one.
type Import struct {
	Service bool   // a service; otherwise a stream
	Account string // the exporting account
	Subject string // the subject in the exporting account
	// To is the subject in this account: for a service, what clients of
	// this account send requests to (default Subject); for a stream, what
	// the messages are delivered as (default Subject, or Prefix + "." +
	// Subject).
	To     string
	Prefix string // a stream's literal prefix
	Share  bool   // a service shares the requester's every detail in Nats-Request-Info (docs/security.md, "Accounts")
	// AllowTrace lets a traced message of the exporter cross into this
	// account still traced (allow_trace, streams only); otherwise its
	// trace stops at the import (ADR-41; docs/protocol.md, "Message
	// tracing").
	AllowTrace bool
}

// LocalSubject is the subject the import has in the importing account.
func (im *Import) LocalSubject() string {
	switch {
	case im.To != "":
		return im.To
	case im.Prefix != "":
		return strings.TrimSuffix(im.Prefix, ".") + "." + im.Subject
	}
	return im.Subject
}

// Reserved account names (nats-server isReservedAccount).
const globalAccountName = "$G"

// accountKeys are the top-level account keys.
var accountKeys = keyTable{
	"accounts":          accountsKey,
	"system_account":    systemAccountKey,
	"system":            systemAccountKey,
	"no_system_account": noSystemAccountKey,
	"no_system":         noSystemAccountKey,
	"no_sys_acc":        noSystemAccountKey,
}

// systemAccountKey reads system_account (system): the account whose users
// may send the server's $SYS requests (nats-server configureSystemAccount).
func systemAccountKey(c *Config, it item, r *report) {
	s, ok := it.val.(string)
	if !ok {
		r.errorf(it, "system account name must be a string")
		return
	}
	c.Operator.SystemAccount = s
}

// noSystemAccountKey reads no_system_account: true leaves out the
// default system account $SYS.
func noSystemAccountKey(c *Config, it item, r *report) {
	if b, ok := r.boolOf(it); ok {
		c.Auth.NoSystemAccount = b
	}
}

// DefaultSystemAccount is the system account nats-server v2.15.2 makes
// when none is named (DEFAULT_SYSTEM_ACCOUNT).
const DefaultSystemAccount = "$SYS"

// SystemAccountName returns the system account of a configuration, as
// nats-server v2.15.2 chooses it (server.go configureAccounts, Start):
// system_account, or in operator mode the operator JWT's; else an
// account named $SYS of the accounts block; else, unless
// no_system_account, the default $SYS, which the server then makes (an
// account without users). In operator mode without a system account
// there is none: nats-server's default $SYS is not issued by the
// operator, and it does not keep it. "" means no system account.
func SystemAccountName(a *Auth, o *Operator) string {
	if o.SystemAccount != "" {
		return o.SystemAccount
	}
	if o.Enabled() {
		return ""
	}
	for _, acc := range a.Accounts {
		if acc.Name == DefaultSystemAccount {
			return DefaultSystemAccount
		}
	}
	if a.NoSystemAccount {
		return ""
	}
	return DefaultSystemAccount
}

// SystemAccountOnly reports whether the configuration's accounts are
// the system account alone, without an authorization block, a
// no_auth_user or operator mode: nats-server v2.15.2 then lets clients
// that send no credentials into the global account $G (configureAccounts
// adds an implicit no_auth_user), so that adding a system account user
// to an open server keeps it open for everyone else.
func SystemAccountOnly(a *Auth, o *Operator) bool {
	sys := SystemAccountName(a, o)
	return !o.Enabled() && !a.Block && a.NoAuthUser == "" && a.Token == "" && a.User == "" &&
		len(a.Accounts) == 1 && a.Accounts[0].Name == sys
}

// validateSystemAccount checks the system account against the accounts
// (nats-server: "error resolving system account: account missing") and
// JetStream, which the system account may not have ("Not allowed to
// enable JetStream on the system account").
func (c *Config) validateSystemAccount() error {
	sys := SystemAccountName(&c.Auth, &c.Operator)
	if sys == "" {
		return nil
	}
	if c.Operator.Enabled() {
		if _, ok := c.Operator.Preload[sys]; !ok && c.Operator.Resolver == "MEMORY" {
			// (The nats-based resolvers find it in their directory, or
			// start with a bootstrapping system account.)
			return fmt.Errorf("system account %s is not among the preloaded accounts (resolver_preload)", sys)
		}
		return nil
	}
	for _, acc := range c.Auth.Accounts {
		if acc.Name != sys {
			continue
		}
		if acc.JetStream != nil && c.JetStream.Enabled {
			return fmt.Errorf("Not allowed to enable JetStream on the system account")
		}
		return nil
	}
	if c.Operator.SystemAccount != "" {
		return fmt.Errorf("error resolving system account: account missing")
	}
	return nil
}

// accountsKey reads the accounts block: a map of accounts, or an array
// of account names.
func accountsKey(c *Config, it item, r *report) {
	switch v := it.val.(type) {
	case []any:
		seen := map[string]bool{}
		for _, e := range v {
			ei := unwrap(it.key, e, it)
			name, ok := r.stringOf(ei)
			switch {
			case !ok:
			case name == globalAccountName:
				r.errorf(ei, "%q is a Reserved Account", name)
			case seen[name]:
				r.errorf(ei, "Duplicate Account Entry: %s", name)
			case !validAccountName(name):
				r.errorf(ei, "account name %q cannot be used: it names a directory of the JetStream store", name)
			default:
				seen[name] = true
				c.Auth.Accounts = append(c.Auth.Accounts, Account{Name: name})
			}
		}
	case map[string]any:
		for _, e := range entries(v, it) {
			if e.usedVar {
				continue
			}
			m, ok := e.val.(map[string]any)
			if !ok {
				r.errorf(e, "Expected map entries for accounts")
				continue
			}
			if e.key == globalAccountName {
				r.errorf(e, "%q is a Reserved Account", e.key)
				continue
			}
			if !validAccountName(e.key) {
				r.errorf(e, "account name %q cannot be used: it names a directory of the JetStream store", e.key)
				continue
			}
			parseAccount(c, e, m, r)
		}
	default:
		r.errorf(it, "Expected map entries for accounts")
		return
	}
	if len(r.errs) == 0 {
		checkImports(c, it, r)
	}
}

// parseAccount reads one account of the map form.
func parseAccount(c *Config, it item, m map[string]any, r *report) {
	acc := Account{Name: it.key}
	var users []User
	var usersAt item
	var defaults *Permissions
	var tmp Config
	block(&tmp, m, it, keyTable{
		"nkey": func(_ *Config, e item, r *report) {
			if s, ok := e.val.(string); !ok || !nkeys.IsValidPublicAccountKey(s) {
				r.errorf(e, "Not a valid public nkey for an account: %q", e.val)
			}
		},
		"users":               func(_ *Config, e item, r *report) { users, usersAt = parseUsers(e, r), e },
		"default_permissions": func(_ *Config, e item, r *report) { defaults = parsePermissions(e, r) },
		"jetstream":           func(_ *Config, e item, r *report) { acc.JetStream = parseAccountJetStream(e, r) },
		"exports":             func(_ *Config, e item, r *report) { acc.Exports = parseExports(e, r) },
		"imports":             func(_ *Config, e item, r *report) { acc.Imports = parseImports(e, r) },
		"mappings":            unsupportedYet,
		"maps":                unsupportedYet,
		"limits":              func(_ *Config, e item, r *report) { acc.Limits = parseAccountLimits(e, r) },
		"msg_trace":           func(_ *Config, e item, r *report) { parseAccountMsgTrace(&acc, e, r) },
		"trace_dest":          func(_ *Config, e item, r *report) { parseAccountMsgTrace(&acc, e, r) },
	}, r)
	c.Auth.Accounts = append(c.Auth.Accounts, acc)
	if len(users) == 0 {
		return
	}
	switch {
	case c.Auth.User != "":
		r.errorf(usersAt, "Can not have a single user/pass and accounts")
		return
	case c.Auth.Token != "":
		r.errorf(usersAt, "Can not have a token and accounts")
		return
	}
	applyDefaultPermissions(users, defaults)
	for i := range users {
		users[i].Account = acc.Name
	}
	r.addUsers(c, usersAt, users)
}

// parseAccountLimits reads an account's limits block with nats-server
// v2.15.2's keys and errors (opts.go parseAccountLimits); an integer is
// kept as nats-server keeps it, truncated to 32 bits. max_leafnodes is
// accepted: cairn has no leafnodes.
func parseAccountLimits(it item, r *report) *AccountLimits {
	m, ok := it.val.(map[string]any)
	if !ok {
		r.errorf(it, "Expected account limits to be a map/struct, got %+v", it.val)
		return nil
	}
	l := &AccountLimits{NoLimit, NoLimit, NoLimit}
	for _, e := range entries(m, it) {
		var dst *int32
		switch strings.ToLower(e.key) {
		case "max_connections", "max_conn":
			dst = &l.MaxConnections
		case "max_subscriptions", "max_subs":
			dst = &l.MaxSubscriptions
		case "max_payload", "max_pay":
			dst = &l.MaxPayload
		case "max_leafnodes", "max_leafs":
			r.int64Of(e)
			continue
		default:
			r.errorf(e, "Unknown field %q parsing account limits", e.key)
			continue
		}
		if n, ok := r.int64Of(e); ok {
			*dst = int32(n)
		}
	}
	return l
}

// parseAccountMsgTrace reads an account's msg_trace or trace_dest: a
// destination subject, or a block { dest, sampling } whose sampling is
// an integer or a percentage ("50%"), with nats-server v2.15.2's texts
// (opts.go parseAccountMsgTrace; the first problem of the block only).
// A destination without sampling samples 100%; a sampling without a
// destination is dropped with a warning. The two keys write the same
// settings, so a block may give the sampling in one and the destination
// in the other, as nats-server allows.
func parseAccountMsgTrace(acc *Account, it item, r *report) {
	t := MsgTrace{}
	if acc.Trace != nil {
		t = *acc.Trace
	}
	dest := func(e item, key string) bool {
		s, ok := e.val.(string)
		switch {
		case !ok:
			r.errorf(e, "Field %q should be a string, got %T", key, e.val)
		case !validPublishSubject(s):
			r.errorf(e, "Trace destination %q is not valid", s)
		default:
			t.Dest = s
			return true
		}
		return false
	}
	sampling := func(e item, n int) bool {
		if n <= 0 || n > 100 {
			// nats-server's text, its typo included.
			r.errorf(e, "Ttrace destination sampling value %d is invalid, needs to be [1..100]", n)
			return false
		}
		t.Sampling = n
		return true
	}
	switch v := it.val.(type) {
	case string:
		if !dest(it, it.key) {
			return
		}
	case map[string]any:
		for _, e := range entries(v, it) {
			ok := true
			switch strings.ToLower(e.key) {
			case "dest":
				ok = dest(e, e.key)
			case "sampling":
				switch sv := e.val.(type) {
				case int64:
					ok = sampling(e, int(sv))
				case string:
					n, err := strconv.Atoi(strings.TrimSuffix(sv, "%"))
					if err != nil {
						r.errorf(e, "Invalid trace destination sampling value %q", sv)
						return
					}
					ok = sampling(e, n)
				default:
					r.errorf(e, "Trace destination sampling field %q should be an integer or a percentage, got %T", e.key, e.val)
					return
				}
			default:
				if !e.usedVar {
					r.errorf(e, "Unknown field %q parsing account message trace map/struct %q", e.key, it.key)
					return
				}
			}
			if !ok {
				return
			}
		}
	default:
		r.errorf(it, "Expected account message trace %q to be a string or a map/struct, got %T", it.key, it.val)
		return
	}
	switch {
	case t.Dest != "" && t.Sampling == 0:
		t.Sampling = 100
	case t.Sampling > 0 && t.Dest == "":
		r.warnf(it, "Trace destination sampling ignored since no destination was set")
		t.Sampling = 0
	}
	acc.Trace = &t
	if t.Dest == "" {
		acc.Trace = nil
	}
}

// validPublishSubject is nats-server's IsValidPublishSubject: a valid
// subject without wildcard tokens.
func validPublishSubject(s string) bool {
	if !validPermSubject(s) {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "*" || tok == ">" {
			return false
		}
	}
	return true
}

// parseAccountJetStream reads an account's jetstream: true, "enabled",
// false, "disabled", or a block of limits (nats-server
// parseJetStreamForAccount).
func parseAccountJetStream(it item, r *report) *AccountJetStream {
	switch v := it.val.(type) {
	case bool:
		if v {
			return unlimitedJetStream()
		}
		return nil
	case string:
		switch strings.ToLower(v) {
		case "enabled", "enable":
			return unlimitedJetStream()
		case "disabled", "disable":
			return nil
		}
		r.errorf(it, "Expected 'enabled' or 'disabled' for string value, got '%s'", v)
		return nil
	case map[string]any:
		l := unlimitedJetStream()
		for _, e := range entries(v, it) {
			size := func(dst *int64) {
				if n, ok := e.val.(int64); ok {
					*dst = n
				} else {
					r.errorf(e, "Expected a parseable size for %q, got %v", e.key, e.val)
				}
			}
			count := func(dst *int) {
				var n int64
				size(&n)
				*dst = int(n)
			}
			switch strings.ToLower(e.key) {
			case "max_memory", "max_mem", "mem", "memory":
				size(&l.MaxMemory)
			case "max_store", "max_file", "max_disk", "store", "disk":
				size(&l.MaxStore)
			case "max_streams", "streams":
				count(&l.MaxStreams)
			case "max_consumers", "consumers":
				count(&l.MaxConsumers)
			case "max_ack_pending":
				count(&l.MaxAckPending)
			case "mem_max_stream_bytes", "memory_max_stream_bytes":
				size(&l.MemoryMaxStreamBytes)
			case "disk_max_stream_bytes", "store_max_stream_bytes":
				size(&l.StoreMaxStreamBytes)
			case "max_bytes_required", "max_stream_bytes", "max_bytes":
				if b, ok := e.val.(bool); ok {
					l.MaxBytesRequired = b
				} else {
					r.errorf(e, "Expected a parseable bool for %q, got %v", e.key, e.val)
				}
			case "cluster_traffic":
				r.ignored(e, "cairn does not replicate JetStream")
			default:
				if !e.usedVar {
					r.unknown(e)
				}
			}
		}
		return l
	}
	r.errorf(it, "Expected map, bool or string to define JetStream, got %T", it.val)
	return nil
}

// parseExports reads an account's exports (nats-server
// parseExportStreamOrService).
func parseExports(it item, r *report) []Export {
	arr, ok := it.val.([]any)
	if !ok {
		r.errorf(it, "Exports should be an array, got %T", it.val)
		return nil
	}
	var out []Export
	for _, v := range arr {
		ei := unwrap(it.key, v, it)
		m, ok := ei.val.(map[string]any)
		if !ok {
			r.errorf(ei, "Export Items should be a map with type entry, got %T", ei.val)
			continue
		}
		var ex Export
		var stream, service, rt bool
		var atrc *item // the allow_trace key, when given
		for _, e := range entries(m, ei) {
			switch strings.ToLower(e.key) {
			case "stream", "service":
				s, ok := e.val.(string)
				if !ok {
					r.errorf(e, "Expected %s name to be string, got %T", strings.ToLower(e.key), e.val)
					continue
				}
				ex.Subject = s
				if strings.ToLower(e.key) == "service" {
					service = true
				} else {
					stream = true
				}
			case "accounts":
				ex.Accounts = []string{}
				if list, ok := e.val.([]any); ok {
					for _, a := range list {
						if s, ok := r.stringOf(unwrap(e.key, a, e)); ok {
							ex.Accounts = append(ex.Accounts, s)
						}
					}
				} else {
					r.typeError(e, "[]interface {}")
				}
			case "response", "response_type":
				rt = true
				s, ok := e.val.(string)
				if !ok {
					r.errorf(e, "Expected response type to be string, got %T", e.val)
					continue
				}
				switch strings.ToLower(s) {
				case "single", "singleton":
					ex.ResponseType = "single"
				case "stream":
					ex.ResponseType = "stream"
				case "chunk", "chunked":
					ex.ResponseType = "chunked"
				default:
					r.errorf(e, "Unknown response type: %q", s)
				}
			case "threshold", "response_threshold", "response_max_time", "response_time":
				s, _ := e.val.(string)
				d, err := time.ParseDuration(s)
				if err != nil {
					r.errorf(e, "Expected response threshold to be a parseable time duration, got %q", e.val)
					continue
				}
				ex.ResponseThreshold = d
			case "allow_trace":
				if b, ok := r.boolOf(e); ok {
					ex.AllowTrace, atrc = b, &e
				}
			case "latency", "account_token_position":
				unsupportedYet(nil, e, r)
			default:
				if !e.usedVar {
					r.unknown(e)
				}
			}
		}
		switch {
		case stream && service:
			r.errorf(ei, "Detected service %q but already saw a stream", ex.Subject)
			continue
		case stream && rt:
			r.errorf(ei, "Detected response directive on non-service")
			continue
		case stream && atrc != nil:
			// allow_trace is the exporter's consent to a traced request
			// crossing into it: services only (nats-server's text).
			r.errorf(*atrc, "Detected allow_trace directive on non-service")
			continue
		case !stream && !service:
			continue // nats-server ignores such an entry
		}
		ex.Service = service
		if service && ex.ResponseType == "" {
			ex.ResponseType = "single"
		}
		out = append(out, ex)
	}
	return out
}

// parseImports reads an account's imports (nats-server
// parseImportStreamOrService).
func parseImports(it item, r *report) []Import {
	arr, ok := it.val.([]any)
	if !ok {
		r.errorf(it, "Imports should be an array, got %T", it.val)
		return nil
	}
	var out []Import
	for _, v := range arr {
		ei := unwrap(it.key, v, it)
		m, ok := ei.val.(map[string]any)
		if !ok {
			r.errorf(ei, "Import Items should be a map with type entry, got %T", ei.val)
			continue
		}
		var im Import
		var stream, service bool
		var atrc *item // the allow_trace key, when given
		for _, e := range entries(m, ei) {
			switch strings.ToLower(e.key) {
			case "stream", "service":
				kind := strings.ToLower(e.key)
				am, ok := e.val.(map[string]any)
				if !ok {
					r.errorf(e, "%s entry should be an account map, got %T", strings.ToUpper(kind[:1])+kind[1:], e.val)
					continue
				}
				var tmp Config
				block(&tmp, am, e, keyTable{
					"account": func(_ *Config, x item, r *report) { setString(&im.Account, x, r) },
					"subject": func(_ *Config, x item, r *report) { setString(&im.Subject, x, r) },
				}, r)
				if im.Account == "" || im.Subject == "" {
					r.errorf(e, "Expect an account name and a subject")
					continue
				}
				if kind == "service" {
					service = true
				} else {
					stream = true
				}
			case "prefix":
				setString(&im.Prefix, e, r)
			case "to":
				setString(&im.To, e, r)
			case "share":
				setBool(&im.Share, e, r)
			case "allow_trace":
				if b, ok := r.boolOf(e); ok {
					im.AllowTrace, atrc = b, &e
				}
			default:
				if !e.usedVar {
					r.unknown(e)
				}
			}
		}
		switch {
		case stream && service:
			r.errorf(ei, "Detected service but already saw a stream")
			continue
		case stream && im.Prefix != "" && im.To != "":
			r.errorf(ei, "Stream import can not have a 'prefix' and a 'to' property")
			continue
		case service && atrc != nil:
			// allow_trace is the importer's consent to a traced message
			// of the exporter crossing into it: streams only
			// (nats-server's text).
			r.errorf(*atrc, "Detected allow_trace directive on a non-stream")
			continue
		case !stream && !service:
			continue
		}
		im.Service = service
		out = append(out, im)
	}
	return out
}

// checkImports checks every import against the exporting account once
// all accounts are read (nats-server parseAccounts, second half): the
// account exists, it exports the subject to the importer (every
// cross-account grant needs a positive check: CVE-2021-3127), a stream
// prefix is literal, no duplicate, no cycle (CVE-2020-28466,
// CVE-2022-42709). The errors carry the accounts block's position, as
// nats-server's do.
func checkImports(c *Config, at item, r *report) {
	byName := map[string]*Account{}
	for i := range c.Auth.Accounts {
		byName[c.Auth.Accounts[i].Name] = &c.Auth.Accounts[i]
	}
	accepted := map[string][]Import{} // imports checked so far, by account
	for _, acc := range c.Auth.Accounts {
		for _, ex := range acc.Exports {
			kind := map[bool]string{false: "stream", true: "service"}[ex.Service]
			if !validPermSubject(ex.Subject) {
				r.errorf(at, "Error adding %s export %q: %v", kind, ex.Subject, "invalid subject")
			}
			for _, a := range ex.Accounts {
				if byName[a] == nil {
					r.errorf(at, "%q account not defined for %s export", a, kind)
				}
			}
		}
		seen := map[string]bool{}
		for _, im := range acc.Imports {
			kind := map[bool]string{false: "stream", true: "service"}[im.Service]
			from := byName[im.Account]
			switch {
			case from == nil:
				r.errorf(at, "%q account not defined for %s import", im.Account, kind)
			case !validPermSubject(im.Subject) || !validPermSubject(im.LocalSubject()):
				r.errorf(at, "Error adding %s import %q: %v", kind, im.Subject, "invalid subject")
			case !from.exports(im.Service, im.Subject, acc.Name):
				r.errorf(at, "Error adding %s import %q: %s import not authorized", kind, im.Subject, kind)
			case im.Prefix != "" && strings.ContainsAny(im.Prefix, "*>"):
				r.errorf(at, "Error adding stream import %q: stream import prefix can not contain wildcard tokens", im.Subject)
			case seen[kind+" "+im.Account+" "+im.Subject]:
				r.errorf(at, "Error adding %s import %q: %s import already exists", kind, im.Subject, kind)
			case importCycle(accepted, acc.Name, im):
				r.errorf(at, "Error adding %s import %q: import forms a cycle", kind, im.Subject)
			case im.mappingError() != nil:
				r.errorf(at, "Error adding %s import %q: %v", kind, im.Subject, im.mappingError())
			default:
				accepted[acc.Name] = append(accepted[acc.Name], im)
			}
			seen[kind+" "+im.Account+" "+im.Subject] = true
		}
	}
}

// mappingError is nats-server's error for an import whose "to" cannot be
// a reversible mapping of the exported subject (nats-server v2.15.2
// AddServiceImport and addMappedStreamImportWithClaim compile it with
// NewSubjectTransformStrict when the exported subject has wildcards);
// nil when the mapping is fine or there is none.
func (im *Import) mappingError() error {
	local := im.LocalSubject()
	if im.To == "" || local == im.Subject || !strings.ContainsAny(im.Subject, "*>") {
		return nil
	}
	if _, err := transform.NewStrict(im.Subject, transform.Tokenize(local)); err != nil {
		kind := map[bool]string{false: "stream", true: "service"}[im.Service]
		from, to := im.Subject, local
		if im.Service {
			from, to = local, im.Subject
		}
		return fmt.Errorf("failed to create mapping transform for %s import subject from %q to %q: %w", kind, from, to, err)
	}
	return nil
}

// exports reports whether the account exports subj (a stream or a
// service) to the account named to: an export whose subject contains subj
// and that is public or lists to (nats-server checkStreamExportApproved,
// checkServiceImportAuthorized).
func (a *Account) exports(service bool, subj, to string) bool {
	for _, ex := range a.Exports {
		if ex.Service != service || !subsetOf(subj, ex.Subject) {
			continue
		}
		if ex.Accounts == nil {
			return true
		}
		for _, n := range ex.Accounts {
			if n == to {
				return true
			}
		}
	}
	return false
}

// importCycle reports whether importing im into the account named into
// closes a loop, through the imports accepted so far, of imports of the
// same kind whose subjects overlap (nats-server streamImportFormsCycle,
// serviceImportFormsCycle; a search deeper than 1024 accounts counts as
// a cycle).
func importCycle(accepted map[string][]Import, into string, im Import) bool {
	visited := map[string]bool{into: true}
	var walk func(acc string, subj string, depth int) bool
	walk = func(acc string, subj string, depth int) bool {
		if depth > 1024 {
			return true
		}
		for _, next := range accepted[acc] {
			if next.Service != im.Service || !overlap(subj, next.LocalSubject()) {
				continue
			}
			if visited[next.Account] {
				return true
			}
			visited[next.Account] = true
			if walk(next.Account, next.Subject, depth+1) {
				return true
			}
		}
		return false
	}
	return walk(im.Account, im.Subject, 0)
}

// subsetOf and overlap are internal/subject's SubsetOf and Overlap
// (config imports nothing of cairn's): every subject of sub is one of
// super; some subject is matched by both.
func subsetOf(sub, super string) bool {
	st, pt := strings.Split(sub, "."), strings.Split(super, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return i < len(st)
		case i >= len(st), st[i] == ">", p != "*" && p != st[i]:
			return false
		}
	}
	return len(st) == len(pt)
}

func overlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		switch {
		case at[i] == ">" || bt[i] == ">":
			return true
		case at[i] != "*" && bt[i] != "*" && at[i] != bt[i]:
			return false
		}
	}
	return len(at) == len(bt)
}

// validAccountName reports whether an account name can name a directory
// under the JetStream store (<store_dir>/jetstream/<account>): cairn
// refuses "", ".", ".." and names with a path separator or a control
// character, which nats-server accepts (CVE-2022-28357 taught that no
// input may lead a write outside the store).
func validAccountName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if r == '/' || r == '\\' || r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// Account returns the account named name, nil when not configured.
func (a *Auth) Account(name string) *Account {
	for i := range a.Accounts {
		if a.Accounts[i].Name == name {
			return &a.Accounts[i]
		}
	}
	return nil
}

// validateAccounts checks what flags could break: users of accounts with
// a single user or a token set by --user or --auth.
func (a *Auth) validateAccounts() error {
	for _, u := range a.Users {
		if u.Account == "" {
			continue
		}
		switch {
		case a.User != "":
			return fmt.Errorf("Can not have a single user/pass and accounts")
		case a.Token != "":
			return fmt.Errorf("Can not have a token and accounts")
		}
	}
	return nil
}
