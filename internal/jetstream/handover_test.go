package jetstream

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// heldLog is a replicated log as the cluster layer gives a stream: it
// leads (streamrun.Leader) and records what is proposed without
// committing it, or, with refuse set, refuses every proposal as a Raft
// log whose replica no longer leads does.
type heldLog struct {
	mu       sync.Mutex
	proposed []stream.Op
	refuse   error
}

func (l *heldLog) Propose(op stream.Op, _ uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil {
		return l.refuse
	}
	b, err := stream.AppendOp(nil, op) // the proposer reuses op
	if err != nil {
		return err
	}
	dec, err := stream.DecodeOp(b)
	if err != nil {
		return err
	}
	l.proposed = append(l.proposed, dec)
	return nil
}

func (l *heldLog) Leader() bool { return true }

func (l *heldLog) entries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, op := range l.proposed {
		if p, ok := op.(*stream.Publish); ok {
			n += len(p.Entries)
		}
	}
	return n
}

// newHeldJS is an engine whose streams run on one heldLog each.
func newHeldJS(t *testing.T, tr Transport, log *heldLog) *JetStream {
	t.Helper()
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1",
		NewReplicatedLog: func(string, Applier[stream.Op]) Log[stream.Op] { return log }}, tr)
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
	return js
}

// A leader about to hand its leadership over (lame duck mode, shutdown)
// stops taking publishes, then proposes everything it took before
// StreamHandOver returns, so that the transfer finds them in the log
// (docs/cluster.md, "Lame duck mode and shutdown").
func TestStreamHandOver(t *testing.T) {
	tr := newMemTransport()
	log := &heldLog{}
	js := newHeldJS(t, tr, log)
	for range 50 {
		if !tr.Publish("events.orders.x", "_INBOX.a", nil, []byte("x")) {
			t.Fatal("the leader's stream does not take publishes")
		}
	}
	if err := js.StreamHandOver("ORDERS", time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := log.entries(); n != 50 {
		t.Fatalf("%d of 50 publishes proposed when StreamHandOver returned", n)
	}
	if tr.HasInterest("events.orders.x") {
		t.Fatal("the stream still subscribes after StreamHandOver")
	}
	if err := js.StreamHandOver("NOPE", time.Minute); err == nil {
		t.Fatal("StreamHandOver of a missing stream: no error")
	}
}

// A publish the log refuses (nothing entered it: the replica no longer
// leads, or hands its leadership over) is answered with the 503 status of
// a request nobody took, which the client retries, never left to time
// out.
func TestUnproposedPublishGets503(t *testing.T) {
	tr := newMemTransport()
	log := &heldLog{refuse: errors.New("raftnode: not the leader")}
	newHeldJS(t, tr, log)
	got := make(chan []byte, 1)
	_, _ = tr.Subscribe("_INBOX.r", "", func(_, _ string, hdr, data []byte) {
		got <- append(append([]byte(nil), hdr...), data...)
	})
	tr.Publish("events.orders.x", "_INBOX.r", nil, []byte("x"))
	select {
	case b := <-got:
		if want := "NATS/1.0 503\r\nNats-Subject: events.orders.x\r\n\r\n"; string(b) != want {
			t.Fatalf("answer %q, want %q", b, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to a publish the log refused")
	}
}
