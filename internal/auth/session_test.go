package auth

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// login authenticates cr against d, failing the test when it is refused.
func login(t *testing.T, d *Directory, cr Credentials) *Session {
	t.Helper()
	cr.ConnType = config.ConnectionTypeStandard
	s, ok := d.Login(&cr)
	if !ok {
		t.Fatalf("login %+v refused", cr)
	}
	return s
}

// A reload checks each connected client again, with nats-server v2.15.2's
// verdicts (reloadAuthorization): a user gone or moved to another account
// is Moved (closed silently), credentials that no longer authenticate
// Failed, the others Keep with their new user.
func TestRecheck(t *testing.T) {
	pw := hash(t, "b-pw")
	users := func(us ...config.User) *Directory { return NewDirectory(&config.Auth{Users: us}, false) }
	old := users(
		config.User{Name: "a", Password: "a-pw"},
		config.User{Name: "b", Password: pw, Account: "B"},
		config.User{Name: "c", Password: "c-pw"},
	)
	sa := login(t, old, Credentials{User: "a", Pass: "a-pw"})
	sb := login(t, old, Credentials{User: "b", Pass: "b-pw"})
	sc := login(t, old, Credentials{User: "c", Pass: "c-pw"})
	perms := &config.Permissions{Subscribe: &config.SubjectPermission{Allow: []string{"x"}}}
	next := users(
		config.User{Name: "a", Password: "a-pw2"},
		config.User{Name: "b", Password: pw, Account: "B", Permissions: perms},
		config.User{Name: "c", Password: "c-pw", Account: "C"},
	)
	if _, v := next.Recheck(sa); v != Failed {
		t.Errorf("a, new password: %v", v)
	}
	if ns, v := next.Recheck(sb); v != Keep || ns.User.Perms.CanSubscribe("y", "") {
		t.Errorf("b, new permissions: %v %+v", v, ns)
	}
	if _, v := next.Recheck(sc); v != Moved {
		t.Errorf("c, moved to account C: %v", v)
	}
	if _, v := users(config.User{Name: "b", Password: pw, Account: "B"}).Recheck(sa); v != Moved {
		t.Errorf("a, removed: %v", v)
	}
	// No authentication, or a single user, is not a table of users: a
	// client that sent a user name has moved (nats-server closes it).
	if _, v := NewDirectory(&config.Auth{}, false).Recheck(sa); v != Moved {
		t.Errorf("a, no authentication: %v", v)
	}
	single := NewDirectory(&config.Auth{User: "a", Password: "a-pw"}, false)
	if _, v := single.Recheck(login(t, single, Credentials{User: "a", Pass: "a-pw"})); v != Moved {
		t.Errorf("single user: %v", v)
	}
	// The single user's client stays when the user is now in a table.
	if _, v := users(config.User{Name: "a", Password: "a-pw"}).Recheck(login(t, single, Credentials{User: "a", Pass: "a-pw"})); v != Keep {
		t.Errorf("single user to users: %v", v)
	}
}

func TestRecheckTokenAndAnonymous(t *testing.T) {
	tok := NewDirectory(&config.Auth{Token: "t1"}, false)
	s := login(t, tok, Credentials{Token: "t1"})
	if _, v := NewDirectory(&config.Auth{Token: "t2"}, false).Recheck(s); v != Failed {
		t.Errorf("new token: %v", v)
	}
	if _, v := NewDirectory(&config.Auth{Token: "t1"}, false).Recheck(s); v != Keep {
		t.Errorf("same token: %v", v)
	}
	if ns, v := NewDirectory(&config.Auth{}, false).Recheck(s); v != Keep || ns.User != Anonymous {
		t.Errorf("token to none: %v", v)
	}
	anon := login(t, NewDirectory(&config.Auth{}, false), Credentials{})
	if _, v := NewDirectory(&config.Auth{Users: []config.User{{Name: "a", Password: "p"}}}, false).Recheck(anon); v != Failed {
		t.Errorf("none to users: %v", v)
	}
}

// The no_auth_user's clients are checked with the password the user had
// when they connected.
func TestRecheckNoAuthUser(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	mk := func(nau, pw string) *Directory {
		return NewDirectory(&config.Auth{NoAuthUser: nau, Users: []config.User{{Name: "guest", Password: pw}, {Nkey: pub}}}, false)
	}
	s := login(t, mk("guest", "g"), Credentials{})
	if _, v := mk("guest", "g").Recheck(s); v != Keep {
		t.Errorf("unchanged: %v", v)
	}
	if _, v := mk("guest", "g2").Recheck(s); v != Failed {
		t.Errorf("new password: %v", v)
	}
	ns := login(t, mk(pub, "g"), Credentials{})
	if _, v := mk(pub, "g").Recheck(ns); v != Keep {
		t.Errorf("nkey no_auth_user: %v", v)
	}
	if _, v := mk("guest", "g").Recheck(ns); v != Failed {
		t.Errorf("nkey no longer the no_auth_user: %v", v)
	}
}

// nkey users are checked again with the signature of the nonce they
// connected with.
func TestRecheckNkeys(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	nonce := NewNonce()
	sig, _ := kp.Sign(nonce)
	d := NewDirectory(&config.Auth{Users: []config.User{{Nkey: pub}}}, false)
	s := login(t, d, Credentials{Nkey: pub, Sig: base64.RawURLEncoding.EncodeToString(sig), Nonce: nonce})
	if _, v := d.Recheck(s); v != Keep {
		t.Errorf("same nkey: %v", v)
	}
	if _, v := NewDirectory(&config.Auth{Users: []config.User{{Nkey: pub, Account: "A"}}}, false).Recheck(s); v != Moved {
		t.Errorf("nkey moved: %v", v)
	}
	if _, v := NewDirectory(&config.Auth{Users: []config.User{{Nkey: pub, ConnectionTypes: []string{"WEBSOCKET"}}}}, false).Recheck(s); v != Failed {
		t.Errorf("connection type no longer allowed: %v", v)
	}
}

// In operator mode a user JWT is checked against its account's current
// JWT: revoked (Revoked), its account gone (Failed), unchanged (Keep).
func TestRecheckJWT(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	enc := func(c interface {
		Encode(nkeys.KeyPair) (string, error)
	}, kp nkeys.KeyPair) string {
		s, err := c.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	opJWT := enc(jwt.NewOperatorClaims(opPub), op)
	dir := func(accounts ...string) *Directory {
		o := &config.Operator{JWTs: []string{opJWT}, Resolver: "MEMORY", Preload: map[string]string{}}
		for _, a := range accounts {
			o.Preload[accPub] = a
		}
		return NewOperatorDirectory(o, 0, nil)
	}
	plain := enc(jwt.NewAccountClaims(accPub), op)
	nonce := NewNonce()
	sig, _ := user.Sign(nonce)
	cr := Credentials{JWT: enc(jwt.NewUserClaims(userPub), acc), Sig: base64.RawURLEncoding.EncodeToString(sig), Nonce: nonce}
	s := login(t, dir(plain), cr)
	if _, v := dir(plain).Recheck(s); v != Keep {
		t.Errorf("unchanged: %v", v)
	}
	revoking := jwt.NewAccountClaims(accPub)
	revoking.RevokeAt(userPub, time.Now().Add(time.Minute))
	if _, v := dir(enc(revoking, op)).Recheck(s); v != Revoked {
		t.Errorf("revoked: %v", v)
	}
	if _, v := dir().Recheck(s); v != Failed {
		t.Errorf("account gone: %v", v)
	}
}
