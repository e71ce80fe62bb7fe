package test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Reloading the security settings (docs/security.md, "Reloading"): the
// same configuration file, rewritten and reloaded with SIGHUP, against
// the cairn binary and the nats-server v2.15.2 binary (when installed;
// with CAIRN_TEST_TARGET=nats-server against nats-server alone), and the
// same outcome for the clients connected before: who is closed, with
// which -ERR and close reason (/connz?state=closed), which subscriptions
// are removed, who may go on.

// reloadTarget is a server binary running from a configuration file the
// test rewrites.
type reloadTarget struct {
	name string // "cairn" or "nats-server"
	url  string
	mon  string // its monitoring URL
	path string // its configuration file
	head string // what starts the file: reloadHead, or another listener setup
	p    *proc
}

// reloadHead starts every file: a free port on the loopback, and the
// monitoring for /connz.
const reloadHead = "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\n"

var (
	cairnBinOnce sync.Once
	cairnBinPath string
)

// reloadServers starts the servers under test with conf: the cairn
// binary (or nats-server with CAIRN_TEST_TARGET=nats-server), then
// nats-server beside it when it is installed.
func reloadServers(t *testing.T, conf string) []*reloadTarget {
	t.Helper()
	return reloadServersHead(t, reloadHead, conf)
}

// reloadServersHead is reloadServers with the files started by head
// instead of reloadHead; head sets "http" or "https" as
// "<scheme>: 127.0.0.1:-1" (or "https_port: -1").
func reloadServersHead(t *testing.T, head, conf string) []*reloadTarget {
	t.Helper()
	name, bin := "cairn", ""
	if targetIsNatsServer() {
		name, bin = "nats-server", natsServerBinary(t)
	} else {
		bin = cairnBinary(t)
	}
	out := []*reloadTarget{startReloadTarget(t, name, bin, head, conf)}
	if natsServerAvailable(t) {
		out = append(out, startReloadTarget(t, "nats-server", natsServerBinary(t), head, conf))
	}
	return out
}

func startReloadTarget(t *testing.T, name, bin, head, conf string) *reloadTarget {
	t.Helper()
	tg := &reloadTarget{name: name, path: filepath.Join(t.TempDir(), "server.conf"), head: head}
	tg.write(t, conf)
	tg.p = startProc(t, bin, nil, "-c", tg.path)
	tg.url = tg.p.clientURL(t)
	re := regexp.MustCompile(`Starting https? monitor on (\S+)`)
	var m []string
	waitFor(t, startTimeout, name+"'s monitor", func() bool {
		m = re.FindStringSubmatch(tg.p.log.String())
		return m != nil
	})
	tg.mon = "http://" + m[1]
	return tg
}

func (tg *reloadTarget) write(t *testing.T, conf string) {
	t.Helper()
	if err := os.WriteFile(tg.path, []byte(tg.head+conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload writes conf and sends SIGHUP; it returns once the server logged
// the reload's outcome: "" when it succeeded, the error otherwise.
func (tg *reloadTarget) reload(t *testing.T, conf string) string {
	t.Helper()
	tg.write(t, conf)
	okRE := regexp.MustCompile(`Reloaded server configuration`)
	failRE := regexp.MustCompile(`Failed to reload server configuration: (.*)`)
	oks, fails := len(okRE.FindAllString(tg.p.log.String(), -1)), len(failRE.FindAllString(tg.p.log.String(), -1))
	if err := tg.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var outcome string
	waitFor(t, readTimeout, tg.name+"'s reload", func() bool {
		log := tg.p.log.String()
		if m := failRE.FindAllStringSubmatch(log, -1); len(m) > fails {
			outcome = m[len(m)-1][1]
			return true
		}
		return len(okRE.FindAllString(log, -1)) > oks
	})
	return outcome
}

// mustReload reloads conf and fails the test when it is refused.
func (tg *reloadTarget) mustReload(t *testing.T, conf string) {
	t.Helper()
	if err := tg.reload(t, conf); err != "" {
		t.Fatalf("%s refused the reload: %s", tg.name, err)
	}
}

// closedReasons returns the close reason of each closed connection, by
// the name its CONNECT gave it, from /connz?state=closed.
func (tg *reloadTarget) closedReasons(t *testing.T) map[string]string {
	t.Helper()
	_, body := monGet(t, tg.mon+"/connz?state=closed")
	var cz struct {
		Conns []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(body, &cz); err != nil {
		t.Fatalf("%s: /connz?state=closed: %v", tg.name, err)
	}
	out := map[string]string{}
	for _, c := range cz.Conns {
		out[c.Name] = c.Reason
	}
	return out
}

// waitReasons waits until /connz?state=closed lists want (name to
// reason) among its closed connections.
func (tg *reloadTarget) waitReasons(t *testing.T, want map[string]string) {
	t.Helper()
	var got map[string]string
	deadline := time.Now().Add(readTimeout)
	for {
		got = tg.closedReasons(t)
		ok := true
		for n, r := range want {
			ok = ok && got[n] == r
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: closed connections %v, want %v among them", tg.name, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// userConn connects a raw client as user/pass, named name (the name
// /connz reports), with verbose off.
func userConn(t *testing.T, u, name, user, pass string) *rawClient {
	t.Helper()
	return liveConnect(t, u, fmt.Sprintf(`{"verbose":false,"protocol":1,"name":%q,"user":%q,"pass":%q}`, name, user, pass))
}

// liveConnect is rawConnect for a client that outlives the server's
// first keep-alive PING, which it answers.
func liveConnect(t *testing.T, u, connectJSON string) *rawClient {
	t.Helper()
	c := rawConnect(t, u, connectJSON)
	c.answerPings = true
	return c
}

// expectQuietClose asserts that the server closes the connection without
// sending anything.
func (c *rawClient) expectQuietClose() {
	c.t.Helper()
	if got := c.waitClosed(readTimeout); got != "" {
		c.t.Fatalf("%s: want a close without a word, got %q first", c.name, got)
	}
}

// expectLines consumes n CRLF lines and fails unless they are want, in
// any order (nats-server removes a client's subscriptions in its map's
// order).
func (c *rawClient) expectLines(want ...string) {
	c.t.Helper()
	got := make([]string, 0, len(want))
	for range want {
		got = append(got, c.readLine())
	}
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		c.t.Fatalf("%s: got %q, want %q in any order", c.name, got, want)
	}
}

// A reload that changes the users checks every connected client with the
// credentials it connected with, as nats-server does: a changed password
// gets -ERR 'Authorization Violation' ("Authentication Failure"); a user
// removed, or moved to another account, is closed without a word
// ("Client Closed"); a user whose permissions changed stays, each
// subscription they no longer allow removed with an -ERR naming its sid;
// the others go on untouched.
func TestReloadUsers(t *testing.T) {
	before := `accounts {
  A { users: [
    {user: pw, password: old}
    {user: gone, password: g}
    {user: mover, password: m}
    {user: perms, password: p, permissions: {subscribe: ["foo.>", "bar", "baz"], publish: ">"}}
    {user: same, password: s}
  ] }
  B { users: [ {user: b, password: b} ] }
}
`
	after := `accounts {
  A { users: [
    {user: pw, password: new}
    {user: perms, password: p, permissions: {subscribe: {allow: [">"], deny: ["foo.>"]}, publish: {deny: "bar"}}}
    {user: same, password: s}
  ] }
  B { users: [ {user: b, password: b}, {user: mover, password: m} ] }
}
`
	for _, tg := range reloadServers(t, before) {
		t.Run(tg.name, func(t *testing.T) {
			pw := userConn(t, tg.url, "pw", "pw", "old")
			gone := userConn(t, tg.url, "gone", "gone", "g")
			mover := userConn(t, tg.url, "mover", "mover", "m")
			perms := userConn(t, tg.url, "perms", "perms", "p")
			perms.send("SUB foo.x 1\r\nSUB bar 2\r\nSUB foo.* q 3\r\nSUB baz 4\r\nPING\r\n")
			perms.expect("PONG\r\n")
			same := userConn(t, tg.url, "same", "same", "s")
			same.send("SUB foo.x 9\r\nPING\r\n")
			same.expect("PONG\r\n")

			tg.mustReload(t, after)
			pw.expectAuthViolation()
			gone.expectQuietClose()
			mover.expectQuietClose()
			perms.expectLines(
				"-ERR 'Permissions Violation for Subscription to \"foo.x\" (sid \"1\")'\r\n",
				"-ERR 'Permissions Violation for Subscription to \"foo.*\" using queue \"q\" (sid \"3\")'\r\n",
			)
			perms.sync()
			tg.waitReasons(t, map[string]string{"pw": "Authentication Failure", "gone": "Client Closed", "mover": "Client Closed"})

			// The new permissions are in force: the removed subscriptions
			// get nothing, the kept ones do, and a publish the new
			// permissions deny is refused.
			same.send("PUB foo.x 1\r\na\r\nPUB baz 1\r\nb\r\nPING\r\n")
			same.expect("MSG foo.x 9 1\r\na\r\nPONG\r\n")
			perms.expect("MSG baz 4 1\r\nb\r\n")
			perms.send("PUB bar 1\r\nc\r\nPING\r\n")
			perms.expectErr(`Permissions Violation for Publish to "bar"`)
			perms.expect("PONG\r\n")
			perms.send("SUB foo.y 5\r\nPING\r\n")
			perms.expectErr(`Permissions Violation for Subscription to "foo.y"`)
			perms.expect("PONG\r\n")

			// New connections meet the new users.
			rawConnect(t, tg.url, `{"verbose":false,"user":"pw","pass":"new"}`)
			c := rawConn(t, tg.url)
			c.send(`CONNECT {"verbose":false,"user":"pw","pass":"old"}` + "\r\n")
			c.expectAuthViolation()
		})
	}
}

// A single user, a token, and no authentication at all: nats-server's
// outcomes for each change between them. A client that sent a user name
// is closed without a word once that name is not in a table of users
// (the single user is not a table); a token or anonymous client is
// authenticated again.
func TestReloadAuthModes(t *testing.T) {
	cases := []struct {
		name          string
		before, after string
		connect       string // CONNECT of the client connected before
		verdict       string // "stays", "violation" or "quiet"
	}{
		{"single user, new password", "authorization { user: a, password: pa }\n", "authorization { user: a, password: pb }\n", `"user":"a","pass":"pa"`, "quiet"},
		{"single user to users", "authorization { user: a, password: pa }\n", "authorization { users: [{user: a, password: pa}] }\n", `"user":"a","pass":"pa"`, "stays"},
		{"users to none", "authorization { users: [{user: a, password: pa}] }\n", "", `"user":"a","pass":"pa"`, "quiet"},
		{"new token", "authorization { token: t1 }\n", "authorization { token: t2 }\n", `"auth_token":"t1"`, "violation"},
		{"token to none", "authorization { token: t1 }\n", "", `"auth_token":"t1"`, "stays"},
		{"none to users", "", "authorization { users: [{user: a, password: pa}] }\n", ``, "violation"},
		{"none to token", "", "authorization { token: t1 }\n", ``, "violation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, tg := range reloadServers(t, tc.before) {
				t.Run(tg.name, func(t *testing.T) {
					connect := `{"verbose":false,"name":"c"`
					if tc.connect != "" {
						connect += "," + tc.connect
					}
					c := liveConnect(t, tg.url, connect+"}")
					tg.mustReload(t, tc.after)
					switch tc.verdict {
					case "stays":
						// A PING answered after the reload's checks: the
						// client is still in.
						c.sync()
						c2 := rawConnect(t, tg.url, connect+"}")
						c2.sync()
						c.sync()
					case "violation":
						c.expectAuthViolation()
						tg.waitReasons(t, map[string]string{"c": "Authentication Failure"})
					case "quiet":
						c.expectQuietClose()
						tg.waitReasons(t, map[string]string{"c": "Client Closed"})
					}
				})
			}
		})
	}
}

// no_auth_user: a client that sent no credentials is checked as that
// user with the password it had: a new password closes it with an
// -ERR. Adding a no_auth_user, or changing it, is refused (the running
// configuration stays); removing it with its user closes its clients
// without a word.
func TestReloadNoAuthUser(t *testing.T) {
	users := "authorization { users: [{user: a, password: pa}, {user: b, password: pb}] }\n"
	for _, tg := range reloadServers(t, users+"no_auth_user: a\n") {
		t.Run(tg.name, func(t *testing.T) {
			anon := liveConnect(t, tg.url, `{"verbose":false,"name":"anon"}`)
			if err := tg.reload(t, users+"no_auth_user: b\n"); !strings.Contains(err, "config reload not supported for") {
				t.Fatalf("a new no_auth_user: %q", err)
			}
			anon.sync()
			tg.mustReload(t, "authorization { users: [{user: a, password: pa2}, {user: b, password: pb}] }\nno_auth_user: a\n")
			anon.expectAuthViolation()

			anon = liveConnect(t, tg.url, `{"verbose":false,"name":"anon2"}`)
			tg.mustReload(t, "authorization { users: [{user: b, password: pb}] }\n")
			anon.expectQuietClose()
			tg.waitReasons(t, map[string]string{"anon": "Authentication Failure", "anon2": "Client Closed"})
		})
	}
	for _, tg := range reloadServers(t, users) {
		t.Run(tg.name+"/added", func(t *testing.T) {
			if err := tg.reload(t, users+"no_auth_user: a\n"); !strings.Contains(err, "config reload not supported for") {
				t.Fatalf("an added no_auth_user: %q", err)
			}
			c := rawConn(t, tg.url)
			if c.info["auth_required"] != true {
				t.Fatalf("INFO after the refused reload: %s", c.infoLine)
			}
		})
	}
}

// nkey users are checked with the signature they connected with: an
// unchanged nkey user stays, one removed is closed without a word, one
// whose allowed connection types no longer include STANDARD gets an
// -ERR.
func TestReloadNkeys(t *testing.T) {
	keep, gone, typ := newNkeyUser(t), newNkeyUser(t), newNkeyUser(t)
	conf := func(users ...string) string {
		return "authorization { users: [\n" + strings.Join(users, "\n") + "\n] }\n"
	}
	nk := func(u nkeyUser) string { return fmt.Sprintf("{nkey: %s}", u.pub) }
	for _, tg := range reloadServers(t, conf(nk(keep), nk(gone), nk(typ))) {
		t.Run(tg.name, func(t *testing.T) {
			dial := func(u nkeyUser, name string) *rawClient {
				c := rawConn(t, tg.url)
				nonce, _ := c.info["nonce"].(string)
				c.handshake(fmt.Sprintf(`{"verbose":false,"protocol":1,"name":%q,"nkey":%q,"sig":%q}`, name, u.pub, u.sign(t, nonce)))
				c.answerPings = true
				return c
			}
			k, g, ty := dial(keep, "keep"), dial(gone, "gone"), dial(typ, "typ")
			tg.mustReload(t, conf(nk(keep), fmt.Sprintf(`{nkey: %s, allowed_connection_types: ["WEBSOCKET"]}`, typ.pub)))
			g.expectQuietClose()
			ty.expectAuthViolation()
			k.sync()
			tg.waitReasons(t, map[string]string{"gone": "Client Closed", "typ": "Authentication Failure"})
		})
	}
}

// tlsConn dials a TLS client the classic way and connects it, named
// name, answering the server's keep-alive PINGs.
func tlsConn(t *testing.T, u, name string, cfg *tls.Config) *rawClient {
	t.Helper()
	c, err := tlsDial(t, u, cfg)
	if err != nil {
		t.Fatalf("TLS client %s: %v", name, err)
	}
	c.send(fmt.Sprintf(`CONNECT {"verbose":false,"name":%q}`+"\r\nPING\r\n", name))
	c.expect("PONG\r\n")
	c.answerPings = true
	return c
}

// A reload reads the certificate files again, as nats-server does: a
// certificate replaced in place (the same file names) is the one new
// clients meet; the clients connected before keep their connections.
func TestReloadTLSCertificates(t *testing.T) {
	p1, p2 := newPKI(t), newPKI(t)
	cert, key := p1.server(t)
	conf := fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  timeout: 2\n}\n", cert, key)
	targets := reloadServers(t, conf)
	old := map[string]*rawClient{}
	for _, tg := range targets {
		old[tg.name] = tlsConn(t, tg.url, "old", p1.clientTLS())
		if _, err := tlsDial(t, tg.url, p2.clientTLS()); err == nil {
			t.Fatalf("%s: a client trusting only the second CA got in", tg.name)
		}
	}
	// Rotate: the second CA's certificate and key, in the same files.
	c2, k2 := p2.server(t)
	for src, dst := range map[string]string{c2: cert, k2: key} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			tg.mustReload(t, conf)
			tlsConn(t, tg.url, "new", p2.clientTLS())
			if _, err := tlsDial(t, tg.url, p1.clientTLS()); err == nil {
				t.Fatal("the first CA's certificate is still served")
			}
			old[tg.name].sync()
		})
	}
}

// New pinned_certs close the clients whose certificate they do not pin,
// without a word ("TLS Handshake Failure"), as nats-server's
// recheckPinnedCerts does; the pinned ones stay.
func TestReloadTLSPinnedCerts(t *testing.T) {
	p := newPKI(t)
	alice, apin := p.client(t, "alice", pkix.Name{CommonName: "alice"})
	bob, bpin := p.client(t, "bob", pkix.Name{CommonName: "bob"})
	conf := func(pins ...string) string {
		q := make([]string, len(pins))
		for i, s := range pins {
			q[i] = fmt.Sprintf("%q", s)
		}
		return tlsConf(p, t, "  verify: true\n  pinned_certs: ["+strings.Join(q, ", ")+"]\n")
	}
	for _, tg := range reloadServers(t, conf(apin, bpin)) {
		t.Run(tg.name, func(t *testing.T) {
			a := tlsConn(t, tg.url, "alice", p.clientTLS(alice))
			b := tlsConn(t, tg.url, "bob", p.clientTLS(bob))
			tg.mustReload(t, conf(apin))
			b.expectQuietClose()
			a.sync()
			tg.waitReasons(t, map[string]string{"bob": "TLS Handshake Failure"})
			// A new connection with the unpinned certificate fails its
			// handshake (the server may close it only once the client's
			// side of the handshake is done).
			if c, err := tlsDial(t, tg.url, p.clientTLS(bob)); err == nil {
				c.send("PING\r\n")
				if err := c.fill(time.Now().Add(readTimeout)); err == nil {
					t.Fatalf("an unpinned certificate got in: %q", c.pending)
				}
			}
		})
	}
}

// TLS turned on by a reload: new clients must use it (INFO tls_required),
// the plain clients connected before stay; turned off, new clients
// connect in plain text.
func TestReloadTLSOnOff(t *testing.T) {
	p := newPKI(t)
	for _, tg := range reloadServers(t, "") {
		t.Run(tg.name, func(t *testing.T) {
			plain := liveConnect(t, tg.url, `{"verbose":false,"name":"plain"}`)
			tg.mustReload(t, tlsConf(p, t, ""))
			if c := rawConn(t, tg.url); c.info["tls_required"] != true {
				t.Fatalf("INFO after TLS was turned on: %s", c.infoLine)
			}
			tlsConn(t, tg.url, "secure", p.clientTLS())
			plain.sync()
			tg.mustReload(t, "")
			c := rawConnect(t, tg.url, `{"verbose":false}`)
			if c.info["tls_required"] != nil {
				t.Fatalf("INFO after TLS was turned off: %s", c.infoLine)
			}
			plain.sync()
		})
	}
}

// verify_and_map cannot change at a reload (nats-server refuses it too):
// the reload is refused and the server keeps its TLS.
func TestReloadTLSVerifyAndMapRefused(t *testing.T) {
	p := newPKI(t)
	users := "authorization { users: [{user: \"alice@example.com\"}] }\n"
	for _, tg := range reloadServers(t, tlsConf(p, t, "  verify: true\n")+users) {
		t.Run(tg.name, func(t *testing.T) {
			if err := tg.reload(t, tlsConf(p, t, "  verify_and_map: true\n")+users); !strings.Contains(err, "config reload not supported for") {
				t.Fatalf("verify_and_map: %q", err)
			}
			if c := rawConn(t, tg.url); c.info["tls_verify"] != true {
				t.Fatalf("INFO after the refused reload: %s", c.infoLine)
			}
		})
	}
}

// Accounts added and removed by a reload: the clients of a removed
// account are closed without a word (their users went with it), the
// others stay; the users of an added account connect into it, isolated
// from the others.
func TestReloadAccountsAddRemove(t *testing.T) {
	before := "accounts {\n  A { users: [{user: a, password: a}] }\n  B { users: [{user: b, password: b}] }\n}\n"
	after := "accounts {\n  A { users: [{user: a, password: a}] }\n  C { users: [{user: c, password: c}] }\n}\n"
	for _, tg := range reloadServers(t, before) {
		t.Run(tg.name, func(t *testing.T) {
			a := userConn(t, tg.url, "a", "a", "a")
			a.send("SUB x 1\r\nPING\r\n")
			a.expect("PONG\r\n")
			b := userConn(t, tg.url, "b", "b", "b")
			tg.mustReload(t, after)
			b.expectQuietClose()
			tg.waitReasons(t, map[string]string{"b": "Client Closed"})
			c := userConn(t, tg.url, "c", "c", "c")
			c.send("SUB x 1\r\nPUB x 1\r\nc\r\nPING\r\n")
			c.expect("MSG x 1 1\r\nc\r\nPONG\r\n")
			a.send("PUB x 1\r\na\r\nPING\r\n")
			a.expect("MSG x 1 1\r\na\r\nPONG\r\n")
			c.sync() // nothing of A's reached C
			rb := rawConn(t, tg.url)
			rb.send(`CONNECT {"verbose":false,"user":"b","pass":"b"}` + "\r\n")
			rb.expectAuthViolation()
		})
	}
}

// Exports and imports changed by a reload: the stream an account imports
// is the new one at once, for the subscriptions made before; a service
// import added by the reload answers requests.
func TestReloadAccountImports(t *testing.T) {
	before := `accounts {
  A { users: [{user: a, password: a}], exports: [{stream: "s.>"}] }
  B { users: [{user: b, password: b}], imports: [{stream: {account: A, subject: "s.>"}}] }
}
`
	after := `accounts {
  A { users: [{user: a, password: a}], exports: [{stream: "t.>"}, {service: "svc"}] }
  B { users: [{user: b, password: b}], imports: [{stream: {account: A, subject: "t.>"}}, {service: {account: A, subject: "svc"}}] }
}
`
	for _, tg := range reloadServers(t, before) {
		t.Run(tg.name, func(t *testing.T) {
			a := userConn(t, tg.url, "a", "a", "a")
			b := userConn(t, tg.url, "b", "b", "b")
			b.send("SUB s.> 1\r\nSUB t.> 2\r\nSUB _INBOX.> 3\r\nPING\r\n")
			b.expect("PONG\r\n")
			a.send("PUB s.1 1\r\nx\r\nPING\r\n")
			a.expect("PONG\r\n")
			b.expect("MSG s.1 1 1\r\nx\r\n")

			tg.mustReload(t, after)
			a.send("SUB svc 7\r\nPUB s.1 1\r\nx\r\nPUB t.1 1\r\ny\r\nPING\r\n")
			a.expect("PONG\r\n")
			b.expect("MSG t.1 2 1\r\ny\r\n")
			b.send("PUB svc _INBOX.r 1\r\nq\r\nPING\r\n")
			b.expect("PONG\r\n")
			m := a.expectRe(`MSG svc 7 (\S+) 1\r\nq\r\n`)
			a.send("PUB " + m[1] + " 1\r\nr\r\nPING\r\n")
			a.expect("PONG\r\n")
			b.expect("MSG _INBOX.r 3 1\r\nr\r\n")
			b.sync() // and s.1 never came
		})
	}
}

// An account's limits lowered by a reload reach its connected clients: a
// client holding more subscriptions than it now may is closed with
// -ERR 'maximum subscriptions exceeded'; one above the new payload limit
// gets 'Maximum Payload Violation' at its next big publish; beyond the
// new max_connections, all but one client get 'maximum account active
// connections exceeded'.
func TestReloadAccountLimits(t *testing.T) {
	acc := func(limits string) string {
		return "accounts { A { users: [{user: a, password: a}], limits: {" + limits + "} } }\n"
	}
	for _, tg := range reloadServers(t, acc("max_subscriptions: 10")) {
		t.Run(tg.name+"/subscriptions", func(t *testing.T) {
			many := userConn(t, tg.url, "many", "a", "a")
			many.send("SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n")
			many.expect("PONG\r\n")
			tg.mustReload(t, acc("max_subscriptions: 2"))
			many.expectErr("maximum subscriptions exceeded")
			many.expectQuietClose()
			tg.waitReasons(t, map[string]string{"many": "Maximum Subscriptions Exceeded"})
		})
	}
	for _, tg := range reloadServers(t, acc("max_payload: 100")) {
		t.Run(tg.name+"/payload", func(t *testing.T) {
			c := userConn(t, tg.url, "c", "a", "a")
			tg.mustReload(t, acc("max_payload: 10"))
			c.sync()
			c.send("PUB x 5\r\nsmall\r\nPING\r\n")
			c.expect("PONG\r\n")
			c.send("PUB x 20\r\n01234567890123456789\r\n")
			c.expectErr("Maximum Payload Violation")
		})
	}
	for _, tg := range reloadServers(t, acc("max_connections: 5")) {
		t.Run(tg.name+"/connections", func(t *testing.T) {
			var cs []*rawClient
			for i := range 3 {
				cs = append(cs, userConn(t, tg.url, fmt.Sprint("c", i), "a", "a"))
			}
			tg.mustReload(t, acc("max_connections: 1"))
			refused := 0
			for _, c := range cs {
				c.send("PING\r\n")
				line := c.readLine()
				switch line {
				case "-ERR 'maximum account active connections exceeded'\r\n":
					refused++
				case "PONG\r\n":
				default:
					t.Fatalf("%s: %q", c.name, line)
				}
			}
			if refused != 2 {
				t.Fatalf("%d of 3 clients refused, want 2", refused)
			}
		})
	}
}

// On a JetStream server cairn applies an account's JetStream only at a
// restart: a reload that would turn it on for an account is refused with
// the reason (nats-server applies it: docs/compatibility.md), and the
// running configuration stays.
func TestReloadAccountJetStreamRefused(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("a deliberate difference: nats-server applies it")
	}
	store := t.TempDir()
	conf := fmt.Sprintf("jetstream { store_dir: %q }\naccounts { A { users: [{user: a, password: a}], jetstream: enabled } }\n", store)
	tg := reloadServers(t, conf)[0]
	added := strings.Replace(conf, "accounts {", "accounts {\n  B { users: [{user: b, password: b}], jetstream: enabled }\n", 1)
	err := tg.reload(t, added)
	if !strings.Contains(err, "config reload not supported for accounts: JetStream would be turned on for account B (cairn turns an account's JetStream on or off at start only; a change of its JetStream limits is applied)") {
		t.Fatalf("reload: %q", err)
	}
	c := rawConn(t, tg.url)
	c.send(`CONNECT {"verbose":false,"user":"b","pass":"b"}` + "\r\n")
	c.expectAuthViolation()
}

// A reload that changes an account's JetStream limits applies them, as
// nats-server does (jetstream.go UpdateJetStreamLimits), with the rest of
// the file: max_streams raised from 2 to 5 lets a third stream in, and the
// password rotated in the same reload is in force.
func TestReloadAccountJetStreamLimits(t *testing.T) {
	conf := func(store string, maxStreams int, pw string) string {
		return fmt.Sprintf("jetstream { store_dir: %q }\naccounts { ORDERS { users: [{user: o, password: %s}], jetstream { max_streams: %d } } }\n", store, pw, maxStreams)
	}
	type target struct {
		name, bin, store string
	}
	targets := []target{{"cairn", "", t.TempDir()}}
	if targetIsNatsServer() {
		targets[0] = target{"nats-server", natsServerBinary(t), t.TempDir()}
	} else {
		targets[0].bin = cairnBinary(t)
		if natsServerAvailable(t) {
			targets = append(targets, target{"nats-server", natsServerBinary(t), t.TempDir()})
		}
	}
	for _, tgt := range targets {
		t.Run(tgt.name, func(t *testing.T) {
			tg := startReloadTarget(t, tgt.name, tgt.bin, reloadHead, conf(tgt.store, 2, "old"))
			nc, err := nats.Connect(tg.url, nats.UserInfo("o", "old"))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
			defer cancel()
			add := func(name string) error {
				_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.MemoryStorage})
				return err
			}
			for _, s := range []string{"S1", "S2"} {
				if err := add(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := add("S3"); !strings.Contains(fmt.Sprint(err), "maximum number of streams reached") {
				t.Fatalf("third stream at max_streams 2: %v", err)
			}
			tg.mustReload(t, conf(tgt.store, 5, "new"))
			if _, err := nats.Connect(tg.url, nats.UserInfo("o", "old")); err == nil {
				t.Fatal("the old password still gets in")
			}
			nc2, err := nats.Connect(tg.url, nats.UserInfo("o", "new"))
			if err != nil {
				t.Fatalf("the new password: %v", err)
			}
			defer nc2.Close()
			if js, err = jetstream.New(nc2); err != nil {
				t.Fatal(err)
			}
			if err := add("S3"); err != nil {
				t.Fatalf("third stream at max_streams 5: %v", err)
			}
			info, err := js.AccountInfo(ctx)
			if err != nil || info.Limits.MaxStreams != 5 || info.Streams != 3 {
				t.Fatalf("account info %+v %v", info, err)
			}
		})
	}
}

// Operator mode: a reload of resolver_preload updates the accounts, and
// every client's user JWT is checked against its account's new JWT, as
// nats-server does: a user the account now revokes gets -ERR 'User
// Authentication Revoked' ("Credentials Revoked"); the users of an
// account no longer preloaded 'Authorization Violation'; a client holding
// more subscriptions than its account's new limit 'maximum subscriptions
// exceeded' (nats-server sends it twice); the others stay, and the users
// of an account the reload added get in. Another operator is refused.
func TestReloadOperatorAccounts(t *testing.T) {
	op, opPub := mustKP(t, nkeys.CreateOperator)
	accA, aPub := mustKP(t, nkeys.CreateAccount)
	accB, bPub := mustKP(t, nkeys.CreateAccount)
	accC, cPub := mustKP(t, nkeys.CreateAccount)
	_, sysPub := mustKP(t, nkeys.CreateAccount)
	encode := func(c interface {
		Encode(nkeys.KeyPair) (string, error)
	}, kp nkeys.KeyPair) string {
		t.Helper()
		s, err := c.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	oc := jwt.NewOperatorClaims(opPub)
	oc.SystemAccount = sysPub
	opJWT := encode(oc, op)
	revoked, revokedPub := mustKP(t, nkeys.CreateUser)
	many, manyPub := mustKP(t, nkeys.CreateUser)
	stays, staysPub := mustKP(t, nkeys.CreateUser)
	gone, gonePub := mustKP(t, nkeys.CreateUser)
	added, addedPub := mustKP(t, nkeys.CreateUser)
	conf := func(accounts ...string) string {
		s := fmt.Sprintf("operator: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n", opJWT, sysPub, encode(jwt.NewAccountClaims(sysPub), op))
		for i := 0; i < len(accounts); i += 2 {
			s += fmt.Sprintf("  %s: %s\n", accounts[i], accounts[i+1])
		}
		return s + "}\n"
	}
	a2 := jwt.NewAccountClaims(aPub)
	a2.RevokeAt(revokedPub, time.Now().Add(time.Minute))
	a2.Limits.Subs = 1
	before := conf(aPub, encode(jwt.NewAccountClaims(aPub), op), bPub, encode(jwt.NewAccountClaims(bPub), op))
	after := conf(aPub, encode(a2, op), cPub, encode(jwt.NewAccountClaims(cPub), op))
	for _, tg := range reloadServers(t, before) {
		t.Run(tg.name, func(t *testing.T) {
			dial := func(name string, acc, user nkeys.KeyPair, pub string) *rawClient {
				c := rawConn(t, tg.url)
				sig, _ := user.Sign([]byte(c.info["nonce"].(string)))
				c.send(fmt.Sprintf(`CONNECT {"verbose":false,"name":%q,"jwt":%q,"sig":%q}`+"\r\nPING\r\n",
					name, encode(jwt.NewUserClaims(pub), acc), base64.RawURLEncoding.EncodeToString(sig)))
				c.expect("PONG\r\n")
				c.answerPings = true
				return c
			}
			r := dial("revoked", accA, revoked, revokedPub)
			m := dial("many", accA, many, manyPub)
			m.send("SUB a 1\r\nSUB b 2\r\nPING\r\n")
			m.expect("PONG\r\n")
			s := dial("stays", accA, stays, staysPub)
			g := dial("gone", accB, gone, gonePub)

			if err := tg.reload(t, strings.Replace(before, opJWT, encode(jwt.NewOperatorClaims(opPub), op), 1)); !strings.Contains(err, "not support") {
				t.Fatalf("another operator JWT: %q", err)
			}
			tg.mustReload(t, after)
			r.expectErr("User Authentication Revoked")
			r.expectQuietClose()
			m.expectErr("maximum subscriptions exceeded")
			if got := m.waitClosed(readTimeout); got != "" && got != "-ERR 'maximum subscriptions exceeded'\r\n" {
				t.Fatalf("many: got %q before the close", got)
			}
			g.expectAuthViolation()
			s.sync()
			tg.waitReasons(t, map[string]string{"revoked": "Credentials Revoked", "many": "Maximum Subscriptions Exceeded", "gone": "Authentication Failure"})
			dial("added", accC, added, addedPub).sync()
		})
	}
}

// Reloads while clients publish and subscribe, in process (so the race
// detector watches the server): the permissions of a subscriber and an
// account's import change back and forth under traffic; the last
// configuration is the one in force.
func TestReloadSecurityUnderTraffic(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("drives cairn's ReloadSecurity in process")
	}
	conf := func(allow, export string) string {
		return fmt.Sprintf(`accounts {
  A { users: [{user: pub, password: p}, {user: sub, password: s, permissions: {subscribe: %q}}], exports: [{stream: %q}] }
  B { users: [{user: b, password: b}], imports: [{stream: {account: A, subject: %q}}] }
}
`, allow, export, export)
	}
	confs := []string{conf("s.>", "s.>"), conf("t.>", "s.x"), conf(">", "s.*")}
	tg := startCairnConf(t, confs[0], nil)
	pub := connect(t, tg.url, nats.UserInfo("pub", "p"))
	var mu sync.Mutex
	var errs []error
	sub := connect(t, tg.url, nats.UserInfo("sub", "s"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}))
	b := connect(t, tg.url, nats.UserInfo("b", "b"))
	if _, err := sub.Subscribe("s.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("s.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = pub.Publish(fmt.Sprintf("s.%d", i%3), []byte("x"))
		}
	}()
	reload := func(text string) {
		t.Helper()
		cfg := loadConf(t, writeTemp(t, text))
		if err := tg.srv.ReloadSecurity(server.SecurityOptions{Auth: cfg.Auth, Operator: cfg.Operator, TLS: cfg.TLS}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		reload(confs[i%len(confs)])
	}
	// The last configuration: the subscriber may no longer subscribe to
	// s.>, and B imports s.*.
	reload(conf("t.>", "s.*"))
	close(stop)
	<-done
	got, err := b.SubscribeSync("s.last")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("s.last", []byte("end")); err != nil {
		t.Fatal(err)
	}
	if m, err := got.NextMsg(readTimeout); err != nil || string(m.Data) != "end" {
		t.Fatalf("after the reloads: %v %v", m, err)
	}
	waitFor(t, readTimeout, "the subscriber's permission error", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range errs {
			if strings.Contains(e.Error(), `Permissions Violation for Subscription to "s.>"`) {
				return true
			}
		}
		return false
	})
}

// TLS clients are checked like the others: with verify_and_map, a
// reload that changes the permissions of the user a certificate maps to
// removes the subscription they no longer allow, and the TLS connection
// goes on (the check interrupts its read without harming it); a user
// removed closes its client without a word.
func TestReloadTLSMappedUsers(t *testing.T) {
	p := newPKI(t)
	alice, _ := p.client(t, "alice", pkix.Name{CommonName: "alice"}, "alice@example.com")
	bob, _ := p.client(t, "bob", pkix.Name{CommonName: "bob"}, "bob@example.com")
	users := func(alicePerms string, withBob bool) string {
		s := tlsConf(p, t, "  verify_and_map: true\n") + "authorization { users: [\n  {user: \"alice@example.com\", permissions: " + alicePerms + "}\n"
		if withBob {
			s += "  {user: \"bob@example.com\"}\n"
		}
		return s + "] }\n"
	}
	for _, tg := range reloadServers(t, users("{subscribe: \">\"}", true)) {
		t.Run(tg.name, func(t *testing.T) {
			a := tlsConn(t, tg.url, "alice", p.clientTLS(alice))
			a.send("SUB x 1\r\nSUB y 2\r\nPING\r\n")
			a.expect("PONG\r\n")
			b := tlsConn(t, tg.url, "bob", p.clientTLS(bob))
			tg.mustReload(t, users("{subscribe: \"y\"}", false))
			a.expectErr(`Permissions Violation for Subscription to "x" (sid "1")`)
			b.expectQuietClose()
			a.send("PUB x 1\r\n1\r\nPUB y 1\r\n2\r\nPING\r\n")
			a.expect("MSG y 2 1\r\n2\r\nPONG\r\n")
		})
	}
}

// authorization.timeout applies to the clients that connect after the
// reload; /varz reports it.
func TestReloadAuthTimeout(t *testing.T) {
	users := "authorization { timeout: 2, users: [{user: a, password: a}] }\n"
	for _, tg := range reloadServers(t, users) {
		t.Run(tg.name, func(t *testing.T) {
			c := userConn(t, tg.url, "c", "a", "a")
			tg.mustReload(t, strings.Replace(users, "timeout: 2", "timeout: 5", 1))
			_, body := monGet(t, tg.mon+"/varz")
			var v struct {
				AuthTimeout float64 `json:"auth_timeout"`
			}
			if err := json.Unmarshal(body, &v); err != nil || v.AuthTimeout != 5 {
				t.Fatalf("/varz auth_timeout %v (%v), want 5", v.AuthTimeout, err)
			}
			c.sync()
		})
	}
}

// What nats.go sees: a client whose password a reload changed gets
// nats.ErrAuthorization and cannot reconnect with its old credentials; a
// subscriber whose permission went gets the permissions violation in its
// error handler and stays connected.
func TestReloadNatsGoClients(t *testing.T) {
	before := "authorization { users: [{user: a, password: old}, {user: b, password: b, permissions: {subscribe: \">\"}}] }\n"
	after := "authorization { users: [{user: a, password: new}, {user: b, password: b, permissions: {subscribe: \"bar\"}}] }\n"
	for _, tg := range reloadServers(t, before) {
		t.Run(tg.name, func(t *testing.T) {
			errc := make(chan error, 16)
			closed := make(chan struct{})
			a, err := nats.Connect(tg.url, nats.UserInfo("a", "old"), nats.MaxReconnects(2), nats.ReconnectWait(10*time.Millisecond),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errc <- err }),
				nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			perm := make(chan error, 16)
			b := connect(t, tg.url, nats.UserInfo("b", "b"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { perm <- err }))
			if _, err := b.SubscribeSync("foo"); err != nil {
				t.Fatal(err)
			}
			if err := b.Flush(); err != nil {
				t.Fatal(err)
			}
			tg.mustReload(t, after)
			select {
			case err := <-errc:
				if !errors.Is(err, nats.ErrAuthorization) {
					t.Fatalf("a: %v, want %v", err, nats.ErrAuthorization)
				}
			case <-time.After(readTimeout):
				t.Fatal("a: no error after the reload")
			}
			select {
			case <-closed:
			case <-time.After(readTimeout):
				t.Fatal("a reconnected with its old password")
			}
			select {
			case err := <-perm:
				if !strings.Contains(err.Error(), `Permissions Violation for Subscription to "foo" (sid "1")`) {
					t.Fatalf("b: %v", err)
				}
			case <-time.After(readTimeout):
				t.Fatal("b: no permissions error after the reload")
			}
			if err := b.Flush(); err != nil {
				t.Fatalf("b after the reload: %v", err)
			}
		})
	}
}

// A client that has not sent its CONNECT yet, on a server without
// authentication, is checked too when a reload requires authentication:
// -ERR 'Authorization Violation', as nats-server checks every client.
func TestReloadClientWithoutConnect(t *testing.T) {
	for _, tg := range reloadServers(t, "") {
		t.Run(tg.name, func(t *testing.T) {
			c := rawConn(t, tg.url)
			c.answerPings = true
			tg.mustReload(t, "authorization { token: t }\n")
			c.expectAuthViolation()
		})
	}
}

// The HTTPS monitoring serves the certificate a reload read, as
// nats-server's does (its handshakes take the configuration in force).
func TestReloadHTTPSMonitorCertificate(t *testing.T) {
	p1, p2 := newPKI(t), newPKI(t)
	cert, key := p1.server(t)
	conf := fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n}\n", cert, key)
	targets := reloadServersHead(t, "listen: 127.0.0.1:-1\nhttps_port: -1\n", conf)
	get := func(tg *reloadTarget, p *testPKI) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool}}, Timeout: readTimeout}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(strings.Replace(tg.mon, "http://", "https://", 1) + "/varz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, tg := range targets {
		if err := get(tg, p1); err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
	}
	c2, k2 := p2.server(t)
	for src, dst := range map[string]string{c2: cert, k2: key} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			tg.mustReload(t, conf)
			if err := get(tg, p2); err != nil {
				t.Fatalf("the new certificate: %v", err)
			}
			if err := get(tg, p1); err == nil {
				t.Fatal("the old certificate is still served")
			}
		})
	}
}

// cairnBinary builds cmd/cairn once per test run and returns its path.
func cairnBinary(t *testing.T) string {
	t.Helper()
	cairnBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cairn-reload-test")
		if err != nil {
			t.Fatal(err)
		}
		cairnBinPath = filepath.Join(dir, "cairn")
		if out, err := exec.Command("go", "build", "-o", cairnBinPath, "github.com/cairnmq/cairn/cmd/cairn").CombinedOutput(); err != nil {
			t.Fatalf("go build cmd/cairn: %v\n%s", err, out)
		}
	})
	return cairnBinPath
}

// With the MEMORY resolver, an account JWT pushed while the server runs
// ($SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE) lasts until the next reload,
// which puts the preloaded JWTs back even when the file did not change,
// as nats-server v2.15.2 does (reload.go: the resolver is configured
// again from the file and every account takes its JWT from it, logged as
// "Reloaded: accounts"); the connected clients are checked against the
// restored JWTs: the preload revokes x, the pushed JWT revoked u instead.
func TestReloadMemoryResolverRestoresPreloads(t *testing.T) {
	op, opPub := mustKP(t, nkeys.CreateOperator)
	accA, aPub := mustKP(t, nkeys.CreateAccount)
	sys, sysPub := mustKP(t, nkeys.CreateAccount)
	u, uPub := mustKP(t, nkeys.CreateUser)
	x, xPub := mustKP(t, nkeys.CreateUser)
	admin, adminPub := mustKP(t, nkeys.CreateUser)
	encode := func(c interface {
		Encode(nkeys.KeyPair) (string, error)
	}, kp nkeys.KeyPair) string {
		t.Helper()
		s, err := c.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	oc := jwt.NewOperatorClaims(opPub)
	oc.SystemAccount = sysPub
	preload := jwt.NewAccountClaims(aPub)
	preload.RevokeAt(xPub, time.Now().Add(time.Minute))
	conf := fmt.Sprintf("operator: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n}\n",
		encode(oc, op), sysPub, encode(jwt.NewAccountClaims(sysPub), op), aPub, encode(preload, op))
	pushed := jwt.NewAccountClaims(aPub)
	pushed.RevokeAt(uPub, time.Now().Add(time.Minute))
	pushedJWT := encode(pushed, op)
	adminCreds := creds(t, encode(jwt.NewUserClaims(adminPub), sys), admin)
	for _, tg := range reloadServers(t, conf) {
		t.Run(tg.name, func(t *testing.T) {
			dial := func(name string, user nkeys.KeyPair, pub string) *rawClient {
				c := rawConn(t, tg.url)
				sig, _ := user.Sign([]byte(c.info["nonce"].(string)))
				c.send(fmt.Sprintf(`CONNECT {"verbose":false,"name":%q,"jwt":%q,"sig":%q}`+"\r\nPING\r\n",
					name, encode(jwt.NewUserClaims(pub), accA), base64.RawURLEncoding.EncodeToString(sig)))
				return c
			}
			uc := dial("u", u, uPub)
			uc.expect("PONG\r\n")
			uc.answerPings = true
			dial("x", x, xPub).expectAuthViolation()

			nc, err := nats.Connect(tg.url, nats.UserCredentials(adminCreds))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			m, err := nc.Request("$SYS.REQ.ACCOUNT."+aPub+".CLAIMS.UPDATE", []byte(pushedJWT), readTimeout)
			if err != nil || !strings.Contains(string(m.Data), "jwt updated") {
				t.Fatalf("push: %v %v", m, err)
			}
			uc.expectErr("User Authentication Revoked")
			uc.expectQuietClose()
			dial("u", u, uPub).expectAuthViolation()
			xc := dial("x", x, xPub)
			xc.expect("PONG\r\n")
			xc.answerPings = true

			tg.mustReload(t, conf) // the same file
			if !strings.Contains(tg.p.log.String(), "Reloaded: accounts") {
				t.Errorf("%s logged no %q:\n%s", tg.name, "Reloaded: accounts", tg.p.log.String())
			}
			xc.expectErr("User Authentication Revoked")
			xc.expectQuietClose()
			dial("u", u, uPub).expect("PONG\r\n")
			dial("x", x, xPub).expectAuthViolation()
		})
	}
}
