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
// logged once a second, not once per publish. A publisher is held up to
// 10 ms while the queue is more than half full (streamrun
// stallPublisher), so a burst that passes a small bound comes from
// several connections at once.

// ingestBurst is what a burst of publishes with replies got back.
type ingestBurst struct {
	ok, tooMany int
	other       []string // answers that are neither
	elapsed     time.Duration
}

// ingestPublishers is how many connections burstIngest publishes from
// at once: each is held while the queue is crowded, the others go on.
const ingestPublishers = 8

// burstIngest publishes n messages of size bytes to subj through url,
// from ingestPublishers connections at once, each message with its own
// reply subject, without waiting between them, and waits (with a
// deadline) until each is answered; an answer twice to one publish fails
// the test.
func burstIngest(t *testing.T, url, subj string, n, size int) ingestBurst {
	t.Helper()
	nc := connect(t, url)
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
	pubs := make([]*nats.Conn, ingestPublishers)
	for k := range pubs {
		pubs[k] = connect(t, url)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for k, pc := range pubs {
		wg.Go(func() {
			for i := k; i < n; i += len(pubs) {
				if err := pc.PublishRequest(subj, fmt.Sprintf("_INBOX.ingest.%d", i), data); err != nil {
					t.Error(err)
					return
				}
			}
			if err := pc.Flush(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
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

// TestJetStreamMaxBuffered bursts 1 KiB publishes at a file stream whose
// server sets max_buffered_size to 512 bytes, or max_buffered_msgs to 1.
// With the size, no publish fits the queue: every one is refused with
// 429 / 10167 (nats-server v2.15.2's ipQueue refuses an item larger than
// its bound even when empty), the stream stays empty, and the drop is
// logged with nats-server's text, at most once a second. With the count,
// every publish is answered once, with a PubAck or 429 / 10167, and the
// stream holds what was acknowledged.
func TestJetStreamMaxBuffered(t *testing.T) {
	for _, c := range []struct {
		name    string
		set     func(*server.Options)
		cause   string
		refused bool // every publish refused
	}{
		{"max_buffered_size", func(o *server.Options) { o.StreamMaxBufferedSize = 512 }, "IPQ size limit reached", true},
		{"max_buffered_msgs", func(o *server.Options) { o.StreamMaxBufferedMsgs = 1 }, "IPQ len limit reached", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			u := startServer(t, func(o *server.Options) {
				o.JetStream = true
				c.set(o)
				o.Logger = logger.New(&logs, false, false)
			})
			_, js := jsConnect(t, u)
			s := createStream(t, js, jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"in.>"}, Storage: jetstream.FileStorage})
			b := burstIngest(t, u, "in.x", 2000, 1<<10)
			checkBurst(t, b, c.refused, func() uint64 { return streamInfo(t, s).State.Msgs })
			if targetIsNatsServer() || b.tooMany == 0 {
				return // its log goes to its own output; nothing dropped, nothing logged
			}
			line := "Dropping messages due to excessive stream ingest rate on '$G' > 'INGEST': " + c.cause
			if k := strings.Count(logs.String(), line); k < 1 || k > int(b.elapsed/time.Second)+1 {
				t.Fatalf("%d drop lines for %d drops in %v, want 1 a second at most:\n%s", k, b.tooMany, b.elapsed, logs.String())
			}
		})
	}
}

// checkBurst checks that a burst got only PubAcks and 429s, every
// publish refused if refused is set, and that the stream holds what was
// acknowledged (msgs).
func checkBurst(t *testing.T, b ingestBurst, refused bool, msgs func() uint64) {
	t.Helper()
	t.Logf("%d stored, %d refused with 429 in %v", b.ok, b.tooMany, b.elapsed)
	if len(b.other) > 0 {
		t.Fatalf("%d answers neither a PubAck nor 429/10167, first %s", len(b.other), b.other[0])
	}
	if refused && b.ok > 0 {
		t.Fatalf("%d publishes larger than max_buffered_size stored: the bound not applied", b.ok)
	}
	if got := msgs(); got != uint64(b.ok) {
		t.Fatalf("stream holds %d messages, %d PubAcks", got, b.ok)
	}
}

// In a cluster, the leader of a replicated stream bounds its ingest queue
// with the same setting: a burst of publishes larger than
// max_buffered_size sent through a follower's server is refused whole.
func TestJetStreamClusterMaxBufferedSize(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.StreamMaxBufferedSize = 512 })
	_, js := jsConnect(t, servers[0].ClientURL())
	s := createStream(t, js, jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"in.>"}, Storage: jetstream.FileStorage, Replicas: 3})
	follower := (streamLeader(t, servers, js, "INGEST") + 1) % len(servers)
	b := burstIngest(t, servers[follower].ClientURL(), "in.x", 2000, 1<<10)
	checkBurst(t, b, true, func() uint64 { return streamInfo(t, s).State.Msgs })
}
