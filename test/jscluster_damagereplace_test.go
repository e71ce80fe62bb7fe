package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

// A follower whose message blocks were damaged while its server was down
// (bytes flipped in the middle of each block, which the checkpoint
// already held) is fenced at the restart: its store, rolled back to the
// checkpoint, lost acknowledged messages the group's compacted log no
// longer holds (docs/cluster.md, "Fencing"). It is then replaced, as
// a wiped server's replica is: its damaged files are moved aside to the
// account's quarantine directory (kept, never deleted or served), a new
// replica on the same server is added as a learner, caught up by a
// stream snapshot and promoted, and the stream has three current
// replicas again. Each replica, made the leader, serves every
// acknowledged message byte for byte. Before the replacement was built
// the fenced replica stayed out of its group for good: two replicas.
func TestJetStreamClusterDamagedStoreReplaced(t *testing.T) {
	damagedReplaced(t, filepath.Join("jetstream", "$G", "streams", "ORDERS", "msgs", "msgs", "*.blk"),
		filepath.Join("jetstream", "$G", "quarantine", "ORDERS.*", "msgs", "msgs", "*.blk"))
}

// The same with the follower's Raft WAL damaged (bytes flipped in the
// middle of each segment): its replay finds the damage, the server moves
// the WAL aside to its quarantine directory and starts a new one under a
// new store incarnation, joins the meta group as a new replica, and its
// replicas of ORDERS and of the durable are replaced as a wiped server's
// are; its stream of one replica keeps its messages, which no WAL holds.
// Before, every group of the server stayed fenced for good.
func TestJetStreamClusterDamagedWALReplaced(t *testing.T) {
	damagedReplaced(t, filepath.Join("jetstream", "$SYS", "_js_", "raft", "*.wal"),
		filepath.Join("jetstream", "$SYS", "_js_", "quarantine", "raft.*", "*.wal"))
}

// damagedReplaced runs the damage tests: the files of a stopped
// follower's store matching the glob damage are flipped in the middle;
// after its restart the stream has three current replicas, the damaged
// files are under the glob quarantined, and every acknowledged message is
// served by each replica, as is the durable C's state and the messages
// of a stream of one replica on that server.
func damagedReplaced(t *testing.T, damage, quarantined string) {
	servers, opts := jsClusterMod(t, 3, func(i int, o *server.Options) {
		o.RaftRetain = 8
		o.Tags = []string{fmt.Sprintf("t%d", i)}
	})
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js0.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, AllowDirect: true})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 200)
	s, err := js0.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	leader := leaderIndex(servers, s.CachedInfo().Cluster.Leader)
	if leader < 0 {
		t.Fatalf("leader %q", s.CachedInfo().Cluster.Leader)
	}
	victim := (leader + 1) % 3
	name := servers[victim].Name()
	one := []string{"one.1", "one.2", "one.3"}
	eventually(t, "create ONE on "+name, func() error {
		_, err := js0.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ONE", Subjects: []string{"one.>"}, Placement: &jetstream.Placement{Tags: []string{fmt.Sprintf("t%d", victim)}}})
		return err
	})
	for _, subj := range one {
		eventually(t, "publish "+subj, func() error {
			_, err := js0.Publish(tctx(t), subj, []byte(subj))
			return err
		})
	}
	eventually(t, "create the durable C", func() error {
		_, err := js0.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	consumeAck(t, js0, "C", 5)
	servers[victim].Shutdown()
	files, _ := filepath.Glob(filepath.Join(opts[victim].StoreDir, damage))
	if len(files) == 0 {
		t.Fatalf("no file %s", damage)
	}
	for _, f := range files {
		flipMiddle(t, f)
	}
	jsL := jsAt(t, servers[leader])
	publishRange(t, jsL, sent, 201, 230)
	servers[victim] = restartServer(t, opts[victim])
	waitFor(t, 3*clusterTimeout, "three current replicas, "+name+"'s among them", func() bool {
		s, err := jsL.Stream(tctx(t), "ORDERS")
		if err != nil {
			return false
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return false
		}
		found := ci.Leader == name
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return false
			}
			found = found || p.Name == name
		}
		return found
	})
	q, _ := filepath.Glob(filepath.Join(opts[victim].StoreDir, quarantined))
	if len(q) == 0 {
		t.Fatalf("no damaged file in quarantine (%s)", quarantined)
	}
	m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: -1, Server: servers[victim]})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	waitFor(t, clusterTimeout, name+"'s /healthz ok with its new replica", func() bool {
		code, _ := monGet(t, m.URL()+"/healthz")
		return code == 200
	})
	publishRange(t, jsL, sent, 231, 240)
	for i := range servers {
		readAsLeader(t, servers, i, sent)
	}
	jsV := jsAt(t, servers[victim])
	readOrderedAll(t, jsV, sent)
	if got := consumeAck(t, jsV, "C", 1); got[0] != 6 {
		t.Fatalf("C delivered %v after its 5 acknowledged, want sequence 6", got)
	}
	ones, err := jsV.Stream(tctx(t), "ONE")
	if err != nil {
		t.Fatal(err)
	}
	for i, subj := range one {
		if m, err := ones.GetMsg(tctx(t), uint64(i+1)); err != nil || m.Subject != subj {
			t.Fatalf("ONE's message %d on %s: %+v, %v", i+1, name, m, err)
		}
	}
}

// readOrderedAll reads ORDERS from its start with an ordered consumer
// (nats.go's: of one replica, placed among the stream's servers) through
// js and requires every message of sent, in order, byte for byte.
func readOrderedAll(t *testing.T, js jetstream.JetStream, sent map[uint64]sentMsg) {
	t.Helper()
	s, err := js.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	oc, err := s.OrderedConsumer(tctx(t), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	last := s.CachedInfo().State.LastSeq
	deadline := time.Now().Add(clusterTimeout)
	for at := uint64(0); at < last; {
		if time.Now().After(deadline) {
			t.Fatalf("the ordered consumer read up to %d of %d", at, last)
		}
		batch, err := oc.Fetch(100, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			time.Sleep(50 * time.Millisecond) // nats.go recreates its consumer; the deadline bounds the retries
			continue
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			want, ok := sent[md.Sequence.Stream]
			if !ok || m.Subject() != want.subject || !bytes.Equal(m.Data(), want.data) {
				t.Fatalf("the ordered consumer delivered sequence %d as %s, published as %s", md.Sequence.Stream, m.Subject(), want.subject)
			}
			at = md.Sequence.Stream
		}
	}
}

// flipMiddle XORs 8 bytes at 4 places in the middle half of file f's
// data (dataLen).
func flipMiddle(t *testing.T, f string) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	n := dataLen(b)
	if n < 64 {
		t.Fatalf("%s: %d bytes of data", f, n)
	}
	for k := range 4 {
		off := n/4 + k*n/8
		for j := range 8 {
			b[off+j] ^= 0xa5
		}
	}
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dataLen returns how many bytes of b hold data: b without its trailing
// zeros (a Raft WAL segment's preallocated space: docs/cluster.md, "The
// WAL's preallocated space"), so that damage lands where data is.
func dataLen(b []byte) int {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}

// readAsLeader makes servers[i] the leader of ORDERS (a step-down naming
// it preferred, until stream info names it), then reads every message of
// sent through it with direct gets: its own replica answers them.
func readAsLeader(t *testing.T, servers []*server.Server, i int, sent map[uint64]sentMsg) {
	t.Helper()
	nc := connect(t, servers[i].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := servers[i].Name()
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": name}})
	waitFor(t, clusterTimeout, name+" leads ORDERS", func() bool {
		s, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return false
		}
		if s.CachedInfo().Cluster.Leader == name {
			return true
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", req, 2*time.Second)
		return false
	})
	for seq, want := range sent {
		var got *nats.Msg
		eventually(t, fmt.Sprintf("%s: direct get %d", name, seq), func() error {
			var err error
			got, err = nc.Request("$JS.API.DIRECT.GET.ORDERS", []byte(fmt.Sprintf(`{"seq":%d}`, seq)), 2*time.Second)
			if err == nil && got.Header.Get("Status") != "" {
				err = fmt.Errorf("status %s %s", got.Header.Get("Status"), got.Header.Get("Description"))
			}
			return err
		})
		if got.Header.Get("Nats-Subject") != want.subject || !bytes.Equal(got.Data, want.data) || got.Header.Get("Nats-Msg-Id") != want.hdr.Get("Nats-Msg-Id") ||
			got.Header.Get("X-Order") != want.hdr.Get("X-Order") || got.Header.Get("Nats-Sequence") != fmt.Sprint(seq) {
			t.Fatalf("%s served message %d as %s %q, published as %s", name, seq, got.Header.Get("Nats-Subject"), got.Header, want.subject)
		}
	}
	if s, err := js.Stream(tctx(t), "ORDERS"); err != nil || s.CachedInfo().State.Msgs != uint64(len(sent)) {
		t.Fatalf("%s: stream info %v: %d messages, want %d", name, err, msgsOf(s), len(sent))
	}
}

// msgsOf returns the number of messages stream info s reports, 0 for nil.
func msgsOf(s jetstream.Stream) uint64 {
	if s == nil {
		return 0
	}
	return s.CachedInfo().State.Msgs
}
