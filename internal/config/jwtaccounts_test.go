package config

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// The exports and imports of account JWTs become accounts blocks; the
// imports nats-server would not apply (no token for a token_req export,
// a token for another account, not exported, a cycle) are left out with
// a warning, the others kept.
func TestJWTAccounts(t *testing.T) {
	key := func() (nkeys.KeyPair, string) {
		kp, _ := nkeys.CreateAccount()
		pub, _ := kp.PublicKey()
		return kp, pub
	}
	aKP, a := key()
	_, b := key()
	_, c := key()
	tok := func(sub string) string {
		act := jwt.NewActivationClaims(sub)
		act.ImportSubject, act.ImportType = "svc", jwt.Service
		s, err := act.Encode(aKP)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ca := jwt.NewAccountClaims(a)
	ca.Exports.Add(&jwt.Export{Subject: "s.>", Type: jwt.Stream}, &jwt.Export{Subject: "svc", Type: jwt.Service, TokenReq: true, ResponseType: jwt.ResponseTypeStream})
	ca.Imports.Add(&jwt.Import{Account: b, Subject: "back.>", Type: jwt.Stream})
	cb := jwt.NewAccountClaims(b)
	cb.Exports.Add(&jwt.Export{Subject: "back.>", Type: jwt.Stream})
	cb.Imports.Add(
		&jwt.Import{Account: a, Subject: "s.>", To: "pre", Type: jwt.Stream},
		&jwt.Import{Account: a, Subject: "svc", LocalSubject: "ask", Type: jwt.Service, Token: tok(b)},
		&jwt.Import{Account: a, Subject: "nope", Type: jwt.Stream},
	)
	cc := jwt.NewAccountClaims(c)
	cc.Imports.Add(&jwt.Import{Account: a, Subject: "svc", Type: jwt.Service}, &jwt.Import{Account: a, Subject: "svc", Type: jwt.Service, Token: tok(b), Name: "stolen"})
	blocks, warns := JWTAccounts(map[string]*jwt.AccountClaims{a: ca, b: cb, c: cc}, time.Now())
	if got := blocks[b].Imports; len(got) != 2 || got[0].LocalSubject() != "pre.s.>" || got[1].To != "ask" || got[1].Subject != "svc" {
		t.Fatalf("b's imports %+v", got)
	}
	if ex := blocks[a].Exports[1]; ex.ResponseType != "stream" || len(ex.Accounts) != 1 || ex.Accounts[0] != b {
		t.Fatalf("a's token export %+v", ex)
	}
	if len(blocks[c].Imports) != 0 {
		t.Fatalf("c imported without a token of its own: %+v", blocks[c].Imports)
	}
	// a's import of b's back.> closes no cycle of the same subjects; it stays.
	if len(blocks[a].Imports) != 1 {
		t.Fatalf("a's imports %+v", blocks[a].Imports)
	}
	all := strings.Join(warns, "\n")
	for _, want := range []string{"the export requires an activation token", "the activation token is for another account", `"nope" from ` + a + ` left out: stream import not authorized`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}
}
