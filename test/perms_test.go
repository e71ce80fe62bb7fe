package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Permissions (docs/security.md, "Permissions"; docs/protocol.md 1.11): the
// same file against cairn and nats-server v2.15.2, the same bytes.

const permsConf = `
authorization {
  users = [
    { user: pub, password: p, permissions: { publish: { allow: ["orders.>", "svc.*"], deny: ["orders.secret.>"] }, subscribe: "_INBOX.>" } }
    { user: sub, password: p, permissions: {
        subscribe: { allow: ["orders.*", "q.* workers", "jobs.>"], deny: ["orders.secret", "> *.prod"] }
        publish: { deny: ">" } } }
    { user: rsp, password: p, permissions: { publish: { allow: [] }, subscribe: "svc.*", allow_responses: { max: 2 } } }
    { user: all, password: p }
  ]
}
`

func login(t *testing.T, url, user string) *rawClient {
	t.Helper()
	return rawConnect(t, url, fmt.Sprintf(`{"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,"user":%q,"pass":"p"}`, user))
}

// A PUB outside the publish permissions gets the violation and is
// dropped; the connection stays open; deny beats allow.
func TestPermsPublish(t *testing.T) {
	forEach(t, secTargets(t, permsConf, nil), func(t *testing.T, tg secTarget) {
		all := login(t, tg.url, "all")
		all.send("SUB > 1\r\n")
		all.sync()
		p := login(t, tg.url, "pub")
		p.send("PUB orders.new 2\r\nok\r\nPUB other 2\r\nno\r\nPUB orders.secret.x 2\r\nno\r\nPUB svc.a.b 2\r\nno\r\nPUB svc.a 2\r\nok\r\nPING\r\n")
		p.expect(`-ERR 'Permissions Violation for Publish to "other"'` + "\r\n" +
			`-ERR 'Permissions Violation for Publish to "orders.secret.x"'` + "\r\n" +
			`-ERR 'Permissions Violation for Publish to "svc.a.b"'` + "\r\nPONG\r\n")
		all.expect("MSG orders.new 1 2\r\nok\r\nMSG svc.a 1 2\r\nok\r\n")
		all.sync()
		// Again, from the connection's permission cache.
		p.send("PUB other 2\r\nno\r\nPUB orders.new 2\r\nok\r\nPING\r\n")
		p.expect(`-ERR 'Permissions Violation for Publish to "other"'` + "\r\nPONG\r\n")
		all.expect("MSG orders.new 1 2\r\nok\r\n")
		s := login(t, tg.url, "sub")
		s.send("PUB anything 0\r\n\r\nPING\r\n")
		s.expect(`-ERR 'Permissions Violation for Publish to "anything"'` + "\r\nPONG\r\n")
	})
}

// A SUB outside the subscribe permissions gets the violation (with the
// queue when it has one); queue entries allow only their queues; a queue
// deny ("> *.prod") denies those queue groups everywhere; _sys_ is
// reserved.
func TestPermsSubscribe(t *testing.T) {
	forEach(t, secTargets(t, permsConf, nil), func(t *testing.T, tg secTarget) {
		s := login(t, tg.url, "sub")
		cases := []struct{ sub, err string }{
			{"SUB orders.secret 1", `Permissions Violation for Subscription to "orders.secret"`},
			{"SUB orders.a.b 2", `Permissions Violation for Subscription to "orders.a.b"`},
			{"SUB other 3", `Permissions Violation for Subscription to "other"`},
			{"SUB q.a 4", `Permissions Violation for Subscription to "q.a"`},
			{"SUB q.a other 5", `Permissions Violation for Subscription to "q.a" using queue "other"`},
			{"SUB jobs.a blue.prod 6", `Permissions Violation for Subscription to "jobs.a" using queue "blue.prod"`},
			{"SUB orders.x _sys_ 7", `Permissions Violation for Subscription to "orders.x" using queue "_sys_"`},
			{"SUB orders.* 10", ""},
			{"SUB q.a workers 11", ""},
			{"SUB jobs.a blue.dev 12", ""},
			{"SUB jobs.> 13", ""},
		}
		for _, tc := range cases {
			s.send(tc.sub + "\r\nPING\r\n")
			if tc.err != "" {
				s.expectErr(tc.err)
			}
			s.expect("PONG\r\n")
		}
		all := login(t, tg.url, "all")
		all.send("SUB x _sys_ 1\r\nPING\r\n")
		all.expect(`-ERR 'Permissions Violation for Subscription to "x" using queue "_sys_"'` + "\r\nPONG\r\n")
	})
}

// Deny filters delivery: a wildcard subscription that overlaps a deny
// entry never receives the denied subject, from a client or from
// JetStream (CVE-2022-29946, advisory 2026-17), and a queue group member
// whose queue is denied for the subject is skipped.
func TestPermsDeliveryFilter(t *testing.T) {
	forEach(t, secTargets(t, permsConf, nil), func(t *testing.T, tg secTarget) {
		s := login(t, tg.url, "sub")
		s.send("SUB orders.* 1\r\nSUB jobs.> dev.prod.x 2\r\nSUB jobs.> 3\r\n")
		s.sync()
		all := login(t, tg.url, "all")
		all.send("PUB orders.secret 1\r\nA\r\nPUB orders.new 1\r\nB\r\nPUB jobs.x 1\r\nC\r\n")
		all.sync()
		s.expect("MSG orders.new 1 1\r\nB\r\n")
		s.expectRe(`MSG jobs\.x [23] 1\r\nC\r\n`)
		s.expectRe(`MSG jobs\.x [23] 1\r\nC\r\n`)
		s.sync()
	})
}

// cairn refuses a subscription an allow entry does not contain:
// nats-server 2.15.2 lets "allow: foo.*" subscribe to "foo.>" (and
// "allow: *" to ">") and then delivers subjects the allow list does not
// name (docs/compatibility.md). cairn only.
func TestPermsAllowMustContainSubscription(t *testing.T) {
	conf := `authorization { users = [
  { user: narrow, password: p, permissions: { subscribe: { allow: ["*", "foo.*"] } } }
  { user: all, password: p } ] }`
	tg := startCairnConf(t, conf, nil)
	c := login(t, tg.url, "narrow")
	c.send("SUB > 1\r\nSUB foo.> 2\r\nSUB *.> 3\r\nSUB foo.* 4\r\nSUB x 5\r\nPING\r\n")
	c.expect(`-ERR 'Permissions Violation for Subscription to ">"'` + "\r\n" +
		`-ERR 'Permissions Violation for Subscription to "foo.>"'` + "\r\n" +
		`-ERR 'Permissions Violation for Subscription to "*.>"'` + "\r\nPONG\r\n")
	all := login(t, tg.url, "all")
	all.send("PUB foo.bar.baz 1\r\nA\r\nPUB foo.bar 1\r\nB\r\nPUB x 1\r\nC\r\n")
	all.sync()
	c.expect("MSG foo.bar 4 1\r\nB\r\nMSG x 5 1\r\nC\r\n")
	c.sync()
}

// allow_responses: a user that may publish nothing may answer a request
// it received, max times.
func TestPermsAllowResponses(t *testing.T) {
	forEach(t, secTargets(t, permsConf, nil), func(t *testing.T, tg secTarget) {
		r := login(t, tg.url, "rsp")
		r.send("SUB svc.* 1\r\n")
		r.sync()
		all := login(t, tg.url, "all")
		all.send("SUB reply.1 9\r\nPUB svc.a reply.1 1\r\nQ\r\n")
		all.sync()
		r.expect("MSG svc.a 1 reply.1 1\r\nQ\r\n")
		r.send("PUB reply.1 2\r\nA1\r\nPUB reply.1 2\r\nA2\r\nPUB reply.1 2\r\nA3\r\nPUB reply.2 2\r\nA4\r\nPING\r\n")
		r.expect(`-ERR 'Permissions Violation for Publish to "reply.1"'` + "\r\n" +
			`-ERR 'Permissions Violation for Publish to "reply.2"'` + "\r\nPONG\r\n")
		all.expect("MSG reply.1 9 2\r\nA1\r\nMSG reply.1 9 2\r\nA2\r\n")
		all.sync()
	})
}

// nats.go sees a violation as an async error and keeps the connection.
func TestPermsNatsGoAsyncError(t *testing.T) {
	forEach(t, secTargets(t, permsConf, nil), func(t *testing.T, tg secTarget) {
		errs := make(chan error, 4)
		nc, err := nats.Connect(tg.url, nats.UserInfo("pub", "p"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if err := nc.Publish("forbidden", nil); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("async error %v", err)
			}
		case <-time.After(readTimeout):
			t.Fatal("no async error")
		}
		if err := nc.Flush(); err != nil || !nc.IsConnected() {
			t.Fatalf("connection lost: %v", err)
		}
	})
}

// JetStream's API subjects are governed by the same publish permissions:
// a worker allowed only its consumer's next-message subject (and its
// acks) can fetch and acknowledge, and cannot create, read or delete
// streams.
func TestPermsJetStreamAPI(t *testing.T) {
	conf := `jetstream: enabled
authorization { users = [
  { user: admin, password: p }
  { user: worker, password: p, permissions: {
      publish: ["$JS.API.CONSUMER.MSG.NEXT.ORDERS.worker", "$JS.ACK.ORDERS.worker.>"]
      subscribe: "_INBOX.>" } }
] }`
	forEach(t, secTargets(t, conf+fmt.Sprintf("\njetstream { store_dir: %q }\n", t.TempDir()), nil), func(t *testing.T, tg secTarget) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		admin, err := nats.Connect(tg.url, nats.UserInfo("admin", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		ajs, _ := jetstream.New(admin)
		if _, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := ajs.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		if _, err := ajs.Publish(ctx, "orders.1", []byte("o1")); err != nil {
			t.Fatal(err)
		}

		worker, err := nats.Connect(tg.url, nats.UserInfo("worker", "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		defer worker.Close()
		m, err := worker.Request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.worker", []byte(`{"batch":1,"expires":2000000000}`), 5*time.Second)
		if err != nil || string(m.Data) != "o1" {
			t.Fatalf("fetch: %v %v", m, err)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
		wjs, _ := jetstream.New(worker)
		short, cancel2 := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel2()
		if _, err := wjs.CreateStream(short, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil"}}); err == nil {
			t.Fatal("the worker created a stream")
		}
		if _, err := wjs.Stream(short, "ORDERS"); err == nil {
			t.Fatal("the worker read stream info")
		}
		if _, err := ajs.Stream(ctx, "EVIL"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("EVIL stream: %v", err)
		}
		waitFor(t, readTimeout, "the ack", func() bool {
			ci, err := ajs.Consumer(ctx, "ORDERS", "worker")
			if err != nil {
				return false
			}
			info, err := ci.Info(ctx)
			return err == nil && info.AckFloor.Consumer == 1
		})
	})
}
