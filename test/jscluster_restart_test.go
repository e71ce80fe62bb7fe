package test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/cairnmq/cairn/internal/vfs"
)

// restartFixture is three servers with an R3 file stream ORDERS of n
// messages and a durable consumer "worker" (replicated with the stream)
// that received and acknowledged the first acked of them (the last one
// with a double ack, so every acknowledgement before it reached the
// consumer's leader).
func restartFixture(t *testing.T, n, acked int) ([]*server.Server, []server.Options) {
	t.Helper()
	servers, opts := jsClusterOpts(t, 3)
	js, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= n; i++ {
		eventually(t, "publish", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte("order"), jetstream.WithMsgID(fmt.Sprint(i)))
			return err
		})
	}
	var cons jetstream.Consumer
	eventually(t, "create the consumer", func() error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		return err
	})
	for got := 0; got < acked; {
		batch, err := cons.Fetch(acked-got, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			got++
			if got == acked {
				err = m.DoubleAck(tctx(t))
			} else {
				err = m.Ack()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return servers, opts
}

// fetchRest fetches, through url, the messages the consumer has not
// delivered yet and requires exactly sequences from..to.
func fetchRest(t *testing.T, url string, from, to uint64) {
	t.Helper()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	eventually(t, "fetch the rest", func() error {
		c, err := js.Consumer(tctx(t), "ORDERS", "worker")
		if err != nil {
			return err
		}
		batch, err := c.Fetch(int(to-from+1), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			if s := md.Sequence.Stream; s < from || s > to {
				t.Fatalf("delivered sequence %d, want %d..%d", s, from, to)
			}
			got[md.Sequence.Stream] = true
			_ = m.Ack()
		}
		if len(got) < int(to-from+1) {
			return fmt.Errorf("fetched %d of %d", len(got), to-from+1)
		}
		return nil
	})
}

// A clean stop checkpoints every replica the server holds (the meta
// group's, the stream's, the consumer's), so its restart applies none of
// its log again (docs/cluster.md, "Restarts"): the start's work does
// not grow with the log it kept. Without the stop's checkpoints of the
// meta group and the consumer, their entries since their last periodic
// checkpoints are applied again; without the Raft node cut off from its
// peers before them (raftnode Node.Isolate), so are the entries that
// commit after them while the server stops: the empty entry of a leader
// that took over in the handover, another leader's proposals (about one
// run in eight under load).
func TestJetStreamClusterCleanRestartReappliesNothing(t *testing.T) {
	servers, opts := restartFixture(t, 40, 30)
	servers[1].Shutdown()
	servers[1] = restartServer(t, opts[1])
	var rec struct{ meta, streams, consumers uint64 }
	eventually(t, "the restarted server recovered", func() error {
		r, ok := servers[1].JetStreamRecovery()
		if !ok || !r.Done {
			return fmt.Errorf("not yet: %+v", r)
		}
		rec.meta, rec.streams, rec.consumers = r.Meta, r.Streams, r.Consumers
		return nil
	})
	if rec.meta != 0 || rec.streams != 0 || rec.consumers != 0 {
		t.Fatalf("a clean restart applied entries again: meta %d, streams %d, consumers %d", rec.meta, rec.streams, rec.consumers)
	}
	fetchRest(t, servers[1].ClientURL(), 31, 40)
}

// gateFS holds every read of the Raft WAL's segments past their header
// until open is closed: a WAL that takes as long to replay as the test
// likes.
type gateFS struct {
	vfs.FS
	open chan struct{}
}

func (g gateFS) Open(name string) (vfs.File, error) {
	f, err := g.FS.Open(name)
	if err != nil || !strings.Contains(name, "/_js_/raft/") {
		return f, err
	}
	return gateFile{File: f, open: g.open}, nil
}

type gateFile struct {
	vfs.File
	open chan struct{}
}

func (f gateFile) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > 48 { // past the segment header (raftnode's segmentHeaderSize)
		<-f.open
	}
	return f.File.ReadAt(p, off)
}

// A restarted server accepts clients while its Raft WAL is still being
// replayed, as nats-server accepts them while its JetStream recovers:
// core NATS works through it, and JetStream requests through it are
// answered by the servers that lead (the stream's true state), never by
// it from what it has not recovered yet; its /healthz says it is still
// recovering. Once the replay is done, it serves the consumer's remaining
// messages. Before, the client listener opened only after the replay.
func TestJetStreamClusterClientsDuringReplay(t *testing.T) {
	servers, opts := restartFixture(t, 20, 10)
	servers[2].Shutdown()
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	o := opts[2]
	o.JetStreamFS = gateFS{FS: vfs.OS(), open: gate}
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- s.Start() }()
	t.Cleanup(s.Shutdown) // after release (cleanups run last first): a shutdown waits for the replay
	t.Cleanup(release)
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(clusterTimeout):
		t.Fatal("Start did not return while the WAL replay waits")
	}
	nc := connect(t, s.ClientURL())
	sub, err := nc.SubscribeSync("hello")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("hello", []byte("world")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "world" {
		t.Fatalf("core NATS during the replay: %v %v", m, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "stream info through the replaying server", func() error {
		st, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		if si := st.CachedInfo(); si.State.Msgs != 20 || si.Cluster == nil || si.Cluster.Leader == s.Name() {
			return fmt.Errorf("info %+v", si)
		}
		return nil
	})
	// Answered by the meta leader (a server that has known none for 2 s,
	// during a slow election, answers 10008: never an empty list).
	eventually(t, "stream names through the replaying server", func() error {
		names := js.StreamNames(tctx(t))
		var got []string
		for n := range names.Name() {
			got = append(got, n)
		}
		if err := names.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			return err
		}
		if !slices.Equal(got, []string{"ORDERS"}) {
			t.Fatalf("stream names through the replaying server: %v", got)
		}
		return nil
	})
	if total, _ := s.JSAPIStats(); total != 0 {
		t.Fatalf("the replaying server answered %d API requests", total)
	}
	if ps := s.JetStreamClusterHealth(); len(ps) == 0 || ps[0].Kind != "meta" {
		t.Fatalf("healthz: no meta problem reported during the replay: %+v", ps)
	}
	if r, _ := s.JetStreamRecovery(); r.Done {
		t.Fatal("recovered before the replay")
	}
	release()
	eventually(t, "recovered", func() error {
		if r, _ := s.JetStreamRecovery(); !r.Done {
			return errors.New("not yet")
		}
		if ps := s.JetStreamClusterHealth(); len(ps) > 0 {
			return fmt.Errorf("problems %+v", ps)
		}
		return nil
	})
	fetchRest(t, s.ClientURL(), 11, 20)
}

// Three cairn processes with JetStream; one is killed with SIGKILL and
// started again, three times, while acknowledged publishes go on: no
// acknowledged message is lost, the restarted replica's store is rolled
// back to its checkpoint and leaves no *.rolledback file once it has
// recovered (it checkpoints then), and a start logs no set-aside file as
// unknown and no WAL segment as a warning (docs/cluster.md,
// "Restarts").
func TestJetStreamClusterKill9Restarts(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	if targetIsNatsServer() {
		t.Skip("cairn's store layout")
	}
	t.Parallel() // processes that mostly wait; before the ports are picked
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	kc := newKillClusterArgs(t, buildCairn(t), 3, func(i int) []string { return []string{"-js", "-sd", dirs[i]} })
	victim := kc.procs[1]
	nc, err := nats.Connect(kc.procs[0].url+","+kc.procs[2].url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	acked := map[uint64]bool{}
	next := 1
	publish := func(n int) {
		t.Helper()
		for range n {
			i := next
			next++
			eventually(t, "publish", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				ack, err := js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte("order"), jetstream.WithMsgID(fmt.Sprint(i)))
				if err == nil {
					acked[ack.Sequence] = true
				}
				return err
			})
		}
	}
	publish(200)
	msgs := filepath.Join(dirs[1], "jetstream", "$G", "streams", "ORDERS", "msgs", "msgs")
	rollbacks := 0
	for round := 1; round <= 3; round++ {
		victim.kill()
		publish(20)
		victim.start()
		waitFor(t, clusterTimeout, fmt.Sprintf("round %d: the restarted server recovered", round), func() bool {
			return strings.Contains(victim.log.String(), "JetStream cluster: recovered;")
		})
		log := victim.log.String()
		if strings.Contains(log, "set aside until") {
			rollbacks++
		}
		for _, bad := range []string{"unknown file", "[WRN] raftnode: WAL segment"} {
			if strings.Contains(log, bad) {
				t.Fatalf("round %d: the start logged %q:\n%s", round, bad, log)
			}
		}
		if files, _ := filepath.Glob(filepath.Join(msgs, "*.rolledback*")); len(files) > 0 {
			t.Fatalf("round %d: left behind after the recovery: %v", round, files)
		}
		publish(20)
	}
	if rollbacks == 0 {
		t.Fatal("no restart rolled its store back (the test's premise)")
	}
	// Every acknowledged message is in the stream, on the restarted
	// server's replica too (it leads after the others stop leading).
	eventually(t, "every acknowledged message stored", func() error {
		st, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		if got := st.CachedInfo().State.Msgs; got != uint64(len(acked)) {
			return fmt.Errorf("%d messages, %d acknowledged", got, len(acked))
		}
		return nil
	})
	vc, err := nats.Connect(victim.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vc.Close)
	vjs, _ := jetstream.New(vc)
	for seq := range acked {
		eventually(t, fmt.Sprintf("message %d", seq), func() error {
			st, err := vjs.Stream(tctx(t), "ORDERS")
			if err != nil {
				return err
			}
			_, err = st.GetMsg(tctx(t), seq)
			return err
		})
	}
}
