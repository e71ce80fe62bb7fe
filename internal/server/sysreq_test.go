package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
)

// sysOptions are a server with a system account SYS (user sys) and an
// account APP (user app).
func sysOptions() Options {
	return Options{
		Host: "127.0.0.1", Port: RandomPort,
		Auth: config.Auth{
			Users: []config.User{
				{Name: "sys", Password: "sys", Account: "SYS"},
				{Name: "app", Password: "app", Account: "APP"},
			},
			Accounts: []config.Account{{Name: "SYS"}, {Name: "APP"}},
		},
		Operator: config.Operator{SystemAccount: "SYS"},
	}
}

func startWith(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// dialAs connects with the user's credentials (none when user is "")
// and returns the connection and the connect_info INFO that follows the
// first PONG.
func dialAs(t *testing.T, s *Server, user string) (*testConn, string) {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	tc := &testConn{t: t, nc: nc}
	tc.r = bufio.NewReader(nc)
	tc.line() // INFO
	creds := ""
	if user != "" {
		creds = fmt.Sprintf(`,"user":%q,"pass":%q`, user, user)
	}
	tc.send(`CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true` + creds + "}\r\nPING\r\n")
	tc.expect("PONG\r\n")
	return tc, tc.line()
}

// The users of the system account, and only they, get the server's
// answers on $SYS.REQ.SERVER.PING[.<X>] and $SYS.REQ.SERVER.<id>.<X>;
// a request for another server's id, or one the handler declines, gets
// nothing from this server (nats-server v2.15.2 events.go).
func TestSystemRequests(t *testing.T) {
	s := startWith(t, sysOptions())
	if s.SystemAccount() != "SYS" {
		t.Fatalf("system account %q", s.SystemAccount())
	}
	var calls atomic.Int32
	err := s.ServeSystemRequests(func(subj string, body []byte) ([]byte, bool) {
		calls.Add(1)
		if string(body) == "quiet" {
			return nil, false
		}
		return []byte(subj + "|" + string(body)), true
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ServeSystemRequests(func(string, []byte) ([]byte, bool) { return nil, false }); !errors.Is(err, ErrAlreadyServing) {
		t.Fatalf("second call: %v", err)
	}

	sys, info := dialAs(t, s, "sys")
	if !strings.Contains(info, `"remote_account":"SYS","acc_is_sys":true`) {
		t.Fatalf("connect_info INFO of a system account user: %s", info)
	}
	sys.send("SUB _INBOX.sys 1\r\n")
	for _, subj := range []string{"$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.VARZ", "$SYS.REQ.SERVER." + s.ID() + ".JSZ"} {
		sys.send(fmt.Sprintf("PUB %s _INBOX.sys 2\r\n{}\r\n", subj))
		want := subj + "|{}"
		sys.expect(fmt.Sprintf("MSG _INBOX.sys 1 %d\r\n%s\r\n", len(want), want))
	}
	// Another server's id finds no responder here; a declined request
	// gets nothing; then one answered: its answer comes next.
	sys.send("PUB $SYS.REQ.SERVER.NOTME.VARZ _INBOX.sys 2\r\n{}\r\n")
	sys.expect("HMSG _INBOX.sys 1 58 58\r\nNATS/1.0 503\r\nNats-Subject: $SYS.REQ.SERVER.NOTME.VARZ\r\n\r\n\r\n")
	big := strings.Repeat("x", sysRequestMaxBody+1) // dropped unread: no answer
	sys.send(fmt.Sprintf("PUB $SYS.REQ.SERVER.PING.VARZ _INBOX.sys %d\r\n%s\r\n", len(big), big))
	sys.send("PUB $SYS.REQ.SERVER.PING.VARZ _INBOX.sys 5\r\nquiet\r\nPUB $SYS.REQ.SERVER.PING.IDZ _INBOX.sys 0\r\n\r\n")
	want := "$SYS.REQ.SERVER.PING.IDZ|"
	sys.expect(fmt.Sprintf("MSG _INBOX.sys 1 %d\r\n%s\r\n", len(want), want))

	app, info := dialAs(t, s, "app")
	if strings.Contains(info, "acc_is_sys") || !strings.Contains(info, `"remote_account":"APP"`) {
		t.Fatalf("connect_info INFO of another account's user: %s", info)
	}
	app.send("SUB _INBOX.app 1\r\nPUB $SYS.REQ.SERVER.PING _INBOX.app 0\r\n\r\n")
	app.expect("HMSG _INBOX.app 1 52 52\r\nNATS/1.0 503\r\nNats-Subject: $SYS.REQ.SERVER.PING\r\n\r\n\r\n")
	if n := calls.Load(); n != 5 {
		t.Fatalf("handler called %d times, want 5 (not for another server's id nor another account)", n)
	}
}

// Without a system account there is nothing to serve.
func TestSystemRequestsWithoutSystemAccount(t *testing.T) {
	s := startWith(t, Options{Host: "127.0.0.1", Port: RandomPort, Auth: config.Auth{NoSystemAccount: true}})
	if s.SystemAccount() != "" {
		t.Fatalf("system account %q", s.SystemAccount())
	}
	if err := s.ServeSystemRequests(func(string, []byte) ([]byte, bool) { return nil, false }); !errors.Is(err, ErrNoSystemAccount) {
		t.Fatalf("got %v", err)
	}
}

// The default system account $SYS exists with no users; the global
// account keeps JetStream when it is the only other account.
func TestDefaultSystemAccount(t *testing.T) {
	s := startWith(t, Options{Host: "127.0.0.1", Port: RandomPort})
	var names []string
	for _, a := range s.Accounts() {
		names = append(names, fmt.Sprintf("%s/%v", a.Name, a.System))
	}
	if got := strings.Join(names, " "); got != "$G/false $SYS/true" {
		t.Fatalf("accounts %s", got)
	}
	if !s.gacc.jsGlobal || s.sysacc.jsGlobal {
		t.Fatal("JetStream: $G should have it, $SYS not")
	}
	o := sysOptions()
	o.Auth.Accounts = o.Auth.Accounts[:1]
	o.Auth.Users = o.Auth.Users[:1]
	if s := startWith(t, o); !s.gacc.jsGlobal {
		t.Fatal("with the system account as the only account, $G should have JetStream (nats-server globalAccountOnly)")
	}
}

// The system account must exist and may not have JetStream.
func TestSystemAccountErrors(t *testing.T) {
	o := sysOptions()
	o.Operator.SystemAccount = "NOPE"
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "error resolving system account: account missing") {
		t.Fatalf("missing system account: %v", err)
	}
	o = sysOptions()
	o.JetStream, o.StoreDir = true, t.TempDir()
	o.Auth.Accounts[0].JetStream = &config.AccountJetStream{MaxMemory: -1, MaxStore: -1}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "Not allowed to enable JetStream on the system account") {
		t.Fatalf("system account with JetStream: %v", err)
	}
}

// With the system account as the only account and no authorization
// block, a client sending no credentials joins $G, as nats-server
// v2.15.2 lets it (configureAccounts' implicit no_auth_user), while the
// INFO still says auth_required; the system user still logs in.
func TestSystemAccountOnlyLetsAnonymousIntoGlobal(t *testing.T) {
	o := sysOptions()
	o.Auth.Accounts = o.Auth.Accounts[:1]
	o.Auth.Users = o.Auth.Users[:1]
	h, err := bcrypt.GenerateFromPassword([]byte("sys"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	o.Auth.Users[0].Password = string(h)
	s := startWith(t, o)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tc := &testConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	if info := tc.line(); !strings.Contains(info, `"auth_required":true`) {
		t.Fatalf("INFO %s", info)
	}
	tc.send("CONNECT {\"verbose\":false,\"protocol\":1}\r\nPING\r\n")
	tc.expect("PONG\r\n")
	if info := tc.line(); !strings.Contains(info, `"remote_account":"$G"`) {
		t.Fatalf("connect_info INFO %s", info)
	}
	if _, info := dialAs(t, s, "sys"); !strings.Contains(info, `"acc_is_sys":true`) {
		t.Fatalf("system user: %s", info)
	}
	// Nobody logs in as the implicit user, with any password.
	var implicit string
	for _, u := range s.Connections(false) {
		if u.Account == "$G" {
			implicit = u.User
		}
	}
	if !strings.HasPrefix(implicit, "nats-") {
		t.Fatalf("anonymous client's user %q", implicit)
	}
	for _, pass := range []string{"", "$2a$04$", implicit[6:], "x"} {
		if _, ok := s.security().dir.Authenticate(&auth.Credentials{User: implicit, Pass: pass, ConnType: config.ConnectionTypeStandard}); ok {
			t.Fatalf("logged in as the implicit user with password %q", pass)
		}
	}
	if s.security().dir.PlaintextPasswords() {
		t.Fatal("the implicit user counts as a plaintext password")
	}
}

// A PROFILEZ request (a CPU profile takes seconds) is answered on its own
// goroutine: the requests queued after it are answered meanwhile.
func TestSystemProfilezDoesNotHoldOtherRequests(t *testing.T) {
	s := startWith(t, sysOptions())
	release := make(chan struct{})
	err := s.ServeSystemRequests(func(subj string, body []byte) ([]byte, bool) {
		if strings.HasSuffix(subj, ".PROFILEZ") {
			<-release
		}
		return []byte(subj), true
	})
	if err != nil {
		t.Fatal(err)
	}
	sys, _ := dialAs(t, s, "sys")
	sys.send("SUB _INBOX.sys 1\r\nPUB $SYS.REQ.SERVER.PING.PROFILEZ _INBOX.sys 0\r\n\r\nPUB $SYS.REQ.SERVER.PING.VARZ _INBOX.sys 0\r\n\r\n")
	want := "$SYS.REQ.SERVER.PING.VARZ"
	sys.expect(fmt.Sprintf("MSG _INBOX.sys 1 %d\r\n%s\r\n", len(want), want))
	close(release)
	want = "$SYS.REQ.SERVER.PING.PROFILEZ"
	sys.expect(fmt.Sprintf("MSG _INBOX.sys 1 %d\r\n%s\r\n", len(want), want))
}

// The INFO that follows CONNECT says auth_required as the first one does
// (nats-server's copies of its server info carry it; checked with v2.15.2).
func TestConnectInfoSaysAuthRequired(t *testing.T) {
	s := startWith(t, sysOptions())
	_, info := dialAs(t, s, "app")
	if !strings.Contains(info, `"auth_required":true`) || !strings.Contains(info, `"connect_info":true`) {
		t.Fatalf("connect_info INFO: %s", info)
	}
}
