package test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/server"
)

// walSegments counts the segments of the server's Raft WAL (raftnode's
// <store_dir>/jetstream/$SYS/_js_/raft/<seq>.wal files).
func walSegments(t *testing.T, o server.Options) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(o.StoreDir, "jetstream", "$SYS", "_js_", "raft", "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// consumerGroupStatus returns the status of srv's replica of the only
// replicated consumer's group of the global account.
func consumerGroupStatus(srv *server.Server) (raftnode.GroupStatus, error) {
	gs, _ := srv.JetStreamRaftGroups("$G", "")
	for _, g := range gs {
		if strings.HasPrefix(g.Name, "C-") {
			return g.Status, nil
		}
	}
	return raftnode.GroupStatus{}, fmt.Errorf("%s: no consumer group", srv.Name())
}

// A durable R3 consumer acknowledges a few messages of a stream of large
// messages and checkpoints; its leader then steps down (the new leader's
// empty entry is the group's only entry after the checkpoint) and it
// stays idle while the stream takes 1.25 MiB more (five WAL segments of
// 256 KiB). The WAL's segments must come back down within a bounded time
// (docs/cluster.md, "The WAL"): the consumer's group held them all until
// its next checkpoint, taken only when a batch of acks or deliveries
// applied, so forever for an idle consumer (trial 34 saw one server keep
// 16 segments, 1.2 GB, for 10 minutes).
func TestJetStreamClusterIdleConsumerReleasesWAL(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftWALSegmentBytes = 256 << 10 })
	js0, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create BIG", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}, Replicas: 3})
		return err
	})
	var cons jetstream.Consumer
	eventually(t, "create consumer", func() error {
		var err error
		cons, err = js0.CreateOrUpdateConsumer(tctx(t), "BIG", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, Replicas: 3})
		return err
	})
	payload := bytes.Repeat([]byte("x"), 32<<10)
	publish := func(n int) {
		for range n {
			eventually(t, "publish", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := js0.Publish(ctx, "big.1", payload)
				return err
			})
		}
	}
	publish(8)
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(tctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	// Every replica checkpoints the acks (10 s after them) and compacts
	// its group's log empty.
	var term uint64
	eventuallyWithin(t, 30*time.Second, "the consumer's checkpoints", func() error {
		for _, srv := range servers {
			st, err := consumerGroupStatus(srv)
			if err != nil {
				return err
			}
			if st.FirstIndex <= st.Applied {
				return fmt.Errorf("%s: consumer group first index %d, applied %d", srv.Name(), st.FirstIndex, st.Applied)
			}
			term = max(term, st.Term)
		}
		return nil
	})
	sys := connect(t, servers[1].ClientURL())
	eventually(t, "consumer leader step-down", func() error {
		msg, err := sys.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.BIG.D", nil, 2*time.Second)
		if err != nil {
			return err
		}
		if !strings.Contains(string(msg.Data), `"success":true`) {
			return fmt.Errorf("%s", msg.Data)
		}
		return nil
	})
	eventually(t, "the new leader's entry applied everywhere", func() error {
		for _, srv := range servers {
			st, err := consumerGroupStatus(srv)
			if err != nil {
				return err
			}
			if st.Term <= term || st.Applied < st.LastIndex {
				return fmt.Errorf("%s: consumer group term %d (was %d), applied %d, last %d", srv.Name(), st.Term, term, st.Applied, st.LastIndex)
			}
		}
		return nil
	})
	publish(40)
	idle := time.Now()
	segs := func() []int {
		var n []int
		for _, o := range opts {
			n = append(n, walSegments(t, o))
		}
		return n
	}
	t.Logf("after the publishes: WAL segments %v", segs())
	eventuallyWithin(t, walReleaseBound, "the WAL's segments released", func() error {
		for _, o := range opts {
			if n := walSegments(t, o); n > 2 {
				return fmt.Errorf("%s: %d WAL segments (all: %v)", o.ServerName, n, segs())
			}
		}
		return nil
	})
	t.Logf("WAL segments %v %v after the last publish", segs(), time.Since(idle).Round(100*time.Millisecond))
}

// walReleaseBound is how long after the last write an idle cluster's WAL
// must be back to at most two segments in these tests: the stream's own
// checkpoint cadence (10 s, its followers compacting through the floor
// at their next one) and the cluster layer's bound on a group keeping
// sealed segments (jscluster walPinGrace, 10 s, polled every second),
// with room for a loaded machine.
const walReleaseBound = 28 * time.Second
