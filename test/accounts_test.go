package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
)

// Accounts (docs/security.md, "Accounts"): the same file against
// cairn and nats-server v2.15.2.

func accountsConf(storeDir string) string {
	return fmt.Sprintf(`
jetstream { store_dir: %q }
accounts {
  A {
    users = [ { user: a, password: p } ]
    jetstream: enabled
    exports = [ { stream: "events.>" }, { service: help }, { service: "private", accounts: [C] } ]
  }
  B {
    users = [ { user: b, password: p } ]
    jetstream { max_streams: 1, max_consumers: 1 }
    imports = [
      { stream: { account: A, subject: "events.>" }, prefix: from_a }
      { service: { account: A, subject: help }, to: ask }
    ]
  }
  C { users = [ { user: c, password: p } ] }
}
`, storeDir)
}

// A message published in one account reaches only that account's
// subscribers; CONNECT's INFO names the account.
func TestAccountsIsolation(t *testing.T) {
	forEach(t, secTargets(t, accountsConf(t.TempDir()), nil), func(t *testing.T, tg secTarget) {
		a := login(t, tg.url, "a")
		b := login(t, tg.url, "b")
		a.send("SUB foo 1\r\n")
		a.sync()
		b.send("SUB foo 1\r\nPUB foo 2\r\nb1\r\n")
		b.expect("MSG foo 1 2\r\nb1\r\n")
		a.send("PUB foo 2\r\na1\r\n")
		a.expect("MSG foo 1 2\r\na1\r\n")
		a.sync()
		b.sync()

		c := rawConn(t, tg.url)
		c.send(`CONNECT {"verbose":false,"protocol":1,"user":"c","pass":"p"}` + "\r\nPING\r\n")
		c.expect("PONG\r\n")
		if _, info := c.expectInfo(); info["remote_account"] != "C" {
			t.Errorf("connect INFO %v", info)
		}
	})
}

// A stream import delivers the exporter's messages under the prefix; a
// service import carries a request into the exporter and its response
// back.
func TestAccountsImports(t *testing.T) {
	forEach(t, secTargets(t, accountsConf(t.TempDir()), nil), func(t *testing.T, tg secTarget) {
		a := login(t, tg.url, "a")
		b := login(t, tg.url, "b")
		b.send("SUB from_a.> 1\r\nSUB events.> 2\r\n")
		b.sync()
		a.send("PUB events.created 3\r\nnew\r\n")
		a.sync()
		b.expect("MSG from_a.events.created 1 3\r\nnew\r\n")
		b.sync()

		a.send("SUB help 7\r\n")
		a.sync()
		b.send("SUB _INBOX.b 9\r\nPUB ask _INBOX.b 4\r\nhelp\r\n")
		// The request carries who sent it into A (Nats-Request-Info, set
		// by the server), and a reply subject of A's.
		m := a.expectRe(`HMSG help 7 (_R_\.\S+) \d+ \d+\r\nNATS/1.0\r\nNats-Request-Info: \{"acc":"B","rtt":\d+\}\r\n\r\nhelp\r\n`)
		a.send("PUB " + m[1] + " 4\r\nsure\r\nPUB " + m[1] + " 5\r\nagain\r\n")
		a.sync()
		b.expect("MSG _INBOX.b 9 4\r\nsure\r\n")
		b.sync() // a single response: the second never arrives

		nc, err := nats.Connect(tg.url, nats.UserInfo("b", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		na, err := nats.Connect(tg.url, nats.UserInfo("a", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer na.Close()
		if _, err := na.Subscribe("help", func(m *nats.Msg) { _ = m.Respond([]byte("from A: " + string(m.Data))) }); err != nil {
			t.Fatal(err)
		}
		_ = na.Flush()
		resp, err := nc.Request("ask", []byte("q"), readTimeout)
		if err != nil || string(resp.Data) != "from A: q" {
			t.Fatalf("request through the import: %v %v", resp, err)
		}
	})
}

// JetStream is per account: an account sees only its own streams, its
// limits apply, and an account without JetStream gets 10039 with
// nats-server's exact bytes; streams are stored under
// <store_dir>/jetstream/<account>/streams.
func TestAccountsJetStream(t *testing.T) {
	for _, name := range []string{"cairn", "nats-server"} {
		t.Run(name, func(t *testing.T) {
			store := t.TempDir()
			targets := secTargets(t, accountsConf(store), nil)
			var tg secTarget
			for _, x := range targets {
				if x.name == name {
					tg = x
				}
			}
			if tg.url == "" {
				t.Skip("nats-server not installed")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn := func(user string) jetstream.JetStream {
				nc, err := nats.Connect(tg.url, nats.UserInfo(user, "p"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(nc.Close)
				js, _ := jetstream.New(nc)
				return js
			}
			ja, jb, jc := conn("a"), conn("b"), conn("c")
			if _, err := ja.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := jb.Stream(ctx, "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Fatalf("B sees A's stream: %v", err)
			}
			if _, err := jb.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
				t.Fatalf("B's own ORDERS: %v", err)
			}
			_, err := jb.CreateStream(ctx, jetstream.StreamConfig{Name: "SECOND", Subjects: []string{"second"}})
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10027 {
				t.Fatalf("B's second stream: %v, want 10027", err)
			}
			if _, err := jb.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "one"}); err != nil {
				t.Fatal(err)
			}
			_, err = jb.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "two"})
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10026 {
				t.Fatalf("B's second consumer: %v, want 10026", err)
			}
			if _, err := jc.AccountInfo(ctx); !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
				t.Fatalf("C: %v", err)
			}
			for _, acc := range []string{"A", "B"} {
				if _, err := os.Stat(filepath.Join(tg.storeDir, "jetstream", acc, "streams", "ORDERS")); err != nil {
					t.Errorf("stream ORDERS of %s: %v", acc, err)
				}
			}
		})
	}
}

// An account without JetStream gets nats-server's exact answers.
func TestAccountsJetStreamDisabledBytes(t *testing.T) {
	forEach(t, secTargets(t, accountsConf(t.TempDir()), nil), func(t *testing.T, tg secTarget) {
		c := login(t, tg.url, "c")
		c.send("SUB _INBOX.c 1\r\n")
		for subj, want := range map[string]string{
			"$JS.API.INFO":              `{"type":"io.nats.jetstream.api.v1.account_info_response","error":{"code":503,"err_code":10039,"description":"JetStream not enabled for account"}}`,
			"$JS.API.STREAM.NAMES":      `{"type":"io.nats.jetstream.api.v1.stream_names_response","error":{"code":503,"err_code":10039,"description":"JetStream not enabled for account"},"total":0,"offset":0,"limit":0,"streams":null}`,
			"$JS.API.STREAM.INFO.X":     `{"type":"io.nats.jetstream.api.v1.stream_info_response","error":{"code":503,"err_code":10039,"description":"JetStream not enabled for account"},"total":0,"offset":0,"limit":0}`,
			"$JS.API.CONSUMER.LIST.X":   `{"type":"io.nats.jetstream.api.v1.consumer_list_response","error":{"code":503,"err_code":10039,"description":"JetStream not enabled for account"},"total":0,"offset":0,"limit":0,"consumers":[]}`,
			"$JS.API.STREAM.CREATE.X":   `{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":503,"err_code":10039,"description":"JetStream not enabled for account"}}`,
			"$JS.API.CONSUMER.CREATE.X": `{"type":"io.nats.jetstream.api.v1.consumer_create_response","error":{"code":503,"err_code":10039,"description":"JetStream not enabled for account"}}`,
		} {
			c.send("PUB " + subj + " _INBOX.c 0\r\n\r\n")
			c.expect(fmt.Sprintf("MSG _INBOX.c 1 %d\r\n%s\r\n", len(want), want))
		}
		c.sync()
	})
}

// Routes carry the account: a subscriber of A on one server gets A's
// messages published on another, and not B's on the same subject; a
// stream import works across the servers. cairn only (the cluster
// harness writes no accounts for nats-server).
func TestAccountsAcrossRoutes(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("the cluster harness writes no accounts for nats-server")
	}
	path := filepath.Join(t.TempDir(), "acc.conf")
	if err := os.WriteFile(path, []byte(accountsConf(t.TempDir())), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tc := startCluster(t, 2, func(_ int, o *server.Options) { o.Auth = cfg.Auth })
	connect := func(node int, user string) *nats.Conn {
		nc, err := nats.Connect(tc.nodes[node].url, nats.UserInfo(user, "p"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	a1, b1, a2, b2 := connect(0, "a"), connect(0, "b"), connect(1, "a"), connect(1, "b")
	gotA, gotB := make(chan string, 1000), make(chan string, 1000)
	if _, err := a1.Subscribe("foo", func(m *nats.Msg) { gotA <- string(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if _, err := b1.Subscribe("from_a.>", func(m *nats.Msg) { gotB <- m.Subject }); err != nil {
		t.Fatal(err)
	}
	_ = a1.Flush()
	_ = b1.Flush()
	if _, err := a1.Subscribe("help", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	_ = a1.Flush()
	waitFor(t, clusterTimeout, "A's messages across the route", func() bool {
		_ = b2.Publish("foo", []byte("B"))
		_ = a2.Publish("foo", []byte("A"))
		_ = a2.Publish("events.x", []byte("E"))
		_ = b2.Flush()
		_ = a2.Flush()
		select {
		case <-gotA:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	})
	waitFor(t, clusterTimeout, "the stream import across the route", func() bool {
		_ = a2.Publish("events.x", []byte("E"))
		_ = a2.Flush()
		select {
		case s := <-gotB:
			return s == "from_a.events.x"
		case <-time.After(50 * time.Millisecond):
			return false
		}
	})
	waitFor(t, clusterTimeout, "a service request across the route", func() bool {
		m, err := b2.Request("ask", nil, 200*time.Millisecond)
		return err == nil && string(m.Data) == "ok"
	})
	// B's publishes on foo never reached A's subscriber.
	_ = a1.Flush()
	for len(gotA) > 0 {
		if s := <-gotA; s != "A" {
			t.Fatalf("A's subscriber got %q", s)
		}
	}
}
