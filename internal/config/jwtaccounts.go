package config

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
)

// JWTAccounts converts the exports and imports of operator mode's account
// JWTs (by public key) into accounts blocks, as nats-server v2.15.2
// applies them (accounts.go UpdateAccountClaims: AddStreamExport,
// AddServiceExportWithResponse, AddStreamImportWithClaim,
// AddMappedStreamImportWithClaim, AddServiceImportWithClaim), so that
// they work as a configuration's do (docs/security.md, "Accounts"):
//
//   - an export is public, or, when it requires a token (token_req), open
//     to the accounts whose import of it presents a valid activation
//     token: issued by the exporting account (or one of its signing
//     keys, naming it as issuer_account), to the importing account, for a
//     subject containing the import's, not expired at now, not revoked by
//     the export;
//   - a stream import maps to its local_subject (or its deprecated
//     prefix, "to"); a service import is reached on its local_subject
//     (else its subject), mapped to its subject in the exporter (or its
//     deprecated "to");
//   - an import that is not authorized, imports from an account that is
//     not among claims, is a duplicate or forms a cycle is left out, as
//     nats-server leaves it out (its account still works); each one left
//     out is named in the returned warnings.
//
// Accounts without exports or imports get no block (nil).
func JWTAccounts(claims map[string]*jwt.AccountClaims, now time.Time) (map[string]*Account, []string) {
	keys := make([]string, 0, len(claims))
	for k := range claims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]*Account{}
	for _, k := range keys {
		ac := claims[k]
		if len(ac.Exports) == 0 && len(ac.Imports) == 0 {
			continue
		}
		a := &Account{Name: k}
		for _, ex := range ac.Exports {
			e := Export{Subject: string(ex.Subject), Service: ex.Type == jwt.Service, ResponseThreshold: ex.ResponseThreshold}
			if e.Service {
				e.ResponseType = responseType(ex.ResponseType)
			}
			if ex.TokenReq {
				e.Accounts = []string{}
			}
			a.Exports = append(a.Exports, e)
		}
		out[k] = a
	}
	var warns []string
	for _, k := range keys {
		for _, im := range claims[k].Imports {
			ci, why := jwtImport(claims, k, im, out, now)
			if why != "" {
				warns = append(warns, fmt.Sprintf("Account %s: import of %q from %s left out: %s", k, im.Subject, im.Account, why))
				continue
			}
			out[k].Imports = append(out[k].Imports, ci)
		}
	}
	return out, append(warns, filterImports(out, keys)...)
}

// responseType converts a JWT's service response type.
func responseType(t jwt.ResponseType) string {
	switch t {
	case jwt.ResponseTypeStream:
		return "stream"
	case jwt.ResponseTypeChunked:
		return "chunked"
	}
	return "single"
}

// jwtImport converts one import of the account importer and, when the
// export requires a token, authorizes importer by its activation token;
// why is why it is left out.
func jwtImport(claims map[string]*jwt.AccountClaims, importer string, im *jwt.Import, blocks map[string]*Account, now time.Time) (Import, string) {
	ci := Import{Service: im.Type == jwt.Service, Account: im.Account, Share: im.Share}
	if ci.Service {
		ci.To, ci.Subject = string(im.Subject), string(im.To)
		if im.LocalSubject != "" {
			ci.To, ci.Subject = string(im.LocalSubject), string(im.Subject)
		}
		if ci.Subject == "" {
			ci.Subject = ci.To
		}
		if ci.To == ci.Subject {
			ci.To = ""
		}
	} else {
		ci.Subject = string(im.Subject)
		if im.LocalSubject != "" {
			ci.To = string(im.LocalSubject)
		} else {
			ci.Prefix = string(im.To)
		}
	}
	exporter := claims[im.Account]
	if exporter == nil || blocks[im.Account] == nil {
		return ci, "the exporting account is unknown or exports nothing"
	}
	for i, ex := range exporter.Exports {
		e := &blocks[im.Account].Exports[i]
		if e.Service != ci.Service || !subsetOf(ci.Subject, e.Subject) || !ex.TokenReq {
			continue
		}
		if im.Token == "" {
			return ci, "the export requires an activation token"
		}
		if why := checkActivation(im.Token, exporter, ex, importer, ci.Subject, now); why != "" {
			return ci, why
		}
		e.Accounts = append(e.Accounts, importer)
		return ci, ""
	}
	return ci, ""
}

// checkActivation checks an activation token of export ex of exporter for
// importer's import of subj (nats-server checkActivation).
func checkActivation(token string, exporter *jwt.AccountClaims, ex *jwt.Export, importer, subj string, now time.Time) string {
	act, err := jwt.DecodeActivationClaims(token)
	switch {
	case err != nil:
		return "invalid activation token"
	case act.Subject != importer && act.Subject != "*":
		return "the activation token is for another account"
	case act.Expires != 0 && now.Unix() >= act.Expires:
		return "the activation token expired"
	case !subsetOf(subj, string(act.ImportSubject)):
		return "the activation token is for another subject"
	case act.Issuer != exporter.Subject && (act.IssuerAccount != exporter.Subject || !exporter.SigningKeys.Contains(act.Issuer)):
		return "the activation token is not issued by the exporting account"
	case ex.Revocations.IsRevoked(importer, time.Unix(act.IssuedAt, 0)):
		return "the activation token is revoked"
	}
	return ""
}

// filterImports removes the imports checkImports would refuse (not
// exported to the importer, invalid subjects, duplicates, cycles) and
// returns a warning for each.
func filterImports(blocks map[string]*Account, keys []string) []string {
	var warns []string
	accepted := map[string][]Import{}
	for _, k := range keys {
		a := blocks[k]
		if a == nil {
			continue
		}
		seen := map[string]bool{}
		kept := a.Imports[:0]
		for _, im := range a.Imports {
			kind := map[bool]string{false: "stream", true: "service"}[im.Service]
			key := kind + " " + im.Account + " " + im.Subject
			why := ""
			switch from := blocks[im.Account]; {
			case !validPermSubject(im.Subject) || !validPermSubject(im.LocalSubject()):
				why = "invalid subject"
			case from == nil || !from.exports(im.Service, im.Subject, k):
				why = kind + " import not authorized"
			case im.Prefix != "" && strings.ContainsAny(im.Prefix, "*>"):
				why = "stream import prefix can not contain wildcard tokens"
			case seen[key]:
				why = kind + " import already exists"
			case importCycle(accepted, k, im):
				why = "import forms a cycle"
			}
			seen[key] = true
			if why != "" {
				warns = append(warns, fmt.Sprintf("Account %s: import of %q from %s left out: %s", k, im.Subject, im.Account, why))
				continue
			}
			accepted[k] = append(accepted[k], im)
			kept = append(kept, im)
		}
		a.Imports = kept
	}
	return warns
}
