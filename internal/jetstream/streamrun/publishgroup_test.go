package streamrun

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// groupLog records the size of every Publish operation proposed to it.
type groupLog struct {
	groups [][2]int // messages, bytes
}

func (l *groupLog) Propose(op stream.Op, _ uint64) error {
	if p, ok := op.(*stream.Publish); ok {
		size := 0
		for _, e := range p.Entries {
			size += len(e.Subject) + len(e.Header) + len(e.Data)
		}
		l.groups = append(l.groups, [2]int{len(p.Entries), size})
	}
	return nil
}

// Publishes the apply goroutine takes in one batch are proposed in
// groups of at most about 1 MiB (maxPublishGroupBytes), not of 1,024
// messages whatever their size: a replicated stream's group is one raft
// entry, and 1,024 messages of 128 KiB made an entry of 128 MiB, larger
// than the cluster transport's largest frame, that no follower received
// (publish bursts then got 503s or no answer).
func TestPublishGroupsAreBoundedInBytes(t *testing.T) {
	log := &groupLog{}
	cfg := stream.Config{Name: "G", Subjects: []string{"g.>"}, Storage: stream.MemoryStorage}
	cfg.SetDefaults()
	env := Env{Transport: nopTransport{}, Now: time.Now, Logf: t.Logf, Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf),
		NewLog: func(string, Applier[stream.Op]) Log[stream.Op] { return log }}
	r := New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
	payload := make([]byte, 128<<10)
	const n = 40
	for range n {
		r.take(&item{entry: stream.Entry{Subject: "g.x", Data: payload}})
	}
	r.flushPublishes()
	total := 0
	for _, g := range log.groups {
		if g[1] > 1<<20+len(payload)+16 {
			t.Fatalf("one Publish operation of %d messages holds %d bytes", g[0], g[1])
		}
		total += g[0]
	}
	if total != n || len(log.groups) < 2 {
		t.Fatalf("%d of %d publishes proposed in %d groups", total, n, len(log.groups))
	}
}

// answer is one message a recordingTransport published.
type answer struct {
	subject   string
	hdr, data []byte
}

// recordingTransport is nopTransport that records what is published.
type recordingTransport struct {
	nopTransport
	out *[]answer
}

func (t recordingTransport) Publish(subject, _ string, hdr, data []byte) bool {
	*t.out = append(*t.out, answer{subject, hdr, data})
	return true
}

// A stream queues publishes up to Env.MaxBufferedBytes (jetstream
// max_buffered_size; 128 MiB by default, as nats-server) and answers the
// next 429 with the 10167 PubAck, as nats-server's stream ingest queue:
// before, it queued 65,536 publishes whatever their size, and a burst of
// 128 KiB publishes held gigabytes on a replicated stream's leader.
func TestIngestQueueBoundedInBytes(t *testing.T) {
	var out []answer
	cfg := stream.Config{Name: "G", Subjects: []string{"g.>"}, Storage: stream.MemoryStorage}
	cfg.SetDefaults()
	env := Env{Transport: recordingTransport{out: &out}, Now: time.Now, Logf: t.Logf, Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf),
		MaxBufferedBytes: 1 << 20}
	r := New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
	payload := make([]byte, 128<<10)
	for range 7 { // 7 x (128 KiB + 3): the queue keeps them (not served)
		r.handlePublish("g.x", "_INBOX.a", nil, payload)
	}
	if len(out) != 0 {
		t.Fatalf("answers to publishes within the bound: %d (%q %s)", len(out), out[0].hdr, out[0].data)
	}
	r.handlePublish("g.x", "_INBOX.a", nil, payload)
	if len(out) != 1 {
		t.Fatalf("%d answers to the publish past 1 MiB queued, want 1", len(out))
	}
	if h := string(out[0].hdr); h != "NATS/1.0 429 Too Many Requests\r\n\r\n" || !bytes.Contains(out[0].data, []byte(`"err_code":10167`)) {
		t.Fatalf("answer %q %s", h, out[0].data)
	}
}

// A publish queued into an ingest queue more than half full holds its
// publisher until the apply goroutine takes the queue, at most
// ingestStall, as nats-server stalls a fast producer: a burst then slows
// down instead of filling the queue and getting 429s (trial 35: about
// half of a 700 MB burst to an R3 stream refused; nats-server none).
func TestCrowdedIngestStallsPublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := stream.Config{Name: "G", Subjects: []string{"g.>"}, Storage: stream.MemoryStorage}
		cfg.SetDefaults()
		env := Env{Transport: nopTransport{}, Now: time.Now, Logf: t.Logf, Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf),
			MaxBufferedBytes: 1 << 20}
		r := New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
		payload := make([]byte, 128<<10)
		start := time.Now()
		for range 3 { // 3 x (128 KiB + 3): under half of 1 MiB, no stall
			r.handlePublish("g.x", "", nil, payload)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("publishes into a queue under half full held for %v", d)
		}
		r.handlePublish("g.x", "", nil, payload) // past half: nobody takes
		if d := time.Since(start); d != ingestStall {
			t.Fatalf("a publish into a crowded queue nobody takes held for %v, want %v", d, ingestStall)
		}
		held := make(chan time.Duration, 1)
		go func() {
			s := time.Now()
			r.handlePublish("g.x", "", nil, payload)
			held <- time.Since(s)
		}()
		synctest.Wait() // the publisher waits in its stall
		if _, ok := r.in.take(nil); !ok {
			t.Fatal("nothing queued")
		}
		if d := <-held; d != 0 {
			t.Fatalf("a stalled publish went on %v after the queue was taken, want at once", d)
		}
	})
}
