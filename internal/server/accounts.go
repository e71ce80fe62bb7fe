package server

import (
	"sort"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
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
// The accounts are made by New from Options.Auth and never change, so
// the table is read without a lock.

// account is one subject namespace.
type account struct {
	name string
	sl   *sublist.Sublist[*subscription]
	cfg  *config.Account // nil for $G and the accounts of JWTs
	// jsLimits, when not nil, enables JetStream for the account with
	// these limits (from its configuration or its JWT); jsGlobal enables
	// it with the server's limits only ($G without accounts).
	jsLimits *config.AccountJetStream
	jsGlobal bool

	// JetStream: js and jsAPI when enabled for the account; otherwise
	// jsOff answers its API requests with 10039 (jetstream.go).
	js    *jetstream.JetStream
	jsAPI *jsapi.API
	jsOff *jsapi.Disabled

	imp imports // its service imports' response routing (imports.go)
}

func newAccount(name string, cfg *config.Account) *account {
	return &account{name: name, sl: sublist.New[*subscription](), cfg: cfg}
}

// initAccounts builds the account table from the options: $G and every
// configured account.
func (s *Server) initAccounts() {
	s.gacc = newAccount(auth.GlobalAccount, nil)
	s.accounts = map[string]*account{auth.GlobalAccount: s.gacc}
	for i := range s.opts.Auth.Accounts {
		cfg := &s.opts.Auth.Accounts[i]
		acc := newAccount(cfg.Name, cfg)
		acc.jsLimits = cfg.JetStream
		s.accounts[cfg.Name] = acc
	}
	for pub, ac := range s.dir.AccountClaims() {
		acc := newAccount(pub, nil)
		acc.jsLimits = jwtJetStream(&ac.Limits.JetStreamLimits)
		s.accounts[pub] = acc
		if len(ac.Imports) > 0 || len(ac.Exports) > 0 {
			s.log.Warnf("Account %s: the imports and exports of account JWTs are not supported yet; ignored", pub)
		}
	}
	// With no account configured (nor JWT), $G has JetStream (nats-server
	// globalAccountOnly).
	s.gacc.jsGlobal = len(s.accounts) == 1
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
func (s *Server) account(name string) *account { return s.accounts[name] }

// accountsSorted returns the accounts in name order.
func (s *Server) accountsSorted() []*account {
	out := make([]*account, 0, len(s.accounts))
	for _, a := range s.accounts {
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
