package test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startJSProc starts the server binary under test (cairn built from this
// tree, or nats-server) with JetStream in dir on a free loopback port; its
// restart reuses the port and the directory.
func startJSProc(t *testing.T, dir string) *serverProc {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	p := &serverProc{t: t, bin: clusterBinary(t), url: "nats://127.0.0.1:" + port,
		args: []string{"-js", "-sd", dir, "-a", "127.0.0.1", "-p", port}}
	t.Cleanup(p.kill)
	p.start()
	return p
}

// restart stops the server cleanly (SIGTERM) and starts it again.
func (p *serverProc) restart() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(startTimeout):
		p.t.Fatalf("the server did not exit within %v of SIGTERM:\n%s", startTimeout, p.log.String())
	}
	p.running = false
	p.start()
}

// reconnecting connects with unlimited, quick reconnects.
func reconnecting(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// An ephemeral pull consumer of a file stream survives a restart of the
// server binary, as in nats-server v2.15.2: the client's Consume goes on
// delivering from where it was, through the same consumer, which still
// counts what it delivered before the restart.
func TestEphemeralConsumerSurvivesRestart(t *testing.T) {
	p := startJSProc(t, t.TempDir())
	nc := reconnecting(t, p.url)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	name := cons.CachedInfo().Name
	var mu sync.Mutex
	var got []string
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.DoubleAck(ctx)
		mu.Lock()
		got = append(got, string(m.Data()))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	received := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= n }
	}
	for i := 1; i <= 3; i++ {
		if _, err := js.Publish(ctx, "s.x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "3 messages before the restart", received(3))

	p.restart()
	waitFor(t, 10*time.Second, "the client to reconnect", func() bool { return nc.Status() == nats.CONNECTED })
	for i := 4; i <= 5; i++ {
		if _, err := js.Publish(ctx, "s.x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "5 messages after the restart", received(5))
	mu.Lock()
	if fmt.Sprint(got) != "[m1 m2 m3 m4 m5]" {
		t.Errorf("received %v, want m1 to m5 once each in order", got)
	}
	mu.Unlock()
	st, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(ctx)
	var list []string
	for n := range names.Name() {
		list = append(list, n)
	}
	if len(list) != 1 || list[0] != name {
		t.Fatalf("consumers after the restart %v, want only %q (the same consumer, not a new one)", list, name)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Stream != 5 || info.AckFloor.Stream != 5 || info.Config.Durable != "" {
		t.Fatalf("consumer after the restart: delivered %d ack floor %d durable %q, want 5, 5, ephemeral",
			info.Delivered.Stream, info.AckFloor.Stream, info.Config.Durable)
	}
}

// A KV watcher of nats.go keeps getting updates after the server binary
// restarts. Its consumer is an ordered one, which nats.go creates with
// mem_storage: nats-server v2.15.2 keeps such a consumer in memory only,
// so after a restart the client notices the missing heartbeats and
// creates a new consumer from the last revision it saw; cairn does the
// same (see docs/compatibility.md).
func TestKVWatchAcrossRestart(t *testing.T) {
	t.Parallel() // it waits for nats.go's missed heartbeats (10 s and more)
	p := startJSProc(t, t.TempDir())
	nc := reconnecting(t, p.url)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("before")); err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	seen := make(chan string, 16)
	go func() {
		for e := range w.Updates() {
			if e != nil {
				seen <- string(e.Value())
			}
		}
	}()
	expect := func(want string, within time.Duration) {
		t.Helper()
		select {
		case v := <-seen:
			if v != want {
				t.Fatalf("watcher got %q, want %q", v, want)
			}
		case <-time.After(within):
			t.Fatalf("watcher got nothing within %v, want %q", within, want)
		}
	}
	expect("before", 10*time.Second)

	p.restart()
	waitFor(t, 10*time.Second, "the client to reconnect", func() bool { return nc.Status() == nats.CONNECTED })
	if _, err := kv.Put(ctx, "k", []byte("after")); err != nil {
		t.Fatal(err)
	}
	// nats.go resets an ordered consumer after two missed 5 s heartbeats.
	expect("after", 60*time.Second)
}
