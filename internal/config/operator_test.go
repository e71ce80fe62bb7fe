package config

import (
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

func operatorFixture(t *testing.T) (opJWT, accPub, accJWT, rogueJWT string) {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := nkeys.CreateAccount()
	accPub, _ = acc.PublicKey()
	accJWT, _ = jwt.NewAccountClaims(accPub).Encode(op)
	rogue, _ := nkeys.CreateOperator()
	rogueJWT, _ = jwt.NewAccountClaims(accPub).Encode(rogue)
	return
}

// operator, resolver: MEMORY and resolver_preload are read and checked as
// nats-server checks them.
func TestOperatorMode(t *testing.T) {
	opJWT, accPub, accJWT, rogueJWT := operatorFixture(t)
	c, _ := mustLoad(t, "operator: "+opJWT+"\nresolver: MEMORY\nresolver_preload: { "+accPub+": "+accJWT+" }\n")
	if !c.Operator.Enabled() || c.Operator.Resolver != "MEMORY" || c.Operator.Preload[accPub] != accJWT {
		t.Fatalf("operator %+v", c.Operator)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{
		"operator: " + opJWT: "operators require an account resolver to be configured",
		"operator: " + opJWT + "\nresolver: MEMORY\nauthorization { users: [ {user: u} ] }":                 "operators do not allow users to be configured directly",
		"operator: " + opJWT + "\nresolver: MEMORY\naccounts { A {} }":                                      "operators do not allow Accounts to be configured directly",
		"operator: " + opJWT + "\nresolver: MEMORY\nresolver_preload: { " + accPub + ": " + rogueJWT + " }": "is not issued by a trusted operator",
	} {
		c, _ := mustLoad(t, text)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	for text, want := range map[string]string{
		"resolver: URL(http://x)":                   `field "resolver" is not supported by cairn yet: only resolver: MEMORY and the resolver blocks of type full and cache are`,
		"resolver_preload: { X: notajwt }":          `invalid account JWT`,
		"operator: /nonexistent/op.jwt":             `error parsing operator JWT: open /nonexistent/op.jwt: no such file or directory`,
		"resolver_preload: { ABC: " + accJWT + " }": `is the JWT of`,
	} {
		got := strings.Join(problemTexts(t, text), "\n")
		if !strings.Contains(got, want) {
			t.Errorf("%q: %s, want %q", text, got, want)
		}
	}
}
