package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// /healthz reports not ok, naming the stream, when a stream's store found
// damaged data at start: cairn does not serve the damaged messages, and a
// probe should say so (nats-server reports such a server healthy).
func TestHealthzReportsDamagedData(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("cairn's stricter /healthz")
	}
	dir := t.TempDir()
	opts := server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir}
	s, mon := startCairnServer(t, opts)
	nc := connect(t, s.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 { // one fsync each: the damage is never in the last batch
		if _, err := js.Publish(ctx, "s.x", []byte(strings.Repeat(fmt.Sprint(i%10), 100))); err != nil {
			t.Fatal(err)
		}
	}
	if code, body := monGet(t, mon+"/healthz"); code != 200 {
		t.Fatalf("before the damage: %d %s", code, body)
	}
	nc.Close()
	s.Shutdown()

	segs, _ := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", "S", "msgs", "*", "*.blk"))
	if len(segs) == 0 {
		t.Fatal("no segment file found")
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/4] ^= 0x40
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	_, mon2 := startCairnServer(t, opts)
	code, body := monGet(t, mon2+"/healthz")
	if code != 503 || !strings.Contains(string(body), `has damaged data`) {
		t.Fatalf("after the damage: %d %s", code, body)
	}
	code, body = monGet(t, mon2+"/healthz?js-server-only=true")
	if code != 200 {
		t.Fatalf("js-server-only after the damage: %d %s", code, body)
	}
}
