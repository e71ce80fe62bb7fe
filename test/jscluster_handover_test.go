package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/server"
)

// Lame duck mode and shutdown of the server that leads a replicated
// stream and the meta group (issues 15 and 16; docs/cluster.md, "Lame
// duck mode and shutdown"): before JetStream stops, the server hands the
// leadership of its Raft groups to the other servers, so that a nats.go
// client publishing with PubAcks through that very server loses nothing
// and fails nothing (it retries a 503 no responders as it does by
// default), and every acknowledged message is in the stream afterwards.

// handOverCluster is three servers with an R3 file stream ORDERS whose
// leader also leads the meta group; leader is its index.
type handOverCluster struct {
	servers []*server.Server
	leader  int
	admin   jetstream.JetStream // a client of another server
}

func startHandOverCluster(t *testing.T) *handOverCluster {
	t.Helper()
	// The production Raft tick (100 ms): an election after a leader
	// vanished then takes longer than the client's retries of a 503 (two,
	// 250 ms apart), as in production, so that only a handover passes.
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftTick = 0 })
	hc := &handOverCluster{servers: servers}
	nc := connect(t, servers[0].ClientURL())
	setup, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitMetaFormed(t, servers)
	eventually(t, "create ORDERS", func() error {
		_, err := setup.CreateStream(pollCtx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: jetstream.FileStorage})
		return err
	})
	eventually(t, "the stream's leader on the meta leader's server", func() error {
		meta := servers[0].JetStreamMeta()
		if meta == nil || meta.Leader == "" {
			return errors.New("no meta leader")
		}
		st, err := setup.Stream(pollCtx(t), "ORDERS")
		if err != nil {
			return err
		}
		ci := st.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return errors.New("no stream leader")
		}
		if ci.Leader != meta.Leader {
			_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, meta.Leader), 2*time.Second)
			return fmt.Errorf("stream leader %s, meta leader %s", ci.Leader, meta.Leader)
		}
		hc.leader = leaderIndex(servers, ci.Leader)
		return nil
	})
	if hc.admin, err = jetstream.New(connect(t, hc.other().ClientURL())); err != nil {
		t.Fatal(err)
	}
	return hc
}

// pollCtx bounds one request of a loop that retries it: a request sent
// while a group changes leader may go unanswered (docs/cluster.md,
// "Who answers"), and the loop sends the next one.
func pollCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// other returns a server that is not the leader.
func (hc *handOverCluster) other() *server.Server { return hc.servers[(hc.leader+1)%3] }

// syncPublisher publishes with nats.go's jetstream Publish, one message
// at a time, each waiting for its PubAck, until stopped; it keeps the
// sequence of every acknowledged message and every failure. Its messages
// carry no Nats-Msg-Id, so that deduplication hides no message stored
// twice. A publish answered 503 (no responders: the stream's subjects
// have no subscriber while its new leader takes over) is retried every
// 250 ms for 3 s (pubRetries), where nats.go's default gives up after
// 750 ms: that covers a hand-over on this machine but not always one
// beside the rest of the test suite under -race (once in CI, two
// publishes failed "no response from stream"); the bound is
// writable again within 2 s.
type syncPublisher struct {
	js       jetstream.JetStream
	mu       sync.Mutex
	acked    map[string]uint64 // message id -> sequence
	failures []string
	stop     chan struct{}
	done     chan struct{}
	n        atomic.Int64 // acknowledged so far
}

// pubRetries is how many times a syncPublisher's publish answered 503
// is sent again, 250 ms apart (nats.go's default wait).
const pubRetries = 12

func startSyncPublisher(t *testing.T, nc *nats.Conn) *syncPublisher {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &syncPublisher{js: js, acked: map[string]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(p.halt)
	return p
}

func (p *syncPublisher) run() {
	defer close(p.done)
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		id := fmt.Sprintf("m-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ack, err := p.js.Publish(ctx, "orders.new", []byte(id), jetstream.WithRetryAttempts(pubRetries)) // no Nats-Msg-Id: a message stored twice shows
		cancel()
		p.mu.Lock()
		if err != nil {
			p.failures = append(p.failures, fmt.Sprintf("%s: %v", id, err))
		} else {
			p.acked[id] = ack.Sequence
			p.n.Add(1)
		}
		p.mu.Unlock()
	}
}

// halt stops the publisher and waits for its last publish.
func (p *syncPublisher) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// waitMore waits until the publisher has k more PubAcks than now.
func (p *syncPublisher) waitMore(t *testing.T, k int64, what string) {
	t.Helper()
	want := p.n.Load() + k
	waitFor(t, clusterTimeout, what, func() bool { return p.n.Load() >= want })
}

// check stops the publisher and checks it failed nothing and that every
// acknowledged message is in the stream at its sequence, read through
// another server.
func (p *syncPublisher) check(t *testing.T, admin jetstream.JetStream) {
	t.Helper()
	p.halt()
	if len(p.failures) > 0 {
		t.Fatalf("%d failed publishes (of %d): %v", len(p.failures), len(p.failures)+len(p.acked), p.failures)
	}
	p.checkStream(t, admin, nil)
}

// checkStream checks that the stream holds every acknowledged message at
// its sequence, and nothing else but, perhaps, the messages of maybe
// (publishes whose answer was lost).
func (p *syncPublisher) checkStream(t *testing.T, admin jetstream.JetStream, maybe map[string]bool) {
	t.Helper()
	var msgs uint64
	eventually(t, "stream info", func() error {
		st, err := admin.Stream(pollCtx(t), "ORDERS")
		if err != nil {
			return err
		}
		msgs = st.CachedInfo().State.Msgs
		if msgs < uint64(len(p.acked)) || msgs > uint64(len(p.acked)+len(maybe)) {
			return fmt.Errorf("%d messages, %d acknowledged", msgs, len(p.acked))
		}
		return nil
	})
	bySeq := make(map[uint64]string, len(p.acked))
	for id, seq := range p.acked {
		bySeq[seq] = id
	}
	eventually(t, "read ORDERS", func() error {
		oc, err := admin.OrderedConsumer(pollCtx(t), "ORDERS", jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		for got := uint64(0); got < msgs; {
			batch, err := oc.Fetch(int(msgs-got), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				return err
			}
			n := 0
			for m := range batch.Messages() {
				md, err := m.Metadata()
				if err != nil {
					return err
				}
				if id, ok := bySeq[md.Sequence.Stream]; ok && id != string(m.Data()) || !ok && !maybe[string(m.Data())] {
					t.Fatalf("sequence %d holds %q, acknowledged for %q", md.Sequence.Stream, m.Data(), id)
				}
				n++
			}
			if n == 0 {
				return fmt.Errorf("read %d of %d: %v", got, msgs, batch.Error())
			}
			got += uint64(n)
		}
		return nil
	})
}

// Lame duck mode (SIGUSR2, the Helm chart's preStop): the lame duck server
// leads the stream, a replicated consumer and the meta group, and its
// client publishes through it. The leadership moves before JetStream
// stops there; the client's publishes go on, through the lame duck server
// to the new leader, with no failure; the consumer delivers and takes
// acknowledgements through its new leader; a create goes through the new
// meta leader and is placed on the other servers.
func TestJetStreamClusterLameDuckHandsOver(t *testing.T) {
	hc := startHandOverCluster(t)
	leader := hc.servers[hc.leader]
	// A replicated durable consumer, led by the lame duck server too.
	nc := connect(t, hc.other().ClientURL())
	eventually(t, "create the consumer", func() error {
		_, err := hc.admin.CreateOrUpdateConsumer(pollCtx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	consumerLeader := func() string {
		c, err := hc.admin.Consumer(pollCtx(t), "ORDERS", "worker")
		if err != nil || c.CachedInfo().Cluster == nil {
			return ""
		}
		return c.CachedInfo().Cluster.Leader
	}
	eventually(t, "the consumer's leader on the lame duck server", func() error {
		if l := consumerLeader(); l != leader.Name() {
			_, _ = nc.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.worker", fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, leader.Name()), 2*time.Second)
			return fmt.Errorf("consumer leader %q", l)
		}
		return nil
	})
	pub := startSyncPublisher(t, connect(t, leader.ClientURL()))
	pub.waitMore(t, 20, "publishes before lame duck mode")

	ldm := make(chan struct{})
	go func() { defer close(ldm); leader.LameDuck(time.Minute, 30*time.Second) }()
	waitFor(t, clusterTimeout, "a new stream leader", func() bool {
		st, err := hc.admin.Stream(pollCtx(t), "ORDERS")
		if err != nil {
			return false
		}
		ci := st.CachedInfo().Cluster
		return ci != nil && ci.Leader != "" && ci.Leader != leader.Name()
	})
	waitFor(t, clusterTimeout, "a new meta leader", func() bool {
		m := hc.other().JetStreamMeta()
		return m != nil && m.Leader != "" && m.Leader != leader.Name()
	})
	waitFor(t, clusterTimeout, "a new consumer leader", func() bool {
		l := consumerLeader()
		return l != "" && l != leader.Name()
	})
	pub.waitMore(t, 20, "publishes through the lame duck server after the handover")
	pub.check(t, hc.admin)
	cons, err := hc.admin.Consumer(tctx(t), "ORDERS", "worker")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(tctx(t)); err != nil {
			t.Fatalf("ack through the new consumer leader: %v", err)
		}
		got++
	}
	if got != 10 {
		t.Fatalf("fetched %d of 10 from the new consumer leader (%v)", got, batch.Error())
	}
	eventually(t, "a create through the new meta leader, placed on the other servers", func() error {
		st, err := hc.admin.CreateStream(pollCtx(t), jetstream.StreamConfig{Name: "AFTER", Subjects: []string{"after"}, Replicas: 2})
		if err != nil {
			return err
		}
		ci := st.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return errors.New("AFTER has no leader yet")
		}
		for _, r := range ci.Replicas {
			if r.Name == leader.Name() {
				t.Fatalf("AFTER placed on the lame duck server: %+v", ci)
			}
		}
		if ci.Leader == leader.Name() {
			t.Fatalf("AFTER led by the lame duck server: %+v", ci)
		}
		return nil
	})
	leader.Shutdown()
	<-ldm
}

// A clean shutdown (SIGTERM, SIGINT) of the server that leads the stream
// and the meta group: the leadership moves before the server stops, so
// that a client of another server publishing meanwhile fails nothing.
func TestJetStreamClusterShutdownHandsOver(t *testing.T) {
	hc := startHandOverCluster(t)
	leader := hc.servers[hc.leader]
	pub := startSyncPublisher(t, connect(t, hc.other().ClientURL()))
	pub.waitMore(t, 20, "publishes before the shutdown")
	leader.Shutdown()
	pub.waitMore(t, 20, "publishes after the shutdown")
	pub.check(t, hc.admin)
}

// The same shutdown with the client on the stopping server itself, as
// the operator trial ran it (SIGTERM of the leader with a nats.go client
// publishing through it): the client's publishes during the handover get
// 503 and are retried, it reconnects to another server when its
// connection closes (a server shutting down sends no INFO whose
// connect_urls lost the other servers: nats.go would never reconnect),
// and goes on. One publish may go unanswered: the one whose PubAck was on
// its way when the connection closed (nats.go then waits for its
// timeout), which no server can answer on a closed connection;
// nats-server loses it too (docs/cluster.md, "Lame duck mode and
// shutdown").
func TestJetStreamClusterShutdownLeaderClient(t *testing.T) {
	hc := startHandOverCluster(t)
	leader := hc.servers[hc.leader]
	reconnected := make(chan string, 4)
	nc, err := nats.Connect(leader.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectHandler(func(c *nats.Conn) { reconnected <- c.ConnectedUrl() }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pub := startSyncPublisher(t, nc)
	pub.waitMore(t, 20, "publishes before the shutdown")
	leader.Shutdown()
	select {
	case u := <-reconnected:
		if u == leader.ClientURL() {
			t.Fatalf("reconnected to the stopped server %s", u)
		}
	case <-time.After(clusterTimeout):
		t.Fatal("the client did not reconnect to another server")
	}
	pub.waitMore(t, 20, "publishes after the shutdown")
	pub.halt()
	if len(pub.failures) > 1 || len(pub.failures) == 1 && !strings.Contains(pub.failures[0], context.DeadlineExceeded.Error()) {
		t.Fatalf("failed publishes: %v, want none but the one in flight at the close", pub.failures)
	}
	maybe := map[string]bool{}
	for _, f := range pub.failures {
		t.Logf("the publish in flight when the connection closed went unanswered: %v", f)
		maybe[strings.SplitN(f, ":", 2)[0]] = true
	}
	pub.checkStream(t, hc.admin, maybe)
}

// The routine events of a cluster whose server restarts are logged at
// [INF] (the Raft transport's connections made, lost and accepted, as
// nats-server logs its routes') or debug (a peer reported gone, its Raft
// beats stopping and resuming), never [WRN], which stays for real
// problems.
func TestJetStreamClusterRoutineEventsNotWarnings(t *testing.T) {
	logs := make([]*syncBuffer, 3)
	servers, opts := jsClusterMod(t, 3, func(i int, o *server.Options) {
		logs[i] = &syncBuffer{}
		o.Logger = logger.New(logs[i], i == 0, false)
	})
	waitMetaFormed(t, servers)
	servers[1].Shutdown()
	waitFor(t, clusterTimeout, "n1 to notice n2's silence", func() bool {
		l := logs[0].String()
		// Its transport reports n2 gone (its port refuses the redial), or
		// its beats stop for an election timeout.
		return strings.Contains(l, "[DBG] raftnode: n2 is gone") || strings.Contains(l, "[DBG] raftnode: no beat from [n2]")
	})
	restartServer(t, opts[1])
	waitFor(t, clusterTimeout, "n1 to hear n2 again", func() bool {
		return strings.Contains(logs[0].String(), "[DBG] raftnode: [n2] heard again")
	})
	// n1 may hear n2 first on the connection n2 dials, before its own
	// redial (backed off) succeeds: wait for both, before and after. An
	// accepted connection is logged at debug level when its peer closed
	// the one before less than 2 s earlier (a redial: transport
	// closedLine), which a quick restart can be.
	for _, want := range []string{"[INF] transport: connected to n2", "] transport: accepted the Raft connection of n2"} {
		waitFor(t, clusterTimeout, fmt.Sprintf("n1's log to have %q before and after n2's restart", want), func() bool {
			return strings.Count(logs[0].String(), want) >= 2
		})
	}
	for i, l := range logs {
		for line := range strings.SplitSeq(l.String(), "\n") {
			if strings.Contains(line, "[WRN] transport:") || strings.Contains(line, "[WRN] raftnode: no beat") || strings.Contains(line, "heard again") && !strings.Contains(line, "[DBG]") {
				t.Errorf("n%d logged a routine event as a warning: %s", i+1, line)
			}
		}
	}
}

// waitMetaFormed waits until every server knows the meta leader and the
// server of every other member: a server that joined the meta group by
// its leader's invitation knows the other members' servers only once the
// leader's catalogue reached it (a follower hears no other follower), so
// knowing the leader alone does not mean it watches them all. It waits
// up to a minute (a setup step: 20 s passed once in CI under -race
// beside load, four servers) and names what the server saw.
func waitMetaFormed(t *testing.T, servers []*server.Server) {
	t.Helper()
	for _, s := range servers {
		eventuallyWithin(t, 60*time.Second, s.Name()+" to know the meta leader and every member", func() error {
			m := s.JetStreamMeta()
			if m == nil {
				return fmt.Errorf("%s: no meta group", s.Name())
			}
			if m.Leader == "" || m.Size != len(servers) {
				return fmt.Errorf("%s: meta leader %q, size %d", s.Name(), m.Leader, m.Size)
			}
			known := map[string]bool{s.Name(): true}
			for _, p := range m.Replicas {
				known[p.Name] = true
			}
			for _, o := range servers {
				if !known[o.Name()] {
					return fmt.Errorf("%s: meta leader %s, %s not among its replicas", s.Name(), m.Leader, o.Name())
				}
			}
			return nil
		})
	}
}

// A server whose store was wiped comes back with nothing but routine
// lines: it starts on a new Raft WAL (not "recovered"), its old replicas
// are replaced and its stream is caught up by a snapshot, all at [INF]
// or [DBG] (trial 38 counted 27 [WRN] lines for one wiped server:
// fences of its old replicas, snapshot installs, etcd raft's
// "unpromotable" lines).
func TestJetStreamClusterWipedServerLogsNoWarnings(t *testing.T) {
	logs := make([]*syncBuffer, 3)
	servers, opts := jsClusterMod(t, 3, func(i int, o *server.Options) {
		logs[i] = &syncBuffer{}
		o.Logger = logger.New(logs[i], false, false)
		o.RaftRetain = 8
	})
	waitMetaFormed(t, servers)
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	eventually(t, "create the durable", func() error {
		_, err := js0.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 100)
	s, err := js0.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	leader := leaderIndex(servers, s.CachedInfo().Cluster.Leader)
	if leader < 0 {
		t.Fatalf("leader %q", s.CachedInfo().Cluster.Leader)
	}
	wiped := (leader + 1) % 3
	servers[wiped].Shutdown()
	if err := os.RemoveAll(opts[wiped].StoreDir); err != nil {
		t.Fatal(err)
	}
	jsL := jsAt(t, servers[leader])
	publishRange(t, jsL, sent, 101, 150)
	from := len(logs[wiped].String())
	servers[wiped] = restartServer(t, opts[wiped])
	after := func() string { return logs[wiped].String()[from:] }
	waitFor(t, clusterTimeout, "the wiped server's snapshot installed", func() bool {
		return strings.Contains(after(), "installed the snapshot")
	})
	eventually(t, "the wiped server's new replicas current", func() error {
		s, err := jsL.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		for _, p := range s.CachedInfo().Cluster.Replicas {
			if p.Name == servers[wiped].Name() && p.Current && !p.Offline {
				return nil
			}
		}
		return fmt.Errorf("cluster %+v", s.CachedInfo().Cluster)
	})
	if !strings.Contains(after(), "[INF] JetStream cluster: started on a new Raft WAL: nothing to recover") || strings.Contains(after(), "JetStream cluster: recovered;") {
		t.Errorf("the wiped server's start did not say it had nothing to recover")
	}
	for line := range strings.SplitSeq(after(), "\n") {
		if strings.Contains(line, "[WRN]") || strings.Contains(line, "[ERR]") {
			t.Errorf("the wiped server logged a routine event as a warning: %s", line)
		}
	}
}
