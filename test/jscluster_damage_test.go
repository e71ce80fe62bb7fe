package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/nats-io/nats.go/jetstream"
)

// A server whose Raft WAL is damaged (bytes flipped in the middle of its
// segment, before data a later record says was fsynced) fences every
// group it holds, the meta group's replica included (docs/clustering.md,
// "The WAL" and "Fencing"). It must then stay silent on the meta group's
// requests: the others still have a meta leader, and a 10008 ("JetStream
// system temporarily unavailable") from the fenced server would race that
// leader's answer to every request. The process-level fault suite's
// corrupt-wal found it: every consumer create and stream info through
// the damaged server failed with 10008 once it had known no meta leader
// for 2 s, so a client could not even read the stream back.
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
		data[len(data)/2+i] ^= 0x5a
	}
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
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
