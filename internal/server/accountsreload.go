package server

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/jsapi"
)

// Reloading the accounts (docs/security.md, "Reloading"; nats-server
// v2.15.2 reload.go reloadAuthorization, server.go configureAccounts
// with reloading set): a reload of the accounts block (or, in operator
// mode, of resolver_preload) may
//
//   - add accounts: each gets its subject index, the system account's
//     imports every account has, its own imports and, on a JetStream
//     server, the API's "JetStream not enabled for account" answers;
//   - remove accounts: their imports are withdrawn; their clients are
//     closed by the check of every client that follows (their users are
//     gone with the account: closed without a word, as in nats-server;
//     in operator mode the user JWT no longer authenticates:
//     -ERR 'Authorization Violation');
//   - change an account's exports, imports and limits: the imports of
//     every account whose imports changed, or which imports from an
//     account whose exports changed, are withdrawn and made again; the
//     limits apply to new clients and, through the check that follows, to
//     the connected ones;
//   - change the JetStream limits of an account that has JetStream (its
//     jetstream block's, or its JWT's): its engine takes them for later
//     requests (jetstream.JetStream.SetLimits), as nats-server's
//     UpdateJetStreamLimits; what exists beyond them stays.
//
// An account kept by the reload stays the same value (its subject index,
// subscriptions, JetStream, counters), with its new configuration and
// limits. cairn refuses, on a JetStream server, a reload that would turn
// JetStream on or off for an account (adding or removing an account with
// JetStream, a jetstream block added or removed, or the first account
// besides the system account, which takes JetStream from $G):
// nats-server applies those, cairn only at a restart
// (docs/compatibility.md). The system account and $G are never removed.
//
// In a cluster, a peer's interest in an account this server does not
// have yet is ignored (routeconn.go ProcessSub), as nats-server ignores
// it with configured accounts ("Unknown account"): an account added by a
// reload exchanges interest with a peer for the subscriptions made after
// both reloaded.

// accountsReload is the accounts' part of a SecurityReload: the table to
// publish and what changes.
type accountsReload struct {
	// enableJS are kept accounts whose new JWT enables JetStream (a
	// nats-based resolver's change), with their limits.
	enableJS map[*account]*config.AccountJetStream
	// jsLimits are kept accounts with JetStream whose JetStream limits
	// change (a reload), with their new limits.
	jsLimits map[*account]*config.AccountJetStream
	table    accountTable
	kept     map[*account]accountSpec // accounts that stay, with their new settings
	added    []*account               // made, not yet published
	removed  []*account
	reimport []*account // kept accounts whose imports are made again
}

// errAccountJetStream refuses a reload that turns an account's JetStream
// on or off (change: "on", "off"), naming the account.
func errAccountJetStream(name, change string) error {
	return fmt.Errorf("%w for accounts: JetStream would be turned %s for account %s (cairn turns an account's JetStream on or off at start only; a change of its JetStream limits is applied)", ErrReloadUnsupported, change, name)
}

// onOff names the change of JetStream from had to has.
func onOff(has bool) string {
	if has {
		return "on"
	}
	return "off"
}

// prepareAccounts builds the account table of a reload's configuration
// (a, and operator mode's accounts in d) without publishing it. It
// returns ErrReloadUnsupported for JetStream turned on or off for an
// account on a JetStream server (errAccountJetStream).
func (s *Server) prepareAccounts(a *config.Auth, d *auth.Directory) (*accountsReload, error) {
	return s.prepareAccountsFor(a, d, false)
}

// prepareAccountsFor is prepareAccounts; resolver, for a change of a
// nats-based resolver's account JWTs (resolver.go), applies what it can
// of a change of an account's JetStream instead of refusing it, as those
// changes are pushed, not reloaded: an account added with JetStream gets
// the API's "not enabled" answers, an account whose JWT changes its
// JetStream keeps its engine and limits, and an account deleted with
// JetStream stays in the table (no client can log into it), each with a
// warning that the change applies at the next start.
func (s *Server) prepareAccountsFor(a *config.Auth, d *auth.Directory, resolver bool) (*accountsReload, error) {
	cur := s.accountTable()
	specs, warns := accountSpecs(a, d)
	for _, w := range warns {
		s.log.Debugf("%s", w)
	}
	r := &accountsReload{table: accountTable{s.gacc.name: s.gacc}, kept: map[*account]accountSpec{}}
	js := s.opts.JetStream
	names := make([]string, 0, len(specs))
	for name := range specs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sp := specs[name]
		acc := cur[name]
		switch {
		case acc == nil:
			if js && sp.js != nil && !resolver {
				return nil, errAccountJetStream(name, "on")
			}
			acc = newAccount(name, sp) // with JetStream, started by apply
			r.added = append(r.added, acc)
		case js && !reflect.DeepEqual(acc.jsLimits, sp.js) && resolver:
			if acc.js.Load() == nil && sp.js != nil && !acc.system { // (never the system account's)
				if r.enableJS == nil {
					r.enableJS = map[*account]*config.AccountJetStream{}
				}
				r.enableJS[acc] = sp.js
			} else {
				s.log.Warnf("Account %s: the JetStream settings of its new JWT apply at the next start", name)
			}
			r.kept[acc] = sp
		case js && !reflect.DeepEqual(acc.jsLimits, sp.js):
			if acc.jsLimits == nil || sp.js == nil || acc.js.Load() == nil {
				return nil, errAccountJetStream(name, onOff(sp.js != nil))
			}
			if r.jsLimits == nil {
				r.jsLimits = map[*account]*config.AccountJetStream{}
			}
			r.jsLimits[acc] = sp.js
			r.kept[acc] = sp
		default:
			r.kept[acc] = sp
		}
		r.table[name] = acc
	}
	if sys := s.sysacc; sys != nil && r.table[sys.name] == nil {
		// The system account is no longer configured: it stays, as the
		// server makes it (checkSecurityReload kept its name).
		r.table[sys.name] = sys
		r.kept[sys] = accountSpec{lim: accountLimitsOf(nil)}
	}
	for name, acc := range cur {
		if r.table[name] == nil {
			if js && (acc.js.Load() != nil || acc.jsLimits != nil) && resolver {
				s.log.Warnf("Account %s: deleted; its JetStream stops at the next start", name)
				r.table[name] = acc
				r.kept[acc] = accountSpec{lim: config.AccountLimits{}}
				continue
			}
			if js && (acc.js.Load() != nil || acc.jsLimits != nil) {
				return nil, errAccountJetStream(name, "off")
			}
			r.removed = append(r.removed, acc)
		}
	}
	if g := s.globalOnly(r.table); js && g != s.gacc.jsGlobal {
		return nil, errAccountJetStream(s.gacc.name, onOff(g))
	}
	r.findReimports()
	return r, nil
}

// findReimports lists the kept accounts whose imports are made again:
// their imports changed, or an account they import from changed its
// exports or is new.
func (r *accountsReload) findReimports() {
	exportsChanged := map[string]bool{}
	for _, acc := range r.added {
		exportsChanged[acc.name] = true
	}
	for acc, sp := range r.kept {
		if !reflect.DeepEqual(exportsOf(acc.cfg.Load()), exportsOf(sp.cfg)) {
			exportsChanged[acc.name] = true
		}
	}
	for acc, sp := range r.kept {
		imports := importsOf(sp.cfg)
		again := !reflect.DeepEqual(importsOf(acc.cfg.Load()), imports)
		for _, im := range imports {
			again = again || exportsChanged[im.Account]
		}
		if again {
			r.reimport = append(r.reimport, acc)
		}
	}
	sort.Slice(r.reimport, func(i, j int) bool { return r.reimport[i].name < r.reimport[j].name })
}

func exportsOf(cfg *config.Account) []config.Export {
	if cfg == nil {
		return nil
	}
	return cfg.Exports
}

func importsOf(cfg *config.Account) []config.Import {
	if cfg == nil {
		return nil
	}
	return cfg.Imports
}

// apply publishes the table and makes the accounts' imports and exports
// what the configuration says. It runs on the reload's goroutine; the
// clients are checked afterwards (recheckClients).
func (r *accountsReload) apply(s *Server) {
	for acc, sp := range r.kept {
		lim := sp.lim
		acc.cfg.Store(sp.cfg)
		acc.lim.Store(&lim)
		acc.trace.Store(sp.trace)
		acc.jwtName.Store(sp.jwtName())
	}
	for _, acc := range r.added {
		if err := s.addSystemImports(acc); err != nil {
			s.log.Errorf("Reloading account %s: %v", acc.name, err)
		}
		if s.opts.JetStream && acc.jsLimits != nil {
			// (a nats-based resolver's account: a reload refuses it)
			err := s.startAccountJetStreamLive(acc, acc.jsLimits)
			if err == nil {
				continue
			}
			s.log.Errorf("Account %s: JetStream not started: %v", acc.name, err)
			acc.jsLimits = nil
		}
		if s.opts.JetStream && acc.jsOff.Load() == nil {
			off, err := jsapi.NewDisabled(jsTransport{s: s, acc: acc}, s.opts.ServerName, s.opts.JetStreamDomain)
			if err != nil {
				s.log.Errorf("Reloading account %s: JetStream API: %v", acc.name, err)
			}
			acc.jsOff.Store(off)
		}
	}
	s.accounts.Store(&r.table)
	for acc, limits := range r.jsLimits {
		acc.js.Load().SetLimits(engineLimits(limits)) // (prepared: running)
		acc.jsLimits = limits
		s.log.Noticef("Reloaded: account %s JetStream limits", acc.name)
	}
	for acc, limits := range r.enableJS {
		if err := s.startAccountJetStreamLive(acc, limits); err != nil {
			s.log.Errorf("Account %s: JetStream not started: %v", acc.name, err)
			continue
		}
		acc.jsLimits = limits
	}
	for _, acc := range r.removed {
		s.removeImports(acc)
		if off := acc.jsOff.Load(); off != nil {
			off.Close()
		}
		acc.imp.stop()
		s.log.Noticef("Reloaded: account %s removed", acc.name)
	}
	for _, acc := range r.reimport {
		s.removeImports(acc)
	}
	for _, acc := range append(r.reimport, r.added...) {
		if err := s.installImports(acc, r.table); err != nil {
			s.log.Errorf("Reloading the imports of account %s: %v", acc.name, err)
		}
	}
	for _, acc := range r.added {
		s.log.Noticef("Reloaded: account %s added", acc.name)
	}
}
