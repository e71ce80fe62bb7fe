package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
)

// Durable source and mirror consumers (ADR-60) and external mirrors and
// sources in a cluster of three (docs/cluster.md, "Sourcing in a
// cluster"): only the leader of the replicated sourcing stream runs the
// exchange with the origin's consumer, and a new leader goes on where
// the copies its log committed end. Each test publishes to the origin
// without pause while the sourcing streams' leadership moves to each
// server in turn and while their leader's server is shut down and
// started again, then checks that every origin message was copied
// exactly once: a source holds each origin sequence once (its
// Nats-Stream-Source header), a mirror every sequence of the origin.
// Before, a clustered JetStream refused these streams (10052); with the
// refusal lifted alone, every replica ran the exchange: each reset the
// durable consumer every couple of seconds, and a new leader went on
// from the position its sourcer had held since it started.

// TestJetStreamClusterDurableSourceLeaderChange: an R3 aggregate sourcing
// and an R3 mirror of an R3 origin, each through a durable flow_control
// consumer the test created. After the changes of leadership no reset
// reaches the consumers while nothing changes (only a leader resets, once
// per leadership), the flow control replies of the last leader
// acknowledge everything, and stream info reports the leader's lag.
func TestJetStreamClusterDurableSourceLeaderChange(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, nil)
	nc, js := clusterConn(t, servers)
	o := clusterCreate(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}, Replicas: 3})
	for _, c := range []jetstream.ConsumerConfig{
		{Durable: "SRC", DeliverSubject: "dlv.src", AckPolicy: jetstream.AckFlowControlPolicy, MaxAckPending: 100, Replicas: 3},
		{Durable: "MIR", DeliverSubject: "dlv.mir", AckPolicy: jetstream.AckFlowControlPolicy, MaxAckPending: 100, Replicas: 3},
	} {
		eventually(t, "create consumer "+c.Durable, func() error {
			_, err := o.CreateOrUpdatePushConsumer(ctx2(t), c)
			return err
		})
	}
	clusterCreate(t, js, jetstream.StreamConfig{Name: "AGG", Replicas: 3, Sources: []*jetstream.StreamSource{
		{Name: "O", Consumer: &jetstream.StreamConsumerSource{Name: "SRC", DeliverSubject: "dlv.src"}}}})
	clusterCreate(t, js, jetstream.StreamConfig{Name: "M", Replicas: 3, Mirror: &jetstream.StreamSource{
		Name: "O", Consumer: &jetstream.StreamConsumerSource{Name: "MIR", DeliverSubject: "dlv.mir"}}})

	n := sourceThroughLeaderChanges(t, servers, opts, nc, js, js, "O", []string{"AGG", "M"})

	// Settled: a few more messages copied with no reset meanwhile (a
	// reset follows a change of leadership, of the stream or of the
	// consumer, which the restart may still bring; before, each follower
	// reset the consumer a couple of seconds after each delivery it could
	// not copy).
	resets := countRequests(t, nc, "$JS.API.CONSUMER.RESET.O.*")
	round := 0
	eventuallyWithin(t, 4*clusterTimeout, "10 messages copied without a reset", func() error {
		resets.Store(0)
		for i := range 10 {
			clusterPublish(t, js, fmt.Sprintf("o.quiet.%d.%d", round, i), uint64(n+i+1))
		}
		n += 10
		round++
		sourcedOnce(t, js, "AGG", n)
		mirroredAll(t, js, "M", n)
		if got := resets.Load(); got != 0 {
			t.Logf("round %d: %d consumer resets", round, got)
			return fmt.Errorf("%d consumer resets while the leaders stayed", got)
		}
		return nil
	})
	for _, name := range []string{"SRC", "MIR"} {
		eventually(t, name+" acknowledged through "+strconv.Itoa(n), func() error {
			c, err := o.PushConsumer(ctx2(t), name)
			if err != nil {
				return err
			}
			ci := c.CachedInfo()
			if ci.AckFloor.Stream != uint64(n) || !ci.PushBound {
				return fmt.Errorf("ack floor %+v, push bound %v", ci.AckFloor, ci.PushBound)
			}
			return nil
		})
	}
	eventually(t, "the leaders' source and mirror info", func() error {
		ai, err := streamInfoVia(js, "AGG")
		if err != nil {
			return err
		}
		mi, err := streamInfoVia(js, "M")
		if err != nil {
			return err
		}
		return sourceInfoLive(append(ai.Sources, mi.Mirror))
	})
}

// TestJetStreamClusterExternalSourceLeaderChange: the account S mirrors
// and sources the stream ORIG of the account O through its imports of
// O's consumer API, deliver subjects and flow control replies
// (externalConf, as nats-server v2.15.2's jsClusterMirrorSourceImportsTempl).
// After the changes of leadership the origin holds one consumer per
// sourcing stream, its leader's: each leader that stepped down deleted
// its own.
func TestJetStreamClusterExternalSourceLeaderChange(t *testing.T) {
	auth := externalAuth(t)
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.Auth = auth })
	_, jo := clusterConn(t, servers, nats.UserInfo("o", "p"))
	ns, js := clusterConn(t, servers, nats.UserInfo("s", "p"))
	clusterCreate(t, jo, jetstream.StreamConfig{Name: "ORIG", Subjects: []string{"orig.>"}, Replicas: 3})
	clusterCreate(t, js, jetstream.StreamConfig{Name: "SRC", Replicas: 3, Sources: []*jetstream.StreamSource{{
		Name: "ORIG", External: &jetstream.ExternalStream{APIPrefix: "RI.JS.API", DeliverPrefix: "RI.DELIVER.SYNC.SOURCES"}}}})
	clusterCreate(t, js, jetstream.StreamConfig{Name: "MIR", Replicas: 3, Mirror: &jetstream.StreamSource{
		Name: "ORIG", External: &jetstream.ExternalStream{APIPrefix: "RI.JS.API", DeliverPrefix: "RI.DELIVER.SYNC.MIRRORS"}}})

	n := sourceThroughLeaderChanges(t, servers, opts, ns, js, jo, "ORIG", []string{"SRC", "MIR"})

	// Leadership moves once more without a kill: the origin ends with
	// the two consumers of the last leaders.
	for _, name := range []string{"SRC", "MIR"} {
		leadBy(t, servers, ns, js, name, (streamLeader(t, servers, js, name)+1)%3)
	}
	for i := range 10 {
		clusterPublish(t, jo, fmt.Sprintf("orig.more.%d", i), uint64(n+i+1))
	}
	n += 10
	sourcedOnce(t, js, "SRC", n)
	mirroredAll(t, js, "MIR", n)
	eventuallyWithin(t, 2*clusterTimeout, "the origin's consumers", func() error {
		s, err := jo.Stream(ctx2(t), "ORIG")
		if err != nil {
			return err
		}
		var names []string
		l := s.ConsumerNames(ctx2(t))
		for name := range l.Name() {
			names = append(names, name)
		}
		if l.Err() != nil {
			return l.Err()
		}
		if len(names) != 2 {
			return fmt.Errorf("consumers %v, want one of each sourcing stream's leader", names)
		}
		return nil
	})
	eventually(t, "the leaders' source and mirror info", func() error {
		si, err := streamInfoVia(js, "SRC")
		if err != nil {
			return err
		}
		mi, err := streamInfoVia(js, "MIR")
		if err != nil {
			return err
		}
		if si.Sources[0].External == nil || mi.Mirror.External == nil || mi.Mirror.External.DeliverPrefix != "RI.DELIVER.SYNC.MIRRORS" {
			return fmt.Errorf("external %+v, %+v", si.Sources[0].External, mi.Mirror.External)
		}
		return sourceInfoLive(append(si.Sources, mi.Mirror))
	})
}

// sourceThroughLeaderChanges publishes to origin (through ojs, on
// <origin-subject-prefix>.<i>) without pause while each of the sourcing
// streams names is led by each server in turn, then while its leader's
// server is shut down and started again, and checks the copies: names[0]
// is a source, names[1] a mirror. It returns how many messages the
// origin holds.
func sourceThroughLeaderChanges(t *testing.T, servers []*server.Server, opts []server.Options, nc *nats.Conn, js, ojs jetstream.JetStream, origin string, names []string) int {
	t.Helper()
	subj := strings.ToLower(origin) + ".p"
	pub := startOriginPublisher(t, ojs, subj)
	progress := func(what string) {
		t.Helper()
		for _, name := range names {
			sourceProgress(t, js, name, what)
		}
	}
	progress("before any change of leader")
	for _, target := range []int{1, 2, 0} {
		for _, name := range names {
			leadBy(t, servers, nc, js, name, target)
		}
		progress(fmt.Sprintf("led by %s", servers[target].Name()))
	}
	// The aggregate's leader's server goes (mid-copy: the publisher
	// goes on), and comes back.
	down := streamLeader(t, servers, js, names[0])
	servers[down].Shutdown()
	progress(servers[down].Name() + " down")
	servers[down] = restartServer(t, opts[down])
	progress(servers[down].Name() + " back")
	acked := pub()
	var n int
	eventually(t, "the origin's state", func() error {
		oi, err := streamInfoVia(ojs, origin)
		if err != nil {
			return err
		}
		if st := oi.State; st.Msgs != st.LastSeq || st.LastSeq < uint64(acked) {
			return fmt.Errorf("origin state %+v, %d acknowledged", st, acked)
		}
		n = int(oi.State.LastSeq)
		return nil
	})
	sourcedOnce(t, js, names[0], n)
	mirroredAll(t, js, names[1], n)
	return n
}

// startOriginPublisher publishes subj.<i> through js, one message after
// the other, each until acknowledged, until the returned stop is called;
// stop returns the sequence of the last message acknowledged (a
// publish that timed out may have been stored too).
func startOriginPublisher(t *testing.T, js jetstream.JetStream, subj string) (stop func() int) {
	t.Helper()
	var done atomic.Bool
	var last atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; !done.Load(); i++ {
			for !done.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				ack, err := js.Publish(ctx, fmt.Sprintf("%s.%d", subj, i), []byte(strconv.Itoa(i)))
				cancel()
				if err == nil {
					last.Store(ack.Sequence)
					break
				}
			}
			time.Sleep(2 * time.Millisecond) // pacing, not a wait for a condition
		}
	}()
	stopped := false
	stop = func() int {
		if !stopped {
			stopped = true
			done.Store(true)
			wg.Wait()
		}
		return int(last.Load())
	}
	t.Cleanup(func() { stop() })
	return stop
}

// sourceProgress waits until stream name copies again: it holds more
// messages than when asked. A server's shutdown may make the sourcer's
// consumer setups fail for a while (the meta leader's election: 10008),
// each failure adding 10 s to nats-server's retry backoff, so the wait
// is longer than the cluster's usual.
func sourceProgress(t *testing.T, js jetstream.JetStream, name, what string) {
	t.Helper()
	var from uint64
	eventually(t, what+": "+name+"'s count", func() error {
		si, err := streamInfoVia(js, name)
		if err != nil {
			return err
		}
		from = si.State.Msgs
		return nil
	})
	eventuallyWithin(t, 4*clusterTimeout, fmt.Sprintf("%s: %s copies above %d", what, name, from), func() error {
		si, err := streamInfoVia(js, name)
		if err != nil {
			return err
		}
		if si.State.Msgs <= from {
			return fmt.Errorf("%d messages (mirror %+v, sources %v)", si.State.Msgs, si.Mirror, sourceErrors(si.Sources))
		}
		return nil
	})
}

// sourcedOnce waits (as long as sourceProgress) until the source stream
// name holds n messages and
// checks it holds each origin sequence 1..n exactly once (by its
// Nats-Stream-Source header).
func sourcedOnce(t *testing.T, js jetstream.JetStream, name string, n int) {
	t.Helper()
	var s jetstream.Stream
	eventuallyWithin(t, 4*clusterTimeout, fmt.Sprintf("%s holds %d messages", name, n), func() error {
		var err error
		if s, err = js.Stream(ctx2(t), name); err != nil {
			return err
		}
		if got := s.CachedInfo().State.Msgs; got < uint64(n) {
			return fmt.Errorf("%d messages (sources %v)", got, sourceErrors(s.CachedInfo().Sources))
		}
		return nil
	})
	st := s.CachedInfo().State
	seen := make(map[int]int, n)
	for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(ctx2(t), seq)
		if err != nil {
			t.Fatalf("%s message %d: %v", name, seq, err)
		}
		f := strings.Fields(m.Header.Get("Nats-Stream-Source"))
		oseq := 0
		if len(f) > 1 {
			oseq, _ = strconv.Atoi(f[1])
		}
		seen[oseq]++
	}
	var wrong []string
	for i := 1; i <= n; i++ {
		if seen[i] != 1 && len(wrong) < 10 {
			wrong = append(wrong, fmt.Sprintf("%d: %d times", i, seen[i]))
		}
	}
	if st.Msgs != uint64(n) || len(seen) != n || len(wrong) > 0 {
		t.Fatalf("%s holds %d messages of %d origin sequences, want %d once each; first wrong %v", name, st.Msgs, len(seen), n, wrong)
	}
}

// mirroredAll waits (as long as sourceProgress) until the mirror name
// holds the origin's sequences 1..n, each once.
func mirroredAll(t *testing.T, js jetstream.JetStream, name string, n int) {
	t.Helper()
	eventuallyWithin(t, 4*clusterTimeout, fmt.Sprintf("%s mirrors 1..%d", name, n), func() error {
		si, err := streamInfoVia(js, name)
		if err != nil {
			return err
		}
		if st := si.State; st.Msgs != uint64(n) || st.FirstSeq != 1 || st.LastSeq != uint64(n) {
			return fmt.Errorf("state %+v (mirror %+v)", st, si.Mirror)
		}
		return nil
	})
}

// sourceInfoLive checks the infos report no lag, no error and an origin
// heard within the last 3 s.
func sourceInfoLive(infos []*jetstream.StreamSourceInfo) error {
	for _, si := range infos {
		if si == nil || si.Lag != 0 || si.Error != nil || si.Active < 0 || si.Active > 3*time.Second {
			return fmt.Errorf("source info %+v", si)
		}
	}
	return nil
}

// leadBy makes server target lead stream name (step-downs naming it).
func leadBy(t *testing.T, servers []*server.Server, nc *nats.Conn, js jetstream.JetStream, name string, target int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s led by %s", name, servers[target].Name()), func() error {
		if streamLeader(t, servers, js, name) == target {
			return nil
		}
		// (a request that times out under load is sent again)
		m, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+name, []byte(fmt.Sprintf(`{"placement":{"preferred":%q}}`, servers[target].Name())), 5*time.Second)
		if err != nil {
			return fmt.Errorf("step-down: %v", err)
		}
		var r apiReply
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Error != nil {
			return fmt.Errorf("step-down: %s", m.Data)
		}
		return fmt.Errorf("stepped down")
	})
}

// countRequests counts the messages published on subj (seen by a
// subscriber of nc) from now on.
func countRequests(t *testing.T, nc *nats.Conn, subj string) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	sub, err := nc.Subscribe(subj, func(*nats.Msg) { n.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &n
}

// clusterConn connects one client to every server of the cluster (it
// reconnects to another when its server goes).
func clusterConn(t *testing.T, servers []*server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...) // (a server's shutdown is expected)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// clusterCreate creates a stream, retrying until the cluster answers.
func clusterCreate(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	var s jetstream.Stream
	eventually(t, "create "+cfg.Name, func() error {
		var err error
		s, err = js.CreateOrUpdateStream(ctx2(t), cfg)
		return err
	})
	return s
}

// streamInfoVia returns stream name's info through js.
func streamInfoVia(js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.CachedInfo(), nil
}

// externalAuth is the accounts and users of externalConf.
func externalAuth(t *testing.T) config.Auth {
	t.Helper()
	path := filepath.Join(t.TempDir(), "accounts.conf")
	if err := os.WriteFile(path, []byte(externalConf(t.TempDir())), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Auth
}
