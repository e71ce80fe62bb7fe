package test

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Core NATS across a cluster of three servers (issue 14; docs/routes.md).
// Every test here passes against nats-server
// v2.15.2 too (CAIRN_TEST_TARGET=nats-server), unless it says otherwise.

// collector gathers the messages of one subscription.
type collector struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (c *collector) add(m *nats.Msg) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *collector) all() []*nats.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

func subscribeCollect(t *testing.T, nc *nats.Conn, subj, queue string) *collector {
	t.Helper()
	c := &collector{}
	var err error
	if queue == "" {
		_, err = nc.Subscribe(subj, c.add)
	} else {
		_, err = nc.QueueSubscribe(subj, queue, c.add)
	}
	if err != nil {
		t.Fatalf("subscribe %s: %v", subj, err)
	}
	return c
}

// TestClusterMeshAndInfo: nodes 2 and 3 know only node 1, yet every
// server ends up routed to every other (gossip), and the INFO clients get
// carries the cluster name and the client URLs of all three, the server's
// own first (docs/routes.md, "Topology" and "What clients see").
func TestClusterMeshAndInfo(t *testing.T) {
	tc := startCluster(t, 3, nil)
	for _, nd := range tc.nodes {
		info, err := fetchInfo(nd.url)
		if err != nil {
			t.Fatal(err)
		}
		if info["cluster"] != clusterName {
			t.Errorf("%s: INFO cluster = %v, want %q", nd.name(), info["cluster"], clusterName)
		}
		urls := nd.connectURLs()
		if len(urls) != 3 || urls[0] != hostPort(nd.url) {
			t.Errorf("%s: connect_urls = %v, want 3 with %s first", nd.name(), urls, hostPort(nd.url))
		}
		if _, ok := info["ws_connect_urls"]; ok {
			t.Errorf("%s: INFO has ws_connect_urls: %v", nd.name(), info)
		}
		if nd.srv != nil && nd.srv.NumRoutes() != 2 {
			t.Errorf("%s: %d routes, want 2", nd.name(), nd.srv.NumRoutes())
		}
	}
	nc := tc.nodes[0].connect()
	waitFor(t, clusterTimeout, "the client to discover the other two servers", func() bool {
		return len(nc.DiscoveredServers()) == 2
	})
}

// TestClusterPubSub: a message published on one server reaches every
// matching plain subscription on the others exactly once (wildcards
// included), headers intact, in publish order (docs/routes.md,
// "Topology": one hop; docs/protocol.md 1.7).
func TestClusterPubSub(t *testing.T) {
	tc := startCluster(t, 3, nil)
	n1, n2, n3 := tc.nodes[0], tc.nodes[1], tc.nodes[2]
	s2 := n2.connect()
	s3 := n3.connect()
	var cols []*collector
	for _, subj := range []string{"orders.new", "orders.*", "orders.>", "*.new"} {
		cols = append(cols, subscribeCollect(t, s2, subj, ""))
	}
	cols = append(cols, subscribeCollect(t, s3, "orders.new", ""))
	l1 := n1.connect()
	local := subscribeCollect(t, l1, "orders.new", "")
	flushInterest(t, s2, n1)
	flushInterest(t, s3, n1)

	pub := n1.connect()
	const n = 2000
	for i := 0; i < n; i++ {
		m := nats.NewMsg("orders.new")
		m.Data = []byte(strconv.Itoa(i))
		if i%2 == 1 {
			m.Header.Set("Seq", strconv.Itoa(i))
		}
		if err := pub.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	pub.Flush()
	for _, c := range append(cols, local) {
		waitFor(t, clusterTimeout, "every message to arrive", func() bool { return c.len() >= n })
	}
	fence(t, pub, s2, s3, l1)
	for ci, c := range append(cols, local) {
		msgs := c.all()
		if len(msgs) != n {
			t.Fatalf("subscription %d got %d messages, want %d", ci, len(msgs), n)
		}
		for i, m := range msgs {
			if string(m.Data) != strconv.Itoa(i) {
				t.Fatalf("subscription %d: message %d is %q: out of order", ci, i, m.Data)
			}
			if want := strconv.Itoa(i); i%2 == 1 && m.Header.Get("Seq") != want {
				t.Fatalf("subscription %d: message %d header Seq = %q, want %q", ci, i, m.Header.Get("Seq"), want)
			}
		}
	}
}

// fence publishes one message on a fresh subject that each subscriber
// connection subscribes to, and waits until each gets it: messages from
// pub reach a connection in order, so whatever pub sent before has been
// delivered to those connections by then.
func fence(t *testing.T, pub *nats.Conn, subs ...*nats.Conn) {
	t.Helper()
	subj := "_FENCE." + strconv.FormatInt(time.Now().UnixNano(), 36)
	var got atomic.Int32
	for _, s := range subs {
		sub, err := s.Subscribe(subj, func(*nats.Msg) { got.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		flushInterestConn(t, s, pub)
	}
	if err := pub.Publish(subj, nil); err != nil {
		t.Fatal(err)
	}
	pub.Flush()
	waitFor(t, clusterTimeout, "the fence to reach every subscriber", func() bool { return got.Load() == int32(len(subs)) })
}

// flushInterestConn is flushInterest towards the server of the client pub.
func flushInterestConn(t *testing.T, sub, pub *nats.Conn) {
	t.Helper()
	probe := "_PROBE." + strconv.FormatInt(time.Now().UnixNano(), 36)
	ps, err := sub.Subscribe(probe, func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Unsubscribe()
	sub.Flush()
	waitFor(t, clusterTimeout, "interest to reach the publisher's server", func() bool {
		_, err := pub.Request(probe, nil, time.Second)
		return err == nil
	})
}

// TestClusterQueueGroupExactlyOnce: 10,000 messages published on all three
// servers to a queue group with members on each server (two on one) reach
// exactly one member each, cluster-wide (docs/routes.md, "Delivery across
// the cluster": the publishing
// server picks one member or one server per group, weighted by the
// servers' member counts).
func TestClusterQueueGroupExactlyOnce(t *testing.T) {
	tc := startCluster(t, 3, nil)
	var subConns []*nats.Conn
	var members []*collector
	for i, nd := range tc.nodes {
		nc := nd.connect()
		subConns = append(subConns, nc)
		members = append(members, subscribeCollect(t, nc, "work.>", "workers"))
		if i == 1 {
			members = append(members, subscribeCollect(t, nc, "work.>", "workers"))
		}
	}
	for _, nc := range subConns {
		flushInterest(t, nc, tc.nodes...)
	}
	const total = 10000
	var wg sync.WaitGroup
	pubs := make([]*nats.Conn, len(tc.nodes))
	for p, nd := range tc.nodes {
		pubs[p] = nd.connect()
		wg.Add(1)
		go func(p int, nc *nats.Conn) {
			defer wg.Done()
			for i := p; i < total; i += len(tc.nodes) {
				if err := nc.Publish("work.item", []byte(strconv.Itoa(i))); err != nil {
					t.Error(err)
					return
				}
			}
			nc.Flush()
		}(p, pubs[p])
	}
	wg.Wait()
	count := func() int {
		n := 0
		for _, m := range members {
			n += m.len()
		}
		return n
	}
	waitFor(t, clusterTimeout, "10,000 deliveries", func() bool { return count() >= total })
	for _, p := range pubs {
		fence(t, p, subConns...)
	}
	seen := make([]int, total)
	for mi, m := range members {
		msgs := m.all()
		if len(msgs) == 0 {
			t.Errorf("member %d received nothing", mi)
		}
		for _, msg := range msgs {
			i, err := strconv.Atoi(string(msg.Data))
			if err != nil || i < 0 || i >= total {
				t.Fatalf("member %d got %q", mi, msg.Data)
			}
			seen[i]++
		}
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("message %d delivered %d times, want exactly once", i, n)
		}
	}
}

// TestClusterRequestReply: requests reach responders on other servers and
// the replies come back (headers too); the no-responders status comes only
// once no server has interest any more (docs/protocol.md 1.8).
func TestClusterRequestReply(t *testing.T) {
	tc := startCluster(t, 3, nil)
	n1, n2, n3 := tc.nodes[0], tc.nodes[1], tc.nodes[2]
	responder := func(nc *nats.Conn, name string) *nats.Subscription {
		sub, err := nc.QueueSubscribe("svc.echo", "svc", func(m *nats.Msg) {
			r := nats.NewMsg(m.Reply)
			r.Data = append([]byte(name+":"), m.Data...)
			r.Header.Set("Echo", m.Header.Get("Echo"))
			_ = m.RespondMsg(r)
		})
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	r2, r3 := n2.connect(), n3.connect()
	sub2, sub3 := responder(r2, "n2"), responder(r3, "n3")
	flushInterest(t, r2, n1)
	flushInterest(t, r3, n1)

	req := n1.connect()
	ask := func(i int) (*nats.Msg, error) {
		m := nats.NewMsg("svc.echo")
		m.Data = []byte(strconv.Itoa(i))
		m.Header.Set("Echo", "h"+strconv.Itoa(i))
		return req.RequestMsg(m, readTimeout)
	}
	for i := 0; i < 100; i++ {
		resp, err := ask(i)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if d := string(resp.Data); d != "n2:"+strconv.Itoa(i) && d != "n3:"+strconv.Itoa(i) {
			t.Fatalf("request %d: reply %q", i, d)
		}
		if resp.Header.Get("Echo") != "h"+strconv.Itoa(i) {
			t.Fatalf("request %d: reply header %v", i, resp.Header)
		}
	}
	// One responder leaves: n3's still answers, so no request may get 503.
	// Until n1 has the RS- of n2's member, n1 may still pick it, and n2,
	// with no member left, drops the request (as nats-server v2.15.2
	// does: a routed queue message is not routed again), so the request
	// times out. n2 writes its interest changes to the route in the order
	// they happen, so once n1 routes to a probe subscribed on r2 after the
	// UNSUB, n1 has applied the RS- too.
	if err := sub2.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	flushInterest(t, r2, n1)
	for i := 0; i < 100; i++ {
		resp, err := ask(i)
		if err != nil {
			t.Fatalf("request %d with a responder left on n3: %v", i, err)
		}
		if string(resp.Data) != "n3:"+strconv.Itoa(i) && string(resp.Data) != "n2:"+strconv.Itoa(i) {
			t.Fatalf("request %d: reply %q", i, resp.Data)
		}
	}
	// The last one leaves: requests end with no responders.
	if err := sub3.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	r3.Flush()
	waitNoInterest(t, n1, "svc.echo")
	if _, err := ask(0); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request with no responder anywhere: %v, want no responders", err)
	}
}

// TestClusterAutoUnsubscribe: a subscription with a delivery limit on one
// server receives exactly that many of the messages published on another,
// and its interest then leaves the cluster (docs/protocol.md 1.3 UNSUB max).
func TestClusterAutoUnsubscribe(t *testing.T) {
	tc := startCluster(t, 3, nil)
	n1, n2 := tc.nodes[0], tc.nodes[1]
	s2 := n2.connect()
	c := &collector{}
	sub, err := s2.Subscribe("limited", c.add)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.AutoUnsubscribe(5); err != nil {
		t.Fatal(err)
	}
	flushInterest(t, s2, n1)
	pub := n1.connect()
	for i := 0; i < 50; i++ {
		if err := pub.Publish("limited", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	pub.Flush()
	fence(t, pub, s2)
	if got := c.len(); got != 5 {
		t.Fatalf("got %d messages, want 5", got)
	}
	for i, m := range c.all() {
		if string(m.Data) != strconv.Itoa(i) {
			t.Fatalf("message %d is %q", i, m.Data)
		}
	}
	waitNoInterest(t, n1, "limited")
}

// TestClusterPeerRestart: after a server restarts, the routes to it form
// again (the servers that route to it dial it again; those it routes to
// are dialed by it) and carry all interest again, old and new, both ways.
func TestClusterPeerRestart(t *testing.T) {
	tc := startCluster(t, 3, nil)
	for _, restart := range []int{1, 0} { // a server that routes to node 1, then node 1 itself
		n := tc.nodes[restart]
		other := tc.nodes[2]
		s3 := other.connect()
		before := subscribeCollect(t, s3, "restart.before."+strconv.Itoa(restart), "")
		flushInterest(t, s3, tc.nodes...)

		n.restart()
		tc.waitMesh()

		// Interest that existed before the restart reaches the restarted server.
		flushInterest(t, s3, n)
		pub := n.connect()
		if err := pub.Publish("restart.before."+strconv.Itoa(restart), []byte("x")); err != nil {
			t.Fatal(err)
		}
		pub.Flush()
		waitFor(t, clusterTimeout, "a message from the restarted server", func() bool { return before.len() == 1 })

		// Interest made on the restarted server reaches the others.
		after := subscribeCollect(t, pub, "restart.after", "")
		flushInterest(t, pub, tc.nodes...)
		for _, nd := range tc.nodes {
			if nd == n {
				continue
			}
			p := nd.connect()
			if err := p.Publish("restart.after", []byte(nd.name())); err != nil {
				t.Fatal(err)
			}
			p.Flush()
		}
		waitFor(t, clusterTimeout, "messages to the restarted server", func() bool { return after.len() == 2 })
	}
}

// TestClusterClientFailover: a client given one server's URL learns the
// others from INFO, follows servers leaving and joining through async
// INFO, and when its server goes away reconnects to another, where its
// subscription works again (docs/routes.md, "What clients see").
func TestClusterClientFailover(t *testing.T) {
	tc := startCluster(t, 3, nil)
	n1, n2, n3 := tc.nodes[0], tc.nodes[1], tc.nodes[2]
	reconnected := make(chan string, 4)
	nc := n2.connect(
		nats.ReconnectWait(50*time.Millisecond),
		nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(c *nats.Conn) { reconnected <- c.ConnectedUrl() }),
	)
	waitFor(t, clusterTimeout, "the client to discover two servers", func() bool { return len(nc.DiscoveredServers()) == 2 })

	n3.stop()
	waitFor(t, clusterTimeout, "an async INFO without n3", func() bool { return len(nc.DiscoveredServers()) == 1 })
	n3.start()
	tc.waitMesh()
	waitFor(t, clusterTimeout, "an async INFO with n3 again", func() bool { return len(nc.DiscoveredServers()) == 2 })

	c := subscribeCollect(t, nc, "failover", "")
	nc.Flush()
	n2.stop()
	var now string
	select {
	case now = <-reconnected:
	case <-time.After(clusterTimeout):
		t.Fatal("the client did not reconnect")
	}
	if now == n2.url {
		t.Fatalf("reconnected to the stopped server %s", now)
	}
	pub := n1.connect()
	waitFor(t, clusterTimeout, "the resubscribed interest to reach n1", func() bool {
		_ = pub.Publish("failover", []byte("x"))
		_ = pub.Flush()
		return c.len() > 0
	})
}

// TestClusterInterestChurn: many clients subscribing and unsubscribing at
// once on one server leave the other servers with exactly the interest
// that remains (nats-server #8233: RS+ and RS- written out of order made a
// server answer 503 with a live subscriber).
func TestClusterInterestChurn(t *testing.T) {
	tc := startCluster(t, 3, nil)
	n1, n2 := tc.nodes[0], tc.nodes[1]
	const clients, rounds = 8, 40
	var wg sync.WaitGroup
	conns := make([]*nats.Conn, clients)
	for i := range conns {
		conns[i] = n2.connect()
	}
	for i, nc := range conns {
		wg.Add(1)
		go func(i int, nc *nats.Conn) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				for _, q := range []string{"", "q"} {
					sub, err := nc.QueueSubscribe("churn."+strconv.Itoa(r%4), q, func(*nats.Msg) {})
					if err != nil {
						t.Error(err)
						return
					}
					if r < rounds-1 || i%2 == 0 {
						_ = sub.Unsubscribe()
					}
				}
			}
			nc.Flush()
		}(i, nc)
	}
	wg.Wait()
	for _, nc := range conns {
		flushInterest(t, nc, n1)
	}
	// Clients with odd indexes keep their last subscriptions, to
	// churn.3 (plain and queue); the other subjects have none left.
	req := n1.connect()
	for s := 0; s < 4; s++ {
		subj := "churn." + strconv.Itoa(s)
		_, err := req.Request(subj, nil, 200*time.Millisecond)
		want := nats.ErrNoResponders
		if s == (rounds-1)%4 {
			want = nats.ErrTimeout // interest, but nobody answers
		}
		if !errors.Is(err, want) {
			t.Errorf("request to %s: %v, want %v", subj, err, want)
		}
	}
}

// TestClusterRoutePortRejects: the cluster port turns away a client (its
// CONNECT has lang), a first line other than CONNECT, and a server of
// another cluster, with nats-server's -ERR texts.
func TestClusterRoutePortRejects(t *testing.T) {
	tc := startCluster(t, 1, nil)
	u := tc.nodes[0].routeURL
	c := rawConn(t, u)
	if c.info["cluster"] != clusterName {
		t.Fatalf("route INFO %v", c.info)
	}
	c.send(`CONNECT {"verbose":false,"pedantic":false,"lang":"go","version":"1.55.0","protocol":1}` + "\r\n")
	c.expectErr("attempted to connect to route port")
	c.expectClosed()

	c = rawConn(t, u)
	c.send("PING\r\n")
	c.expectErr("Authorization Violation")
	c.expectClosed()

	c = rawConn(t, u)
	c.send(`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"NOTHER","cluster":"OTHER"}` + "\r\n")
	c.expectErr(`Rejecting connection, cluster name "OTHER" does not match "TEST"`)
	c.expectClosed()
}

// TestClusterRouteProtocol drives a route by hand, as a peer server would,
// and checks the bytes: the peer's interest arrives as RS+ with queue
// weights, messages for it as RMSG/HMSG with the queue groups chosen, and
// the server delivers the peer's RMSG to its local subscribers only.
func TestClusterRouteProtocol(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("nats-server pools routes by default; this test speaks the unpooled protocol")
	}
	tc := startCluster(t, 1, nil)
	n1 := tc.nodes[0]
	local := n1.connect()
	plain := subscribeCollect(t, local, "rp.>", "")
	qa := subscribeCollect(t, local, "rp.q", "g1")
	qb := subscribeCollect(t, local, "rp.q", "g1")
	local.Flush()

	peer := rawConn(t, n1.routeURL)
	peer.send(`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"NPEER","cluster":"TEST"}` + "\r\n" +
		`INFO {"server_id":"NPEER","server_name":"peer","version":"2.10.0","proto":2,"go":"go","host":"127.0.0.1","port":1,"headers":true,"max_payload":1048576,"cluster":"TEST"}` + "\r\n")
	// Its whole interest, sorted, then nothing else.
	peer.expectRoute("RS+ $G rp.>\r\nRS+ $G rp.q g1 2\r\n")
	// Changes follow: a third member raises the weight.
	qc := subscribeCollect(t, local, "rp.q", "g1")
	local.Flush()
	peer.expectRoute("RS+ $G rp.q g1 3\r\n")

	// The peer's interest: a plain subject and a queue group.
	peer.send("RS+ $G rp.peer\r\nRS+ $G rp.q g1 5\r\nPING\r\n")
	peer.expectRoute("PONG\r\n")
	if err := local.Publish("rp.peer", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("rp.peer")
	m.Header.Set("K", "v")
	m.Reply = "reply.to"
	if err := local.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	local.Flush()
	peer.expectRoute("RMSG $G rp.peer 2\r\nhi\r\n")
	peer.expectRoute("HMSG $G rp.peer reply.to 18 18\r\nNATS/1.0\r\nK: v\r\n\r\n\r\n")

	// A message from the peer naming g1 goes to every local plain
	// subscription and one local member of g1; one naming no group to the
	// plain subscriptions only; nothing goes back to the peer.
	peer.send("RMSG $G rp.q | g1 1\r\na\r\nRMSG $G rp.q 1\r\nb\r\nPING\r\n")
	peer.expectRoute("PONG\r\n")
	fence(t, local, local)
	var got []string
	for _, m := range plain.all() {
		got = append(got, string(m.Data))
	}
	// rp.> also saw the two local messages to rp.peer.
	if !slices.Equal(got, []string{"hi", "", "a", "b"}) || qa.len()+qb.len()+qc.len() != 1 {
		t.Fatalf("rp.> got %q (want hi, \"\", a, b); g1 got %d (want 1)", got, qa.len()+qb.len()+qc.len())
	}
	if n1.srv.NumRoutes() != 1 {
		t.Fatalf("%d routes, want 1", n1.srv.NumRoutes())
	}
}

// expectRoute is expect on a route connection: it answers and drops the
// server's keep-alive PINGs, which may come at any line boundary.
func (c *rawClient) expectRoute(want string) {
	c.t.Helper()
	deadline := time.Now().Add(readTimeout)
	for {
		c.dropPings()
		if len(c.pending) >= len(want) {
			break
		}
		if err := c.fill(deadline); err != nil {
			c.t.Fatalf("%s: want %q; got %q then %v", c.name, trunc(want), trunc(string(c.pending)), err)
		}
	}
	c.expect(want)
}

// dropPings removes the complete "PING\r\n" lines of pending, answering
// each with PONG, and the interest lines of the system account ("RS+
// $SYS ...", "RS- $SYS ..."), which its internal subscriptions (the
// $SYS requests and the imports every account gets) send at any time.
func (c *rawClient) dropPings() {
	var out []byte
	rest := c.pending
	for {
		i := bytes.Index(rest, []byte("\r\n"))
		if i < 0 {
			out = append(out, rest...)
			break
		}
		line := rest[:i+2]
		switch {
		case string(line) == "PING\r\n":
			c.send("PONG\r\n")
		case bytes.HasPrefix(line, []byte("RS+ $SYS ")), bytes.HasPrefix(line, []byte("RS- $SYS ")):
		default:
			out = append(out, line...)
		}
		rest = rest[i+2:]
	}
	c.pending = out
}
