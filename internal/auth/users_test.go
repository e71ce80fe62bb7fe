package auth

import (
	"encoding/base64"
	"testing"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
)

func hash(t *testing.T, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestNoAuthRequired(t *testing.T) {
	d := NewDirectory(&config.Auth{}, false)
	if d.Required() || d.NonceRequired() {
		t.Fatal("empty directory requires auth")
	}
	if u, ok := d.Authenticate(&Credentials{User: "x", Pass: "y"}); !ok || u != Anonymous || u.Account != GlobalAccount {
		t.Fatalf("got %+v %v", u, ok)
	}
}

func TestTokenAndSingleUser(t *testing.T) {
	for _, tok := range []string{"s3cr3t", hash(t, "s3cr3t")} {
		d := NewDirectory(&config.Auth{Token: tok}, false)
		if _, ok := d.Authenticate(&Credentials{Token: "s3cr3t"}); !ok {
			t.Errorf("token %q refused", tok)
		}
		for _, bad := range []*Credentials{{Token: "nope"}, {}, {User: "s3cr3t"}, {Pass: "s3cr3t"}} {
			if _, ok := d.Authenticate(bad); ok {
				t.Errorf("token %q: accepted %+v", tok, bad)
			}
		}
	}
	d := NewDirectory(&config.Auth{User: "a", Password: hash(t, "pw")}, false)
	if u, ok := d.Authenticate(&Credentials{User: "a", Pass: "pw"}); !ok || u.Name != "a" {
		t.Errorf("user refused: %+v", u)
	}
	if _, ok := d.Authenticate(&Credentials{User: "a", Pass: "px"}); ok {
		t.Error("wrong password accepted")
	}
	if d.PlaintextPasswords() {
		t.Error("bcrypt password counted as plain text")
	}
	if !NewDirectory(&config.Auth{User: "a", Password: "pw"}, false).PlaintextPasswords() {
		t.Error("plain password not detected")
	}
	// Users without a password (mapped from a TLS certificate's subject,
	// verify_and_map) are not plain-text passwords: nats-server does not
	// warn about them.
	if NewDirectory(&config.Auth{Users: []config.User{{Name: "CN=app"}}}, false).PlaintextPasswords() {
		t.Error("a user without a password counted as a plain-text password")
	}
}

func TestUsersAndNkeys(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	other, _ := nkeys.CreateUser()
	a := &config.Auth{Users: []config.User{
		{Name: "alice", Password: hash(t, "a-pw"), Account: "A"},
		{Name: "bob", Password: "b-pw", ConnectionTypes: []string{"WEBSOCKET"}},
		{Nkey: pub, Permissions: &config.Permissions{Publish: &config.SubjectPermission{Allow: []string{"x"}}}},
	}}
	d := NewDirectory(a, false)
	if !d.Required() || !d.NonceRequired() {
		t.Fatal("users: auth and nonce required")
	}
	if u, ok := d.Authenticate(&Credentials{User: "alice", Pass: "a-pw", ConnType: "STANDARD"}); !ok || u.Account != "A" {
		t.Errorf("alice: %+v %v", u, ok)
	}
	if _, ok := d.Authenticate(&Credentials{User: "bob", Pass: "b-pw", ConnType: "STANDARD"}); ok {
		t.Error("bob may only connect over websocket")
	}
	nonce := NewNonce()
	if len(nonce) != NonceLen {
		t.Fatalf("nonce %q", nonce)
	}
	sig, _ := kp.Sign(nonce)
	good := base64.RawURLEncoding.EncodeToString(sig)
	u, ok := d.Authenticate(&Credentials{Nkey: pub, Sig: good, Nonce: nonce, ConnType: "STANDARD"})
	if !ok || !u.Nkey || u.Account != GlobalAccount || u.Perms.CanPublish([]byte("y")) {
		t.Errorf("nkey user: %+v %v", u, ok)
	}
	if _, ok := d.Authenticate(&Credentials{Nkey: pub, Sig: base64.StdEncoding.EncodeToString(sig), Nonce: nonce}); !ok {
		t.Error("standard base64 signature refused")
	}
	osig, _ := other.Sign(nonce)
	for name, cr := range map[string]*Credentials{
		"no signature":      {Nkey: pub, Nonce: nonce},
		"other key's sig":   {Nkey: pub, Sig: base64.RawURLEncoding.EncodeToString(osig), Nonce: nonce},
		"other nonce":       {Nkey: pub, Sig: good, Nonce: NewNonce()},
		"unknown nkey":      {Nkey: "UBOGUS", Sig: good, Nonce: nonce},
		"garbage signature": {Nkey: pub, Sig: "!!!", Nonce: nonce},
		"short signature":   {Nkey: pub, Sig: "AAAA", Nonce: nonce},
		"nothing":           {},
	} {
		if _, ok := d.Authenticate(cr); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// no_auth_user: a client with no credentials at all becomes that user; a
// client with wrong ones does not.
func TestNoAuthUser(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	for _, nau := range []string{"guest", pub} {
		d := NewDirectory(&config.Auth{NoAuthUser: nau, Users: []config.User{{Name: "guest", Password: "g"}, {Nkey: pub}}}, false)
		u, ok := d.Authenticate(&Credentials{ConnType: "STANDARD"})
		if !ok || u.Name != nau {
			t.Errorf("%s: %+v %v", nau, u, ok)
		}
		if _, ok := d.Authenticate(&Credentials{User: "guest", Pass: "x"}); ok {
			t.Errorf("%s: a wrong password got in", nau)
		}
	}
}

func FuzzVerifyNonce(f *testing.F) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	f.Add(pub, "sig", []byte("nonce"))
	f.Add("U", "", []byte{})
	f.Fuzz(func(t *testing.T, key, sig string, nonce []byte) {
		if VerifyNonce(key, sig, nonce) {
			t.Fatalf("forged signature accepted: %q %q %q", key, sig, nonce)
		}
	})
}
