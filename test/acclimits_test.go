package test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// The connection, subscription and payload limits of accounts, users and
// the server (docs/security.md, "Limits"), against cairn and nats-server
// v2.15.2 with the same file.

const accLimitsConf = `
max_subscriptions: 5
accounts {
  A {
    users = [ {user: a, password: p}, {user: a2, password: p}, {user: a3, password: p} ]
    limits { max_connections: 2, max_subscriptions: 2, max_payload: 10 }
  }
  B { users = [ {user: b, password: p} ] }
  Z {
    users = [ {user: z, password: p} ]
    limits { max_subs: 0 }
  }
}
`

// An account's max_subscriptions (the smaller of it and the server's)
// refuses the SUB beyond it, a repeated sid included, and keeps the
// connection; the server's applies to an account without its own; after
// an UNSUB a SUB is taken again.
func TestAccountLimitsSubscriptions(t *testing.T) {
	forEach(t, secTargets(t, accLimitsConf, nil), func(t *testing.T, tg secTarget) {
		a := login(t, tg.url, "a")
		a.send("SUB x 1\r\nSUB y 2\r\nSUB z 3\r\nSUB x 1\r\nPING\r\n")
		a.expect("-ERR 'maximum subscriptions exceeded'\r\n-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")
		a.send("UNSUB 2\r\nSUB z 3\r\nSUB w 4\r\nPING\r\n")
		a.expect("-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")
		a.send("PUB z 2\r\nhi\r\n")
		a.expect("MSG z 3 2\r\nhi\r\n")

		b := login(t, tg.url, "b")
		var subs strings.Builder
		for i := 1; i <= 6; i++ {
			fmt.Fprintf(&subs, "SUB s%d %d\r\n", i, i)
		}
		b.send(subs.String() + "PING\r\n")
		b.expect("-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")
	})
}

// A limit of no subscription closes the client at CONNECT.
func TestAccountLimitsNoSubscriptions(t *testing.T) {
	forEach(t, secTargets(t, accLimitsConf, nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":false,"protocol":1,"user":"z","pass":"p"}` + "\r\n")
		c.expectErr("maximum subscriptions exceeded")
		c.expectClosed()
	})
}

// An account's max_payload is the client's: its connect_info INFO says
// so, and a PUB above it gets -ERR 'Maximum Payload Violation' and the
// close; the first INFO has the server's.
func TestAccountLimitsPayload(t *testing.T) {
	forEach(t, secTargets(t, accLimitsConf, nil), func(t *testing.T, tg secTarget) {
		c := rawConn(t, tg.url)
		if c.info["max_payload"] != float64(1<<20) {
			t.Fatalf("first INFO max_payload %v", c.info["max_payload"])
		}
		c.send(`CONNECT {"verbose":false,"protocol":1,"user":"a","pass":"p"}` + "\r\nPING\r\n")
		c.expect("PONG\r\n")
		if _, info := c.expectInfo(); info["max_payload"] != float64(10) {
			t.Fatalf("connect INFO max_payload %v", info["max_payload"])
		}
		c.send("SUB x 1\r\nPUB x 10\r\n0123456789\r\n")
		c.expect("MSG x 1 10\r\n0123456789\r\n")
		c.send("PUB x 11\r\n")
		c.expectErr("Maximum Payload Violation")
		c.expectClosed()

		// nats.go learns the limit from the INFO after CONNECT and refuses
		// the message itself.
		nc, err := nats.Connect(tg.url, nats.UserInfo("a2", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := nc.MaxPayload(); got != 10 {
			t.Errorf("nats.go MaxPayload %d, want 10", got)
		}
		if err := nc.Publish("x", make([]byte, 11)); !errors.Is(err, nats.ErrMaxPayload) {
			t.Errorf("publish of 11 bytes: %v", err)
		}
	})
}

// An account's max_connections refuses the next client of the account
// (only), with nats-server's -ERR; once one leaves, another gets in.
func TestAccountLimitsConnections(t *testing.T) {
	forEach(t, secTargets(t, accLimitsConf, nil), func(t *testing.T, tg secTarget) {
		first := login(t, tg.url, "a")
		login(t, tg.url, "a2")
		c := rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":false,"protocol":1,"user":"a3","pass":"p"}` + "\r\nPING\r\n")
		c.expectErr("maximum account active connections exceeded")
		c.expectClosed()
		login(t, tg.url, "b") // other accounts are not limited

		first.conn.Close()
		waitFor(t, readTimeout, "a third client of A once one left", func() bool {
			c := rawConn(t, tg.url)
			defer c.conn.Close()
			c.send(`CONNECT {"verbose":false,"protocol":1,"user":"a3","pass":"p"}` + "\r\nPING\r\n")
			return strings.HasPrefix(c.readLine(), "PONG")
		})
	})
}

// An account JWT's conn, subs and payload limits and a user JWT's subs
// and payload limits apply as a file's, the smallest winning.
func TestJWTLimits(t *testing.T) {
	f := newJWTFixture(t, "")
	ac := jwt.NewAccountClaims(f.accPub)
	ac.Limits.Conn = 2
	ac.Limits.Subs = 3
	ac.Limits.Payload = 100
	accJWT, err := ac.Encode(f.op)
	if err != nil {
		t.Fatal(err)
	}
	conf := replaceAccountJWT(t, f.conf, f.accPub, accJWT)
	userKP, userPub := mustKP(t, nkeys.CreateUser)
	small := f.userJWT(t, f.acc, userPub, func(uc *jwt.UserClaims) { uc.Limits.Subs = 1; uc.Limits.Payload = 20 })
	plain := f.userJWT(t, f.acc, userPub, nil)
	connectJWT := func(t *testing.T, u, token string, kp nkeys.KeyPair) *rawClient {
		t.Helper()
		c := rawConn(t, u)
		s, _ := kp.Sign([]byte(c.info["nonce"].(string)))
		c.send(fmt.Sprintf(`CONNECT {"verbose":false,"protocol":1,"jwt":%q,"sig":%q}`+"\r\nPING\r\n", token, base64.RawURLEncoding.EncodeToString(s)))
		return c
	}
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		c := connectJWT(t, tg.url, small, userKP)
		c.expect("PONG\r\n")
		if _, info := c.expectInfo(); info["max_payload"] != float64(20) {
			t.Fatalf("user JWT: connect INFO max_payload %v", info["max_payload"])
		}
		c.send("SUB a 1\r\nSUB b 2\r\nPING\r\n")
		c.expect("-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")

		d := connectJWT(t, tg.url, plain, userKP)
		d.expect("PONG\r\n")
		if _, info := d.expectInfo(); info["max_payload"] != float64(100) {
			t.Fatalf("account JWT: connect INFO max_payload %v", info["max_payload"])
		}
		d.send("SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB d 4\r\nPING\r\n")
		d.expect("-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")
		d.send("PUB a 101\r\n")
		d.expectErr("Maximum Payload Violation")
		d.expectClosed()

		e := connectJWT(t, tg.url, plain, userKP)
		e.expect("PONG\r\n")
		e.expectInfo()
		third := connectJWT(t, tg.url, plain, userKP)
		third.expectErr("maximum account active connections exceeded")
		third.expectClosed()
	})
}

// replaceAccountJWT puts accJWT in place of the account's JWT in a
// resolver_preload configuration.
func replaceAccountJWT(t *testing.T, conf, accPub, accJWT string) string {
	t.Helper()
	lines := strings.Split(conf, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), accPub+":") {
			lines[i] = "  " + accPub + ": " + accJWT
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no preload of %s in %q", accPub, conf)
	return ""
}
