package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// The nats-based account resolvers (docs/security.md, "The nats-based
// resolvers"): resolver { type: full } and { type: cache }, their
// directory of account JWTs and the system account's claims API, which
// `nsc push` uses. Without nsc on the machine, the JWTs are made with
// nats-io/jwt/v2 as nsc makes them, and pushes are sent as nsc sends them
// (a request to $SYS.REQ.CLAIMS.UPDATE whose answers are collected).

// resolverFixture is an operator with a signing key, its system account
// and user, and an account A with a user.
type resolverFixture struct {
	op, opSigner, sys, acc      nkeys.KeyPair
	opPub, signerPub            string
	sysPub, accPub              string
	opJWT, sysJWT               string
	sysUser                     string // .creds of a system account user
	userKP                      nkeys.KeyPair
	userPub, userJWT, userCreds string
}

func newResolverFixture(t *testing.T) *resolverFixture {
	t.Helper()
	f := &resolverFixture{}
	f.op, f.opPub = mustKP(t, nkeys.CreateOperator)
	f.opSigner, f.signerPub = mustKP(t, nkeys.CreateOperator)
	f.sys, f.sysPub = mustKP(t, nkeys.CreateAccount)
	f.acc, f.accPub = mustKP(t, nkeys.CreateAccount)
	oc := jwt.NewOperatorClaims(f.opPub)
	oc.SystemAccount = f.sysPub
	oc.SigningKeys.Add(f.signerPub)
	var err error
	if f.opJWT, err = oc.Encode(f.op); err != nil {
		t.Fatal(err)
	}
	f.sysJWT = f.accountJWT(t, f.sysPub, f.op, nil)
	skp, spub := mustKP(t, nkeys.CreateUser)
	sj, _ := jwt.NewUserClaims(spub).Encode(f.sys)
	f.sysUser = creds(t, sj, skp)
	f.userKP, f.userPub = mustKP(t, nkeys.CreateUser)
	f.userJWT, _ = jwt.NewUserClaims(f.userPub).Encode(f.acc)
	f.userCreds = creds(t, f.userJWT, f.userKP)
	return f
}

// accountJWT issues an account JWT, changed by mod, signed by signer.
func (f *resolverFixture) accountJWT(t *testing.T, pub string, signer nkeys.KeyPair, mod func(*jwt.AccountClaims)) string {
	t.Helper()
	ac := jwt.NewAccountClaims(pub)
	if mod != nil {
		mod(ac)
	}
	tok, err := ac.Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// conf is the configuration nsc generate config --nats-resolver writes,
// with the block's extra keys.
func (f *resolverFixture) conf(dir, extra string) string {
	return fmt.Sprintf("operator: %s\nsystem_account: %s\nresolver {\n  type: full\n  dir: %q\n  %s\n}\nresolver_preload: {\n  %s: %s\n}\n",
		f.opJWT, f.sysPub, dir, extra, f.sysPub, f.sysJWT)
}

// resolverTargets starts cairn and nats-server with f.conf, each with its
// own directory.
func resolverTargets(t *testing.T, f *resolverFixture, extra string) []secTarget {
	t.Helper()
	out := []secTarget{startCairnConf(t, f.conf(t.TempDir(), extra), nil)}
	if natsServerAvailable(t) {
		path := filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(path, []byte(f.conf(t.TempDir(), extra)+"\nlisten: 127.0.0.1:-1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, natsServerBinary(t), nil, "-c", path)
		out = append(out, secTarget{name: "nats-server", url: p.clientURL(t), proc: p})
	}
	return out
}

// sysConn connects as the system account user.
func (f *resolverFixture) sysConn(t *testing.T, u string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(u, nats.UserCredentials(f.sysUser))
	if err != nil {
		t.Fatalf("system user: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// claimsRequest sends a request as nsc does and returns the first answer
// (each test server is alone: one answer).
func claimsRequest(t *testing.T, nc *nats.Conn, subj string, body []byte) []byte {
	t.Helper()
	m, err := nc.Request(subj, body, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
	return m.Data
}

// withoutServer returns an answer's JSON without its "server" object
// (which names the answering server), keys in nats-server's order; a
// body that is not a JSON object is returned as it is.
func withoutServer(t *testing.T, b []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &m) != nil {
		return string(b)
	}
	var si struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	}
	if err := json.Unmarshal(m["server"], &si); err != nil || si.Name == "" || si.ID == "" {
		t.Errorf("answer without the server's name and id (nsc needs them): %s", b)
	}
	delete(m, "server")
	out, _ := json.Marshal(m)
	return string(out)
}

// The claims API answers what nats-server v2.15.2 answers, byte for byte
// but the server object: pushes on the three update subjects, by the
// operator and its signing key, bad JWTs, lookups, the list, deletes.
func TestResolverClaimsAPIDifferential(t *testing.T) {
	f := newResolverFixture(t)
	_, otherPub := mustKP(t, nkeys.CreateAccount)
	aJWT := f.accountJWT(t, f.accPub, f.op, nil)
	aSigned := f.accountJWT(t, f.accPub, f.opSigner, func(ac *jwt.AccountClaims) { ac.Limits.Conn = 5 })
	gen := func(signer nkeys.KeyPair, iss string, accs []string) []byte {
		gc := jwt.NewGenericClaims(iss)
		gc.Data["accounts"] = accs
		tok, err := gc.Encode(signer)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(tok)
	}
	type step struct {
		name, subj string
		body       []byte
	}
	steps := []step{
		{"push", "$SYS.REQ.CLAIMS.UPDATE", []byte(aJWT)},
		{"push again", "$SYS.REQ.CLAIMS.UPDATE", []byte(aJWT)},
		{"push by signing key on the account subject", "$SYS.REQ.ACCOUNT." + f.accPub + ".CLAIMS.UPDATE", []byte(aSigned)},
		{"push on the old subject", "$SYS.ACCOUNT." + f.accPub + ".CLAIMS.UPDATE", []byte(aSigned)},
		{"subject of another account", "$SYS.REQ.ACCOUNT." + otherPub + ".CLAIMS.UPDATE", []byte(aSigned)},
		{"garbage", "$SYS.REQ.CLAIMS.UPDATE", []byte("garbage")},
		{"empty", "$SYS.REQ.CLAIMS.UPDATE", nil},
		{"lookup", "$SYS.REQ.ACCOUNT." + f.accPub + ".CLAIMS.LOOKUP", nil},
		{"lookup unknown", "$SYS.REQ.ACCOUNT." + otherPub + ".CLAIMS.LOOKUP", nil},
		{"list", "$SYS.REQ.CLAIMS.LIST", nil},
		{"delete the system account", "$SYS.REQ.CLAIMS.DELETE", gen(f.op, f.opPub, []string{f.sysPub})},
		{"delete not self-signed", "$SYS.REQ.CLAIMS.DELETE", gen(f.op, f.signerPub, []string{f.accPub})},
		{"delete by an account", "$SYS.REQ.CLAIMS.DELETE", gen(f.acc, f.accPub, []string{f.accPub})},
		{"delete malformed", "$SYS.REQ.CLAIMS.DELETE", gen(f.op, f.opPub, []string{"nope"})},
		{"delete garbage", "$SYS.REQ.CLAIMS.DELETE", []byte("x")},
		{"delete by the signing key", "$SYS.REQ.CLAIMS.DELETE", gen(f.opSigner, f.signerPub, []string{f.accPub, otherPub})},
		{"list after", "$SYS.REQ.CLAIMS.LIST", nil},
		{"lookup deleted", "$SYS.REQ.ACCOUNT." + f.accPub + ".CLAIMS.LOOKUP", nil},
	}
	got := map[string][]string{}
	targets := resolverTargets(t, f, "allow_delete: true")
	forEach(t, targets, func(t *testing.T, tg secTarget) {
		nc := f.sysConn(t, tg.url)
		for _, st := range steps {
			ans := withoutServer(t, claimsRequest(t, nc, st.subj, st.body))
			got[tg.name] = append(got[tg.name], ans)
		}
	})
	want := []string{
		`{"data":{"account":"` + f.accPub + `","code":200,"message":"jwt updated"}}`,
		`{"data":{"account":"` + f.accPub + `","code":200,"message":"jwt updated"}}`,
		`{"data":{"account":"` + f.accPub + `","code":200,"message":"jwt updated"}}`,
		`{"data":{"account":"` + f.accPub + `","code":200,"message":"jwt updated"}}`,
		`{"error":{"account":"` + otherPub + `","code":500,"description":"jwt update resulted in error - subject does not match jwt content"}}`,
		`{"error":{"account":"n/a","code":500,"description":"jwt update resulted in error - expected 3 chunks"}}`,
		`{"error":{"account":"n/a","code":500,"description":"jwt update resulted in error - expected 3 chunks"}}`,
		aSigned,
		``,
		`{"data":["` + sorted2(f.accPub, f.sysPub) + `"]}`,
		`{"error":{"code":500,"description":"delete accounts request by ` + f.opPub + ` failed - not allowed to delete system account"}}`,
		`{"error":{"code":500,"description":"delete accounts request by ` + f.signerPub + ` failed - not self signed"}}`,
		`{"error":{"code":500,"description":"delete accounts request by ` + f.accPub + ` failed - not trusted"}}`,
		`{"error":{"code":500,"description":"delete accounts request by ` + f.opPub + ` failed - malformed request"}}`,
		`{"error":{"code":500,"description":"delete accounts request by  failed - expected 3 chunks"}}`,
		`{"data":{"code":200,"message":"deleted 2 accounts"}}`,
		`{"data":["` + f.sysPub + `"]}`,
		``,
	}
	for _, tg := range targets {
		for i, st := range steps {
			if g := got[tg.name]; i < len(g) && g[i] != want[i] {
				t.Errorf("%s, %s:\n got %s\nwant %s", tg.name, st.name, g[i], want[i])
			}
		}
	}
	if len(targets) == 2 {
		for i := range steps {
			if a, b := got["cairn"], got["nats-server"]; i < len(a) && i < len(b) && a[i] != b[i] {
				t.Errorf("%s: cairn %s, nats-server %s", steps[i].name, a[i], b[i])
			}
		}
	}
}

// sorted2 joins two keys in order with `","`.
func sorted2(a, b string) string {
	if a > b {
		a, b = b, a
	}
	return a + `","` + b
}

// A client of an account the server does not know is refused; once its
// account's JWT is pushed, it connects with its .creds (nats.go), and the
// JWT is in the directory, nats-server's layout.
func TestResolverPushNewAccount(t *testing.T) {
	f := newResolverFixture(t)
	aJWT := f.accountJWT(t, f.accPub, f.op, nil)
	forEach(t, resolverTargets(t, f, ""), func(t *testing.T, tg secTarget) {
		connectJWT(t, tg.url, f.userJWT, f.userKP).expectAuthViolation()
		nc := f.sysConn(t, tg.url)
		if ans := withoutServer(t, claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(aJWT))); !strings.Contains(ans, `"jwt updated"`) {
			t.Fatalf("push: %s", ans)
		}
		uc, err := nats.Connect(tg.url, nats.UserCredentials(f.userCreds))
		if err != nil {
			t.Fatalf("user of the pushed account: %v", err)
		}
		defer uc.Close()
		sub, _ := uc.SubscribeSync("x")
		_ = uc.Publish("x", []byte("hi"))
		if m, err := sub.NextMsg(readTimeout); err != nil || string(m.Data) != "hi" {
			t.Fatalf("%v %v", m, err)
		}
	})
}

// A revocation pushed while the user is connected closes it with
// -ERR 'User Authentication Revoked', as in nats-server; a new limit of
// the account's subscriptions applies to the user that stays.
func TestResolverRevocationWhileConnected(t *testing.T) {
	f := newResolverFixture(t)
	otherKP, otherPub := mustKP(t, nkeys.CreateUser)
	otherJWT, _ := jwt.NewUserClaims(otherPub).Encode(f.acc)
	forEach(t, resolverTargets(t, f, ""), func(t *testing.T, tg secTarget) {
		nc := f.sysConn(t, tg.url)
		claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.accountJWT(t, f.accPub, f.op, nil)))
		c := connectJWT(t, tg.url, f.userJWT, f.userKP)
		c.expect("PONG\r\n")
		stays := connectJWT(t, tg.url, otherJWT, otherKP)
		stays.expect("PONG\r\n")
		revoked := f.accountJWT(t, f.accPub, f.op, func(ac *jwt.AccountClaims) {
			ac.RevokeAt(f.userPub, time.Now().Add(time.Minute))
		})
		if ans := withoutServer(t, claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(revoked))); !strings.Contains(ans, `"jwt updated"`) {
			t.Fatalf("push: %s", ans)
		}
		if got := c.waitClosed(10 * time.Second); got != "-ERR 'User Authentication Revoked'\r\n" {
			t.Fatalf("revoked user got %q", got)
		}
		stays.send("PING\r\n")
		stays.expect("PONG\r\n")
		connectJWT(t, tg.url, f.userJWT, f.userKP).expectAuthViolation()
	})
}

// Deleting an account closes its clients with
// -ERR 'Account Authentication Expired', as nats-server's removal does.
func TestResolverDeleteWhileConnected(t *testing.T) {
	f := newResolverFixture(t)
	forEach(t, resolverTargets(t, f, "allow_delete: true"), func(t *testing.T, tg secTarget) {
		nc := f.sysConn(t, tg.url)
		claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.accountJWT(t, f.accPub, f.op, nil)))
		c := connectJWT(t, tg.url, f.userJWT, f.userKP)
		c.expect("PONG\r\n")
		gc := jwt.NewGenericClaims(f.opPub)
		gc.Data["accounts"] = []string{f.accPub}
		del, _ := gc.Encode(f.op)
		if ans := withoutServer(t, claimsRequest(t, nc, "$SYS.REQ.CLAIMS.DELETE", []byte(del))); !strings.Contains(ans, "deleted 1 accounts") {
			t.Fatalf("delete: %s", ans)
		}
		if got := c.waitClosed(10 * time.Second); got != "-ERR 'Account Authentication Expired'\r\n" {
			t.Fatalf("client of the deleted account got %q", got)
		}
		connectJWT(t, tg.url, f.userJWT, f.userKP).expectAuthViolation()
	})
}

// Where cairn is stricter than nats-server v2.15.2 (docs/compatibility.md):
// a pushed JWT not issued by the operator or its signing keys, or issued
// before the stored one, is refused, and nothing changes.
func TestResolverRefusesUntrustedAndOlder(t *testing.T) {
	f := newResolverFixture(t)
	rogue, _ := mustKP(t, nkeys.CreateOperator)
	older := f.accountJWT(t, f.accPub, f.op, nil)
	tg := startCairnConf(t, f.conf(t.TempDir(), ""), nil)
	nc := f.sysConn(t, tg.url)
	waitFor(t, 5*time.Second, "a newer second", func() bool { return time.Now().Unix() > jwtIssuedAt(t, older) })
	newer := f.accountJWT(t, f.accPub, f.op, func(ac *jwt.AccountClaims) { ac.Limits.Conn = 7 })
	claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(newer))
	for name, c := range map[string]struct{ tok, want string }{
		"untrusted": {f.accountJWT(t, f.accPub, rogue, nil), "jwt update resulted in error - account validation failed"},
		"older":     {older, "jwt update resulted in error - jwt is older than the stored one"},
	} {
		ans := withoutServer(t, claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(c.tok)))
		if !strings.Contains(ans, c.want) {
			t.Errorf("%s: %s", name, ans)
		}
	}
	if got := claimsRequest(t, nc, "$SYS.REQ.ACCOUNT."+f.accPub+".CLAIMS.LOOKUP", nil); string(got) != newer {
		t.Fatalf("stored JWT changed")
	}
}

func jwtIssuedAt(t *testing.T, tok string) int64 {
	g, err := jwt.DecodeGeneric(tok)
	if err != nil {
		t.Fatal(err)
	}
	return g.IssuedAt
}

// The JWTs pushed are in the directory, one <key>.jwt each, and a restart
// loads them: the user connects without a new push.
func TestResolverRestartLoadsDirectory(t *testing.T) {
	f := newResolverFixture(t)
	dir := t.TempDir()
	tg := startCairnConf(t, f.conf(dir, ""), nil)
	aJWT := f.accountJWT(t, f.accPub, f.op, nil)
	claimsRequest(t, f.sysConn(t, tg.url), "$SYS.REQ.CLAIMS.UPDATE", []byte(aJWT))
	data, err := os.ReadFile(filepath.Join(dir, f.accPub+".jwt"))
	if err != nil || string(data) != aJWT {
		t.Fatalf("directory: %v", err)
	}
	tg.stop()
	tg = startCairnConf(t, f.conf(dir, ""), nil)
	uc, err := nats.Connect(tg.url, nats.UserCredentials(f.userCreds))
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	uc.Close()
}

// resolverCluster starts n cairn servers with a resolver each (its own
// directory); kind(i) is node i's block body.
func resolverCluster(t *testing.T, f *resolverFixture, n int, kind func(i int) config.ResolverDir) *testCluster {
	t.Helper()
	if targetIsNatsServer() {
		t.Skip("the cluster harness does not pass operator options to nats-server")
	}
	return startCluster(t, n, func(i int, o *server.Options) {
		rd := kind(i)
		rd.Dir = t.TempDir()
		res := "FULL"
		if !rd.Full {
			res = "CACHE"
		}
		o.Operator = config.Operator{JWTs: []string{f.opJWT}, Resolver: res, ResolverDir: rd,
			Preload: map[string]string{f.sysPub: f.sysJWT}, SystemAccount: f.sysPub}
	})
}

// multiRequest is nsc's: it collects answers until none comes within the
// rest of the window; it returns them.
func multiRequest(t *testing.T, nc *nats.Conn, subj string, body []byte, want int) [][]byte {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subj, inbox, body); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(out) < want {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%d answers of %d: %v", len(out), want, err)
		}
		out = append(out, m.Data)
	}
	return out
}

// In a cluster of full resolvers a push reaches every server (each
// answers, as nsc push counts them), and a server that was down at the
// push gets the JWT from the others within an interval; a cache resolver
// fetches an account it does not know when its client connects.
func TestResolverCluster(t *testing.T) {
	f := newResolverFixture(t)
	tc := resolverCluster(t, f, 3, func(i int) config.ResolverDir {
		if i == 2 {
			return config.ResolverDir{Timeout: time.Second}
		}
		return config.ResolverDir{Full: true, Interval: 200 * time.Millisecond}
	})
	nc := f.sysConn(t, tc.nodes[0].url)
	// The system account's subscriptions reach every server first.
	waitFor(t, clusterTimeout, "every server answering", func() bool {
		ib := nats.NewInbox()
		sub, _ := nc.SubscribeSync(ib)
		defer sub.Unsubscribe()
		_ = nc.PublishRequest("$SYS.REQ.CLAIMS.LIST", ib, nil)
		n := 0
		for {
			if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
				return n == 3
			}
			n++
		}
	})
	aJWT := f.accountJWT(t, f.accPub, f.op, nil)
	answers := multiRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(aJWT), 3)
	var full, cache int
	for _, a := range answers {
		switch {
		case bytes.Contains(a, []byte(`"jwt updated"`)):
			full++
		case bytes.Contains(a, []byte(`"jwt update cache skipped"`)):
			cache++
		default:
			t.Errorf("answer %s", a)
		}
	}
	if full != 2 || cache != 1 {
		t.Fatalf("answers: %d full, %d cache", full, cache)
	}
	for _, nd := range tc.nodes {
		uc, err := nats.Connect(nd.url, nats.UserCredentials(f.userCreds))
		if err != nil {
			t.Fatalf("%s: %v", nd.name(), err)
		}
		uc.Close()
	}
	// A server down at the push gets it at the next comparison.
	tc.nodes[1].stop()
	bPub := ""
	bKP, bPub := mustKP(t, nkeys.CreateAccount)
	_ = bKP
	bJWT := f.accountJWT(t, bPub, f.op, nil)
	multiRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(bJWT), 2)
	tc.nodes[1].start()
	dir := tc.nodes[1].opts.Operator.ResolverDir.Dir
	waitFor(t, clusterTimeout, "the JWT pushed while down", func() bool {
		data, err := os.ReadFile(filepath.Join(dir, bPub+".jwt"))
		return err == nil && string(data) == bJWT
	})
	// An account no server knows is refused by the cache resolver after
	// its lookup.
	_, unknownPub := mustKP(t, nkeys.CreateAccount)
	_ = unknownPub
	ukp, upub := mustKP(t, nkeys.CreateUser)
	unknownAcc, _ := mustKP(t, nkeys.CreateAccount)
	uj, _ := jwt.NewUserClaims(upub).Encode(unknownAcc)
	connectJWT(t, tc.nodes[2].url, uj, ukp).expectAuthViolation()
}

// With resolver: MEMORY a JWT pushed on the account's subjects replaces a
// preloaded account's (nats-server accountClaimUpdate): the answers are
// nats-server's, and the revocation it carries closes the user.
func TestMemoryResolverPush(t *testing.T) {
	f := newResolverFixture(t)
	rogue, _ := mustKP(t, nkeys.CreateOperator)
	_, otherPub := mustKP(t, nkeys.CreateAccount)
	aJWT := f.accountJWT(t, f.accPub, f.op, nil)
	conf := fmt.Sprintf("operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n}\n",
		f.opJWT, f.sysPub, f.sysPub, f.sysJWT, f.accPub, aJWT)
	revoked := f.accountJWT(t, f.accPub, f.opSigner, func(ac *jwt.AccountClaims) {
		ac.RevokeAt(f.userPub, time.Now().Add(time.Minute))
	})
	steps := []struct {
		name, subj string
		body       []byte
		want       string
	}{
		{"unknown account", "$SYS.REQ.ACCOUNT." + otherPub + ".CLAIMS.UPDATE", []byte(f.accountJWT(t, otherPub, f.op, nil)),
			`{"data":{"account":"` + otherPub + `","code":200,"message":"jwt update skipped"}}`},
		{"empty", "$SYS.REQ.ACCOUNT." + f.accPub + ".CLAIMS.UPDATE", nil,
			`{"error":{"account":"` + f.accPub + `","code":500,"description":"jwt update error - request body is empty"}}`},
		{"garbage", "$SYS.ACCOUNT." + f.accPub + ".CLAIMS.UPDATE", []byte("garbage"),
			`{"error":{"account":"` + f.accPub + `","code":500,"description":"jwt update resulted in error - expected 3 chunks"}}`},
		{"other subject", "$SYS.REQ.ACCOUNT." + otherPub + ".CLAIMS.UPDATE", []byte(aJWT),
			`{"error":{"account":"` + otherPub + `","code":500,"description":"jwt update resulted in error - subject does not match jwt content"}}`},
		{"untrusted", "$SYS.REQ.ACCOUNT." + f.accPub + ".CLAIMS.UPDATE", []byte(f.accountJWT(t, f.accPub, rogue, nil)),
			`{"error":{"account":"` + f.accPub + `","code":500,"description":"jwt update resulted in error - account validation failed"}}`},
		{"same", "$SYS.REQ.ACCOUNT." + f.accPub + ".CLAIMS.UPDATE", []byte(aJWT),
			`{"data":{"account":"` + f.accPub + `","code":200,"message":"jwt updated"}}`},
		{"revocation", "$SYS.REQ.ACCOUNT." + f.accPub + ".CLAIMS.UPDATE", []byte(revoked),
			`{"data":{"account":"` + f.accPub + `","code":200,"message":"jwt updated"}}`},
	}
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		c := connectJWT(t, tg.url, f.userJWT, f.userKP)
		c.expect("PONG\r\n")
		nc := f.sysConn(t, tg.url)
		for _, st := range steps {
			if got := withoutServer(t, claimsRequest(t, nc, st.subj, st.body)); got != st.want {
				t.Errorf("%s:\n got %s\nwant %s", st.name, got, st.want)
			}
		}
		if got := c.waitClosed(10 * time.Second); got != "-ERR 'User Authentication Revoked'\r\n" {
			t.Fatalf("revoked user got %q", got)
		}
		// $SYS.REQ.CLAIMS.UPDATE is the nats-based resolvers' only.
		if _, err := nc.Request("$SYS.REQ.CLAIMS.UPDATE", []byte(aJWT), time.Second); err != nats.ErrNoResponders {
			t.Fatalf("CLAIMS.UPDATE with MEMORY: %v", err)
		}
	})
}

// An account pushed with JetStream, and an account whose new JWT enables
// it, get JetStream at once, as in nats-server: their users create
// streams and publish to them.
func TestResolverPushEnablesJetStream(t *testing.T) {
	f := newResolverFixture(t)
	bKP, bPub := mustKP(t, nkeys.CreateAccount)
	bUserKP, bUserPub := mustKP(t, nkeys.CreateUser)
	bUser, _ := jwt.NewUserClaims(bUserPub).Encode(bKP)
	js := func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}
	for _, tg := range []string{"cairn", "nats-server"} {
		t.Run(tg, func(t *testing.T) {
			conf := f.conf(t.TempDir(), "") + fmt.Sprintf("jetstream { store_dir: %q }\n", t.TempDir())
			var u string
			if tg == "cairn" {
				u = startCairnConf(t, conf, nil).url
			} else {
				if !natsServerAvailable(t) {
					t.Skip("no nats-server")
				}
				path := filepath.Join(t.TempDir(), "nats.conf")
				if err := os.WriteFile(path, []byte(conf+"\nlisten: 127.0.0.1:-1\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				u = startProc(t, natsServerBinary(t), nil, "-c", path).clientURL(t)
			}
			nc := f.sysConn(t, u)
			claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.accountJWT(t, f.accPub, f.op, js)))
			claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.accountJWT(t, bPub, f.op, nil)))
			useStream := func(creds, name string) error {
				uc, err := nats.Connect(u, nats.UserCredentials(creds))
				if err != nil {
					return err
				}
				defer uc.Close()
				jsc, _ := uc.JetStream()
				if _, err := jsc.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
					return err
				}
				_, err = jsc.Publish(name+".x", []byte("1"))
				return err
			}
			if err := useStream(f.userCreds, "A"); err != nil {
				t.Fatalf("account pushed with JetStream: %v", err)
			}
			bCreds := creds(t, bUser, bUserKP)
			if err := useStream(bCreds, "B"); err == nil {
				t.Fatal("JetStream in an account without it")
			}
			claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.accountJWT(t, bPub, f.op, js)))
			if err := useStream(bCreds, "B"); err != nil {
				t.Fatalf("account whose new JWT enables JetStream: %v", err)
			}
		})
	}
}

// The exports and imports of account JWTs work as nats-server applies
// them: a public stream export imported under a local subject, a service
// export that requires an activation token, imported with one; a push
// withdrawing the stream export ends the import at once.
func TestResolverJWTImportsExports(t *testing.T) {
	f := newResolverFixture(t)
	bKP, bPub := mustKP(t, nkeys.CreateAccount)
	bUserKP, bUserPub := mustKP(t, nkeys.CreateUser)
	bUser, _ := jwt.NewUserClaims(bUserPub).Encode(bKP)
	bCreds := creds(t, bUser, bUserKP)
	exports := func(stream bool) func(*jwt.AccountClaims) {
		return func(ac *jwt.AccountClaims) {
			if stream {
				ac.Exports.Add(&jwt.Export{Subject: "orders.>", Type: jwt.Stream})
			}
			ac.Exports.Add(&jwt.Export{Subject: "help", Type: jwt.Service, TokenReq: true})
		}
	}
	act := jwt.NewActivationClaims(bPub)
	act.ImportSubject = "help"
	act.ImportType = jwt.Service
	token, err := act.Encode(f.acc)
	if err != nil {
		t.Fatal(err)
	}
	bJWT := f.accountJWT(t, bPub, f.op, func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Account: f.accPub, Subject: "orders.>", LocalSubject: "in.orders.>", Type: jwt.Stream})
		ac.Imports.Add(&jwt.Import{Account: f.accPub, Subject: "help", Type: jwt.Service, Token: token})
	})
	forEach(t, resolverTargets(t, f, ""), func(t *testing.T, tg secTarget) {
		nc := f.sysConn(t, tg.url)
		claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.accountJWT(t, f.accPub, f.op, exports(true))))
		claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(bJWT))
		a, err := nats.Connect(tg.url, nats.UserCredentials(f.userCreds))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := nats.Connect(tg.url, nats.UserCredentials(bCreds))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := a.Subscribe("help", func(m *nats.Msg) { _ = m.Respond([]byte("helped " + string(m.Data))) }); err != nil {
			t.Fatal(err)
		}
		_ = a.Flush()
		sub, _ := b.SubscribeSync("in.orders.>")
		_ = b.Flush()
		waitFor(t, 5*time.Second, "the imported stream", func() bool {
			_ = a.Publish("orders.1", []byte("o"))
			m, err := sub.NextMsg(100 * time.Millisecond)
			return err == nil && m.Subject == "in.orders.1"
		})
		if m, err := b.Request("help", []byte("me"), 5*time.Second); err != nil || string(m.Data) != "helped me" {
			t.Fatalf("service import: %v %v", m, err)
		}
		claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.accountJWT(t, f.accPub, f.op, exports(false))))
		for { // what was in flight before the push
			if _, err := sub.NextMsg(100 * time.Millisecond); err != nil {
				break
			}
		}
		_ = a.Publish("orders.2", []byte("o"))
		_ = a.Flush()
		if m, err := b.Request("help", []byte("again"), 5*time.Second); err != nil || string(m.Data) != "helped again" {
			t.Fatalf("service import after the push: %v %v", m, err)
		}
		if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("stream export withdrawn, still delivered %s", m.Subject)
		}
	})
}

// nsc's configuration without the system account's JWT starts with
// nats-server's bootstrapping system account: a user its own key issued
// pushes the JWTs. A reload (SIGHUP, the binaries) keeps the accounts
// pushed, and cairn refuses a change of the resolver block.
func TestResolverBootstrapAndReload(t *testing.T) {
	f := newResolverFixture(t)
	aJWT := f.accountJWT(t, f.accPub, f.op, nil)
	confOf := func(dir, extra string) string {
		return fmt.Sprintf("operator: %s\nsystem_account: %s\nresolver {\n  type: full\n  dir: %q\n  %s\n}\n", f.opJWT, f.sysPub, dir, extra)
	}
	names := []string{"cairn"}
	if natsServerAvailable(t) {
		names = append(names, "nats-server")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if name == "cairn" && targetIsNatsServer() {
				t.Skip("cairn is compared with nats-server in the other subtest")
			}
			bin := natsServerBinary(t)
			if name == "cairn" {
				bin = cairnBinary(t)
			}
			dir := t.TempDir()
			tg := startReloadTarget(t, name, bin, reloadHead, confOf(dir, ""))
			nc := f.sysConn(t, tg.url)
			if ans := withoutServer(t, claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(f.sysJWT))); !strings.Contains(ans, `"jwt updated"`) {
				t.Fatalf("push of the system account: %s", ans)
			}
			if ans := withoutServer(t, claimsRequest(t, nc, "$SYS.REQ.CLAIMS.UPDATE", []byte(aJWT))); !strings.Contains(ans, `"jwt updated"`) {
				t.Fatalf("push: %s", ans)
			}
			uc, err := nats.Connect(tg.url, nats.UserCredentials(f.userCreds))
			if err != nil {
				t.Fatal(err)
			}
			defer uc.Close()
			tg.mustReload(t, confOf(dir, ""))
			if err := uc.Flush(); err != nil {
				t.Fatalf("the user after the reload: %v", err)
			}
			again, err := nats.Connect(tg.url, nats.UserCredentials(f.userCreds))
			if err != nil {
				t.Fatalf("a new client after the reload: %v", err)
			}
			again.Close()
			if name == "cairn" {
				if err := tg.reload(t, confOf(dir, `interval: "5m"`)); !strings.Contains(err, "config reload not supported for resolver") {
					t.Fatalf("resolver block changed: %q", err)
				}
			}
		})
	}
}
