package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// kill -9 while a consumer dead-letters messages into a stream (cairn's
// dead-letter subject, docs/dead-letter.md): every message is moved
// exactly once, none is lost, and none is released before its copy is
// stored.
//
// A workqueue stream DLQORD (dlqord.>) names dlq.orders in its metadata;
// stream DLQ captures dlq.> with the shortest duplicate window (100 ms),
// so that a move retried after a restart is not stopped by the
// Nats-Msg-Id alone. Consumer P has explicit acks, max_deliver 1 and
// ack_wait 1 s. Each iteration:
//
//  1. publishes crashDLQN messages (PubAcks awaited), then consumes
//     them: by stream sequence, one in four is NAKed (max_deliver
//     reached), one terminated (+TERM), one terminated with a confirmed
//     +TERM (a request, whose answer means the move is complete), and
//     one left alone (its ack wait runs out);
//  2. kills the server at a random moment of the consumption, just
//     after a copy was published (a core subscriber sees it), and
//     restarts it on the same directory once DLQ's duplicate window has
//     passed;
//  3. consumes again with the same handler until DLQORD is empty (the
//     workqueue releases a message only once its copy is stored);
//  4. checks DLQ: exactly one copy per message published so far (by
//     Cairn-Dlq-Sequence), every confirmed +TERM's among them, with its
//     payload and subject, the reason max_deliver for every NAK and
//     every message left alone, max_deliver or term for a +TERM (a
//     +TERM that comes after the ack wait ran out joins the max_deliver
//     move already under way, and is answered when it completes).
//
// Only for cairn: nats-server has no dead-letter subject.

const (
	crashDLQN       = 400
	crashDLQAckWait = time.Second
	crashDLQWindow  = 100 * time.Millisecond // DLQ's duplicate window, the shortest allowed
)

// dlqAction is what the test's handler does with a stream sequence.
func dlqAction(seq uint64) string {
	return [...]string{"nak", "term", "term-confirmed", "ignore"}[seq%4]
}

func TestDeadLetterCrashKill9(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("the dead-letter subject is cairn's own")
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed)
	bin := buildCairn(t)
	dir := t.TempDir()
	p := startCairnProc(t, bin, dir)

	published := map[uint64]string{} // DLQORD seq -> payload, over all iterations
	confirmed := map[uint64]bool{}   // seqs whose +TERM was confirmed
	const iterations = 3
	for it := range iterations {
		nc, js := crashDLQConnect(t, p)
		if it == 0 {
			crashDLQSetup(t, js)
		}
		crashDLQPublish(t, js, it, published)

		// Watch the copies go out (a core subscriber of dlq.orders).
		copies := make(chan struct{}, crashDLQN)
		watch, err := nc.Subscribe("dlq.orders", func(*nats.Msg) {
			select {
			case copies <- struct{}{}:
			default:
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}

		// Consume; kill at a random moment, just after a copy went out
		// (so that moves are in flight: stored or not, acknowledged or
		// not), or when none comes.
		h := &dlqHandler{nc: nc, confirmed: map[uint64]bool{}}
		cc := crashDLQConsume(t, js, h)
		killAfter := 20*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
		time.Sleep(killAfter)
		for len(copies) > 0 {
			<-copies
		}
		select {
		case <-copies:
			time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
		case <-time.After(crashDLQAckWait):
		}
		p.kill()
		killed := time.Now()
		_ = watch.Unsubscribe()
		h.stop()
		cc.Stop()
		nc.Close()
		h.mu.Lock()
		for s := range h.confirmed {
			confirmed[s] = true
		}
		t.Logf("iteration %d: killed %v into the consumption, after %d deliveries (%d +TERM confirmed)",
			it, killAfter.Round(time.Millisecond), h.seen, len(h.confirmed))
		h.mu.Unlock()

		// Restart past DLQ's duplicate window, so that only the move's
		// own check keeps a copy stored before the kill from being
		// stored again, and drain.
		time.Sleep(time.Until(killed.Add(crashDLQWindow + 50*time.Millisecond)))
		p = startCairnProc(t, bin, dir)
		nc, js = crashDLQConnect(t, p)
		h = &dlqHandler{nc: nc, confirmed: map[uint64]bool{}}
		cc = crashDLQConsume(t, js, h)
		crashDLQDrain(t, p, js, it)
		cc.Stop()
		h.mu.Lock()
		for s := range h.confirmed {
			confirmed[s] = true
		}
		h.mu.Unlock()
		crashDLQVerify(t, p, js, it, published, confirmed)
		nc.Close()
	}
}

// crashDLQDrain waits for DLQORD to be empty; if it does not empty, it
// fails with the stream's and the consumer's state and the server log.
func crashDLQDrain(t *testing.T, p *cairnProc, js jetstream.JetStream, it int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
		s, err := js.Stream(ctx, "DLQORD")
		cancel()
		if err == nil && s.CachedInfo().State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
			defer cancel()
			var state any
			if s != nil {
				state = s.CachedInfo().State
			}
			var cinfo any
			if c, err := js.Consumer(ctx, "DLQORD", "P"); err == nil {
				cinfo = c.CachedInfo()
			}
			t.Fatalf("iteration %d: DLQORD not empty after 30s: stream %+v (err %v)\nconsumer %+v\nserver log:\n%s",
				it, state, err, cinfo, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func crashDLQConnect(t *testing.T, p *cairnProc) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(p.url, nats.NoReconnect(), nats.Timeout(readTimeout),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.log.String())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func crashDLQSetup(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"},
		Storage: jetstream.FileStorage, Duplicates: crashDLQWindow}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQORD", Subjects: []string{"dlqord.>"},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy,
		Metadata: map[string]string{"cairn.dead_letter_subject": "dlq.orders"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "DLQORD", jetstream.ConsumerConfig{Durable: "P",
		AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 1, AckWait: crashDLQAckWait}); err != nil {
		t.Fatal(err)
	}
}

// crashDLQPublish publishes crashDLQN messages and records them.
func crashDLQPublish(t *testing.T, js jetstream.JetStream, it int, published map[uint64]string) {
	t.Helper()
	futures := make([]jetstream.PubAckFuture, 0, crashDLQN)
	for i := range crashDLQN {
		f, err := js.PublishAsync("dlqord.new", []byte(crashPayload(it, i)))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case pa := <-f.Ok():
			published[pa.Sequence] = string(f.Msg().Data)
		case err := <-f.Err():
			t.Fatalf("publish: %v", err)
		case <-time.After(jsTimeout):
			t.Fatal("no PubAck")
		}
	}
}

// dlqHandler handles deliveries as dlqAction says.
type dlqHandler struct {
	nc        *nats.Conn
	mu        sync.Mutex
	stopped   bool
	seen      int
	confirmed map[uint64]bool
}

func (h *dlqHandler) stop() {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
}

func (h *dlqHandler) handle(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	seq := md.Sequence.Stream
	h.mu.Lock()
	h.seen++
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		return
	}
	switch dlqAction(seq) {
	case "nak":
		_ = m.Nak()
	case "term":
		_ = m.Term()
	case "term-confirmed":
		if _, err := h.nc.Request(m.Reply(), []byte("+TERM"), 2*time.Second); err == nil {
			h.mu.Lock()
			if !h.stopped {
				h.confirmed[seq] = true
			}
			h.mu.Unlock()
		}
	}
}

func crashDLQConsume(t *testing.T, js jetstream.JetStream, h *dlqHandler) jetstream.ConsumeContext {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	c, err := js.Consumer(ctx, "DLQORD", "P")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.Consume(h.handle, jetstream.PullMaxMessages(64), jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// crashDLQVerify checks that DLQ holds exactly one copy of each message
// published, with the reasons the handler's actions allow.
func crashDLQVerify(t *testing.T, p *cairnProc, js jetstream.JetStream, it int, published map[uint64]string, confirmed map[uint64]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*jsTimeout)
	defer cancel()
	s, err := js.Stream(ctx, "DLQ")
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	copies := map[uint64]int{}
	reasons := map[string]int{}
	for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("iteration %d: DLQ seq %d: %v", it, seq, err)
		}
		orig, err := strconv.ParseUint(m.Header.Get("Cairn-Dlq-Sequence"), 10, 64)
		if err != nil {
			t.Fatalf("iteration %d: DLQ seq %d without an origin: %v", it, seq, m.Header)
		}
		copies[orig]++
		reason := m.Header.Get("Cairn-Dlq-Reason")
		reasons[reason]++
		want, ok := published[orig]
		switch {
		case !ok:
			t.Errorf("iteration %d: copy of DLQORD seq %d, which was never published", it, orig)
		case string(m.Data) != want || m.Subject != "dlq.orders" || m.Header.Get("Cairn-Dlq-Subject") != "dlqord.new":
			t.Errorf("iteration %d: copy of %d: %s %q, published %q", it, orig, m.Subject, trunc(string(m.Data)), trunc(want))
		case m.Header.Get("Nats-Msg-Id") != fmt.Sprintf("DLQORD.P.%d", orig):
			t.Errorf("iteration %d: copy of %d with Nats-Msg-Id %q", it, orig, m.Header.Get("Nats-Msg-Id"))
		case dlqAction(orig) != "term" && dlqAction(orig) != "term-confirmed" && reason != "max_deliver":
			t.Errorf("iteration %d: %d (%s) moved with reason %q", it, orig, dlqAction(orig), reason)
		case reason != "term" && reason != "max_deliver":
			t.Errorf("iteration %d: %d moved with reason %q", it, orig, reason)
		}
	}
	for seq := range confirmed {
		if copies[seq] == 0 {
			t.Errorf("iteration %d: the +TERM of %d was confirmed, but it was not moved", it, seq)
		}
	}
	var lost, twice []uint64
	for seq := range published {
		switch copies[seq] {
		case 0:
			lost = append(lost, seq)
		case 1:
		default:
			twice = append(twice, seq)
		}
	}
	if len(lost) > 0 || len(twice) > 0 {
		t.Fatalf("iteration %d: %d messages published, %d copies; not moved: %v; moved more than once: %v\nserver log:\n%s",
			it, len(published), st.Msgs, head(lost), head(twice), p.log.String())
	}
	t.Logf("iteration %d: DLQ holds exactly one copy of each of the %d messages (reasons %v)", it, len(published), reasons)
}

func head(s []uint64) []uint64 { return s[:min(len(s), 10)] }
