package server

import (
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/jetstream"
)

// A clustered JetStream's subscription (jsTransport.shared) is announced
// to the peers and takes what they route: a publish on another server
// reaches it once; an unclustered JetStream's subscriptions do not.
func TestSharedJetStreamSubscriptions(t *testing.T) {
	a := startClusterServer(t, "a", "c")
	b := startClusterServer(t, "b", "c", fmt.Sprintf("nats://%s", a.ClusterAddr()))
	waitCond(t, "the route", func() bool { return a.NumRoutes() == 1 && b.NumRoutes() == 1 })

	var shared, localN atomic.Int32
	tr := jsTransport{s: a, acc: a.gacc, shared: true}
	sub, err := tr.SubscribeTraced("orders.>", "", func(_, _ string, _, _ []byte, _ jetstream.Tracer) { shared.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	local := jsTransport{s: a, acc: a.gacc}
	if _, err := local.Subscribe("local.>", "", func(_, _ string, _, _ []byte) { localN.Add(1) }); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "b to learn a's interest", func() bool { return b.HasInterest("orders.1") })
	b.Publish("orders.1", "", nil, []byte("x"))
	b.Publish("local.1", "", nil, []byte("x"))
	waitCond(t, "the routed publish", func() bool { return shared.Load() == 1 })

	// A round trip through the route: once b's publish of "sync" came
	// back, the earlier local.1 publish was routed or dropped.
	var synced atomic.Bool
	if _, err := tr.Subscribe("sync", "", func(_, _ string, _, _ []byte) { synced.Store(true) }); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "b to learn sync", func() bool { return b.HasInterest("sync") })
	b.Publish("sync", "", nil, nil)
	waitCond(t, "sync", synced.Load)
	if localN.Load() != 0 || shared.Load() != 1 {
		t.Fatalf("local subscription got %d routed publishes, shared %d (want 0, 1)", localN.Load(), shared.Load())
	}

	sub.Unsubscribe()
	waitCond(t, "b to forget a's interest", func() bool { return !b.HasInterest("orders.1") })
}

// ClusterMembers is complete once every explicit route led to a peer or
// to the server itself, and names every server once.
func TestClusterMembers(t *testing.T) {
	a := startClusterServer(t, "a", "c")
	selfAndA := []string{fmt.Sprintf("nats://%s", a.ClusterAddr())}
	b := startClusterServer(t, "b", "c", selfAndA...)
	if names, complete := a.ClusterMembers(); !complete || len(names) != 1 || names[0] != "a" {
		t.Fatalf("a without routes: %v %v", names, complete)
	}
	waitCond(t, "b's members", func() bool {
		names, complete := b.ClusterMembers()
		return complete && fmt.Sprint(names) == "[a b]"
	})
	// A server whose routes name itself and a server that is not up is
	// not complete.
	c := startClusterServer(t, "c", "c", "nats://127.0.0.1:1", fmt.Sprintf("nats://%s", a.ClusterAddr()))
	waitCond(t, "c to reach a", func() bool { return c.NumRoutes() >= 1 })
	if names, complete := c.ClusterMembers(); complete {
		t.Fatalf("c complete with an unreachable route: %v", names)
	}

	// A server whose routes name itself counts itself once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	o := Options{Host: "127.0.0.1", Port: RandomPort, ServerName: "d"}
	o.Cluster = ClusterOptions{Host: "127.0.0.1", Port: port, Name: "c"}
	for _, r := range []string{fmt.Sprintf("nats://127.0.0.1:%d", port), fmt.Sprintf("nats://%s", a.ClusterAddr())} {
		u, _ := url.Parse(r)
		o.Cluster.Routes = append(o.Cluster.Routes, u)
	}
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	waitCond(t, "d's members", func() bool {
		names, complete := d.ClusterMembers()
		return complete && fmt.Sprint(names) == "[a d]"
	})
}
