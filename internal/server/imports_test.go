package server

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

// importOptions are a server where account B (user b) imports the
// service "svc" of account A (user a).
func importOptions() Options {
	return Options{
		Host: "127.0.0.1", Port: RandomPort,
		Auth: config.Auth{
			Users: []config.User{
				{Name: "a", Password: "a", Account: "A"},
				{Name: "b", Password: "b", Account: "B"},
			},
			Accounts: []config.Account{
				{Name: "A", Exports: []config.Export{{Service: true, Subject: "svc"}}},
				{Name: "B", Imports: []config.Import{{Service: true, Account: "A", Subject: "svc"}}},
			},
		},
	}
}

func pendingResponses(acc *account) int {
	acc.imp.mu.Lock()
	defer acc.imp.mu.Unlock()
	return len(acc.imp.pending)
}

// A request that nothing in the exporter receives gets the
// no-responders status and leaves no pending response behind; one a
// responder receives keeps its pending response until answered.
func TestServiceImportUndeliveredForgetsResponse(t *testing.T) {
	s := startWith(t, importOptions())
	exporter := s.account("A")
	b, _ := dialAs(t, s, "b")
	b.send("SUB _INBOX.b 1\r\nPUB svc _INBOX.b 2\r\nhi\r\n")
	b.expect("HMSG _INBOX.b 1 35 35\r\nNATS/1.0 503\r\nNats-Subject: svc\r\n\r\n\r\n")
	if n := pendingResponses(exporter); n != 0 {
		t.Fatalf("%d pending responses after an undelivered request, want 0", n)
	}

	a, _ := dialAs(t, s, "a")
	a.send("SUB svc 1\r\nPING\r\n")
	a.expect("PONG\r\n")
	b.send("PUB svc _INBOX.b 2\r\nhi\r\n")
	if l := a.line(); len(l) < 5 || l[:5] != "HMSG " {
		t.Fatalf("responder got %q", l)
	}
	deadline := time.Now().Add(5 * time.Second)
	for pendingResponses(exporter) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pending responses after a delivered request, want 1", pendingResponses(exporter))
		}
		time.Sleep(time.Millisecond)
	}
}
