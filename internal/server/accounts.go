package server

import (
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/sublist"
	"github.com/nats-io/jwt/v2"
)

// Accounts (docs/security.md, "Accounts"; nats-server v2.15.2
// accounts.go): each account is a separate subject namespace with its
// own subject index, so a message published in one account reaches only
// that account's subscribers, and its own JetStream (streams under
// <store_dir>/jetstream/<account>/streams, the API answering only about
// them). Every client belongs to one account, chosen by the user it
// authenticates as; without accounts, and for users that name none, it
// is the global account $G. Routes carry the account's name in RS+, RS-,
// RMSG and HMSG. Exports and imports (imports.go) let messages cross
// between accounts where the configuration says so, and nowhere else.
//
// One account may be the system account (SystemAccount), whose users can
// send the server's $SYS requests (sysreq.go): the one system_account
// names, or the operator JWT's; else a configured account named $SYS;
// else, unless no_system_account, an account $SYS that New makes, with
// no users (nats-server v2.15.2 server.go configureAccounts, Start,
// SetDefaultSystemAccount). It never has JetStream.
//
// The accounts are made by New from Options.Auth (and operator mode's
// preloaded account JWTs); a reload may add and remove accounts and
// change their exports, imports and limits (accountsreload.go). The
// table is an immutable map behind an atomic pointer, read without a
// lock and replaced whole; an account kept by a reload stays the same
// value, its configuration and limits behind atomic pointers.

// accountTable maps account names to accounts; immutable once published.
type accountTable map[string]*account

// account is one subject namespace.
type account struct {
	name   string
	system bool // the system account
	sl     *sublist.Sublist[*subscription]
	// cfg is the account's block of the configuration: nil for $G, the
	// accounts of JWTs and a system account the server made. A reload may
	// replace it.
	cfg atomic.Pointer[config.Account]
	// jwtName is the name in the account's JWT, "" for none (in operator
	// mode); a reload or a pushed JWT may replace it. See nameTag.
	jwtName atomic.Pointer[string]
	// jsLimits, when not nil, enables JetStream for the account with
	// these limits (from its configuration or its JWT); jsGlobal enables
	// it with the server's limits only ($G without accounts). Set by New;
	// a reload does not change them.
	jsLimits *config.AccountJetStream
	jsGlobal bool

	// JetStream: js and jsAPI when enabled for the account; otherwise
	// jsOff answers its API requests with 10039 (jetstream.go). Set at
	// start, or when a nats-based resolver's JWT enables JetStream for
	// the account while the server runs (jetstream.go
	// startAccountJetStreamLive), read by any goroutine.
	js    atomic.Pointer[jetstream.JetStream]
	jsAPI atomic.Pointer[jsapi.API]
	jsOff atomic.Pointer[jsapi.Disabled]

	imp imports // its service imports' response routing (imports.go)
	// importSubs are the subscriptions of its configured imports
	// (imports.go), removed and made again by a reload that changes them;
	// owned by Start, then by the reloads (one at a time).
	importSubs []*InternalSub
	// The system account's exports to every account and the imports of
	// them this account got (sysreq.go startSystemImports); set in Start
	// (or, for an account a reload added, before it is published),
	// read-only after.
	sysExports []config.Export
	sysImports []config.Import

	// Limits (acclimits.go): lim is set by New and replaced by a reload;
	// nconns counts the clients authenticated into the account;
	// lastSubsLog (unix nanoseconds) paces the log of its clients'
	// subscription limit errors.
	lim         atomic.Pointer[config.AccountLimits]
	nconns      atomic.Int32
	lastSubsLog atomic.Int64

	// trace, when not nil, is where messages published in the account
	// with a sampled traceparent header are traced (msgtrace.go): its
	// msg_trace, or its JWT's trace. Set by New, replaced by a reload,
	// read by the read loops.
	trace atomic.Pointer[config.MsgTrace]

	closed traffic // totals of its client connections that closed (stats.go), added under Server.mu
}

// accountSpec is what the configuration says of one account: its block
// (nil for $G and the accounts of JWTs), its limits and its JetStream.
type accountSpec struct {
	cfg *config.Account
	lim config.AccountLimits
	js  *config.AccountJetStream
	jwt *jwt.AccountClaims // the account's JWT, in operator mode
	// trace is the account's traceparent destination (msg_trace, or
	// the JWT's trace); nil for none.
	trace *config.MsgTrace
}

// accountSpecs returns the accounts a configuration defines, by name:
// those of the accounts block and, in operator mode, the account JWTs
// (d.AccountClaims), whose exports and imports become their block
// (config.JWTAccounts); with the warnings for the imports of JWTs left
// out. $G and a system account the server makes are not among them.
func accountSpecs(a *config.Auth, d *auth.Directory) (map[string]accountSpec, []string) {
	out := map[string]accountSpec{}
	for i := range a.Accounts {
		cfg := &a.Accounts[i]
		out[cfg.Name] = accountSpec{cfg: cfg, lim: accountLimitsOf(cfg.Limits), js: cfg.JetStream, trace: cfg.Trace}
	}
	claims := d.AccountClaims()
	blocks, warns := config.JWTAccounts(claims, time.Now())
	for pub, ac := range claims {
		out[pub] = accountSpec{
			cfg: blocks[pub],
			js:  jwtJetStream(&ac.Limits.JetStreamLimits),
			// nats-server accounts.go UpdateAccountClaims: conn, subs, payload.
			lim: config.AccountLimits{
				MaxConnections:   clamp32(ac.Limits.Conn),
				MaxSubscriptions: clamp32(ac.Limits.Subs),
				MaxPayload:       clamp32(ac.Limits.Payload),
			},
			jwt:   ac,
			trace: jwtTrace(ac.Trace),
		}
	}
	return out, warns
}

// jwtTrace converts an account JWT's trace setting as nats-server
// v2.15.2 reads it (accounts.go UpdateAccountClaims): none for a
// destination that is not a literal subject, a sampling outside 1..100
// taken as 100.
func jwtTrace(t *jwt.MsgTrace) *config.MsgTrace {
	if t == nil || !subject.ValidLiteral(string(t.Destination)) {
		return nil
	}
	n := t.Sampling
	if n <= 0 || n > 100 {
		n = 100
	}
	return &config.MsgTrace{Dest: string(t.Destination), Sampling: n}
}

func newAccount(name string, sp accountSpec) *account {
	acc := &account{name: name, sl: sublist.New[*subscription](), jsLimits: sp.js}
	acc.cfg.Store(sp.cfg)
	acc.lim.Store(&sp.lim)
	acc.trace.Store(sp.trace)
	acc.jwtName.Store(sp.jwtName())
	return acc
}

// jwtName returns the name in the spec's account JWT, "" without one.
func (sp accountSpec) jwtName() *string {
	name := ""
	if sp.jwt != nil {
		name = sp.jwt.Name
	}
	return &name
}

// nameTag is the account's name tag: its JWT's name, or its own name
// when it has no JWT or the JWT names none (nats-server v2.15.2
// accounts.go getNameTagLocked).
func (a *account) nameTag() string {
	if n := a.jwtName.Load(); n != nil && *n != "" {
		return *n
	}
	return a.name
}

// limits returns the account's limits in force.
func (a *account) limits() *config.AccountLimits { return a.lim.Load() }

// initAccounts builds the account table from the options: $G, every
// configured account and the system account. It returns the errors
// nats-server v2.15.2 gives for a system account that does not exist or
// has JetStream.
func (s *Server) initAccounts() error {
	s.gacc = newAccount(auth.GlobalAccount, accountSpec{lim: accountLimitsOf(nil)})
	table := accountTable{auth.GlobalAccount: s.gacc}
	specs, warns := accountSpecs(&s.opts.Auth, s.security().dir)
	for name, sp := range specs {
		table[name] = newAccount(name, sp)
	}
	for _, w := range warns {
		s.log.Warnf("%s", w)
	}
	if err := s.initSystemAccount(table); err != nil {
		return err
	}
	// With no account configured but the system account (nor JWT), $G
	// has JetStream (nats-server globalAccountOnly).
	s.gacc.jsGlobal = s.globalOnly(table)
	s.accounts.Store(&table)
	return nil
}

// globalOnly reports whether a table holds no account but $G and the
// system account, outside operator mode: then $G has JetStream
// (nats-server globalAccountOnly).
func (s *Server) globalOnly(table accountTable) bool {
	others := 0
	for _, acc := range table {
		if acc != s.gacc && !acc.system {
			others++
		}
	}
	return others == 0 && !s.opts.Operator.Enabled()
}

// initSystemAccount finds or makes the system account
// (config.SystemAccountName) in table.
func (s *Server) initSystemAccount(table accountTable) error {
	name := config.SystemAccountName(&s.opts.Auth, &s.opts.Operator)
	if name == "" {
		if s.opts.Operator.Enabled() {
			s.log.Warnf("Trusted Operators should utilize a System Account")
		}
		return nil
	}
	acc := table[name]
	switch {
	case acc == nil && s.opts.Operator.Enabled():
		return fmt.Errorf("%w: can't set system account: account %s is not among the preloaded accounts", ErrInvalidOptions, name)
	case acc == nil && s.opts.Operator.SystemAccount != "":
		return fmt.Errorf("%w: error resolving system account: account missing", ErrInvalidOptions)
	case acc == nil:
		acc = newAccount(name, accountSpec{lim: accountLimitsOf(nil)})
		table[name] = acc
	case acc.jsLimits != nil && s.opts.JetStream:
		return fmt.Errorf("%w: Not allowed to enable JetStream on the system account", ErrInvalidOptions)
	}
	acc.system = true
	s.sysacc = acc
	return nil
}

// jwtJetStream converts an account JWT's JetStream limits: JetStream is
// on when memory or disk storage is allowed (nats-server: 0 is disabled,
// -1 unlimited).
func jwtJetStream(l *jwt.JetStreamLimits) *config.AccountJetStream {
	if l.MemoryStorage == 0 && l.DiskStorage == 0 {
		return nil
	}
	n := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	return &config.AccountJetStream{
		MaxMemory: l.MemoryStorage, MaxStore: l.DiskStorage,
		MaxStreams: int(n(l.Streams)), MaxConsumers: int(n(l.Consumer)), MaxAckPending: int(n(l.MaxAckPending)),
		MemoryMaxStreamBytes: n(l.MemoryMaxStreamBytes), StoreMaxStreamBytes: n(l.DiskMaxStreamBytes),
		MaxBytesRequired: l.MaxBytesRequired,
	}
}

// account returns the account named name, nil when there is none.
func (s *Server) account(name string) *account { return s.accountTable()[name] }

// AccountNameTag returns the name tag of the account named name: the
// name in its account JWT (operator mode), else name itself, also for an
// account that is gone. It is what nats-server v2.15.2 shows as /connz
// name_tag, /subsz account_tag, /accountz name_tag and the connection
// events' name_tag (accounts.go getNameTag).
func (s *Server) AccountNameTag(name string) string {
	if acc := s.account(name); acc != nil {
		return acc.nameTag()
	}
	return name
}

// accountTable returns the accounts in force.
func (s *Server) accountTable() accountTable { return *s.accounts.Load() }

// AccountImportsExports returns what the account named name exports
// (its configured exports, then, for the system account, its exports to
// every account) and imports (its configured imports, then the system
// account's services it imports), as /accountz lists them; ok is false
// when there is no such account. The slices are the caller's; the
// elements' Accounts lists are shared and not to be modified. An account
// JWT's exports and imports are listed as config.JWTAccounts converts
// them.
func (s *Server) AccountImportsExports(name string) (exports []config.Export, imports []config.Import, ok bool) {
	acc := s.account(name)
	if acc == nil {
		return nil, nil, false
	}
	if cfg := acc.cfg.Load(); cfg != nil {
		exports = append(exports, cfg.Exports...)
		imports = append(imports, cfg.Imports...)
	}
	return append(exports, acc.sysExports...), append(imports, acc.sysImports...), true
}

// accountsSorted returns the accounts in name order.
func (s *Server) accountsSorted() []*account {
	table := s.accountTable()
	out := make([]*account, 0, len(table))
	for _, a := range table {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// jetStreamFor reports whether JetStream runs for acc and with which
// limits (nil: the server's only): with no account configured, $G has it;
// otherwise only the accounts whose configuration enables it (nats-server
// v2.15.2 globalAccountOnly, configAllJetStreamAccounts).
func (s *Server) jetStreamFor(acc *account) (bool, *config.AccountJetStream) {
	return acc.jsGlobal || acc.jsLimits != nil, acc.jsLimits
}

// AccountStats is what the monitoring endpoints report of one account
// (/accountz, /jsz, /healthz, /metrics).
type AccountStats struct {
	Name   string
	System bool // the system account
	// JetStream is the account's engine; nil when the account has no
	// JetStream (or the server has not started it).
	JetStream *jetstream.JetStream
	// APITotal and APIErrors count the $JS.API responses the account's
	// clients got and the error responses among them (nats-server's
	// per-account api.total and api.errors); zero without JetStream.
	APITotal, APIErrors uint64
	Sublist             SublistStats // the account's subject index
	// Connections counts the account's open client connections. The
	// traffic counts messages and header plus payload bytes its client
	// connections received (In) and were sent (Out), closed ones
	// included, as Stats' client counters do for the server.
	Connections                        int
	InMsgs, InBytes, OutMsgs, OutBytes int64
}

// Accounts returns a snapshot of every account, sorted by name.
func (s *Server) Accounts() []AccountStats {
	accs := s.accountsSorted()
	out := make([]AccountStats, 0, len(accs))
	idx := make(map[string]int, len(accs))
	traffic := make([]traffic, len(accs))
	s.mu.Lock()
	for i, acc := range accs {
		idx[acc.name] = i
		addTraffic(&traffic[i], &acc.closed)
		out = append(out, AccountStats{Name: acc.name, System: acc.system, JetStream: acc.js.Load()})
	}
	for _, c := range s.clients {
		c.mu.Lock()
		name := c.meta.account
		c.mu.Unlock()
		i, ok := idx[name]
		if !ok {
			i = idx[s.gacc.name]
		}
		out[i].Connections++
		traffic[i].addConn(c)
	}
	s.mu.Unlock()
	for i, acc := range accs {
		st := &out[i]
		st.Sublist = acc.sublistStats()
		st.InMsgs, st.InBytes = traffic[i].inMsgs.Load(), traffic[i].inBytes.Load()
		st.OutMsgs, st.OutBytes = traffic[i].outMsgs.Load(), traffic[i].outBytes.Load()
		if api := acc.jsAPI.Load(); api != nil {
			st.APITotal, st.APIErrors = api.Stats()
		}
	}
	return out
}
