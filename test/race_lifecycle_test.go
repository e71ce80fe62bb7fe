package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamConsumerLifecycleRace: one client creates and deletes stream
// RACE in a loop while another creates, reads and deletes a durable
// consumer on it. Afterwards the store holds no debris (no directory of
// the deleted stream, no "unrestored" leftovers), and a restart reports
// nothing left unrestored. (A user's scripts did this for 20 s and left
// RACE.unrestored-<time>/obs/... behind in 5 of 6 runs.)
func TestStreamConsumerLifecycleRace(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("inspects cairn's store directory")
	}
	dir := t.TempDir()
	u, stop := startServerStoppable(t, func(o *server.Options) { o.JetStream, o.StoreDir = true, dir })
	conn := func() jetstream.JetStream {
		nc, err := nats.Connect(u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	jsA, jsB := conn(), conn()
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var streams, consumers int
	wg.Add(2)
	go func() {
		defer wg.Done()
		for time.Now().Before(end) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = jsA.CreateStream(ctx, jetstream.StreamConfig{Name: "RACE", Subjects: []string{"race.x"}, Storage: jetstream.FileStorage})
			_ = jsA.DeleteStream(ctx, "RACE")
			cancel()
			streams++
		}
	}()
	go func() {
		defer wg.Done()
		for time.Now().Before(end) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = jsB.CreateOrUpdateConsumer(ctx, "RACE", jetstream.ConsumerConfig{Durable: "C1", AckPolicy: jetstream.AckExplicitPolicy})
			if s, err := jsB.Stream(ctx, "RACE"); err == nil {
				_, _ = s.Consumer(ctx, "C1")
			}
			_ = jsB.DeleteConsumer(ctx, "RACE", "C1")
			cancel()
			consumers++
		}
	}()
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = jsA.DeleteStream(ctx, "RACE")
	stop()
	t.Logf("%d stream and %d consumer cycles", streams, consumers)
	var debris []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && (strings.Contains(p, "RACE") || strings.Contains(p, "unrestored")) {
			debris = append(debris, p)
		}
		return nil
	})
	if len(debris) > 0 {
		t.Fatalf("left behind after every stream was deleted: %q", debris)
	}
}
