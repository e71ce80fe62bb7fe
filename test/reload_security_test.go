package test

import (
	"encoding/json"
	"fmt"
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
	name, bin := "cairn", ""
	if targetIsNatsServer() {
		name, bin = "nats-server", natsServerBinary(t)
	} else {
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
		bin = cairnBinPath
	}
	out := []*reloadTarget{startReloadTarget(t, name, bin, conf)}
	if natsServerAvailable(t) {
		out = append(out, startReloadTarget(t, "nats-server", natsServerBinary(t), conf))
	}
	return out
}

func startReloadTarget(t *testing.T, name, bin, conf string) *reloadTarget {
	t.Helper()
	tg := &reloadTarget{name: name, path: filepath.Join(t.TempDir(), "server.conf")}
	tg.write(t, conf)
	tg.p = startProc(t, bin, nil, "-c", tg.path)
	tg.url = tg.p.clientURL(t)
	re := regexp.MustCompile(`Starting http monitor on (\S+)`)
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
	if err := os.WriteFile(tg.path, []byte(reloadHead+conf), 0o600); err != nil {
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
