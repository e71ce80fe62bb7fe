// Command fetchnoack fetches messages from a durable pull consumer without
// acknowledging them, so that they stay pending (bench/idle_pending.sh).
// natscli's `nats consumer next --count N --no-ack` does the same with one
// request per message, which takes minutes for a million.
//
// Usage: go run ./bench/fetchnoack -s nats://127.0.0.1:4222 -stream S -consumer C -n 1000000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("s", nats.DefaultURL, "server URL")
	stream := flag.String("stream", "benchstream", "stream name")
	name := flag.String("consumer", "idle", "durable pull consumer name")
	n := flag.Int("n", 1000000, "messages to fetch")
	batch := flag.Int("batch", 5000, "messages per fetch request")
	flag.Parse()
	if err := run(*url, *stream, *name, *n, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "fetchnoack:", err)
		os.Exit(1)
	}
}

func run(url, stream, name string, n, batch int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, stream, name)
	if err != nil {
		return err
	}
	start := time.Now()
	got := 0
	for got < n {
		b, err := cons.Fetch(min(batch, n-got), jetstream.FetchMaxWait(30*time.Second))
		if err != nil {
			return err
		}
		k := 0
		for range b.Messages() {
			k++ // not acknowledged: it stays pending
		}
		got += k
		if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("after %d messages: %w", got, err)
		}
		if k == 0 {
			return fmt.Errorf("no message in 30s after %d of %d", got, n)
		}
	}
	el := time.Since(start)
	fmt.Printf("fetched %d messages without acking in %v (%.0f msgs/s)\n", got, el.Round(time.Millisecond), float64(got)/el.Seconds())
	return nil
}
