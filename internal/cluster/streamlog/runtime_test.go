package streamlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// These tests run the stream runtime itself (streamrun.Stream, as the
// engine runs it) over a Log on each of three raftnode nodes: the
// runtime's apply goroutine takes what the group commits
// (Env.NewReplicatedLog), only the leader's runtime answers and decides
// expiry, and every replica reaches the same state.

// memTransport is the messaging side of one replica's runtime: the
// stream's subscriptions by subject, and every message it published (its
// PubAcks) by subject.
type memTransport struct {
	mu   sync.Mutex
	subs map[string]streamrun.MsgHandler
	sent map[string][][]byte
	// acks, when not nil, takes a signal for each message published, in
	// place of its record (a benchmark's PubAcks).
	acks chan struct{}
}

type memSub struct {
	t    *memTransport
	subj string
}

func (s memSub) Unsubscribe() {
	s.t.mu.Lock()
	delete(s.t.subs, s.subj)
	s.t.mu.Unlock()
}

func (t *memTransport) Subscribe(subject, _ string, h streamrun.MsgHandler) (streamrun.Subscription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.subs[subject] = h
	return memSub{t, subject}, nil
}

// Publish records hdr and data, one after the other (a PubAck has no
// header; a status reply no data).
func (t *memTransport) Publish(subject, _ string, hdr, data []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.acks != nil {
		t.acks <- struct{}{}
		return true
	}
	t.sent[subject] = append(t.sent[subject], append(bytes.Clone(hdr), data...))
	return true
}

func (t *memTransport) PublishAs(route, _, reply string, hdr, data []byte) bool {
	return t.Publish(route, reply, hdr, data)
}

func (t *memTransport) HasInterest(string) bool { return false }

// publish hands a message to the stream's subscription on subject's
// pattern, as the server does for a client's publish; false when the
// runtime is not subscribed.
func (t *memTransport) publish(pattern, subject, reply string, hdr, data []byte) bool {
	t.mu.Lock()
	h := t.subs[pattern]
	t.mu.Unlock()
	if h == nil {
		return false
	}
	h(subject, reply, hdr, data)
	return true
}

// replies returns what was published to subject.
func (t *memTransport) replies(subject string) [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent[subject]
}

// runReplica is one server: its node, the stream's Log and runtime.
type runReplica struct {
	id    raftnode.ServerID
	node  *raftnode.Node
	log   *Log
	rt    *streamrun.Stream
	store store.Store
	tr    *memTransport
}

type runCluster struct {
	t    testing.TB
	net  *raftnode.MemNetwork
	reps []*runReplica
}

// newRunCluster starts three nodes, each with the runtime of stream cfg
// over a memory store and its Log in group, and waits for a leader;
// opts change each node's config.
func newRunCluster(t testing.TB, cfg stream.Config, opts ...func(*raftnode.Config)) *runCluster {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	net := raftnode.NewMemNetwork(1, nil)
	c := &runCluster{t: t, net: net}
	var peers []raftnode.Peer
	for i := range 3 {
		id := raftnode.ServerID(fmt.Sprintf("s%d", i+1))
		peers = append(peers, raftnode.Peer{Replica: raftnode.ReplicaID(i + 1), Server: id})
		ncfg := raftnode.Config{FS: vfs.NewCrashFS(), Dir: "wal", Server: id, Transport: net.Transport(id)}
		for _, o := range opts {
			o(&ncfg)
		}
		n, err := raftnode.Open(ncfg)
		if err != nil {
			t.Fatal(err)
		}
		net.Attach(id, n)
		c.reps = append(c.reps, &runReplica{id: id, node: n})
	}
	for i, r := range c.reps {
		r.tr = &memTransport{subs: map[string]streamrun.MsgHandler{}, sent: map[string][][]byte{}}
		env := streamrun.Env{
			Transport: r.tr, Now: time.Now, Logf: t.Logf,
			Storage: streamrun.NewStorage(nil, "", streamrun.NewUsage(), time.Now, t.Logf, t.Logf),
			Batches: &stream.BatchInflight{},
			NewReplicatedLog: func(_ string, a streamrun.Applier[stream.Op]) streamrun.Log[stream.Op] {
				r.log = New(Config{Node: r.node, Group: group, OnLeader: func(leader bool) {
					if err := r.rt.SetLeader(leader); err != nil {
						t.Errorf("%s: SetLeader(%v): %v", r.id, leader, err)
					}
				}}, a)
				return r.log
			},
		}
		r.store = memstore.New(cfg.StoreConfig())
		r.rt = streamrun.New(env, cfg, time.Now(), "", r.store)
		if err := r.rt.Open(); err != nil {
			t.Fatal(err)
		}
		if err := r.rt.Serve(); err != nil {
			t.Fatal(err)
		}
		gc := raftnode.GroupConfig{ID: group, Replica: raftnode.ReplicaID(i + 1), Incarnation: r.node.Incarnation(), Peers: peers}
		if err := r.node.AddGroup(gc, r.log.StateMachine()); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range c.reps {
		r.node.Start()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { net.Run(stop) })
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		for _, r := range c.reps {
			r.log.Close()
			_ = r.node.Close()
			_ = r.rt.Stop(nil)
		}
	})
	return c
}

// leader waits for a leader other than not (-1: any) and returns it.
func (c *runCluster) leader(not int) int {
	c.t.Helper()
	c.waitFor("a leader", func() bool {
		for i, r := range c.reps {
			if i != not && r.log.Leader() {
				return true
			}
		}
		return false
	})
	for i, r := range c.reps {
		if i != not && r.log.Leader() {
			return i
		}
	}
	return -1
}

// waitFor waits (virtual time) until cond holds.
func (c *runCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			for _, r := range c.reps {
				st, err := r.node.Status(group)
				c.t.Logf("%s: %+v %v", r.id, st, err)
			}
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// converged waits until every replica's store holds last messages up to
// sequence last, then requires their whole states to be identical.
func (c *runCluster) converged(last, msgs uint64) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("every replica at last_seq %d with %d messages", last, msgs), func() bool {
		for _, r := range c.reps {
			if st := r.store.State(false); st.LastSeq != last || st.Msgs != msgs {
				return false
			}
		}
		return true
	})
	var first []byte
	for i, r := range c.reps {
		release := r.rt.Hold()
		state := r.rt.AppendState(nil)
		release()
		if i == 0 {
			first = state
		} else if !bytes.Equal(state, first) {
			c.t.Fatalf("replica %s's state differs from %s's", r.id, c.reps[0].id)
		}
	}
}

type runAck struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Error  *struct {
		Code int `json:"err_code"`
	} `json:"error"`
}

// ack waits for the one PubAck published to reply on replica i.
func (c *runCluster) ack(i int, reply string) runAck {
	c.t.Helper()
	var got [][]byte
	c.waitFor("the PubAck on "+reply, func() bool {
		got = c.reps[i].tr.replies(reply)
		return len(got) > 0
	})
	if len(got) != 1 {
		c.t.Fatalf("%d replies on %s", len(got), reply)
	}
	var a runAck
	if err := json.Unmarshal(got[0], &a); err != nil {
		c.t.Fatalf("PubAck %q: %v", got[0], err)
	}
	return a
}

// The leader's runtime takes publishes and answers each once it is
// committed and applied; every replica applies the same operations to
// the same state; a follower's runtime answers nobody and proposes
// nothing of its own.
func TestRuntimeOverReplicatedLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newRunCluster(t, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.MemoryStorage})
		l := c.leader(-1)
		for i := 1; i <= 20; i++ {
			reply := fmt.Sprintf("reply.%d", i)
			if !c.reps[l].tr.publish("orders.>", fmt.Sprintf("orders.%d", i), reply, nil, []byte("order")) {
				t.Fatal("the leader's runtime is not subscribed")
			}
			if a := c.ack(l, reply); a.Error != nil || a.Seq != uint64(i) || a.Stream != "ORDERS" {
				t.Fatalf("PubAck %d: %+v", i, a)
			}
		}
		c.converged(20, 20)

		// Only the leader is subscribed to the stream's subjects; a
		// follower's runtime proposes nothing.
		f := (l + 1) % 3
		if c.reps[f].tr.publish("orders.>", "orders.x", "reply.follower", nil, []byte("lost")) {
			t.Fatal("a follower is subscribed to the stream's subjects")
		}
		if _, ok := c.reps[f].rt.Do(&stream.Purge{}); ok {
			t.Fatal("a follower's purge was applied")
		}

		// A purge on the leader is answered once applied, and every
		// replica applies it.
		out, ok := c.reps[l].rt.Do(&stream.Purge{Request: store.PurgeRequest{Seq: 11}})
		if !ok || out.Err != nil || out.Removed != 10 {
			t.Fatalf("purge: ok %v, outcome %+v", ok, out)
		}
		c.converged(20, 10)
	})
}

// Expiry is the leader's: its runtime proposes an Expire at its clock's
// time and every replica removes the same messages; a follower's
// timer proposes nothing.
func TestRuntimeExpiryFromLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newRunCluster(t, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.MemoryStorage, MaxAge: 3 * time.Second})
		l := c.leader(-1)
		for i := 1; i <= 5; i++ {
			reply := fmt.Sprintf("reply.%d", i)
			c.reps[l].tr.publish("orders.>", "orders.a", reply, nil, []byte("order"))
			c.ack(l, reply)
		}
		c.converged(5, 5)
		c.converged(5, 0) // max_age passes: the leader's Expire removes them everywhere
	})
}

// A leader that loses its leadership with publishes in flight answers
// none it did not apply under its term; the new leader takes over, and
// the replicas converge. Every PubAck sent names the sequence at which
// its message is stored on every replica.
func TestRuntimeLeaderChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newRunCluster(t, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.MemoryStorage})
		old := c.leader(-1)
		for i := 1; i <= 50; i++ {
			c.reps[old].tr.publish("orders.>", fmt.Sprintf("orders.%d", i), fmt.Sprintf("reply.%d", i), nil, []byte("order"))
		}
		if err := c.reps[old].node.StepDown(group); err != nil {
			t.Fatal(err)
		}
		l := c.leader(old)
		c.waitFor("the old leader to unsubscribe", func() bool {
			return !c.reps[old].tr.publish("orders.>", "orders.late", "", nil, nil)
		})
		c.waitFor("the new leader to subscribe", func() bool {
			c.reps[l].tr.mu.Lock()
			defer c.reps[l].tr.mu.Unlock()
			return c.reps[l].tr.subs["orders.>"] != nil
		})
		for i := 51; i <= 60; i++ {
			reply := fmt.Sprintf("reply.%d", i)
			c.reps[l].tr.publish("orders.>", fmt.Sprintf("orders.%d", i), reply, nil, []byte("order"))
			if a := c.ack(l, reply); a.Error != nil {
				t.Fatalf("PubAck %d from the new leader: %+v", i, a)
			}
		}
		synctest.Wait()
		last := c.reps[l].store.State(false).LastSeq
		c.converged(last, last)
		for i := 1; i <= 60; i++ {
			reply := fmt.Sprintf("reply.%d", i)
			var got [][]byte
			for _, r := range c.reps {
				got = append(got, r.tr.replies(reply)...)
			}
			if len(got) > 1 {
				t.Fatalf("%d PubAcks for message %d", len(got), i)
			}
			if len(got) == 0 {
				continue // forgotten: the client would retry
			}
			if bytes.HasPrefix(got[0], []byte("NATS/1.0 503")) {
				// dropped by raft before it entered the log: stored nowhere
				for _, r := range c.reps {
					if last := r.store.State(false).LastSeq; storedSubject(r.store, last, fmt.Sprintf("orders.%d", i)) {
						t.Fatalf("message %d answered 503 but stored on %s", i, r.id)
					}
				}
				continue
			}
			var a runAck
			if err := json.Unmarshal(got[0], &a); err != nil || a.Error != nil {
				t.Fatalf("PubAck %d: %q", i, got[0])
			}
			for _, r := range c.reps {
				sm, err := r.store.Load(a.Seq)
				if err != nil || !strings.HasSuffix(sm.Subject, fmt.Sprintf(".%d", i)) || sm.Subject != fmt.Sprintf("orders.%d", i) {
					t.Fatalf("%s at seq %d: %v, %v; want orders.%d", r.id, a.Seq, sm, err, i)
				}
			}
		}
	})
}

// A publish that reaches the leader while it hands its leadership over
// is dropped by raft after Propose returned: it never entered the log,
// so it is answered 503 with its subject (as a publish refused at
// Propose, and as a request no subscriber took), for the client to
// retry on the next leader, instead of being left unanswered until the
// client's timeout; nothing of it is stored, and the retry is.
func TestRuntimeDroppedPublishRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newRunCluster(t, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.MemoryStorage})
		l := c.leader(-1)
		c.reps[l].tr.publish("orders.>", "orders.1", "reply.1", nil, []byte("order"))
		c.ack(l, "reply.1")
		c.converged(1, 1)

		// The target never hears the leader's TimeoutNow: the transfer
		// stays under way for an election timeout, raft dropping every
		// proposal meanwhile.
		f := (l + 1) % 3
		c.net.Cut(c.reps[l].id, c.reps[f].id)
		if err := c.reps[l].node.TransferLeader(group, raftnode.ReplicaID(f+1)); err != nil {
			t.Fatal(err)
		}
		c.waitFor("the transfer under way", func() bool {
			st, err := c.reps[l].node.Status(group)
			return err == nil && st.Transferee != 0
		})
		if !c.reps[l].tr.publish("orders.>", "orders.2", "reply.2", nil, []byte("dropped")) {
			t.Fatal("the leader's runtime is not subscribed")
		}
		c.waitFor("the reply to the dropped publish", func() bool {
			return len(c.reps[l].tr.replies("reply.2")) > 0
		})
		if got := c.reps[l].tr.replies("reply.2"); len(got) != 1 || string(got[0]) != "NATS/1.0 503\r\nNats-Subject: orders.2\r\n\r\n" {
			t.Fatalf("replies to the dropped publish: %q", got)
		}
		c.net.Heal(c.reps[l].id, c.reps[f].id)

		// The client's retry (a 503 again while the transfer lasts) is
		// stored, once, wherever leadership went.
		var a runAck
		for try := 0; ; try++ {
			reply := fmt.Sprintf("reply.2.%d", try)
			i := c.leader(-1)
			if !c.reps[i].tr.publish("orders.>", "orders.2", reply, nil, []byte("retried")) {
				continue // between a leader's election and its subscription
			}
			var got [][]byte
			c.waitFor("the retry's reply", func() bool {
				got = c.reps[i].tr.replies(reply)
				return len(got) > 0
			})
			if bytes.HasPrefix(got[0], []byte("NATS/1.0 503")) {
				time.Sleep(250 * time.Millisecond) // nats.go's retry wait
				continue
			}
			if err := json.Unmarshal(got[0], &a); err != nil || a.Error != nil || a.Seq != 2 {
				t.Fatalf("retry's PubAck: %q", got[0])
			}
			break
		}
		c.converged(2, 2)
		for _, r := range c.reps {
			if sm, err := r.store.Load(2); err != nil || string(sm.Data) != "retried" {
				t.Fatalf("%s seq 2: %v, %v", r.id, sm, err)
			}
		}
	})
}

// storedSubject reports whether st holds a message on subject among its
// sequences 1 to last.
func storedSubject(st store.Store, last uint64, subject string) bool {
	for seq := uint64(1); seq <= last; seq++ {
		if sm, err := st.Load(seq); err == nil && sm.Subject == subject {
			return true
		}
	}
	return false
}

// BenchmarkRuntimePublish publishes 128-byte messages to the leader's
// runtime of a memory stream of three replicas (in-memory network and
// WALs), with one publish in flight or 64, each awaiting its PubAck: the
// replicated publish path (ingest queue, proposer, Log.Propose, commit,
// apply, PubAck) without a disk.
//
//	go test -run '^$' -bench BenchmarkRuntimePublish -count 10 ./internal/cluster/streamlog/
func BenchmarkRuntimePublish(b *testing.B) {
	for _, inflight := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			c := newRunCluster(b, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.MemoryStorage})
			tr := c.reps[c.leader(-1)].tr
			acks := make(chan struct{}, inflight)
			tr.mu.Lock()
			tr.acks = acks
			tr.mu.Unlock()
			payload := make([]byte, 128)
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i >= inflight {
					<-acks
				}
				if !tr.publish("orders.>", "orders.new", "reply", nil, payload) {
					b.Fatal("the leader's runtime is not subscribed")
				}
			}
			for range min(b.N, inflight) {
				<-acks
			}
		})
	}
}
