package test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Authentication (docs/security.md; docs/protocol.md 1.11): each test
// runs one configuration file against cairn and nats-server v2.15.2 and
// expects the same bytes.

// usersConf is a users table with a bcrypt password, a plain one and an
// nkey user.
func usersConf(t *testing.T, nk nkeyUser, extra string) string {
	return fmt.Sprintf(`
authorization {
  timeout: 1
  users = [
    { user: alice, password: %q }
    { user: bob, password: bob-pw }
    { nkey: %s }
  ]
}
%s`, bcryptOf(t, "alice-pw"), nk.pub, extra)
}

// The INFO of a server requiring authentication says so and carries a
// 15-character nonce when nkey users exist; the right credentials of each
// kind get in.
func TestAuthUsersConnect(t *testing.T) {
	nk := newNkeyUser(t)
	forEach(t, secTargets(t, usersConf(t, nk, ""), nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		nonce, _ := c.info["nonce"].(string)
		if c.info["auth_required"] != true || len(nonce) != 15 {
			t.Fatalf("INFO %s", c.infoLine)
		}
		if !strings.Contains(c.infoLine, `"headers":true,"auth_required":true,"max_payload"`) {
			t.Errorf("auth_required out of nats-server's key order: %s", c.infoLine)
		}
		c.handshake(`{"verbose":false,"protocol":1,"user":"alice","pass":"alice-pw"}`)

		c = rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":true,"user":"bob","pass":"bob-pw"}` + "\r\nPING\r\n")
		c.expect("+OK\r\nPONG\r\n")

		c = rawConn(t, tg.url)
		sig := nk.sign(t, c.info["nonce"].(string))
		c.send(fmt.Sprintf(`CONNECT {"verbose":false,"nkey":%q,"sig":%q}`+"\r\nPING\r\n", nk.pub, sig))
		c.expect("PONG\r\n")
	})
}

// Wrong or missing credentials, anything but CONNECT first, a signature
// of another nonce, and a CONNECT that names an account get
// -ERR 'Authorization Violation' and the connection closes.
func TestAuthViolations(t *testing.T) {
	nk := newNkeyUser(t)
	other := newNkeyUser(t)
	cases := []struct {
		name string
		send func(c *rawClient) string
	}{
		{"PING first", func(*rawClient) string { return "PING\r\n" }},
		{"SUB first", func(*rawClient) string { return "SUB foo 1\r\n" }},
		{"PUB first", func(*rawClient) string { return "PUB foo 1000000\r\n" }},
		{"garbage first", func(*rawClient) string { return "XYZ\r\n" }},
		{"one byte", func(*rawClient) string { return "P" }},
		{"no credentials", func(*rawClient) string { return "CONNECT {\"verbose\":true}\r\n" }},
		{"empty CONNECT", func(*rawClient) string { return "CONNECT {}\r\nPING\r\n" }},
		{"wrong password", func(*rawClient) string { return `CONNECT {"user":"bob","pass":"nope"}` + "\r\n" }},
		{"wrong bcrypt password", func(*rawClient) string { return `CONNECT {"user":"alice","pass":"bob-pw"}` + "\r\n" }},
		{"bcrypt hash as password", func(*rawClient) string {
			return fmt.Sprintf(`CONNECT {"user":"alice","pass":%q}`+"\r\n", bcryptOf(t, "alice-pw"))
		}},
		{"unknown user", func(*rawClient) string { return `CONNECT {"user":"mallory","pass":"x"}` + "\r\n" }},
		{"token", func(*rawClient) string { return `CONNECT {"auth_token":"bob-pw"}` + "\r\n" }},
		{"nkey without signature", func(*rawClient) string { return fmt.Sprintf(`CONNECT {"nkey":%q}`+"\r\n", nk.pub) }},
		{"other key's signature", func(c *rawClient) string {
			return fmt.Sprintf(`CONNECT {"nkey":%q,"sig":%q}`+"\r\n", nk.pub, other.sign(t, c.info["nonce"].(string)))
		}},
		{"signature of another nonce", func(*rawClient) string {
			return fmt.Sprintf(`CONNECT {"nkey":%q,"sig":%q}`+"\r\n", nk.pub, nk.sign(t, "AAAAAAAAAAAAAAA"))
		}},
		{"unknown nkey", func(c *rawClient) string {
			return fmt.Sprintf(`CONNECT {"nkey":%q,"sig":%q}`+"\r\n", other.pub, other.sign(t, c.info["nonce"].(string)))
		}},
		{"malformed nkey", func(*rawClient) string { return `CONNECT {"nkey":"UABC","sig":"AAAA"}` + "\r\n" }},
		{"account in CONNECT", func(*rawClient) string {
			return `CONNECT {"user":"bob","pass":"bob-pw","account":"$SYS"}` + "\r\n"
		}},
		{"new_account in CONNECT", func(*rawClient) string {
			return `CONNECT {"user":"bob","pass":"bob-pw","new_account":true}` + "\r\n"
		}},
	}
	targets := secTargets(t, usersConf(t, nk, ""), nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEach(t, targets, func(t *testing.T, tg secTarget) {
				c := rawConn(t, tg.url)
				c.send(tc.send(c))
				c.expectAuthViolation()
			})
		})
	}
}

// A second CONNECT authenticates again: with wrong credentials the
// client is closed; with good ones its subscriptions are dropped, as
// nats-server v2.15.2 drops them.
func TestAuthSecondConnect(t *testing.T) {
	nk := newNkeyUser(t)
	forEach(t, secTargets(t, usersConf(t, nk, ""), nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":true,"user":"bob","pass":"bob-pw"}` + "\r\n" + `CONNECT {"user":"bob","pass":"bad"}` + "\r\nPING\r\n")
		c.expect("+OK\r\n")
		c.expectAuthViolation()

		c = rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":false,"user":"bob","pass":"bob-pw"}` + "\r\nSUB foo 1\r\n" +
			`CONNECT {"verbose":false}` + "\r\nPUB foo 2\r\nhi\r\nPING\r\n")
		c.expect("PONG\r\n")
		c.send("SUB foo 2\r\nPUB foo 2\r\nhi\r\nPING\r\n")
		c.expect("MSG foo 2 2\r\nhi\r\nPONG\r\n")
	})
}

// A client that sends nothing is closed with -ERR 'Authentication Timeout'
// at authorization.timeout.
func TestAuthTimeout(t *testing.T) {
	nk := newNkeyUser(t)
	forEach(t, secTargets(t, usersConf(t, nk, ""), nil), func(t *testing.T, tg secTarget) {
		start := time.Now() // before the dial: the server's timer starts at the accept or later
		c := rawConn(t, tg.url)
		got := c.waitClosed(10 * time.Second)
		if got != "-ERR 'Authentication Timeout'\r\n" {
			t.Fatalf("got %q", got)
		}
		if el := time.Since(start); el < 900*time.Millisecond {
			t.Fatalf("closed after %v, before the 1 s timeout", el)
		}
		// A partial CONNECT does not stop the clock.
		c = rawConn(t, tg.url)
		c.send(`CONNECT {"user":"bob",`)
		if got := c.waitClosed(10 * time.Second); got != "-ERR 'Authentication Timeout'\r\n" {
			t.Fatalf("partial CONNECT: got %q", got)
		}
	})
}

// A token, in clear or bcrypt-hashed in the file.
func TestAuthToken(t *testing.T) {
	for _, tok := range []string{"s3cr3t", bcryptOf(t, "s3cr3t")} {
		forEach(t, secTargets(t, fmt.Sprintf("authorization { token: %q }", tok), nil), func(t *testing.T, tg secTarget) {
			c := rawConn(t, tg.url)
			if c.info["auth_required"] != true || c.info["nonce"] != nil {
				t.Fatalf("INFO %s", c.infoLine)
			}
			c.send(`CONNECT {"verbose":false,"auth_token":"s3cr3t"}` + "\r\nPING\r\n")
			c.expect("PONG\r\n")
			c = rawConn(t, tg.url)
			c.send(`CONNECT {"auth_token":"s3cr3"}` + "\r\n")
			c.expectAuthViolation()
			c = rawConn(t, tg.url)
			c.send(`CONNECT {"user":"s3cr3t","pass":"s3cr3t"}` + "\r\n")
			c.expectAuthViolation()

			nc, err := nats.Connect(tg.url, nats.Token("s3cr3t"))
			if err != nil {
				t.Fatalf("nats.go with the token: %v", err)
			}
			nc.Close()
			_, err = nats.Connect(tg.url, nats.Token("wrong"), nats.NoReconnect())
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("nats.go with a wrong token: %v, want %v", err, nats.ErrAuthorization)
			}
		})
	}
}

// One user and password.
func TestAuthSingleUser(t *testing.T) {
	forEach(t, secTargets(t, "authorization { user: u, password: p }", nil), func(t *testing.T, tg secTarget) {
		nc, err := nats.Connect(tg.url, nats.UserInfo("u", "p"))
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
		for _, bad := range []nats.Option{nats.UserInfo("u", "x"), nats.UserInfo("x", "p"), nats.Token("p")} {
			if _, err := nats.Connect(tg.url, bad, nats.NoReconnect()); !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("bad credentials: %v", err)
			}
		}
	})
}

// nats.go's nkey and user/password options against the users table.
func TestAuthNatsGo(t *testing.T) {
	nk := newNkeyUser(t)
	forEach(t, secTargets(t, usersConf(t, nk, ""), nil), func(t *testing.T, tg secTarget) {
		nc, err := nats.Connect(tg.url, nats.Nkey(nk.pub, func(nonce []byte) ([]byte, error) { return nk.kp.Sign(nonce) }))
		if err != nil {
			t.Fatalf("nkey: %v", err)
		}
		sub, _ := nc.SubscribeSync("greet")
		if err := nc.Publish("greet", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(readTimeout); err != nil || string(m.Data) != "hi" {
			t.Fatalf("message %v %v", m, err)
		}
		nc.Close()
		nc, err = nats.Connect(strings.Replace(tg.url, "nats://", "nats://alice:alice-pw@", 1))
		if err != nil {
			t.Fatalf("user in URL: %v", err)
		}
		nc.Close()
		other := newNkeyUser(t)
		_, err = nats.Connect(tg.url, nats.NoReconnect(), nats.Nkey(other.pub, func(n []byte) ([]byte, error) { return other.kp.Sign(n) }))
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("unknown nkey: %v", err)
		}
	})
}

// no_auth_user: INFO no longer says auth_required, a client that sends no
// credentials (or sends something else first) is that user, and a client
// with wrong credentials is still refused.
func TestAuthNoAuthUser(t *testing.T) {
	nk := newNkeyUser(t)
	forEach(t, secTargets(t, usersConf(t, nk, "no_auth_user: bob\n"), nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		if _, ok := c.info["auth_required"]; ok {
			t.Fatalf("INFO %s", c.infoLine)
		}
		c.send("SUB foo 1\r\nPUB foo 2\r\nhi\r\nPING\r\n")
		c.expect("+OK\r\n+OK\r\nMSG foo 1 2\r\nhi\r\nPONG\r\n")

		c = rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":false}` + "\r\nPING\r\n")
		c.expect("PONG\r\n")

		c = rawConn(t, tg.url)
		c.send(`CONNECT {"user":"bob","pass":"x"}` + "\r\n")
		c.expectAuthViolation()

		nc, err := nats.Connect(tg.url)
		if err != nil {
			t.Fatalf("nats.go without credentials: %v", err)
		}
		nc.Close()
	})
}

// An nkey no_auth_user, and a user limited to other connection types.
func TestAuthNoAuthNkeyAndConnectionTypes(t *testing.T) {
	nk := newNkeyUser(t)
	conf := fmt.Sprintf(`authorization { users = [ {nkey: %s}, {user: ws, password: p, allowed_connection_types: ["WEBSOCKET"]} ] }
no_auth_user: %s`, nk.pub, nk.pub)
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":false}` + "\r\nPING\r\n")
		c.expect("PONG\r\n")
		c = rawConn(t, tg.url)
		c.send(`CONNECT {"user":"ws","pass":"p"}` + "\r\n")
		c.expectAuthViolation()
	})
}
