package streamrun

import (
	"bytes"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// slowLog is a replicated log (Leader) whose first publish waits for
// release, as a leader's proposals wait for room while its disk writes a
// burst; it counts the publishes proposed.
type slowLog struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	entries int
}

func (l *slowLog) Propose(op stream.Op, _ uint64) error {
	if p, ok := op.(*stream.Publish); ok {
		l.once.Do(func() { <-l.release })
		l.mu.Lock()
		l.entries += len(p.Entries)
		l.mu.Unlock()
	}
	return nil
}

func (l *slowLog) Leader() bool { return true }

// lockedTransport records what is published, from any goroutine.
type lockedTransport struct {
	nopTransport
	mu  *sync.Mutex
	out *[]answer
}

func (t lockedTransport) Publish(subject, _ string, hdr, data []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	*t.out = append(*t.out, answer{subject, hdr, data})
	return true
}

// A leader handing its leadership over proposes what it took for
// patience, then answers the publishes it took and had not proposed with
// 503 (nothing of them entered the log: the client's retry stores them
// once, with the new leader) instead of proposing them at its disk's pace
// while every new publish gets 503 (trial 38: 1.9 s for a burst of
// 128 KiB messages). Without the patience, all ten are proposed.
func TestQuiesceRefusesAfterPatience(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var out []answer
		log := &slowLog{release: make(chan struct{})}
		cfg := stream.Config{Name: "G", Subjects: []string{"g.>"}, Storage: stream.MemoryStorage}
		cfg.SetDefaults()
		env := Env{Transport: lockedTransport{mu: &mu, out: &out}, Now: time.Now, Logf: t.Logf,
			Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf),
			NewLog:  func(string, Applier[stream.Op]) Log[stream.Op] { return log }}
		r := New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
		if err := r.Open(); err != nil {
			t.Fatal(err)
		}
		if err := r.Serve(); err != nil {
			t.Fatal(err)
		}
		defer r.Stop(nil)
		if err := r.SetLeader(true); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, 512<<10)
		const n = 10
		for i := range n {
			r.handlePublish("g.x", "_INBOX.p"+string(rune('a'+i)), nil, payload)
		}
		synctest.Wait() // the first proposal waits for room
		if err := r.SetLeader(false); err != nil {
			t.Fatal(err)
		}
		quiet := make(chan time.Duration, 1)
		start := time.Now()
		go func() { r.Quiesce(250 * time.Millisecond); quiet <- time.Since(start) }()
		time.Sleep(time.Second) // the disk still busy past the patience
		synctest.Wait()
		close(log.release)
		took := <-quiet
		mu.Lock()
		refused := 0
		for _, a := range out {
			if bytes.HasPrefix(a.hdr, []byte("NATS/1.0 503\r\n")) {
				refused++
			}
		}
		mu.Unlock()
		log.mu.Lock()
		proposed := log.entries
		log.mu.Unlock()
		if proposed+refused != n || refused < n/2 || took != time.Second {
			t.Fatalf("%d proposed, %d answered 503 (of %d), Quiesce took %v; want most answered 503 once the first proposal was through (1s)", proposed, refused, n, took)
		}
		// Leading again, the stream proposes what it takes.
		if err := r.SetLeader(true); err != nil {
			t.Fatal(err)
		}
		r.handlePublish("g.x", "_INBOX.q", nil, payload)
		r.Barrier()
		log.mu.Lock()
		defer log.mu.Unlock()
		if log.entries != proposed+1 {
			t.Fatalf("a publish taken after leading again: %d proposed, want %d", log.entries, proposed+1)
		}
	})
}
