package auth

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

func TestTimesAllowed(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 1, 1, h, m, 0, 0, time.UTC) }
	day := []jwt.TimeRange{{Start: "09:00:00", End: "17:00:00"}}
	night := []jwt.TimeRange{{Start: "22:00:00", End: "06:00:00"}}
	cases := []struct {
		times []jwt.TimeRange
		now   time.Time
		want  bool
	}{
		{nil, at(3, 0), true},
		{day, at(10, 0), true},
		{day, at(17, 0), false},
		{day, at(8, 59), false},
		{night, at(23, 0), true},
		{night, at(5, 0), true},
		{night, at(12, 0), false},
		{[]jwt.TimeRange{{Start: "xx", End: "yy"}}, at(12, 0), false},
	}
	for i, tc := range cases {
		if got := timesAllowed(tc.times, "UTC", tc.now); got != tc.want {
			t.Errorf("case %d: %v", i, got)
		}
	}
	if timesAllowed(day, "Not/AZone", at(10, 0)) {
		t.Error("an unknown locale allowed")
	}
}

func TestExpiryAndPermissions(t *testing.T) {
	if at, text := expiry(100, 200); at.Unix() != 100 || text != UserExpired {
		t.Fatal(at, text)
	}
	if at, text := expiry(0, 200); at.Unix() != 200 || text != AccountExpired {
		t.Fatal(at, text)
	}
	if at, _ := expiry(0, 0); !at.IsZero() {
		t.Fatal(at)
	}
	p := jwtPermissions(&jwt.Permissions{Resp: &jwt.ResponsePermission{}})
	if p.Publish == nil || p.Publish.Allow == nil || len(p.Publish.Allow) != 0 || p.Response.MaxMsgs != 1 {
		t.Fatalf("%+v", p)
	}
	if jwtPermissions(&jwt.Permissions{}) != nil {
		t.Fatal("empty permissions restrict")
	}
}

// A user JWT is expired from the instant its exp names: a login during
// that second is refused, one just before it is taken (the trial found a
// reconnect within the second of exp taken, then ended at once).
func TestJWTExpiredFromExpInstant(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	opJWT, _ := jwt.NewOperatorClaims(opPub).Encode(op)
	accJWT, _ := jwt.NewAccountClaims(accPub).Encode(op)
	d := NewOperatorDirectory(&config.Operator{JWTs: []string{opJWT}, Resolver: "MEMORY", Preload: map[string]string{accPub: accJWT}}, 0, nil)
	// exp lies ahead of the real clock, which jwt's Validate reads.
	exp := time.Now().Add(time.Hour).Unix()
	uc := jwt.NewUserClaims(userPub)
	uc.Expires = exp
	tok, err := uc.Encode(acc)
	if err != nil {
		t.Fatal(err)
	}
	nonce := NewNonce()
	sig, _ := user.Sign(nonce)
	cr := &Credentials{JWT: tok, Sig: base64.RawURLEncoding.EncodeToString(sig), Nonce: nonce, ConnType: config.ConnectionTypeStandard}
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{time.Unix(exp-1, 999e6), true},
		{time.Unix(exp, 0), false},
		{time.Unix(exp, 500e6), false},
		{time.Unix(exp+1, 0), false},
	} {
		if _, ok := d.jwt.authenticateJWT(cr, tc.now); ok != tc.want {
			t.Errorf("at %v (exp %d): accepted %v, want %v", tc.now, exp, ok, tc.want)
		}
	}
}
