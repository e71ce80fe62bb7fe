package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/server"
)

// A stream's ingest queue is bounded by jetstream { max_buffered_size,
// max_buffered_msgs } (server.Options.StreamMaxBufferedSize and
// StreamMaxBufferedMsgs), as nats-server v2.15.2's (stream.go
// queueInbound): a burst of publishes faster than the stream stores them
// gets 'NATS/1.0 429 Too Many Requests' answers with a 10167 PubAck error
// past the bound, every publish is answered once, and the drops are
// logged once a second, not once per publish.

// ingestBurst is what a burst of publishes with replies got back.
type ingestBurst struct {
	ok, tooMany int
	other       []string // answers that are neither
	elapsed     time.Duration
}

// burstIngest publishes n messages of size bytes to subj, each with its
// own reply subject, without waiting between them, and waits (with a
// deadline) until each is answered; an answer twice to one publish fails
// the test.
func burstIngest(t *testing.T, nc *nats.Conn, subj string, n, size int) ingestBurst {
	t.Helper()
	var (
		mu      sync.Mutex
		b       ingestBurst
		answers = map[string]int{}
	)
	sub, err := nc.Subscribe("_INBOX.ingest.*", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		answers[m.Subject]++
		var ack struct {
			Stream string `json:"stream"`
			Error  *struct {
				Code    int `json:"code"`
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		err := json.Unmarshal(m.Data, &ack)
		switch {
		case err == nil && ack.Error == nil && m.Header.Get("Status") == "":
			b.ok++
		case err == nil && ack.Error != nil && ack.Error.Code == 429 && ack.Error.ErrCode == 10167 &&
			m.Header.Get("Status") == "429" && m.Header.Get("Description") == "Too Many Requests":
			b.tooMany++
		default:
			b.other = append(b.other, fmt.Sprintf("%v %s", m.Header, m.Data))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	start := time.Now()
	for i := range n {
		if err := nc.PublishRequest(subj, fmt.Sprintf("_INBOX.ingest.%d", i), data); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, jsTimeout, "an answer to every publish", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answers) == n
	})
	mu.Lock()
	defer mu.Unlock()
	b.elapsed = time.Since(start)
	for s, k := range answers {
		if k != 1 {
			t.Errorf("%s answered %d times", s, k)
		}
	}
	return b
}

// TestJetStreamMaxBufferedSize bursts 1 KiB publishes at a file stream
// whose server sets max_buffered_size to 2 KiB: the queue holds one
// publish while the stream stores the previous ones, so most of the burst
// is refused with 429 / 10167; what was accepted is stored. The drop is
// logged with nats-server's text, at most once a second.
func TestJetStreamMaxBufferedSize(t *testing.T) {
	var logs syncBuffer
	u := startServer(t, func(o *server.Options) {
		o.JetStream = true
		o.StreamMaxBufferedSize = 2 << 10
		o.Logger = logger.New(&logs, false, false)
	})
	nc, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"in.>"}, Storage: jetstream.FileStorage})
	const n = 2000
	b := burstIngest(t, nc, "in.x", n, 1<<10)
	t.Logf("%d stored, %d refused with 429 in %v", b.ok, b.tooMany, b.elapsed)
	if len(b.other) > 0 {
		t.Fatalf("%d answers neither a PubAck nor 429/10167, first %s", len(b.other), b.other[0])
	}
	if b.tooMany == 0 {
		t.Fatalf("no publish of the burst refused (%d stored): max_buffered_size not applied", b.ok)
	}
	if got := streamInfo(t, s).State.Msgs; got != uint64(b.ok) {
		t.Fatalf("stream holds %d messages, %d PubAcks", got, b.ok)
	}
	if targetIsNatsServer() {
		return // its log goes to its own output
	}
	line := "Dropping messages due to excessive stream ingest rate on '$G' > 'INGEST': IPQ size limit reached"
	if k := strings.Count(logs.String(), line); k < 1 || k > int(b.elapsed/time.Second)+1 {
		t.Fatalf("%d drop lines for %d drops in %v, want 1 a second at most:\n%s", k, b.tooMany, b.elapsed, logs.String())
	}
}

// The default bound is nats-server's 128 MiB: the same burst on a server
// that sets nothing is stored whole.
func TestJetStreamMaxBufferedDefault(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"in.>"}, Storage: jetstream.FileStorage})
	b := burstIngest(t, nc, "in.x", 2000, 1<<10)
	if b.ok != 2000 || b.tooMany != 0 || len(b.other) > 0 {
		t.Fatalf("default bound: %d stored, %d refused, other %q", b.ok, b.tooMany, b.other)
	}
}
