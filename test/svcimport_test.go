package test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cairnmq/cairn/internal/server"
)

// Service imports (docs/security.md, "Accounts"): the requests
// that cross into the exporting account, against cairn and nats-server
// v2.15.2 from the same file.

func svcImportConf(nkey string) string {
	return fmt.Sprintf(`
server_name: svc1
cluster { name: C1, listen: "127.0.0.1:-1" }
accounts {
  A {
    users = [ { user: a, password: p } ]
    exports = [ { service: "svc.>" }, { service: none } ]
  }
  B {
    users = [ { user: b, password: p }, { nkey: %s } ]
    imports = [
      { service: { account: A, subject: "svc.shared" }, to: shared, share: true }
      { service: { account: A, subject: "svc.plain" }, to: plain }
      { service: { account: A, subject: none } }
    ]
  }
}
`, nkey)
}

// svcImportTargets starts cairn and nats-server (when available) from
// svcImportConf; cairn gets the file's cluster block as options (a
// cluster of one, so that the request info names the cluster).
func svcImportTargets(t *testing.T, nkey string) []secTarget {
	return secTargets(t, svcImportConf(nkey), func(o *server.Options) {
		o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: server.RandomPort, Name: "C1"}
	})
}

// A request through a service import that nothing in the exporting
// account receives gets the no-responders status, naming the subject the
// requester published (the import's subject in its own account), when
// the requester asked for it (CONNECT no_responders) and subscribes the
// reply subject itself; otherwise nothing. A responder there gets it, and
// the requester no 503.
func TestServiceImportNoResponders(t *testing.T) {
	forEach(t, svcImportTargets(t, newNkeyUser(t).pub), func(t *testing.T, tg secTarget) {
		b := login(t, tg.url, "b")
		b.send("SUB _INBOX.b 9\r\nPUB none _INBOX.b 2\r\nhi\r\nPUB plain _INBOX.b 2\r\nhi\r\n")
		b.expect("HMSG _INBOX.b 9 36 36\r\nNATS/1.0 503\r\nNats-Subject: none\r\n\r\n\r\n" +
			"HMSG _INBOX.b 9 37 37\r\nNATS/1.0 503\r\nNats-Subject: plain\r\n\r\n\r\n")
		// No reply subject, a reply subject it does not subscribe: nothing.
		b.send("PUB none 2\r\nhi\r\nPUB plain _INBOX.other 2\r\nhi\r\n")
		b.sync()

		// Without no_responders, the request times out.
		quiet := rawConnect(t, tg.url, `{"verbose":false,"pedantic":false,"protocol":1,"headers":true,"user":"b","pass":"p"}`)
		quiet.send("SUB _INBOX.q 1\r\nPUB none _INBOX.q 2\r\nhi\r\n")
		quiet.sync()

		a := login(t, tg.url, "a")
		a.send("SUB svc.> 1\r\nSUB none 2\r\n")
		a.sync()
		b.send("PUB plain _INBOX.b 2\r\nhi\r\nPUB none _INBOX.b 2\r\nhi\r\n")
		a.expectRe(`HMSG svc\.plain 1 _R_\.\S+ \d+ \d+\r\nNATS/1.0\r\nNats-Request-Info: [^\r]+\r\n\r\nhi\r\n`)
		m := a.expectRe(`HMSG none 2 (_R_\.\S+) \d+ \d+\r\nNATS/1.0\r\nNats-Request-Info: [^\r]+\r\n\r\nhi\r\n`)
		a.send("PUB " + m[1] + " 2\r\nok\r\n")
		a.sync()
		b.expect("MSG _INBOX.b 9 2\r\nok\r\n")
		b.sync()
	})
}

// requestInfo is one Nats-Request-Info: its keys in order and values.
type requestInfo struct {
	keys []string
	vals map[string]any
}

// expectRequest consumes the request a service import delivers to c
// (SID 1 on svc.<name>) and returns its Nats-Request-Info.
func expectRequest(t *testing.T, c *rawClient, name string) requestInfo {
	t.Helper()
	m := c.expectRe(`HMSG svc\.` + name + ` 1 _R_\.\S+ \d+ \d+\r\nNATS/1.0\r\nNats-Request-Info: ([^\r]+)\r\n\r\nhi\r\n`)
	var ri requestInfo
	dec := json.NewDecoder(strings.NewReader(m[1]))
	if _, err := dec.Token(); err != nil { // {
		t.Fatalf("request info %s: %v", m[1], err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("request info %s: %v", m[1], err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("request info %s: %v", m[1], err)
		}
		ri.keys = append(ri.keys, k.(string))
	}
	if err := json.Unmarshal([]byte(m[1]), &ri.vals); err != nil {
		t.Fatalf("request info %s: %v", m[1], err)
	}
	return ri
}

// share: true gives the exporter every detail of the requester, in
// nats-server's keys and order; without it only the account and
// round-trip time. A fast batch publish's reply subject rides along.
func TestServiceImportShare(t *testing.T) {
	nk := newNkeyUser(t)
	forEach(t, svcImportTargets(t, nk.pub), func(t *testing.T, tg secTarget) {
		a := login(t, tg.url, "a")
		a.send("SUB svc.> 1\r\n")
		a.sync()
		b := rawConn(t, tg.url)
		b.handshake(`{"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,"user":"b","pass":"p","name":"req","lang":"go","version":"1.2.3"}`)
		b.send("PUB shared _INBOX.b 2\r\nhi\r\nPUB plain _INBOX.b 2\r\nhi\r\nPUB plain fb.1.$FI 2\r\nhi\r\n")

		shared := expectRequest(t, a, "shared")
		want := []string{"start", "host", "id", "acc", "user", "name", "lang", "ver", "rtt", "server", "cluster", "kind", "client_type"}
		if !reflect.DeepEqual(shared.keys, want) {
			t.Errorf("shared request info keys %v, want %v", shared.keys, want)
		}
		v := shared.vals
		wantVals := map[string]any{
			"host": "127.0.0.1", "id": b.info["client_id"], "acc": "B", "user": "b",
			"name": "req", "lang": "go", "ver": "1.2.3", "server": b.info["server_name"],
			"cluster": "C1", "kind": "Client", "client_type": "nats",
		}
		for k, w := range wantVals {
			if v[k] != w {
				t.Errorf("shared %s = %v, want %v", k, v[k], w)
			}
		}
		if st, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v["start"])); err != nil || time.Since(st) > time.Minute {
			t.Errorf("shared start %v: %v", v["start"], err)
		}
		if rtt, ok := v["rtt"].(float64); !ok || rtt <= 0 {
			t.Errorf("shared rtt %v", v["rtt"])
		}

		plain := expectRequest(t, a, "plain")
		if want := []string{"acc", "rtt"}; !reflect.DeepEqual(plain.keys, want) || plain.vals["acc"] != "B" {
			t.Errorf("plain request info %v, want keys %v and acc B", plain.vals, want)
		}
		fast := expectRequest(t, a, "plain")
		if want := []string{"acc", "rtt", "reply"}; !reflect.DeepEqual(fast.keys, want) || fast.vals["reply"] != "fb.1.$FI" {
			t.Errorf("fast batch request info %v, want keys %v and reply fb.1.$FI", fast.vals, want)
		}

		// An nkey user: the nkey as the user, its account as the issuer.
		n := rawConn(t, tg.url)
		n.handshake(fmt.Sprintf(`{"verbose":false,"pedantic":false,"protocol":1,"headers":true,"nkey":%q,"sig":%q}`,
			nk.pub, nk.sign(t, n.info["nonce"].(string))))
		n.send("PUB shared _INBOX.n 2\r\nhi\r\n")
		nv := expectRequest(t, a, "shared")
		want = []string{"start", "host", "id", "acc", "user", "rtt", "server", "cluster", "issuer_key", "kind", "client_type"}
		if !reflect.DeepEqual(nv.keys, want) || nv.vals["user"] != nk.pub || nv.vals["issuer_key"] != "B" {
			t.Errorf("nkey request info %v, want keys %v, user %s, issuer_key B", nv.vals, want, nk.pub)
		}
	})
}

// A JWT user's shared details (operator mode): its JWT, the signing key
// that issued it (issuer_key), its name (name_tag) and tags, the same on
// both servers but for the connection's own values.
func TestServiceImportShareJWT(t *testing.T) {
	f := newJWTFixture(t, "")
	f.accClaims.Exports.Add(&jwt.Export{Subject: "help", Type: jwt.Service})
	accJWT, err := f.accClaims.Encode(f.op)
	if err != nil {
		t.Fatal(err)
	}
	_, impPub := mustKP(t, nkeys.CreateAccount)
	impSigner, impSignerPub := mustKP(t, nkeys.CreateAccount)
	ic := jwt.NewAccountClaims(impPub)
	ic.SigningKeys.Add(impSignerPub)
	ic.Imports.Add(&jwt.Import{Account: f.accPub, Subject: "help", LocalSubject: "ask", Type: jwt.Service, Share: true})
	impJWT, err := ic.Encode(f.op)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(f.conf, f.accPub+": "+f.accJWT, f.accPub+": "+accJWT+"\n  "+impPub+": "+impJWT, 1)

	userKP, userPub := mustKP(t, nkeys.CreateUser)
	uc := jwt.NewUserClaims(userPub)
	uc.IssuerAccount = impPub
	uc.Name = "alice"
	uc.Tags.Add("blue", "green")
	userTok, err := uc.Encode(impSigner)
	if err != nil {
		t.Fatal(err)
	}
	respKP, respPub := mustKP(t, nkeys.CreateUser)
	respTok := f.userJWT(t, f.acc, respPub, nil)

	got := map[string]string{}
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		connect := func(tok string, kp nkeys.KeyPair) *rawClient {
			c := rawConn(t, tg.url)
			s, _ := kp.Sign([]byte(c.info["nonce"].(string)))
			c.handshake(fmt.Sprintf(`{"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,"jwt":%q,"sig":%q}`,
				tok, base64.RawURLEncoding.EncodeToString(s)))
			return c
		}
		a := connect(respTok, respKP)
		a.send("SUB help 1\r\n")
		a.sync()
		b := connect(userTok, userKP)
		b.send("PUB ask _INBOX.b 2\r\nhi\r\n")
		m := a.expectRe(`HMSG help 1 _R_\.\S+ \d+ \d+\r\nNATS/1.0\r\nNats-Request-Info: ([^\r]+)\r\n\r\nhi\r\n`)
		var v map[string]any
		if err := json.Unmarshal([]byte(m[1]), &v); err != nil {
			t.Fatal(err)
		}
		for k, w := range map[string]any{"acc": impPub, "user": userPub, "jwt": userTok, "issuer_key": impSignerPub, "name_tag": "alice"} {
			if v[k] != w {
				t.Errorf("%s = %v, want %v", k, v[k], w)
			}
		}
		for _, k := range []string{"start", "id", "rtt", "server"} {
			v[k] = "<" + k + ">"
		}
		out, _ := json.Marshal(v)
		got[tg.name] = diffKeyOrderAs([]byte(m[1]), out)
	})
	if n := got["nats-server"]; n != "" && got["cairn"] != n {
		t.Errorf("request info\ncairn       %s\nnats-server %s", got["cairn"], n)
	}
}
