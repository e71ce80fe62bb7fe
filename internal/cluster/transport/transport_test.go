package transport_test

import (
	"errors"
	"fmt"
	. "github.com/cairnmq/cairn/internal/cluster/transport"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/server"
)

// TestSendAndReceive: frames sent between two servers of a cluster arrive
// whole, in order and named by their sender, once the route between them
// told each where the other listens; a name no route gives is unknown.
func TestSendAndReceive(t *testing.T) {
	a := startMember(t, "a", cred{}, &Config{})
	b := startMember(t, "b", cred{}, &Config{}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var ra, rb recorder
	a.tr.Attach(&ra)
	b.tr.Attach(&rb)
	if err := a.tr.Send("nobody", []byte("x")); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("Send to an unknown server: %v", err)
	}
	var want []string
	for i := range 50 {
		f := strings.Repeat(string(rune('a'+i%26)), 1+i*1000)
		want = append(want, f)
		sendUntilQueued(t, a.tr, "b", []byte(f))
	}
	waitFor(t, "b to receive every frame", func() bool { return len(rb.got()) >= len(want) })
	if got := rb.got(); !slices.Equal(got, want) {
		t.Fatalf("b received %d frames, not the %d sent in order", len(got), len(want))
	}
	if slices.ContainsFunc(rb.from, func(s raftnode.ServerID) bool { return s != "a" }) {
		t.Fatalf("senders %v", rb.from)
	}
	sendUntilQueued(t, b.tr, "a", []byte("back"))
	waitFor(t, "a to receive b's frame", func() bool { return len(ra.got()) == 1 })
}

// sendUntilQueued sends f to to, retrying while the first dial is under
// way (the peer's route may register there after it did here).
func sendUntilQueued(t *testing.T, tr *Transport, to raftnode.ServerID, f []byte) {
	t.Helper()
	waitFor(t, "a frame to be queued", func() bool { return tr.Send(to, f) == nil })
}

// TestHelloRefused: the accepting server refuses, with -ERR and close, a
// hello naming a server that has no route to it, its own name, another
// cluster or another version, and admits the name of a routed peer
// (package comment, "Admission").
func TestHelloRefused(t *testing.T) {
	a := startMember(t, "a", cred{}, &Config{})
	b := startMember(t, "b", cred{}, nil, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var rec recorder
	a.tr.Attach(&rec)
	cases := []struct {
		h    Hello
		want string
	}{
		{Hello{V: Version, Name: "stranger", Cluster: "C"}, RefusePeer},
		{Hello{V: Version, Name: "a", Cluster: "C"}, RefusePeer},
		{Hello{V: Version, Name: "b", Cluster: "OTHER"}, RefuseCluster},
		{Hello{V: Version + 1, Name: "b", Cluster: "C"}, RefuseVersion},
	}
	for _, tc := range cases {
		nc, r := rawConn(t, a)
		if got := sayHello(t, nc, r, &tc.h); got != "-ERR '"+tc.want+"'\r\n" {
			t.Errorf("hello %+v: answer %q, want %q", tc.h, got, tc.want)
		}
		_, _ = nc.Write(Frames("injected"))
		if !closedByPeer(r) {
			t.Errorf("hello %+v: connection left open", tc.h)
		}
	}
	nc, r := rawConn(t, a)
	if _, err := nc.Write([]byte("RAFT {not json\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, _ := r.ReadString('\n'); line != "-ERR '"+RefuseHello+"'\r\n" || !closedByPeer(r) {
		t.Errorf("malformed hello: %q", line)
	}

	nc, r = rawConn(t, a)
	if got := sayHello(t, nc, r, &Hello{V: Version, Name: "b", Cluster: "C"}); got != "+OK\r\n" {
		t.Fatalf("hello of routed peer b: %q", got)
	}
	if _, err := nc.Write(Frames("f1", "f2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the admitted frames", func() bool { return len(rec.got()) == 2 })
	if rec.from[0] != "b" || len(rec.got()) != 2 {
		t.Fatalf("frames %q from %v: the refused connections' frames got through", rec.got(), rec.from)
	}
}

// TestBadFramesClose: a length of 0, or above the limit, and a frame the
// receiver finds damaged close the connection; the frames before it were
// delivered.
func TestBadFramesClose(t *testing.T) {
	a := startMember(t, "a", cred{}, &Config{MaxFrameBytes: 1000})
	b := startMember(t, "b", cred{}, nil, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var rec recorder
	a.tr.Attach(&rec)
	bad := [][]byte{Frames(""), AppendFrameHeader(nil, 1001)}
	for i, tail := range bad {
		nc, r := rawConn(t, a)
		if got := sayHello(t, nc, r, &Hello{V: Version, Name: "b", Cluster: "C"}); got != "+OK\r\n" {
			t.Fatalf("hello: %q", got)
		}
		_, _ = nc.Write(append(Frames("good"), tail...))
		if !closedByPeer(r) {
			t.Fatalf("bad frame %d: connection left open", i)
		}
		if n := len(rec.got()); n != i+1 {
			t.Fatalf("bad frame %d: %d frames delivered, want %d", i, n, i+1)
		}
	}
	rec.err = raftnode.ErrBadFrame
	nc, r := rawConn(t, a)
	if got := sayHello(t, nc, r, &Hello{V: Version, Name: "b", Cluster: "C"}); got != "+OK\r\n" {
		t.Fatalf("hello: %q", got)
	}
	_, _ = nc.Write(Frames("damaged"))
	if !closedByPeer(r) {
		t.Fatal("a damaged frame left the connection open")
	}
}

// TestCredentials: with cluster credentials, a hello must carry them
// (checked as a route's CONNECT is); wrong ones get 'Authorization
// Violation' and close. Two servers with the same credentials reach
// each other.
func TestCredentials(t *testing.T) {
	c := cred{"ruser", "s3cret"}
	a := startMember(t, "a", c, &Config{})
	b := startMember(t, "b", c, &Config{}, a.routeURL(c))
	waitRoutes(t, a, b)
	var rec recorder
	a.tr.Attach(&rec)
	for _, h := range []Hello{
		{V: Version, Name: "b", Cluster: "C"},
		{V: Version, Name: "b", Cluster: "C", User: "ruser", Pass: "wrong"},
		{V: Version, Name: "b", Cluster: "C", User: "other", Pass: "s3cret"},
	} {
		nc, r := rawConn(t, a)
		if got := sayHello(t, nc, r, &h); got != "-ERR '"+RefuseAuth+"'\r\n" {
			t.Errorf("hello %+v: %q", HelloSummary(&h), got)
		}
		if !closedByPeer(r) {
			t.Errorf("hello %+v: connection left open", HelloSummary(&h))
		}
	}
	sendUntilQueued(t, b.tr, "a", []byte("hi"))
	waitFor(t, "b's frame", func() bool { return len(rec.got()) == 1 })
}

// TestSendNeverBlocks: Send returns at once whatever the peer does. A
// peer whose cluster port refuses the transport is unreachable (nothing
// is queued for it); a peer that admits the connection and never reads
// fills its queue, and Send then fails with ErrQueueFull. Close ends the
// writer blocked on the full socket.
func TestSendNeverBlocks(t *testing.T) {
	a := startMember(t, "a", cred{}, &Config{MaxQueueBytes: 1 << 20})
	deaf := startMember(t, "deaf", cred{}, nil, a.routeURL(cred{})) // no transport: RAFT is refused
	waitRoutes(t, a, deaf)
	waitFor(t, "the refused dial to make the peer unreachable", func() bool {
		return errors.Is(a.tr.Send("deaf", []byte("x")), ErrUnreachable)
	})

	stuck := make(chan net.Conn, 1)
	startCustom(t, "mute", func(nc net.Conn, _ []byte) {
		_, _ = nc.Write([]byte("+OK\r\n"))
		stuck <- nc
		var b [1]byte
		_, _ = nc.Read(b[:]) // never sent: returns when the conn closes
	}, a.routeURL(cred{}))
	select {
	case nc := <-stuck: // a's writer dialed mute as soon as the route told it where
		defer nc.Close()
	case <-time.After(20 * time.Second):
		t.Fatal("a did not dial mute")
	}
	waitFor(t, "the connection to mute to be up", func() bool { return a.tr.Send("mute", []byte("x")) == nil })
	frame := make([]byte, 64<<10)
	full := false
	for i := 0; i < 1024 && !full; i++ { // 64 MiB: far more than the socket buffers and the queue hold
		switch err := a.tr.Send("mute", frame); {
		case errors.Is(err, ErrQueueFull):
			full = true
		case err != nil:
			t.Fatalf("Send: %v", err)
		}
	}
	if !full {
		t.Fatal("the queue of a peer that never reads did not fill")
	}
	if err := a.tr.Send("mute", make([]byte, MaxFrameBytes+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize frame: %v", err)
	}
	a.tr.Close() // returns: the writer blocked in a write ends
	if err := a.tr.Send("mute", frame); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// startCustom starts a server in cluster "C" whose RAFT connections go to
// h instead of a transport.
func startCustom(t *testing.T, name string, h server.ClusterConnHandler, routes ...string) *member {
	t.Helper()
	o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: name}
	o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: server.RandomPort, Name: "C"}
	for _, r := range routes {
		u, _ := url.Parse(r)
		o.Cluster.Routes = append(o.Cluster.Routes, u)
	}
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv.HandleClusterConns(Op, h)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, srv: srv}
	t.Cleanup(m.stop)
	return m
}

// TestRedial: when the peer's server restarts (a new process on a new
// port), the route registering again gives its new address and the
// writer reaches it there.
func TestRedial(t *testing.T) {
	a := startMember(t, "a", cred{}, &Config{})
	b := startMember(t, "b", cred{}, &Config{}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var rb recorder
	b.tr.Attach(&rb)
	sendUntilQueued(t, a.tr, "b", []byte("one"))
	waitFor(t, "the first frame", func() bool { return len(rb.got()) == 1 })
	b.stop()
	waitFor(t, "the route to b to go", func() bool { return a.srv.NumRoutes() == 0 })
	waitFor(t, "b to be unknown or unreachable", func() bool { return a.tr.Send("b", []byte("lost")) != nil })

	b2 := startMember(t, "b", cred{}, &Config{}, a.routeURL(cred{}))
	var rb2 recorder
	b2.tr.Attach(&rb2)
	waitRoutes(t, a, b2)
	deadline := time.Now().Add(20 * time.Second)
	for len(rb2.got()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no frame reached the restarted b")
		}
		_ = a.tr.Send("b", []byte("two"))
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServerStopsFirst: a server put in lame duck mode (and so shut down)
// while its transport is open ends cleanly: Shutdown closes the accepted
// transport connections and their readers return (Shutdown would wait for
// them forever otherwise), and Close afterwards returns. Its peer then
// finds it gone.
func TestServerStopsFirst(t *testing.T) {
	a := startMember(t, "a", cred{}, &Config{})
	b := startMember(t, "b", cred{}, &Config{}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var ra, rb recorder
	a.tr.Attach(&ra)
	b.tr.Attach(&rb)
	sendUntilQueued(t, a.tr, "b", []byte("to b"))
	sendUntilQueued(t, b.tr, "a", []byte("to a"))
	waitFor(t, "both connections", func() bool { return len(ra.got()) == 1 && len(rb.got()) == 1 })
	b.srv.LameDuck(time.Second, time.Millisecond)
	b.tr.Close()
	waitFor(t, "a to find b gone", func() bool { return a.tr.Send("b", []byte("x")) != nil })
}

// TestGone: a peer whose server stops (its Raft connection ends, then its
// route goes and its cluster port refuses the redial) is reported to
// Config.Gone, once for that lost connection (docs/cluster.md, "The
// process-level fault suite").
func TestGone(t *testing.T) {
	var mu sync.Mutex
	var gone []raftnode.ServerID
	cfg := &Config{Gone: func(s raftnode.ServerID) {
		mu.Lock()
		gone = append(gone, s)
		mu.Unlock()
	}}
	reported := func() []raftnode.ServerID {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(gone)
	}
	a := startMember(t, "a", cred{}, cfg)
	b := startMember(t, "b", cred{}, &Config{}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var rb recorder
	b.tr.Attach(&rb)
	sendUntilQueued(t, a.tr, "b", []byte("one"))
	waitFor(t, "the first frame", func() bool { return len(rb.got()) == 1 })
	if g := reported(); len(g) != 0 {
		t.Fatalf("reported gone while up: %v", g)
	}
	b.stop()
	// A writer finds its connection broken when it writes: raftnode
	// sends every peer a beat each tick.
	waitFor(t, "b to be reported gone", func() bool {
		_ = a.tr.Send("b", []byte("beat"))
		return len(reported()) > 0
	})
	waitFor(t, "the route to b to go", func() bool { return a.srv.NumRoutes() == 0 })
	for range 20 { // frames queued to b meanwhile report nothing more
		_ = a.tr.Send("b", []byte("lost"))
	}
	if g := reported(); !slices.Equal(g, []raftnode.ServerID{"b"}) {
		t.Fatalf("reported %v, want b once", g)
	}
}

// TestLost: the end of a peer's accepted connection (its process gone)
// is reported to Config.Lost at once, without this server writing to it
// (the catch-up service fails its fetches from the peer then, instead of
// waiting for their answers: docs/cluster.md, "The transport").
func TestLost(t *testing.T) {
	var mu sync.Mutex
	var lost []raftnode.ServerID
	cfg := &Config{Lost: func(s raftnode.ServerID) {
		mu.Lock()
		lost = append(lost, s)
		mu.Unlock()
	}}
	reported := func() []raftnode.ServerID {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lost)
	}
	a := startMember(t, "a", cred{}, cfg)
	b := startMember(t, "b", cred{}, &Config{}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var ra recorder
	a.tr.Attach(&ra)
	sendUntilQueued(t, b.tr, "a", []byte("one"))
	waitFor(t, "b's frame", func() bool { return len(ra.got()) == 1 })
	if g := reported(); len(g) != 0 {
		t.Fatalf("reported lost while up: %v", g)
	}
	b.stop()
	waitFor(t, "b's connection to be reported lost", func() bool { return slices.Contains(reported(), "b") })
}

// TestRefusalKind: the dialer tells the acceptor's "Unknown Raft Peer"
// (its route from here not registered there yet, routine while servers
// start: logged as such, trial 38 read it as a member unknown to the
// cluster) from its other refusals, and keeps the wire text in the error.
func TestRefusalKind(t *testing.T) {
	err := NewRefusal("-ERR", "'"+RefusePeer+"'")
	if !IsRefusal(fmt.Errorf("dial: %w", err), RefusePeer) || IsRefusal(err, RefuseCluster) {
		t.Errorf("isRefusal of %v", err)
	}
	if got := err.Error(); got != "transport: refused: -ERR 'Unknown Raft Peer'" {
		t.Errorf("error text %q", got)
	}
	if IsRefusal(errors.New("transport: refused: -ERR 'Unknown Raft Peer'"), RefusePeer) {
		t.Error("a plain error taken for a refusal")
	}
}
