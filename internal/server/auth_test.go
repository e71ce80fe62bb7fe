package server

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/logger"
)

// A CONNECT's secrets never reach a trace line, whatever the case of
// their keys (Go's JSON decoding ignores it) or the shape of the line.
func TestRedactConnect(t *testing.T) {
	for in, want := range map[string]string{
		`{"verbose":false}`:                       `{"verbose":false}`,
		`{"user":"u","pass":"hunter2"}`:           `{"pass":"[REDACTED]","user":"u"}`,
		`{"PASS":"hunter2","Auth_Token":"t0k3n"}`: `{"Auth_Token":"[REDACTED]","PASS":"[REDACTED]"}`,
		`{"sig":"abc","jwt":"eyJ","nkey":"UABC"}`: `{"jwt":"[REDACTED]","nkey":"UABC","sig":"[REDACTED]"}`,
		`{"pass":"hunter2"`:                       `[REDACTED: 17 bytes that are not a JSON object]`,
		`garbage`:                                 `garbage`,
	} {
		if got := string(redactConnect([]byte(in))); got != want {
			t.Errorf("redactConnect(%s) = %s, want %s", in, got, want)
		}
	}
}

// A failed authentication is logged as nats-server v2.15.2 logs it
// (client.go authViolation, getAuthUser): who the CONNECT claimed to be,
// its nkey first, never the password or token, also with tracing on.
func TestAuthFailureLogHasNoSecret(t *testing.T) {
	const nkey = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"
	users := config.Auth{Users: []config.User{{Name: "bob", Password: "right-pw"}, {Nkey: nkey}}}
	for _, tc := range []struct {
		auth    config.Auth
		connect string
		want    string
	}{
		{users, `{"user":"bob","pass":"wrong-pw"}`, `authentication error - User "bob"` + "\n"},
		{users, `{"nkey":"` + nkey + `","sig":"AAAA"}`, `authentication error - Nkey "` + nkey + `"` + "\n"},
		{users, `{"nkey":"` + nkey + `","user":"bob","pass":"wrong-pw"}`, `authentication error - Nkey "` + nkey + `"` + "\n"},
		{users, `{"jwt":"eyJ0eXAiOiJKV1QifQ.e30.","sig":"AAAA"}`, "authentication error\n"},
		{config.Auth{Token: "right-pw"}, `{"auth_token":"wrong-pw"}`, `authentication error - Token "[REDACTED]"` + "\n"},
	} {
		log := failedAuthLog(t, tc.auth, tc.connect, tc.want)
		if strings.Contains(log, "wrong-pw") || strings.Contains(log, "right-pw") {
			t.Fatalf("a secret in the log:\n%s", log)
		}
	}
}

// failedAuthLog starts a server with a, sends the CONNECT (refused) and
// returns the server's log once it holds want.
func failedAuthLog(t *testing.T, a config.Auth, connect, want string) string {
	t.Helper()
	var out syncWriter
	s, err := New(Options{Host: "127.0.0.1", Port: RandomPort, Logger: logger.New(&out, true, true), Auth: a})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte("CONNECT " + connect + "\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	if line, _ := r.ReadString('\n'); line != "-ERR 'Authorization Violation'\r\n" {
		t.Fatalf("%s: got %q", connect, line)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %q in the log:\n%s", connect, want, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out.String()
}

// FuzzConnectAuth feeds arbitrary CONNECT arguments through the decoding
// and the authentication a client gets before anything else (nats-server
// CVE-2020-26521 and 2026-23 were pre-auth panics): nothing panics, and
// nothing but the right password gets in.
func FuzzConnectAuth(f *testing.F) {
	f.Add([]byte(`{"user":"bob","pass":"right-pw"}`))
	f.Add([]byte(`{"nkey":"UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4","sig":"AAAA"}`))
	f.Add([]byte(`{"auth_token":"x","jwt":"eyJ0eXAiOiJKV1QifQ.e30.","account":"$SYS"}`))
	f.Add([]byte(`{"PASS":"right-pw","User":"bob"}`))
	dir := auth.NewDirectory(&config.Auth{Users: []config.User{
		{Name: "bob", Password: "right-pw"},
		{Nkey: "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"},
	}}, false)
	nonce := auth.NewNonce()
	f.Fuzz(func(t *testing.T, arg []byte) {
		opts, err := parseConnect(arg, connectOpts{Verbose: true})
		_ = redactConnect(arg)
		if err != nil {
			return
		}
		c := &client{nonce: nonce}
		u, ok := dir.Authenticate(c.credentials(&opts))
		if ok && (u.Name != "bob" || opts.Pass != "right-pw") {
			t.Fatalf("%q authenticated as %+v", arg, u)
		}
	})
}
