package test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/server"
)

// TLS on routes: the cluster block's tls (docs/routes.md, "TLS"), as
// nats-server v2.15.2 does it. The tests run against nats-server too
// (CAIRN_TEST_TARGET=nats-server), except for what reads cairn's logs or
// needs its JetStream cluster.

// routeCert issues the certificate of a server of a TLS cluster: the
// server accepts routes and dials them, so it is both a TLS server and a
// TLS client (both extended key usages). It names ips and dns.
func (p *testPKI) routeCert(t *testing.T, name string, ips []string, dns ...string) (certFile, keyFile string) {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, DNSNames: dns,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	c, k, _, _ := p.issue(t, name, tmpl)
	return c, k
}

// clusterTLS is the cluster tls block of server name: a certificate for
// 127.0.0.1 and localhost, and the CA.
func (p *testPKI) clusterTLS(t *testing.T, name string) config.TLS {
	t.Helper()
	c, k := p.routeCert(t, name, []string{"127.0.0.1"}, "localhost")
	return config.TLS{CertFile: c, KeyFile: k, CAFile: p.caFile}
}

// logTo makes a cairn server log into a buffer the test reads.
func logTo(o *server.Options) *syncBuffer {
	buf := &syncBuffer{}
	o.Logger = logger.New(buf, false, false)
	return buf
}

// waitLog waits until buf holds every one of wants on one line.
func waitLog(t *testing.T, buf *syncBuffer, wants ...string) string {
	t.Helper()
	var found string
	waitFor(t, clusterTimeout, fmt.Sprintf("a log line with %q", wants), func() bool {
		for _, line := range strings.Split(buf.String(), "\n") {
			ok := true
			for _, w := range wants {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				found = line
				return true
			}
		}
		return false
	})
	return found
}

// Three servers whose cluster block has tls form the full mesh and route
// core NATS messages (a subscriber on n3 gets what n1 publishes; a
// request from n2 gets n3's reply). The route INFO travels inside TLS and
// says tls_required and tls_verify; a peer that speaks plain text (a
// route's CONNECT, the Raft transport's RAFT line) gets nothing back, not
// even the INFO, and is closed; so is one that stays silent, at the TLS
// timeout.
func TestRouteTLSCluster(t *testing.T) {
	p := newPKI(t)
	tc := startCluster(t, 3, func(i int, o *server.Options) {
		o.Cluster.TLS = p.clusterTLS(t, fmt.Sprintf("n%d", i+1))
		o.Cluster.TLS.Timeout = 500 * time.Millisecond
	})
	n1, n2, n3 := tc.nodes[0], tc.nodes[1], tc.nodes[2]

	sub := n3.connect()
	s := subSync(t, sub, "over.tls")
	if _, err := sub.Subscribe("svc.tls", func(m *nats.Msg) { _ = m.Respond([]byte("pong " + string(m.Data))) }); err != nil {
		t.Fatal(err)
	}
	flushInterest(t, sub, n1, n2)
	pub := n1.connect()
	publish(t, pub, "over.tls", "secret")
	if m := nextMsg(t, s); string(m.Data) != "secret" {
		t.Fatalf("got %q", m.Data)
	}
	if m, err := n2.connect().Request("svc.tls", []byte("ping"), readTimeout); err != nil || string(m.Data) != "pong ping" {
		t.Fatalf("request: %v %v", m, err)
	}

	// The INFO, inside TLS, with a certificate of the cluster's CA.
	nc, err := net.DialTimeout("tcp", hostPort(n1.routeURL), readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	peer, err := tls.LoadX509KeyPair(n2.opts.Cluster.TLS.CertFile, n2.opts.Cluster.TLS.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	tlsc := tls.Client(nc, &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{peer}, ServerName: "127.0.0.1"})
	_ = tlsc.SetDeadline(time.Now().Add(readTimeout))
	line, err := bufio.NewReader(tlsc).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("INFO inside TLS: %q %v", line, err)
	}
	if !strings.Contains(line, `"headers":true,"tls_required":true,"tls_verify":true,"max_payload"`) {
		t.Errorf("route INFO: %s", line)
	}

	for _, first := range []string{
		`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"PLAIN","cluster":"TEST"}` + "\r\n",
		`RAFT {"v":1,"name":"n2","cluster":"TEST"}` + "\r\n",
	} {
		c := rawDial(t, n1.routeURL)
		_, _ = c.Write([]byte(first))
		if got := readUntilClosed(t, c); got != "" {
			t.Errorf("plain %q got %q", first[:4], got)
		}
	}
	// A connection that never starts the handshake is closed at the TLS
	// timeout (readUntilClosed fails after readTimeout).
	if got := readUntilClosed(t, rawDial(t, n1.routeURL)); got != "" {
		t.Errorf("silent connection got %q", got)
	}
}

// rawDial opens a TCP connection, closed at cleanup.
func rawDial(t *testing.T, u string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", hostPort(u), readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// readUntilClosed reads until the peer closes (failing the test if it
// does not within readTimeout) and returns what it sent.
func readUntilClosed(t *testing.T, nc net.Conn) string {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(readTimeout))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("not closed within %v; got %q", readTimeout, got)
			}
			return string(got)
		}
	}
}

// A cairn server without tls that routes to a TLS cluster port never
// forms a route: the TLS server logs the failed handshake at error level.
func TestRouteTLSPlainPeerRefused(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("reads cairn's log")
	}
	p := newPKI(t)
	var logA *syncBuffer
	tc := startCluster(t, 1, func(_ int, o *server.Options) {
		o.Cluster.TLS = p.clusterTLS(t, "n1")
		logA = logTo(o)
	})
	u, _ := url.Parse(tc.nodes[0].routeURL)
	o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: "plain"}
	o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: server.RandomPort, Name: clusterName, Routes: []*url.URL{u}}
	logB := logTo(&o)
	plain := restartServer(t, o)
	line := waitLog(t, logA, "[ERR]", "TLS route handshake error", "first record does not look like a TLS handshake")
	t.Logf("TLS server: %s", line)
	waitLog(t, logB, "Router connection closed") // the dial that failed ended
	if plain.NumRoutes() != 0 || tc.nodes[0].srv.NumRoutes() != 0 {
		t.Fatalf("routes: plain %d, tls %d", plain.NumRoutes(), tc.nodes[0].srv.NumRoutes())
	}
}

// A server whose certificate and ca_file come from another CA cannot join
// a TLS cluster: it rejects the cluster's certificate and logs why (the
// unknown authority, the subject and SHA-256 of the certificate it could
// not verify); with insecure (it skips that check) the cluster rejects its
// certificate instead and logs why. Neither forms a route.
func TestRouteTLSWrongCA(t *testing.T) {
	good := newPKI(t)
	logs := make([]*syncBuffer, 2)
	tc := startCluster(t, 2, func(i int, o *server.Options) {
		o.Cluster.TLS = good.clusterTLS(t, fmt.Sprintf("n%d", i+1))
		logs[i] = logTo(o)
	})
	other := newPKI(t)
	u, _ := url.Parse(tc.nodes[0].routeURL)
	for _, insecure := range []bool{false, true} {
		o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: fmt.Sprintf("intruder-%v", insecure)}
		o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: server.RandomPort, Name: clusterName, Routes: []*url.URL{u}}
		o.Cluster.TLS = other.clusterTLS(t, o.ServerName)
		o.Cluster.TLS.Insecure = insecure
		logBad := logTo(&o)
		bad := restartServer(t, o)
		if !insecure {
			line := waitLog(t, logBad, "[ERR]", "Error trying to connect to route (attempt 1): TLS route handshake error",
				"certificate signed by unknown authority", "CN=n1 SHA-256: ")
			t.Logf("intruder: %s", line)
		} else {
			waitLog(t, logBad, "[WRN]", "DO NOT USE IN PRODUCTION!")
		}
		if !targetIsNatsServer() {
			want := "remote error: tls: " // the intruder's alert
			if insecure {
				want = "certificate signed by unknown authority"
			}
			line := waitLog(t, logs[0], "[ERR]", "TLS route handshake error", want)
			t.Logf("cluster: %s", line)
			logs[0].reset()
		}
		if bad.NumRoutes() != 0 {
			t.Fatalf("insecure %v: the intruder has %d routes", insecure, bad.NumRoutes())
		}
		bad.Shutdown()
	}
	if !targetIsNatsServer() && (tc.nodes[0].srv.NumRoutes() != 1 || tc.nodes[1].srv.NumRoutes() != 1) {
		t.Fatalf("routes: %d %d", tc.nodes[0].srv.NumRoutes(), tc.nodes[1].srv.NumRoutes())
	}
}

// A server dialing a peer by IP address (a route learned from gossip)
// checks the peer's certificate against the first host name among its
// explicit routes (nats-server saveRouteTLSName): with certificates that
// name only localhost and routes to nats://localhost:<port>, n2 and n3,
// which learn of each other from n1's gossip (an IP address), still form
// the full mesh.
func TestRouteTLSGossipByHostName(t *testing.T) {
	p := newPKI(t)
	startCluster(t, 3, func(i int, o *server.Options) {
		c, k := p.routeCert(t, fmt.Sprintf("n%d", i+1), nil, "localhost")
		o.Cluster.TLS = config.TLS{CertFile: c, KeyFile: k, CAFile: p.caFile}
		for _, u := range o.Cluster.Routes {
			u.Host = "localhost:" + u.Port()
		}
	})
}

// A stream with num_replicas 3 on three cairn servers whose cluster has
// tls: its Raft traffic (the transport's connections on the cluster port)
// must pass the same TLS handshake, since the cluster port accepts
// nothing else; created, published to and read from different servers.
func TestRouteTLSJetStreamReplicated(t *testing.T) {
	p := newPKI(t)
	servers, _ := jsClusterMod(t, 3, func(i int, o *server.Options) {
		o.Cluster.TLS = p.clusterTLS(t, o.ServerName)
	})
	js := make([]jetstream.JetStream, 3)
	for i, s := range servers {
		var err error
		if js[i], err = jetstream.New(connect(t, s.ClientURL())); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= 5; i++ {
		eventually(t, "publish", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			ack, err := js[1].Publish(ctx, fmt.Sprintf("orders.%d", i), []byte("order"), jetstream.WithMsgID(fmt.Sprint(i)))
			if err == nil && ack.Sequence != uint64(i) {
				t.Fatalf("PubAck %+v", ack)
			}
			return err
		})
	}
	eventually(t, "replicas current", func() error {
		s, err := js[2].Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.State.Msgs != 5 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("info %+v cluster %+v", info.State, info.Cluster)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current {
				return fmt.Errorf("replica %s not current", r.Name)
			}
		}
		return nil
	})
	st, err := js[2].Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(tctx(t), "orders.5")
	if err != nil || msg.Sequence != 5 {
		t.Fatalf("last message: %v %v", msg, err)
	}
}

// /varz cluster reports the cluster port's TLS as nats-server does:
// tls_required and tls_verify, tls_timeout, an auth_timeout of the TLS
// timeout plus a second, and when the certificate expires.
func TestRouteTLSVarz(t *testing.T) {
	diffRequireNatsServer(t)
	p := newPKI(t)
	o := server.Options{Host: "127.0.0.1", Port: -1, ServerName: "a"}
	o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: -1, Name: "MON", TLS: p.clusterTLS(t, "a")}
	o.Cluster.TLS.Timeout = 1500 * time.Millisecond
	_, cairnMon := startCairnServer(t, o)
	ports, _ := startNatsServerExtra(t, o, "http_port: -1\n")
	keys := []string{"tls_required", "tls_verify", "tls_timeout", "auth_timeout"}
	var got [2]map[string]any
	for i, mon := range []string{cairnMon, ports.Monitoring[0]} {
		_, body := monGet(t, mon+"/varz")
		var v struct {
			Cluster map[string]any `json:"cluster"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		got[i] = v.Cluster
		if _, ok := v.Cluster["tls_cert_not_after"].(string); !ok {
			t.Errorf("side %d: no tls_cert_not_after in %v", i, v.Cluster)
		}
	}
	for _, k := range keys {
		if fmt.Sprint(got[0][k]) != fmt.Sprint(got[1][k]) {
			t.Errorf("cluster.%s: cairn %v, nats-server %v", k, got[0][k], got[1][k])
		}
	}
	if got[0]["tls_required"] != true || got[0]["tls_timeout"] != 1.5 || got[0]["auth_timeout"] != 2.5 {
		t.Errorf("cairn cluster %v", got[0])
	}
}

// A cairn server and a nats-server v2.15.2 route to each other over TLS,
// whichever dials (cairn offers no route pool, so nats-server keeps one
// route to it), and requests cross the route both ways.
func TestRouteTLSInteropNatsServer(t *testing.T) {
	diffRequireNatsServer(t)
	for _, cairnDials := range []bool{true, false} {
		t.Run(fmt.Sprintf("cairn dials %v", cairnDials), func(t *testing.T) {
			p := newPKI(t)
			ns := server.Options{Host: "127.0.0.1", Port: -1, ServerName: "ns"}
			ns.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: -1, Name: "MIX", TLS: p.clusterTLS(t, "ns")}
			c := server.Options{Host: "127.0.0.1", Port: -1, ServerName: "cairn"}
			c.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: -1, Name: "MIX", TLS: p.clusterTLS(t, "cairn")}
			var nsURL string
			var s *server.Server
			if cairnDials {
				ports, _ := startNatsServerPorts(t, ns)
				u, _ := url.Parse(ports.Cluster[0])
				c.Cluster.Routes = []*url.URL{u}
				nsURL, s = ports.Nats[0], restartServer(t, c)
			} else {
				s = restartServer(t, c)
				u, _ := url.Parse(s.ClusterURL())
				ns.Cluster.Routes = []*url.URL{u}
				ports, _ := startNatsServerPorts(t, ns)
				nsURL = ports.Nats[0]
			}
			waitFor(t, clusterTimeout, "the route", func() bool { return s.NumRoutes() == 1 })
			a, b := connect(t, nsURL), connect(t, s.ClientURL())
			for _, pair := range [][2]*nats.Conn{{a, b}, {b, a}} {
				responder, requester := pair[0], pair[1]
				subj := "svc." + responder.ConnectedServerName()
				if _, err := responder.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond([]byte("hello from " + responder.ConnectedServerName())) }); err != nil {
					t.Fatal(err)
				}
				flush(t, responder)
				var reply string
				waitFor(t, clusterTimeout, subj+" to answer across the route", func() bool {
					m, err := requester.Request(subj, nil, time.Second)
					if err == nil {
						reply = string(m.Data)
					}
					return err == nil
				})
				if reply != "hello from "+responder.ConnectedServerName() {
					t.Fatalf("reply %q", reply)
				}
			}
		})
	}
}
