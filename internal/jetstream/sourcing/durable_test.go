package sourcing

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// fakeTimers is an injected timer source: every After is recorded and
// fires only when the test fires it.
type fakeTimers struct {
	mu  sync.Mutex
	chs []chan time.Time
	ds  []time.Duration
}

func (f *fakeTimers) after(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	f.chs, f.ds = append(f.chs, ch), append(f.ds, d)
	return ch
}

// fire fires every pending timer of duration d.
func (f *fakeTimers) fire(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, ch := range f.chs {
		if f.ds[i] == d && ch != nil {
			ch <- time.Time{}
			f.chs[i] = nil
		}
	}
}

// waiting reports whether a timer of duration d is pending.
func (f *fakeTimers) waiting(d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, ch := range f.chs {
		if f.ds[i] == d && ch != nil {
			return true
		}
	}
	return false
}

// fakeConsumer plays the origin's durable consumer on the transport:
// it records the reset requests and flow control replies the sourcer
// sends.
type fakeConsumer struct {
	mu      sync.Mutex
	resets  []string // the reply subject of each reset request
	hdrs    []string // and its header
	fcAcks  []string // the header of each flow control reply
	tr      *memTransport
	deliver string
}

func newFakeConsumer(t *testing.T, tr *memTransport, origin, name, deliver string) *fakeConsumer {
	f := &fakeConsumer{tr: tr, deliver: deliver}
	if _, err := tr.Subscribe("$JS.API.CONSUMER.RESET."+origin+"."+name, "", func(_, reply string, hdr, _ []byte) {
		f.mu.Lock()
		f.resets, f.hdrs = append(f.resets, reply), append(f.hdrs, string(hdr))
		f.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Subscribe("fc.>", "", func(_, _ string, hdr, _ []byte) {
		f.mu.Lock()
		f.fcAcks = append(f.fcAcks, string(hdr))
		f.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeConsumer) numResets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.resets)
}

// answer answers the last reset with the consumer's ack policy and
// delivered stream sequence.
func (f *fakeConsumer) answer(ack string, delivered uint64) {
	f.mu.Lock()
	reply := f.resets[len(f.resets)-1]
	f.mu.Unlock()
	body := fmt.Sprintf(`{"type":"io.nats.jetstream.api.v1.consumer_reset_response","name":"C","config":{"ack_policy":%q},"delivered":{"consumer_seq":0,"stream_seq":%d},"reset_seq":%d}`, ack, delivered, delivered+1)
	f.tr.Publish(reply, "", nil, []byte(body))
}

// deliver delivers origin message sseq as delivery dseq.
func (f *fakeConsumer) deliver1(sseq, dseq uint64) {
	reply := fmt.Sprintf("$JS.ACK.O.C.1.%d.%d.%d.0", sseq, dseq, 1_700_000_000_000_000_000+int64(sseq))
	f.tr.Publish(f.deliver, reply, nil, []byte(fmt.Sprintf("m%d", sseq)))
}

// startDurableSource starts the stream AGG sourcing, through the durable
// consumer C (deliver subject "dlv"), the stream O, with timers and clk.
func startDurableSource(t *testing.T, e *engine, timers *fakeTimers, clk *fakeClock) *Set {
	t.Helper()
	cfg := stream.Config{Name: "AGG", Sources: []*stream.Source{{Name: "O", Consumer: &stream.SourceConsumer{Name: "C", DeliverSubject: "dlv"}}}, Storage: stream.MemoryStorage}
	cfg.SetDefaults()
	env := streamrun.Env{Transport: e.tr, Now: time.Now, Logf: t.Logf, Storage: e.storage, BatchLimits: stream.BatchLimits{}.WithDefaults(), Batches: &e.batches}
	s := streamrun.New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(nil) })
	ss := NewSet(Env{Now: clk.now, Logf: t.Logf, Lookup: e.lookup, Transport: e.tr, After: timers.after}, s)
	s.SetSources(ss)
	ss.Start(cfg, e.lookup)
	t.Cleanup(func() { ss.Close(false) })
	return ss
}

// refuse answers the last reset with the JetStream error code.
func (f *fakeConsumer) refuse(code int) {
	f.mu.Lock()
	reply := f.resets[len(f.resets)-1]
	f.mu.Unlock()
	body := fmt.Sprintf(`{"type":"io.nats.jetstream.api.v1.consumer_reset_response","error":{"code":400,"err_code":%d,"description":"refused"}}`, code)
	f.tr.Publish(reply, "", nil, []byte(body))
}

// An origin whose server refuses the API level a durable source asks for
// (10185, or 10025 from a server that does not know the header) is asked
// again with level 4 without the identity, then with no level, at once
// and within the same wait; its answer then sets the source up
// (nats-server v2.15.2 trySetupSourceConsumer).
func TestDurableSourceLevelFallback(t *testing.T) {
	e := newEngine(t)
	timers := &fakeTimers{}
	fc := newFakeConsumer(t, e.tr, "O", "C", "dlv")
	set := startDurableSource(t, e, timers, &fakeClock{t: time.Unix(1_800_000_000, 0)})
	waitUntil(t, "the first reset", func() bool { return fc.numResets() == 1 })
	fc.refuse(10185)
	waitUntil(t, "the second reset", func() bool { return fc.numResets() == 2 })
	fc.refuse(10025)
	waitUntil(t, "the third reset", func() bool { return fc.numResets() == 3 })
	fc.mu.Lock()
	hdrs := slices.Clone(fc.hdrs)
	fc.mu.Unlock()
	if !strings.Contains(hdrs[1], "Nats-Required-Api-Level: 4\r\n") || strings.Contains(hdrs[1], "Nats-Stream-Identity") || strings.Contains(hdrs[2], "Api-Level") {
		t.Fatalf("reset headers %q", hdrs)
	}
	fc.answer("flow_control", 0)
	fc.deliver1(1, 1)
	waitUntil(t, "the first message copied", func() bool { return set.r.Store().State(false).Msgs == 1 })
}

// A durable source resets its consumer (API level 5, the origin's
// identity), copies what it delivers in order, answers flow control
// with what it copied, resets again on a missed delivery without
// copying twice, and reports a consumer of another ack policy as 10217
// and retries it after the backoff (nats-server v2.15.2
// trySetupSourceConsumer, processInboundSourceMsg; ADR-60).
func TestDurableSourceProtocol(t *testing.T) {
	e := newEngine(t)
	timers := &fakeTimers{}
	fc := newFakeConsumer(t, e.tr, "O", "C", "dlv")
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	set := startDurableSource(t, e, timers, clk)
	agg := set.r

	waitUntil(t, "the first reset", func() bool { return fc.numResets() == 1 })
	if h := fc.hdrs[0]; !strings.Contains(h, "Nats-Required-Api-Level: 5\r\n") || !strings.Contains(h, "Nats-Stream-Identity:") {
		t.Fatalf("reset header %q, want API level 5 and the identity", h)
	}
	fc.answer("explicit", 0)
	waitUntil(t, "error 10217", func() bool {
		_, src := set.Infos()
		return len(src) == 1 && src[0].Error != nil && src[0].Error.ErrCode == 10217
	})
	// The backoff after a failure: 2 s since the request + 10 s + 100 ms.
	waitUntil(t, "the backoff", func() bool { return timers.waiting(12*time.Second + 100*time.Millisecond) })
	if fc.numResets() != 1 {
		t.Fatal("retried before the backoff")
	}
	timers.fire(12*time.Second + 100*time.Millisecond)
	waitUntil(t, "the second reset", func() bool { return fc.numResets() == 2 })
	fc.answer("flow_control", 0)
	waitUntil(t, "the error to clear", func() bool {
		_, src := set.Infos()
		return src[0].Error == nil
	})
	for i := uint64(1); i <= 3; i++ {
		fc.deliver1(i, i)
	}
	waitMsgs(t, agg, 3)
	sm, err := agg.Store().Load(3)
	if err != nil {
		t.Fatal(err)
	}
	if iname, oseq, _, ok := stream.SourcedFrom(sm.Header); !ok || oseq != 3 || !strings.HasPrefix(iname, "O:C="+stream.Hash8("C")+" ") {
		t.Fatalf("copy header %q", sm.Header)
	}
	e.tr.Publish("dlv", "fc.1", []byte("NATS/1.0 100 FlowControl Request\r\n\r\n"), nil)
	waitUntil(t, "the flow control reply", func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return len(fc.fcAcks) == 1
	})
	if got := fc.fcAcks[0]; got != "NATS/1.0\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n" {
		t.Fatalf("flow control reply header %q", got)
	}
	// Delivery 5 after 3: one was missed; reset again (after 2 s since
	// the last request: the fake clock has not moved).
	fc.deliver1(5, 5)
	waitUntil(t, "the retry wait", func() bool { return timers.waiting(2*time.Second + 100*time.Millisecond) })
	timers.fire(2*time.Second + 100*time.Millisecond)
	waitUntil(t, "the third reset", func() bool { return fc.numResets() == 3 })
	fc.answer("flow_control", 3) // back to just above the ack floor
	fc.deliver1(3, 1)            // copied already: skipped
	fc.deliver1(4, 2)
	fc.deliver1(5, 3)
	waitMsgs(t, agg, 5)
	for seq, want := range map[uint64]string{4: "m4", 5: "m5"} {
		sm, err := agg.Store().Load(seq)
		if err != nil || string(sm.Data) != want {
			t.Fatalf("message %d: %v %q, want %q", seq, err, sm.Data, want)
		}
	}
	// A heartbeat naming another last delivery also resets.
	e.tr.Publish("dlv", "", []byte("NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 9\r\nNats-Last-Stream: 9\r\n\r\n"), nil)
	waitUntil(t, "the retry wait", func() bool { return timers.waiting(2*time.Second + 100*time.Millisecond) })
	timers.fire(2*time.Second + 100*time.Millisecond)
	waitUntil(t, "the fourth reset", func() bool { return fc.numResets() == 4 })
	if _, src := set.Infos(); src[0].Seq != 5 {
		t.Fatalf("source seq %d, want 5", src[0].Seq)
	}
}
