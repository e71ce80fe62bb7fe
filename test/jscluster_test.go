package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

// prefixWriter writes each log write with a prefix (the server's name),
// for CAIRN_TEST_LOG=1 runs of the cluster tests.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	_, err := p.w.Write(append([]byte(p.prefix), b...))
	return len(b), err
}

// jsCluster starts n cairn servers with JetStream in one cluster whose
// routes each name every server (the meta group's voters,
// docs/cluster.md, "The cluster layer", "Bootstrap"), and returns them.
func jsCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	servers, _ := jsClusterOpts(t, n)
	return servers
}

// jsClusterOpts is jsCluster that also returns each server's options,
// with which a test restarts it (same ports, same store directory).
func jsClusterOpts(t *testing.T, n int) ([]*server.Server, []server.Options) {
	t.Helper()
	return jsClusterMod(t, n, nil)
}

// jsClusterMod is jsClusterOpts with mod, when not nil, adjusting server
// i's options before it starts. It returns once every server knows the
// meta leader and the other members (waitMetaFormed): until the meta
// leader knows the servers, nobody answers a stream create, or it fails
// with 10005, and a client's first request waits out its whole timeout
// (10 s with tctx).
//
// The test runs in parallel with the other parallel tests from here on
// (clusterParallel).
func jsClusterMod(t *testing.T, n int, mod func(i int, o *server.Options)) ([]*server.Server, []server.Options) {
	t.Helper()
	if targetIsNatsServer() {
		t.Skip("cairn's JetStream cluster layer")
	}
	clusterParallel(t)
	// The route ports are picked free, then released before the servers
	// bind them: another process (a parallel test package) can take one
	// meanwhile. Then the cluster starts again on new ports.
	for attempt := 1; ; attempt++ {
		servers, opts, err := tryJSCluster(t, n, mod)
		if err == nil {
			waitMetaFormed(t, servers)
			return servers, opts
		}
		if !addrInUse(err) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; starting the cluster again on other ports", attempt, err)
	}
}

// parallelTests holds, for each test that called clusterParallel or
// serialTest, whether it runs in parallel.
var parallelTests sync.Map // *testing.T -> bool

// clusterParallel makes t a parallel test (t.Parallel) unless it is one
// already or called serialTest. A test with a JetStream cluster mostly
// waits (elections, catch-ups, retries; the test binary used about a
// fifth of a core under -race), so two of them at once (go test's
// -parallel, GOMAXPROCS by default) take about half the time. Every
// server listens on its own ports (a port taken meanwhile is retried:
// jsClusterMod, restartServer) and stores in its own t.TempDir().
func clusterParallel(t *testing.T) {
	if _, seen := parallelTests.LoadOrStore(t, true); !seen {
		t.Cleanup(func() { parallelTests.Delete(t) })
		t.Parallel()
	}
}

// serialTest keeps t out of the parallel tests, called before its first
// cluster: for a test that asserts bounds on how long something takes,
// or one that a busier machine makes fail.
func serialTest(t *testing.T) {
	if _, seen := parallelTests.LoadOrStore(t, false); !seen {
		t.Cleanup(func() { parallelTests.Delete(t) })
	}
}

// addrInUse reports whether err is a listener's "address already in use".
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// tryJSCluster starts n servers routed to one another; on an error it
// stops those it started and returns it.
func tryJSCluster(t *testing.T, n int, mod func(i int, o *server.Options)) ([]*server.Server, []server.Options, error) {
	t.Helper()
	ports := make([]int, n)
	var routes []*url.URL
	for i := range ports {
		ports[i] = freePort(t)
		u, _ := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		routes = append(routes, u)
	}
	servers, opts := make([]*server.Server, n), make([]server.Options, n)
	for i := range servers {
		o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: fmt.Sprintf("n%d", i+1),
			JetStream: true, StoreDir: t.TempDir(), RaftTick: 20 * time.Millisecond}
		if os.Getenv("CAIRN_TEST_LOG") != "" {
			o.Logger = logger.New(prefixWriter{os.Stderr, fmt.Sprintf("n%d ", i+1)}, true, false)
		}
		o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: ports[i], Name: clusterName, Routes: routes}
		if mod != nil {
			mod(i, &o)
		}
		s, err := server.New(o)
		if err == nil {
			err = s.Start()
		}
		if err != nil {
			for _, started := range servers[:i] {
				started.Shutdown()
			}
			return nil, nil, err
		}
		servers[i], opts[i] = s, o
		o.Port = portOf(t, s.ClientURL())
		opts[i] = o
	}
	for _, s := range servers {
		t.Cleanup(s.Shutdown)
	}
	return servers, opts, nil
}

// restartServer starts a server again with opts (after its Shutdown).
// Its ports are fixed; one another process took while it was down is
// waited for (bounded).
func restartServer(t *testing.T, o server.Options) *server.Server {
	t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	for {
		s, err := server.New(o)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Start()
		if err == nil {
			t.Cleanup(s.Shutdown)
			return s
		}
		if !addrInUse(err) || time.Now().After(deadline) { // a failed Start cleaned up after itself
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // polling for the port, bounded by the deadline
	}
}

// eventually retries f until it succeeds or clusterTimeout passes.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	eventuallyWithin(t, clusterTimeout, what, f)
}

// eventuallyWithin retries f until it succeeds or d passes: for a wait
// that includes a fixed delay of the server's (a 10 s housekeeping
// bound) on top of the usual convergence.
// A failure names the last error and the earlier distinct ones (each
// with how many tries returned it), so that a wait that failed in CI
// tells what it went through.
func eventuallyWithin(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var seen errorTally
	for {
		err := f()
		if err == nil {
			return
		}
		seen.add(err)
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v%s", what, err, seen.earlier(err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// errorTally counts a wait's errors by their text, in the order first seen.
type errorTally struct {
	texts []string
	count map[string]int
}

// maxTallied bounds the distinct errors a tally keeps.
const maxTallied = 8

func (e *errorTally) add(err error) {
	if e.count == nil {
		e.count = map[string]int{}
	}
	s := err.Error()
	if _, ok := e.count[s]; !ok && len(e.texts) == maxTallied {
		s = "(other errors)"
	}
	if _, ok := e.count[s]; !ok {
		e.texts = append(e.texts, s)
	}
	e.count[s]++
}

// earlier returns the distinct errors other than last, with their counts
// ("" if none).
func (e *errorTally) earlier(last error) string {
	var b strings.Builder
	for _, s := range e.texts {
		if s != last.Error() {
			fmt.Fprintf(&b, "\n\tearlier (%d tries): %s", e.count[s], s)
		}
	}
	return b.String()
}

// A stream with num_replicas 3 on three servers: created through one
// server, published to through another, its info from a third names the
// leader and the other replicas; when its leader's server stops, the
// other two elect a leader and keep every acknowledged message, and take
// new publishes.
func TestJetStreamClusterReplicatedStream(t *testing.T) {
	servers := jsCluster(t, 3)
	nc := make([]*nats.Conn, 3)
	js := make([]jetstream.JetStream, 3)
	for i, s := range servers {
		nc[i] = connect(t, s.ClientURL())
		var err error
		if js[i], err = jetstream.New(nc[i]); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	publish := func(i int, subj string) *jetstream.PubAck {
		t.Helper()
		var ack *jetstream.PubAck
		eventually(t, "publish "+subj, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var err error
			ack, err = js[i].Publish(ctx, subj, []byte("order"), jetstream.WithMsgID(subj))
			return err
		})
		return ack
	}
	for i := 1; i <= 10; i++ {
		if ack := publish(1, fmt.Sprintf("orders.%d", i)); ack.Sequence != uint64(i) || ack.Stream != "ORDERS" {
			t.Fatalf("PubAck %d: %+v", i, ack)
		}
	}
	// STREAM.LIST, answered by the meta leader whichever server leads
	// the stream, reports the state of the meta leader's replica.
	eventually(t, "stream list", func() error {
		lister := js[1].ListStreams(tctx(t))
		n := 0
		for si := range lister.Info() {
			if si.Config.Name == "ORDERS" && si.State.Msgs == 10 {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("ORDERS with 10 messages listed %d times (%v)", n, lister.Err())
		}
		return nil
	})
	var info *jetstream.StreamInfo
	eventually(t, "stream info", func() error {
		s, err := js[2].Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		info = s.CachedInfo()
		if info.State.Msgs != 10 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("info %+v cluster %+v", info.State, info.Cluster)
		}
		return nil
	})
	// A durable pull consumer, created and fetched through the server
	// that does not run it: its subscriptions are the cluster's.
	var cons jetstream.Consumer
	eventually(t, "create consumer", func() error {
		var err error
		cons, err = js[2].CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(tctx(t)); err != nil {
			t.Fatalf("ack %s: %v", m.Subject(), err)
		}
		got++
	}
	if got != 10 {
		t.Fatalf("fetched %d of 10 (%v)", got, batch.Error())
	}
	leader := -1
	for i, s := range servers {
		if info.Cluster.Leader == s.Name() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("leader %q is none of the servers", info.Cluster.Leader)
	}
	servers[leader].Shutdown()
	other := (leader + 1) % 3
	for i := 11; i <= 15; i++ {
		if ack := publish(other, fmt.Sprintf("orders.%d", i)); ack.Sequence != uint64(i) {
			t.Fatalf("PubAck %d after the leader stopped: %+v", i, ack)
		}
	}
	eventually(t, "info after failover", func() error {
		s, err := js[other].Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		info = s.CachedInfo()
		if info.State.Msgs != 15 || info.State.LastSeq != 15 || info.Cluster.Leader == servers[leader].Name() {
			return fmt.Errorf("info %+v cluster %+v", info.State, info.Cluster)
		}
		return nil
	})
	eventually(t, "delete ORDERS", func() error { return js[other].DeleteStream(tctx(t), "ORDERS") })
	// The stream's leader answers for it until it applied the removal
	// (the meta leader answered the delete once it applied there).
	eventually(t, "info after delete", func() error {
		if _, err := js[other].Stream(tctx(t), "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("info after delete: %v", err)
		}
		return nil
	})
}

// Streams with one replica in a cluster: the meta group places each on
// one server, every server knows them (create through one, info and
// publish through the others), and core subscribers anywhere still get
// what is published to a stream's subjects.
func TestJetStreamClusterOneReplicaStreams(t *testing.T) {
	servers := jsCluster(t, 3)
	js := make([]jetstream.JetStream, 3)
	for i, s := range servers {
		var err error
		if js[i], err = jetstream.New(connect(t, s.ClientURL())); err != nil {
			t.Fatal(err)
		}
	}
	watch := connect(t, servers[2].ClientURL())
	seen, err := watch.SubscribeSync("one.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"ONE", "TWO"} {
		eventually(t, "create "+name, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := js[i].CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}})
			return err
		})
	}
	for i := 1; i <= 10; i++ {
		for j, subj := range []string{"one.x", "two.x"} {
			var ack *jetstream.PubAck
			eventually(t, "publish "+subj, func() error {
				var err error
				ack, err = js[2].Publish(tctx(t), subj, nil, jetstream.WithMsgID(fmt.Sprintf("%s-%d", subj, i)))
				return err
			})
			if ack.Sequence != uint64(i) || ack.Stream != []string{"ONE", "TWO"}[j] {
				t.Fatalf("PubAck %d on %s: %+v", i, subj, ack)
			}
		}
	}
	for _, name := range []string{"ONE", "TWO"} {
		for i := range js {
			s, err := js[i].Stream(tctx(t), name)
			if err != nil || s.CachedInfo().State.Msgs != 10 {
				t.Fatalf("stream %s from n%d: %v", name, i+1, err)
			}
		}
	}
	names := js[1].StreamNames(tctx(t))
	var got []string
	for n := range names.Name() {
		got = append(got, n)
	}
	if fmt.Sprint(got) != "[ONE TWO]" {
		t.Fatalf("stream names %v", got)
	}
	for range 10 {
		if _, err := seen.NextMsg(clusterTimeout); err != nil {
			t.Fatalf("core subscriber: %v", err)
		}
	}
}

// A server of a JetStream cluster restarts on its store: it rejoins the
// meta group and its replica of a file stream (rebuilt from the group's
// log), and after the stream's leader is lost the two others keep every
// acknowledged message.
func TestJetStreamClusterRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	pub := func(js jetstream.JetStream, i int) {
		t.Helper()
		eventually(t, fmt.Sprintf("publish %d", i), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			ack, err := js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte("order"), jetstream.WithMsgID(fmt.Sprint(i)))
			if err == nil && ack.Sequence != uint64(i) {
				t.Fatalf("PubAck %d: %+v", i, ack)
			}
			return err
		})
	}
	info := func(js jetstream.JetStream, want uint64) *jetstream.StreamInfo {
		t.Helper()
		var si *jetstream.StreamInfo
		eventually(t, "info", func() error {
			s, err := js.Stream(tctx(t), "ORDERS")
			if err != nil {
				return err
			}
			si = s.CachedInfo()
			if si.State.Msgs != want || si.State.LastSeq != want {
				return fmt.Errorf("state %+v, want %d messages", si.State, want)
			}
			return nil
		})
		return si
	}
	for i := 1; i <= 10; i++ {
		pub(js0, i)
	}
	si := info(js0, 10)
	follower := -1
	for i, s := range servers {
		if s.Name() != si.Cluster.Leader && follower < 0 {
			follower = i
		}
	}
	stay := 3 - follower - leaderIndex(servers, si.Cluster.Leader) // the third server
	jsS, err := jetstream.New(connect(t, servers[stay].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	servers[follower].Shutdown()
	for i := 11; i <= 15; i++ {
		pub(jsS, i)
	}
	servers[follower] = restartServer(t, opts[follower])
	jsF, err := jetstream.New(connect(t, servers[follower].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	si = info(jsF, 15)
	// The stream's leader stops; the client publishes through a server
	// that stays (the restarted follower may have become the leader).
	stopped := leaderIndex(servers, si.Cluster.Leader)
	servers[stopped].Shutdown()
	js := jsF
	if stopped == follower {
		js = jsS
	}
	for i := 16; i <= 20; i++ {
		pub(js, i)
	}
	info(js, 20)
}

// leaderIndex returns the index of the server named leader, -1 if none.
func leaderIndex(servers []*server.Server, leader string) int {
	for i, s := range servers {
		if s != nil && s.Name() == leader {
			return i
		}
	}
	return -1
}

// A stream with one replica keeps its messages and its consumers when
// its server restarts (it has no log to be rebuilt from: its files are
// restored as a single server restores them).
func TestJetStreamClusterOneReplicaRestart(t *testing.T) {
	servers, opts := jsClusterOpts(t, 3)
	js0, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ONE", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "ONE", Subjects: []string{"one.>"}})
		return err
	})
	for i := 1; i <= 5; i++ {
		eventually(t, "publish", func() error {
			_, err := js0.Publish(tctx(t), "one.x", nil, jetstream.WithMsgID(fmt.Sprint(i)))
			return err
		})
	}
	eventually(t, "create the consumer", func() error {
		_, err := js0.CreateOrUpdateConsumer(tctx(t), "ONE", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	s, err := js0.Stream(tctx(t), "ONE")
	if err != nil {
		t.Fatal(err)
	}
	home := leaderIndex(servers, s.CachedInfo().Cluster.Leader)
	if home < 0 {
		t.Fatalf("ONE's server %q", s.CachedInfo().Cluster.Leader)
	}
	servers[home].Shutdown()
	servers[home] = restartServer(t, opts[home])
	other := (home + 1) % 3
	jsO, err := jetstream.New(connect(t, servers[other].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "ONE after its server restarted", func() error {
		s, err := jsO.Stream(tctx(t), "ONE")
		if err != nil {
			return err
		}
		if st := s.CachedInfo().State; st.Msgs != 5 || st.LastSeq != 5 {
			return fmt.Errorf("state %+v", st)
		}
		_, err = s.Consumer(tctx(t), "C")
		return err
	})
}

// /healthz of a server of a JetStream cluster reports the meta group:
// unavailable while its routes have not all resolved (the meta group has
// not started), ok once the cluster runs.
func TestJetStreamClusterHealthz(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("cairn's JetStream cluster layer")
	}
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var routes []*url.URL
	for _, p := range ports {
		u, _ := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", p))
		routes = append(routes, u)
	}
	start := func(i int) (string, *server.Server) {
		o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: fmt.Sprintf("n%d", i+1),
			JetStream: true, StoreDir: t.TempDir(), RaftTick: 20 * time.Millisecond}
		o.Cluster = server.ClusterOptions{Host: "127.0.0.1", Port: ports[i], Name: clusterName, Routes: routes}
		s := restartServer(t, o)
		m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: -1, Server: s})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m.URL(), s
	}
	health := func(u string) (int, string) {
		resp, err := http.Get(u + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	u1, s1 := start(0)
	if code, body := health(u1); code != http.StatusServiceUnavailable || !strings.Contains(body, "waits to enter its meta group") {
		t.Fatalf("alone: %d %s", code, body)
	}
	// Without a meta leader for a while, the server answers the meta
	// group's requests with 10008 rather than leaving them to time out.
	js1, err := jetstream.New(connect(t, s1.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "10008 from a leaderless server", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js1.CreateStream(ctx, jetstream.StreamConfig{Name: "EARLY"})
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == 10008 {
			return nil
		}
		return fmt.Errorf("create: %v", err)
	})
	start(1)
	start(2)
	eventually(t, "healthz ok", func() error {
		if code, body := health(u1); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
}
