package test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
)

// connect opens a nats.go connection that never reconnects and fails the
// test at cleanup if the client reported an asynchronous error (an -ERR
// from the server, a client-side slow consumer, ...).
func connect(t testing.TB, u string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	var mu sync.Mutex
	var asyncErrs []string
	base := []nats.Option{
		nats.NoReconnect(),
		nats.Timeout(readTimeout),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			mu.Lock()
			defer mu.Unlock()
			subj := ""
			if s != nil {
				subj = s.Subject
			}
			asyncErrs = append(asyncErrs, fmt.Sprintf("sub %q: %v", subj, err))
		}),
	}
	nc, err := nats.Connect(u, append(base, opts...)...)
	if err != nil {
		t.Fatalf("nats.Connect(%s): %v", u, err)
	}
	t.Cleanup(func() {
		nc.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range asyncErrs {
			t.Errorf("asynchronous client error: %s", e)
		}
	})
	return nc
}

func flush(t testing.TB, nc *nats.Conn) {
	t.Helper()
	if err := nc.FlushTimeout(readTimeout); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func subSync(t testing.TB, nc *nats.Conn, subj string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatalf("subscribe %q: %v", subj, err)
	}
	return sub
}

func publish(t testing.TB, nc *nats.Conn, subj, data string) {
	t.Helper()
	if err := nc.Publish(subj, []byte(data)); err != nil {
		t.Fatalf("publish %q: %v", subj, err)
	}
}

func nextMsg(t testing.TB, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(readTimeout)
	if err != nil {
		t.Fatalf("NextMsg on %q: %v", sub.Subject, err)
	}
	return m
}

// drainPending returns the payloads already queued on sub. Call it after a
// Flush on the subscribing connection: the server sends every message it
// routed to that connection before the PONG that ends the flush, so the
// queue is then complete.
func drainPending(t testing.TB, sub *nats.Subscription) []string {
	t.Helper()
	n, _, err := sub.Pending()
	if err != nil {
		t.Fatalf("pending on %q: %v", sub.Subject, err)
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, string(nextMsg(t, sub).Data))
	}
	return out
}

func TestPubSub(t *testing.T) {
	u := startServer(t, nil)
	pub := connect(t, u)
	subConn := connect(t, u)
	sub := subSync(t, subConn, "orders.new")
	other := subSync(t, subConn, "orders.old")
	flush(t, subConn)

	for i := range 3 {
		publish(t, pub, "orders.new", fmt.Sprintf("order-%d", i))
	}
	publish(t, pub, "orders.none", "nobody")
	if err := pub.PublishMsg(&nats.Msg{Subject: "orders.new", Reply: "answers.here", Data: []byte("with-reply")}); err != nil {
		t.Fatal(err)
	}
	publish(t, pub, "orders.new", "")
	flush(t, pub)
	flush(t, subConn)

	for i := range 3 {
		m := nextMsg(t, sub)
		if m.Subject != "orders.new" || string(m.Data) != fmt.Sprintf("order-%d", i) || m.Reply != "" {
			t.Fatalf("message %d: got subject %q reply %q data %q", i, m.Subject, m.Reply, m.Data)
		}
	}
	m := nextMsg(t, sub)
	if m.Reply != "answers.here" || string(m.Data) != "with-reply" {
		t.Fatalf("got reply %q data %q, want answers.here/with-reply", m.Reply, m.Data)
	}
	m = nextMsg(t, sub)
	if len(m.Data) != 0 {
		t.Fatalf("empty payload came back as %q", m.Data)
	}
	if got := drainPending(t, sub); len(got) != 0 {
		t.Fatalf("unexpected extra messages: %q", got)
	}
	if got := drainPending(t, other); len(got) != 0 {
		t.Fatalf("orders.old got %q", got)
	}

	// Unsubscribe stops delivery.
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	still := subSync(t, subConn, "orders.new")
	flush(t, subConn)
	publish(t, pub, "orders.new", "after")
	flush(t, pub)
	flush(t, subConn)
	if got := drainPending(t, still); len(got) != 1 || got[0] != "after" {
		t.Fatalf("resubscribed got %q", got)
	}
}

func TestWildcards(t *testing.T) {
	u := startServer(t, nil)
	nc := connect(t, u)
	patterns := []string{"a.b", "a.*", "a.>", "a.*.c", "*.b", ">", "*", "a.b.>", "foo*", "*.*.*"}
	subs := map[string]*nats.Subscription{}
	for _, p := range patterns {
		subs[p] = subSync(t, nc, p)
	}
	flush(t, nc)

	published := []string{"a", "a.b", "a.c", "a.b.c", "a.x.c", "a.b.d", "x.b", "a.b.c.d", "foo*", "foox", "a.*", "a.>", "*.b"}
	for _, s := range published {
		publish(t, nc, s, s)
	}
	flush(t, nc)

	want := map[string][]string{
		"a.b":   {"a.b"},
		"a.*":   {"a.b", "a.c", "a.*", "a.>"},
		"a.>":   {"a.b", "a.c", "a.b.c", "a.x.c", "a.b.d", "a.b.c.d", "a.*", "a.>"},
		"a.*.c": {"a.b.c", "a.x.c"},
		"*.b":   {"a.b", "x.b", "*.b"},
		">":     published,
		"*":     {"a", "foo*", "foox"},
		"a.b.>": {"a.b.c", "a.b.d", "a.b.c.d"},
		"foo*":  {"foo*"}, // a token with other characters is literal
		"*.*.*": {"a.b.c", "a.x.c", "a.b.d"},
	}
	for _, p := range patterns {
		got := drainPending(t, subs[p])
		if strings.Join(got, " ") != strings.Join(want[p], " ") {
			t.Errorf("subscription %q received %q, want %q", p, got, want[p])
		}
	}
}

func TestWildcardMessageCarriesPublishedSubject(t *testing.T) {
	u := startServer(t, nil)
	nc := connect(t, u)
	sub := subSync(t, nc, "orders.>")
	flush(t, nc)
	publish(t, nc, "orders.eu.new", "x")
	if m := nextMsg(t, sub); m.Subject != "orders.eu.new" {
		t.Fatalf("got subject %q, want the published subject orders.eu.new", m.Subject)
	}
}

func TestQueueGroups(t *testing.T) {
	u := startServer(t, nil)
	const n = 300
	type member struct {
		group string
		nc    *nats.Conn
		sub   *nats.Subscription
	}
	var members []member
	add := func(group string) {
		nc := connect(t, u)
		var sub *nats.Subscription
		var err error
		if group == "" {
			sub, err = nc.SubscribeSync("work.>")
		} else {
			sub, err = nc.QueueSubscribeSync("work.>", group)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		members = append(members, member{group, nc, sub})
	}
	for range 3 {
		add("g1")
	}
	for range 2 {
		add("g2")
	}
	add("") // two plain subscribers
	add("")

	pub := connect(t, u)
	for i := range n {
		publish(t, pub, fmt.Sprintf("work.%d", i%7), strconv.Itoa(i))
	}
	flush(t, pub)

	got := map[string]map[string]int{} // group -> payload -> deliveries
	perMember := make([]int, len(members))
	for i, m := range members {
		flush(t, m.nc) // every message for m is queued before this PONG
		for _, p := range drainPending(t, m.sub) {
			key := m.group
			if key == "" {
				key = fmt.Sprintf("plain-%d", i)
			}
			if got[key] == nil {
				got[key] = map[string]int{}
			}
			got[key][p]++
			perMember[i]++
		}
	}
	for _, key := range []string{"g1", "g2", "plain-5", "plain-6"} {
		if len(got[key]) != n {
			t.Errorf("%s received %d distinct messages, want %d", key, len(got[key]), n)
		}
		for p, c := range got[key] {
			if c != 1 {
				t.Errorf("%s received message %s %d times, want exactly once", key, p, c)
			}
		}
	}
	t.Logf("deliveries per member (g1 g1 g1 g2 g2 plain plain): %v", perMember)

	// A queue member that unsubscribes gets nothing more; the rest of its
	// group takes over.
	if err := members[0].sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	flush(t, members[0].nc)
	for i := range 20 {
		publish(t, pub, "work.x", "late-"+strconv.Itoa(i))
	}
	flush(t, pub)
	total := 0
	for _, m := range members[1:3] {
		flush(t, m.nc)
		total += len(drainPending(t, m.sub))
	}
	if total != 20 {
		t.Fatalf("remaining g1 members received %d of 20 messages", total)
	}
}

func TestHeaders(t *testing.T) {
	u := startServer(t, nil)
	nc := connect(t, u)
	if !nc.HeadersSupported() {
		t.Fatal("server does not announce headers support")
	}
	sub := subSync(t, nc, "hdr")
	flush(t, nc)

	msg := nats.NewMsg("hdr")
	msg.Header.Add("X-Multi", "one")
	msg.Header.Add("X-Multi", "two")
	msg.Header.Add("X-Multi", "three")
	msg.Header["lower-case-name"] = []string{"v1"}
	msg.Header["MiXeD-CaSe"] = []string{"Value With Spaces"}
	msg.Header["Nats-Msg-Id"] = []string{"order-1"}
	msg.Reply = "hdr.reply"
	msg.Data = []byte("payload")
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	// Header-only message: empty payload.
	empty := nats.NewMsg("hdr")
	empty.Header.Set("Only", "header")
	if err := nc.PublishMsg(empty); err != nil {
		t.Fatal(err)
	}

	m := nextMsg(t, sub)
	if string(m.Data) != "payload" || m.Reply != "hdr.reply" {
		t.Fatalf("got data %q reply %q", m.Data, m.Reply)
	}
	for k, v := range map[string][]string{
		"X-Multi":         {"one", "two", "three"},
		"lower-case-name": {"v1"},
		"MiXeD-CaSe":      {"Value With Spaces"},
		"Nats-Msg-Id":     {"order-1"},
	} {
		if got := m.Header[k]; strings.Join(got, "|") != strings.Join(v, "|") {
			t.Errorf("header %q = %q, want %q (all headers: %v)", k, got, v, m.Header)
		}
	}
	if len(m.Header) != 4 {
		t.Errorf("got headers %v, want exactly 4 names", m.Header)
	}
	m = nextMsg(t, sub)
	if len(m.Data) != 0 || m.Header.Get("Only") != "header" {
		t.Fatalf("header-only message: data %q headers %v", m.Data, m.Header)
	}
}

func TestHeadersStrippedForClientWithoutHeaders(t *testing.T) {
	u := startServer(t, nil)
	raw := rawConnect(t, u, `{"verbose":false,"pedantic":false,"protocol":1,"headers":false}`)
	raw.send("SUB hdr 1\r\n")
	raw.sync()
	nc := connect(t, u)
	msg := nats.NewMsg("hdr")
	msg.Header.Set("A", "b")
	msg.Data = []byte("body")
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	flush(t, nc)
	raw.expect("MSG hdr 1 4\r\nbody\r\n")
	raw.sync()
}

func TestRequestReply(t *testing.T) {
	u := startServer(t, nil)
	responder := connect(t, u)
	_, err := responder.Subscribe("svc.echo", func(m *nats.Msg) {
		if err := m.Respond(append([]byte("re:"), m.Data...)); err != nil {
			t.Errorf("respond: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	flush(t, responder)

	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"muxed inbox", nil},
		{"old style inbox", []nats.Option{nats.UseOldRequestStyle()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := connect(t, u, tc.opts...)
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := fmt.Sprintf("q-%d", i)
					resp, err := nc.Request("svc.echo", []byte(req), readTimeout)
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					if string(resp.Data) != "re:"+req {
						t.Errorf("request %q got %q", req, resp.Data)
					}
				}()
			}
			wg.Wait()

			// With headers.
			msg := nats.NewMsg("svc.echo")
			msg.Header.Set("Trace", "abc")
			msg.Data = []byte("h")
			resp, err := nc.RequestMsg(msg, readTimeout)
			if err != nil {
				t.Fatalf("RequestMsg: %v", err)
			}
			if string(resp.Data) != "re:h" {
				t.Fatalf("RequestMsg got %q", resp.Data)
			}
		})
	}
}

func TestRequestReplySubjectsAreRoutedVerbatim(t *testing.T) {
	u := startServer(t, nil)
	responder := connect(t, u)
	seen := make(chan string, 1)
	_, err := responder.Subscribe("svc.who", func(m *nats.Msg) {
		seen <- m.Reply
		_ = m.Respond([]byte("ok"))
	})
	if err != nil {
		t.Fatal(err)
	}
	flush(t, responder)
	nc := connect(t, u)
	if _, err := nc.Request("svc.who", nil, readTimeout); err != nil {
		t.Fatal(err)
	}
	reply := <-seen
	if !regexp.MustCompile(`^_INBOX\.[A-Za-z0-9]+\.[A-Za-z0-9]+$`).MatchString(reply) {
		t.Fatalf("muxed reply subject %q is not _INBOX.<nuid>.<token>", reply)
	}
	// Any reply subject works, not only _INBOX.
	custom := connect(t, u, nats.CustomInboxPrefix("my.replies"))
	if _, err := custom.Request("svc.who", nil, readTimeout); err != nil {
		t.Fatal(err)
	}
	if r := <-seen; !strings.HasPrefix(r, "my.replies.") {
		t.Fatalf("custom-prefix reply %q", r)
	}
}

func TestNoResponders(t *testing.T) {
	u := startServer(t, nil)
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"muxed inbox", nil},
		{"old style inbox", []nats.Option{nats.UseOldRequestStyle()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := connect(t, u, tc.opts...)
			const timeout = 10 * time.Second
			start := time.Now()
			_, err := nc.Request("nobody.home", []byte("x"), timeout)
			elapsed := time.Since(start)
			if !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("got %v, want nats.ErrNoResponders", err)
			}
			if elapsed > 2*time.Second {
				t.Fatalf("no-responders answer took %v; it must come at once, not at the timeout", elapsed)
			}
		})
	}

	// A request that reaches a subscriber that does not answer is a
	// timeout, not a no-responders.
	nc := connect(t, u)
	silent := subSync(t, nc, "silent")
	flush(t, nc)
	_, err := nc.Request("silent", nil, 200*time.Millisecond)
	if !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("request to a silent subscriber: got %v, want nats.ErrTimeout", err)
	}
	if m := nextMsg(t, silent); !strings.HasPrefix(m.Reply, "_INBOX.") {
		t.Fatalf("silent subscriber got reply %q", m.Reply)
	}
}

func TestEchoFalse(t *testing.T) {
	u := startServer(t, nil)
	noEcho := connect(t, u, nats.NoEcho())
	echo := connect(t, u)
	mine := subSync(t, noEcho, "chat")
	theirs := subSync(t, echo, "chat")
	flush(t, noEcho)
	flush(t, echo)

	publish(t, noEcho, "chat", "from-noecho")
	flush(t, noEcho)
	publish(t, echo, "chat", "from-echo")
	flush(t, echo)
	flush(t, noEcho) // the message from echo reached noEcho before this PONG

	if got := drainPending(t, mine); strings.Join(got, ",") != "from-echo" {
		t.Fatalf("no-echo connection received %q, want only from-echo", got)
	}
	if got := drainPending(t, theirs); strings.Join(got, ",") != "from-noecho,from-echo" {
		t.Fatalf("echo connection received %q", got)
	}
}

func TestAutoUnsubscribe(t *testing.T) {
	u := startServer(t, nil)
	nc := connect(t, u)
	sub := subSync(t, nc, "auto")
	if err := sub.AutoUnsubscribe(3); err != nil {
		t.Fatal(err)
	}
	flush(t, nc)
	for i := range 10 {
		publish(t, nc, "auto", strconv.Itoa(i))
	}
	flush(t, nc)
	if got := drainPending(t, sub); strings.Join(got, ",") != "0,1,2" {
		t.Fatalf("got %q, want 0,1,2", got)
	}
	// nats.go also counts on its side, so ask the server itself: after 3
	// deliveries it must have removed the interest, so a request finds no
	// responders.
	if _, err := nc.Request("auto", nil, readTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request after auto-unsubscribe: got %v, want ErrNoResponders (server kept the subscription)", err)
	}
}

func TestAutoUnsubscribeRaw(t *testing.T) {
	u := startServer(t, nil)
	c := rawConnect(t, u, defaultConnect)
	c.send("SUB auto 1\r\nUNSUB 1 2\r\n")
	for i := range 4 {
		c.send(fmt.Sprintf("PUB auto 1\r\n%d\r\n", i))
	}
	c.send("PING\r\n")
	c.expect("MSG auto 1 1\r\n0\r\nMSG auto 1 1\r\n1\r\nPONG\r\n")

	// UNSUB with a max not above what was already delivered removes the
	// subscription at once.
	c.send("SUB again 2\r\nPUB again 1\r\na\r\nPUB again 1\r\nb\r\nUNSUB 2 2\r\nPUB again 1\r\nc\r\nPING\r\n")
	c.expect("MSG again 2 1\r\na\r\nMSG again 2 1\r\nb\r\nPONG\r\n")

	// Plain UNSUB, and UNSUB of an unknown sid (ignored).
	c.send("SUB plain 3\r\nUNSUB 3\r\nUNSUB 99\r\nPUB plain 1\r\nx\r\nPING\r\n")
	c.expect("PONG\r\n")
}

// TestSlowConsumer: a connection that subscribes and never reads is closed
// once its outbound buffer passes max_pending; the publisher is not held
// up and the server keeps serving everyone else.
func TestSlowConsumer(t *testing.T) {
	const maxPending = 1 << 20
	u := startServer(t, func(o *server.Options) { o.MaxPending = maxPending })

	// A tiny receive buffer so that the kernel cannot absorb the flood.
	d := &net.Dialer{Timeout: readTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	slow := rawConnDialer(t, u, d)
	slow.handshake(defaultConnect)
	slow.send("SUB flood 1\r\n")
	slow.sync()

	healthySub := connect(t, u)
	hs := subSync(t, healthySub, "healthy")
	flush(t, healthySub)

	pub := connect(t, u)
	payload := bytes.Repeat([]byte("x"), 64*1024)
	const count = 512 // 32 MiB, far more than max_pending plus socket buffers
	start := time.Now()
	for range count {
		if err := pub.Publish("flood", payload); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	flush(t, pub)
	// A publisher may wait up to 10 ms per read batch on a stalled
	// receiver, so 512 publishes can take seconds on a loaded machine;
	// held up for good, it would take until the flush times out.
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("publishing %d MiB with a slow consumer took %v; the publisher must not be held up", count/16, took)
	}

	// The slow connection: the server closed it, and it received far less
	// than was published.
	t.Logf("published %d MiB in %v", count/16, time.Since(start))
	got := slow.drainUntilClosed(10 * time.Second)
	t.Logf("the slow consumer received %d bytes before the server closed it", got)
	if published := count * len(payload); got >= published {
		t.Fatalf("slow consumer received %d bytes of %d published; want it cut off", got, published)
	}

	// Everyone else still works.
	publish(t, pub, "healthy", "still here")
	flush(t, pub)
	if m := nextMsg(t, hs); string(m.Data) != "still here" {
		t.Fatalf("healthy subscriber got %q", m.Data)
	}
	late := connect(t, u)
	ls := subSync(t, late, "late")
	flush(t, late)
	publish(t, pub, "late", "new client")
	if m := nextMsg(t, ls); string(m.Data) != "new client" {
		t.Fatalf("new client got %q", m.Data)
	}
	if !pub.IsConnected() || !healthySub.IsConnected() {
		t.Fatal("a well-behaved client was disconnected")
	}
}

func raiseFileLimit(t testing.TB, want uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		t.Fatalf("RLIMIT_NOFILE hard limit %d is below the %d this test needs", lim.Max, want)
	}
	old := lim.Cur
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	t.Cleanup(func() {
		lim.Cur = old
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	})
}

func TestThousandConnections(t *testing.T) {
	const n = 1000
	// Both ends of every connection may live in this process.
	raiseFileLimit(t, 2*n+512)
	u := startServer(t, nil)
	// A thousand clients and their server ends share this process and,
	// in CI, two cores under the race detector: a fan-out to all of them
	// can take seconds, so the waits here are longer than readTimeout.
	// Like readTimeout, they only bound how long a failing test hangs.
	const wait = 30 * time.Second

	conns := make([]*nats.Conn, n)
	t.Cleanup(func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	})
	// parallel runs f(0..n-1) on 16 workers.
	parallel := func(f func(i int) error) {
		var wg sync.WaitGroup
		var next, failed atomic.Int64
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					if err := f(i); err != nil {
						if failed.Add(1) <= 5 {
							t.Errorf("connection %d: %v", i, err)
						}
					}
				}
			}()
		}
		wg.Wait()
		if failed.Load() > 0 {
			t.Fatalf("%d of %d connections failed", failed.Load(), n)
		}
	}

	subs := make([]*nats.Subscription, n)
	own := make([]*nats.Subscription, n)
	start := time.Now()
	parallel(func(i int) error {
		nc, err := nats.Connect(u, nats.NoReconnect(), nats.Timeout(wait))
		if err != nil {
			return err
		}
		conns[i] = nc
		if subs[i], err = nc.SubscribeSync("many.all"); err != nil {
			return err
		}
		if own[i], err = nc.SubscribeSync("many.one." + strconv.Itoa(i)); err != nil {
			return err
		}
		return nc.FlushTimeout(wait)
	})

	t.Logf("%d connections subscribed in %v", n, time.Since(start))
	start = time.Now()
	pub := connect(t, u)
	publish(t, pub, "many.all", "broadcast")
	for i := range n {
		publish(t, pub, "many.one."+strconv.Itoa(i), "to-"+strconv.Itoa(i))
	}
	if err := pub.FlushTimeout(wait); err != nil {
		t.Fatalf("flush: %v", err)
	}

	parallel(func(i int) error {
		m, err := subs[i].NextMsg(wait)
		if err != nil {
			return fmt.Errorf("broadcast: %w", err)
		}
		if string(m.Data) != "broadcast" {
			return fmt.Errorf("broadcast: got %q", m.Data)
		}
		m, err = own[i].NextMsg(wait)
		if err != nil {
			return fmt.Errorf("own message: %w", err)
		}
		if want := "to-" + strconv.Itoa(i); string(m.Data) != want {
			return fmt.Errorf("own message: got %q, want %q", m.Data, want)
		}
		// Nothing else arrived.
		if err := conns[i].FlushTimeout(wait); err != nil {
			return err
		}
		if in := conns[i].Stats().InMsgs; in != 2 {
			return fmt.Errorf("received %d messages, want 2", in)
		}
		return nil
	})
	t.Logf("all received their messages in %v", time.Since(start))
}

func TestLargePayloads(t *testing.T) {
	u := startServer(t, nil)
	nc := connect(t, u)
	if got := nc.MaxPayload(); got != 1<<20 {
		t.Fatalf("INFO max_payload = %d, want 1048576", got)
	}
	sub := subSync(t, nc, "big")
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	flush(t, nc)

	mk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		return b
	}
	sizes := []int{1<<20 - 1, 1 << 20, 512 * 1024, 65537}
	for _, n := range sizes {
		if err := nc.Publish("big", mk(n)); err != nil {
			t.Fatalf("publish %d bytes: %v", n, err)
		}
	}
	// Headers plus payload together up to max_payload.
	hm := nats.NewMsg("big")
	hm.Header.Set("K", "v")
	hdrLen := len("NATS/1.0\r\nK: v\r\n\r\n")
	hm.Data = mk(1<<20 - hdrLen)
	if err := nc.PublishMsg(hm); err != nil {
		t.Fatalf("publish header message at max_payload: %v", err)
	}
	for _, n := range sizes {
		m := nextMsg(t, sub)
		if !bytes.Equal(m.Data, mk(n)) {
			t.Fatalf("payload of %d bytes came back as %d bytes (or corrupted)", n, len(m.Data))
		}
	}
	m := nextMsg(t, sub)
	if !bytes.Equal(m.Data, hm.Data) || m.Header.Get("K") != "v" {
		t.Fatalf("header message came back with %d bytes, headers %v", len(m.Data), m.Header)
	}
	// nats.go refuses one byte more itself.
	if err := nc.Publish("big", mk(1<<20+1)); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("publish max_payload+1: got %v, want ErrMaxPayload", err)
	}
}

func TestConfiguredMaxPayload(t *testing.T) {
	u := startServer(t, func(o *server.Options) { o.MaxPayload = 64 * 1024 })
	nc := connect(t, u)
	if got := nc.MaxPayload(); got != 64*1024 {
		t.Fatalf("INFO max_payload = %d, want 65536", got)
	}
	sub := subSync(t, nc, "big")
	flush(t, nc)
	if err := nc.Publish("big", make([]byte, 64*1024)); err != nil {
		t.Fatal(err)
	}
	if m := nextMsg(t, sub); len(m.Data) != 64*1024 {
		t.Fatalf("got %d bytes", len(m.Data))
	}
}

func TestServerIdentity(t *testing.T) {
	u := startServer(t, func(o *server.Options) { o.ServerName = "cairn-test-1" })
	nc := connect(t, u)
	if got := nc.ConnectedServerName(); got != "cairn-test-1" {
		t.Fatalf("server name %q", got)
	}
	if nc.ConnectedServerId() == "" {
		t.Fatal("empty server id")
	}
	v := nc.ConnectedServerVersion()
	m := regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("server version %q is not semver", v)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	// Clients gate features on the version: the JavaScript client's
	// batched direct gets and priority groups and natscli's trace need
	// 2.11; cairn serves everything of 2.12 (docs/compatibility.md).
	if major != 2 || minor < 12 {
		t.Fatalf("server version %q: want 2.12 or later, whose features clients may use", v)
	}
}
