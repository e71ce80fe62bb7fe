package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/nats-io/nats.go/jetstream"
)

// A server whose Raft WAL is damaged (bytes flipped in the middle of its
// segment, before data a later record says was fsynced) fences every
// group it holds, the meta group's replica included (docs/cluster.md,
// "The WAL" and "Fencing"). It must then stay silent on the meta group's
// requests: the others still have a meta leader, and a 10008 ("JetStream
// system temporarily unavailable") from the fenced server would race that
// leader's answer to every request. The process-level fault suite's
// corrupt-wal found it: every consumer create and stream info through
// the damaged server failed with 10008 once it had known no meta leader
// for 2 s, so a client could not even read the stream back. A damaged
// WAL is now moved aside and replaced (TestJetStreamClusterDamagedWALReplaced);
// here the move fails (a file where its quarantine directory goes), and
// the server must stay fenced and silent.
func TestJetStreamClusterDamagedWALServerStaysSilent(t *testing.T) {
	servers, opts := restartFixture(t, 40, 30)
	servers[1].Shutdown()
	segs, _ := filepath.Glob(filepath.Join(opts[1].StoreDir, "jetstream", "$SYS", "_js_", "raft", "*.wal"))
	if len(segs) == 0 {
		t.Fatal("no WAL segment")
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		data[dataLen(data)/2+i] ^= 0x5a
	}
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(opts[1].StoreDir, "jetstream", "$SYS", "_js_", "quarantine"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	servers[1] = restartServer(t, opts[1])
	m, err := monitor.New(monitor.Options{Host: "127.0.0.1", Port: -1, Server: servers[1]})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	waitFor(t, clusterTimeout, "the damaged server reports its fenced groups", func() bool {
		code, body := monGet(t, m.URL()+"/healthz")
		return code != 200 && strings.Contains(string(body), "fenced")
	})
	js, err := jetstream.New(connect(t, servers[1].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	// Requests through the damaged server for longer than the 2 s a
	// server must know no meta leader before it answers 10008.
	for end, i := time.Now().Add(5*time.Second), 0; time.Now().Before(end); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := js.Stream(ctx, "ORDERS")
		if err == nil {
			_, err = s.CreateConsumer(ctx, jetstream.ConsumerConfig{Name: fmt.Sprintf("c%d", i), Replicas: 1})
		}
		cancel()
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == 10008 {
			t.Fatalf("request %d through the fenced server: %v", i, err)
		}
		if err != nil {
			t.Logf("request %d: %v", i, err) // a timeout is retried by clients
		}
	}
}

// A peer removal while a producer publishes all the time: the joint
// change that promotes the new replica and removes the old one is left,
// once the leader applied it, by an entry etcd raft appends by itself,
// and the proposals of the next round must be numbered after it. They
// were numbered one too low, and the leader fenced its own replica
// ("proposal at ... is not in the Ready"): that replica never caught up
// again and the consumers it led stopped (the process-level fault
// suite's peer-remove on five servers). Every replica of the new set
// must become current and hold what the stream holds.
func TestJetStreamClusterPeerRemoveUnderLoad(t *testing.T) {
	servers, _ := jsClusterOpts(t, 4)
	nc := connect(t, servers[0].ClientURL())
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 { // publishers on three servers, so that every round of the group proposes
		pjs, err := jetstream.New(connect(t, servers[i].ClientURL()), jetstream.WithPublishAsyncMaxPending(256))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := pjs.PublishAsync("orders.x", []byte("order")); err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	var ci *jetstream.ClusterInfo
	eventually(t, "the stream's replicas", func() error {
		s, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		ci = s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", ci)
		}
		return nil
	})
	removed := ci.Replicas[0].Name
	eventually(t, "peer-remove "+removed, func() error {
		m, err := nc.Request("$JS.API.STREAM.PEER.REMOVE.ORDERS", []byte(fmt.Sprintf(`{"peer":%q}`, removed)), 2*time.Second)
		if err != nil {
			return err
		}
		if !strings.Contains(string(m.Data), `"success":true`) {
			return fmt.Errorf("%s", m.Data)
		}
		return nil
	})
	waitFor(t, 2*clusterTimeout, "every replica of the new set current", func() bool {
		s, err := js.Stream(tctx(t), "ORDERS")
		if err != nil {
			return false
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || ci.Leader == removed || len(ci.Replicas) != 2 {
			return false
		}
		for _, p := range ci.Replicas {
			if p.Name == removed || !p.Current || p.Pending {
				return false
			}
		}
		return true
	})
}
