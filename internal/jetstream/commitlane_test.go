package jetstream

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// gateLog is a replicated log whose first Publish commits at once and
// whose later ones wait in Propose until gate closes, as streamlog's
// Propose waits while 64 MiB of proposals await their outcome; other
// operations are taken and never commit.
type gateLog struct {
	a    Applier[stream.Op]
	gate chan struct{}

	mu       sync.Mutex
	proposed int
	blocked  chan struct{} // closed when a Propose waits at the gate
}

func (l *gateLog) Propose(op stream.Op, key uint64) error {
	b, err := stream.AppendOp(nil, op) // the proposer reuses op
	if err != nil {
		return err
	}
	dec, err := stream.DecodeOp(b)
	if err != nil {
		return err
	}
	if _, ok := dec.(*stream.Publish); !ok {
		return nil // the leader's own operations never commit here
	}
	l.mu.Lock()
	l.proposed++
	n := l.proposed
	l.mu.Unlock()
	if n == 1 {
		l.a.Apply(1, dec, key) // committed: queued for the apply goroutine
		return nil
	}
	if n == 2 {
		close(l.blocked)
	}
	<-l.gate
	return nil
}

func (l *gateLog) Leader() bool { return true }

// A leader's apply goroutine that took a batch of publishes and waits to
// propose the rest of it still applies what the log committed meanwhile
// and sends its PubAcks (trial 140: a 100 MB object put's chunk PubAcks
// waited until the whole object was proposed, the followers long done
// storing it, and one passed the client's 5 s timeout). Without the
// committed lane the first PubAck comes only once the gate opens.
func TestCommittedAppliesWhileProposing(t *testing.T) {
	log := &gateLog{gate: make(chan struct{}), blocked: make(chan struct{})}
	defer close(log.gate)
	tr := newMemTransport()
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1",
		NewReplicatedLog: func(_ string, a Applier[stream.Op]) Log[stream.Op] {
			log.a = a
			return log
		}}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Shutdown)
	if _, jerr := js.AddStream(ordersConfig(stream.FileStorage)); jerr != nil {
		t.Fatal(jerr)
	}
	if err := js.SetStreamLeader("ORDERS", true); err != nil {
		t.Fatal(err)
	}
	r, jerr := js.lookup("ORDERS")
	if jerr != nil {
		t.Fatal(jerr)
	}
	in := tr.inbox("_INBOX.acks")
	// Four publishes of 600 KB in one batch of the apply goroutine: two
	// proposals of two (a group ends at 1 MiB).
	data := []byte(strings.Repeat("x", 600_000))
	r.Held(func() {
		for range 4 {
			if !tr.Publish("events.orders.x", "_INBOX.acks", nil, data) {
				t.Error("the leader's stream does not take publishes")
			}
		}
	})
	select {
	case <-log.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the second proposal never came")
	}
	for i := 1; i <= 2; i++ {
		select {
		case b := <-in.ch:
			if !strings.Contains(string(b), `"seq":`) || strings.Contains(string(b), "error") {
				t.Fatalf("PubAck %d: %s", i, b)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("PubAck %d of the committed proposal not sent while the next proposal waits", i)
		}
	}
}
