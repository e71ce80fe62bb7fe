package jetstream

import (
	"fmt"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// deliveries collects the ack subjects of the messages delivered to one
// subject, by stream sequence.
type deliveries struct {
	mu   sync.Mutex
	subj map[uint64]string
	got  chan struct{}
}

func collectDeliveries(tr *memTransport, subj string) *deliveries {
	d := &deliveries{subj: map[uint64]string{}, got: make(chan struct{}, 4096)}
	_, _ = tr.Subscribe(subj, "", func(_, reply string, _, _ []byte) {
		if _, sseq, _, ok := consumerrun.ParseAckSubject(reply); ok {
			d.mu.Lock()
			d.subj[sseq] = reply
			d.mu.Unlock()
			d.got <- struct{}{}
		}
	})
	return d
}

func (d *deliveries) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-d.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("fewer than %d deliveries within 10 s", n)
		}
	}
}

// confirmedAcksRun publishes n messages, pulls them, double-acks every
// message in confirmed (waiting for every confirmation), plain-acks the
// others, and returns the JetStream still running. With settle, the acks
// are sent only once the state holding the deliveries is stored, so they
// take the ack journal's path; otherwise most wait for a snapshot.
func confirmedAcksRun(t *testing.T, fs vfs.FS, tr *memTransport, n int, settle bool, confirmed func(seq uint64) bool) *JetStream {
	t.Helper()
	js := newTestJS(t, fs, tr)
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	cfg := consumer.Config{Durable: "proc", AckPolicy: consumer.AckExplicit, AckWait: time.Hour}
	if _, err := js.CreateConsumer("ORDERS", cfg, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	pubAcks := tr.inbox("_INBOX.pub")
	for i := range n {
		tr.Publish("events.orders.x", "_INBOX.pub", nil, fmt.Appendf(nil, "order-%d", i))
	}
	for range n {
		pubAcks.next(t)
	}
	d := collectDeliveries(tr, "_INBOX.pull")
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS.proc", "_INBOX.pull", nil, fmt.Appendf(nil, `{"batch":%d}`, n))
	d.wait(t, n)
	if settle {
		c, _ := js.lookupConsumer("ORDERS", "proc")
		for deadline := time.Now().Add(10 * time.Second); c.StoredDelivered() < uint64(n); {
			if time.Now().After(deadline) {
				t.Fatal("the deliveries' state was not stored within 10 s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	confirms := tr.inbox("_INBOX.confirm")
	want := 0
	d.mu.Lock()
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if confirmed(seq) {
			tr.Publish(d.subj[seq], "_INBOX.confirm", nil, []byte("+ACK"))
			want++
		} else {
			tr.Publish(d.subj[seq], "", nil, []byte("+ACK"))
		}
	}
	d.mu.Unlock()
	for range want {
		confirms.next(t)
	}
	return js
}

// checkConfirmedAcked fails unless the restored consumer holds every
// confirmed ack: none of them pending, none to be redelivered.
func checkConfirmedAcked(t *testing.T, js *JetStream, n int, confirmed func(uint64) bool) {
	t.Helper()
	c, jerr := js.lookupConsumer("ORDERS", "proc")
	if jerr != nil {
		t.Fatal(jerr)
	}
	st := c.Snapshot()
	isPending := func(seq uint64) bool { _, ok := st.PendingAt(seq); return ok }
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if confirmed(seq) && (isPending(seq) || seq > st.Delivered.Stream) {
			t.Fatalf("confirmed ack of %d lost: pending %v, delivered %d, ack floor %d",
				seq, isPending(seq), st.Delivered.Stream, st.AckFloor.Stream)
		}
	}
}

// TestConfirmedAcksSurvivePowerLoss: after a power loss right after the
// confirmations arrived, the restored consumer holds every confirmed ack
// (docs/engine.md, "Durability"). Without the ack journal, the state
// saved every 100 ms lost them.
func TestConfirmedAcksSurvivePowerLoss(t *testing.T) {
	const n = 300
	everyThird := func(seq uint64) bool { return seq%3 == 0 }
	for i, tail := range []vfs.TailMode{vfs.TailDrop, vfs.TailAny, vfs.TailTorn, vfs.TailDrop, vfs.TailAny} {
		settle := i >= 3
		t.Run(fmt.Sprintf("tail%d/settle=%v", tail, settle), func(t *testing.T) {
			fs, tr := vfs.NewCrashFS(), newMemTransport()
			js := confirmedAcksRun(t, fs, tr, n, settle, everyThird)
			crashed := fs.Crash(vfs.CrashOptions{Tail: tail, Rand: rand.New(rand.NewPCG(uint64(i), 1))})
			js.Shutdown()
			js2 := newTestJS(t, crashed, newMemTransport())
			defer js2.Shutdown()
			checkConfirmedAcked(t, js2, n, everyThird)
		})
	}
}

// TestConfirmedAcksAllMessages: with every message double-acked, the
// restored consumer has nothing pending and its ack floor at the end.
func TestConfirmedAcksAllMessages(t *testing.T) {
	const n = 200
	all := func(uint64) bool { return true }
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := confirmedAcksRun(t, fs, tr, n, true, all)
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	js.Shutdown()
	js2 := newTestJS(t, crashed, newMemTransport())
	defer js2.Shutdown()
	info, jerr := js2.ConsumerInfo("ORDERS", "proc")
	if jerr != nil {
		t.Fatal(jerr)
	}
	if info.AckFloor.Stream != n || info.NumAckPending != 0 {
		t.Fatalf("after power loss: ack floor %d, %d pending; want %d and 0", info.AckFloor.Stream, info.NumAckPending, n)
	}
}

// findFiles returns the paths under dir whose name is base.
func findFiles(t *testing.T, fs *vfs.CrashFS, dir, base string) []string {
	t.Helper()
	var out []string
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, n := range names {
		p := dir + "/" + n
		if n == base {
			out = append(out, p)
		}
		out = append(out, findFiles(t, fs, p, base)...)
	}
	return out
}

// TestDamagedConsumerStateRestoresFromConfig: when every copy of a
// durable consumer's state is damaged, the consumer is still there after
// a restart, with nothing acknowledged (everything is delivered again,
// nothing skipped), a warning naming the consumer state, and the damaged
// copies kept.
func TestDamagedConsumerStateRestoresFromConfig(t *testing.T) {
	const n = 30
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := confirmedAcksRun(t, fs, tr, n, true, func(uint64) bool { return true })
	js.Shutdown()
	for _, slot := range []string{"state", "state.1"} {
		for _, p := range findFiles(t, fs, "/sd", slot) {
			if err := fs.FlipBit(p, 8*24); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	var logs []string
	js2, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}}, newMemTransport())
	if err != nil {
		t.Fatal(err)
	}
	defer js2.Shutdown()
	info, jerr := js2.ConsumerInfo("ORDERS", "proc")
	if jerr != nil {
		t.Fatalf("consumer lost with its damaged state: %v", jerr)
	}
	if info.AckFloor.Stream != 0 || info.NumPending != n {
		t.Fatalf("restored consumer: ack floor %d, %d pending; want 0 and %d (everything again)", info.AckFloor.Stream, info.NumPending, n)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range logs {
		if strings.Contains(l, "consumer state damaged") && strings.Contains(l, "proc") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no warning about the consumer state in %q", logs)
	}
	if len(findFiles(t, fs, "/sd", "state.damaged")) == 0 {
		t.Fatal("the damaged state was not kept aside")
	}
}
