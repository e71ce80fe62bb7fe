package consumerrun

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// These tests run a consumer's runtime over a replicated log that
// commits only when the test says (heldLog), as a loaded group commits
// late: its leader may have at most maxUncommitted deliveries sent and
// not applied.

// heldLog is a ReplicatedLog whose batches commit when the test applies
// them (commit): Flush only queues a batch.
type heldLog struct {
	mu      sync.Mutex
	a       streamrun.Applier[consumer.Op]
	batch   []consumer.Op
	key     uint64
	flushed []heldEntry
	index   uint64
	// dropped: Dropped reports it (once); stepDowns counts StepDown.
	dropped   bool
	stepDowns int
	// handedOver: HandedOver reports it (the predecessor handed over).
	handedOver bool
	// noSuccessor: SuccessorReady reports false (no successor serves).
	noSuccessor bool
	// transferring: MayDecide reports false (a leadership transfer).
	transferring bool
	// oldPeer: RecordsPulls reports false (a replica's server of an
	// earlier build).
	oldPeer bool
}

func (l *heldLog) RecordsPulls() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.oldPeer
}

type heldEntry struct {
	ops []consumer.Op
	key uint64
}

// Propose keeps a copy of op (the consumer reuses it).
func (l *heldLog) Propose(op consumer.Op, key uint64) error {
	enc, err := consumer.AppendOp(nil, op)
	if err != nil {
		return err
	}
	cp, err := consumer.DecodeOp(enc)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.batch, l.key = append(l.batch, cp), key
	l.mu.Unlock()
	return nil
}

func (l *heldLog) Flush() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.batch) > 0 {
		l.flushed = append(l.flushed, heldEntry{ops: l.batch, key: l.key})
		l.batch = nil
	}
	return false, nil
}

func (l *heldLog) Discard() {
	l.mu.Lock()
	l.batch = nil
	l.mu.Unlock()
}

func (l *heldLog) Dropped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dropped
	l.dropped = false
	return d
}

func (l *heldLog) StepDown() {
	l.mu.Lock()
	l.stepDowns++
	l.mu.Unlock()
}

// Outstanding is the key of the last batch flushed and not applied:
// as raftnode's kept waiters, a batch waits until the test applies it.
func (l *heldLog) Outstanding() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.flushed) == 0 {
		return 0
	}
	return l.flushed[len(l.flushed)-1].key
}

func (l *heldLog) Leader() bool { return true }
func (l *heldLog) MayDecide() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.transferring
}
func (l *heldLog) SuccessorReady() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.noSuccessor
}
func (l *heldLog) HandedOver() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handedOver
}

// commit applies every batch flushed so far, in order, as the group's
// worker does (Consumer.ApplyBatch, with the proposer's key), and
// returns how many.
func (l *heldLog) commit(c *Consumer) int {
	l.mu.Lock()
	es := l.flushed
	l.flushed = nil
	l.mu.Unlock()
	for _, e := range es {
		l.index++
		c.ApplyBatch(l.index, e.ops, e.key)
	}
	return len(es)
}

// pullTransport records what a consumer sends: deliveries (PublishAs)
// and status messages (Publish) by subject; everything has interest.
type pullTransport struct {
	mu     sync.Mutex
	subs   map[string]map[int]streamrun.MsgHandler // by subject, then subscription
	next   int
	msgs   map[string]int
	status map[string][]string
}

type pullSub struct {
	t    *pullTransport
	subj string
	id   int
}

func (s pullSub) Unsubscribe() {
	s.t.mu.Lock()
	delete(s.t.subs[s.subj], s.id)
	s.t.mu.Unlock()
}

func (t *pullTransport) Subscribe(subject, _ string, h streamrun.MsgHandler) (streamrun.Subscription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs[subject] == nil {
		t.subs[subject] = map[int]streamrun.MsgHandler{}
	}
	t.next++
	t.subs[subject][t.next] = h
	return pullSub{t, subject, t.next}, nil
}

// handlers returns the handlers of the subscriptions to subj.
func (t *pullTransport) handlers(subj string) []streamrun.MsgHandler {
	t.mu.Lock()
	defer t.mu.Unlock()
	var hs []streamrun.MsgHandler
	for _, h := range t.subs[subj] {
		hs = append(hs, h)
	}
	return hs
}

func (t *pullTransport) Publish(subject, _ string, hdr, _ []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	line, _, _ := bytes.Cut(hdr, []byte("\r\n"))
	t.status[subject] = append(t.status[subject], string(line))
	return true
}

func (t *pullTransport) PublishAs(route, _, _ string, _, _ []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs[route]++
	return true
}

func (t *pullTransport) HasInterest(string) bool { return true }

// pull sends a pull request to the consumer's subscription.
func (t *pullTransport) pull(tb testing.TB, inbox, body string) {
	tb.Helper()
	hs := t.handlers("$JS.API.CONSUMER.MSG.NEXT.S.C")
	if len(hs) == 0 {
		tb.Fatal("the consumer does not take pull requests")
	}
	for _, h := range hs {
		h("$JS.API.CONSUMER.MSG.NEXT.S.C", inbox, nil, []byte(body))
	}
}

func (t *pullTransport) got(inbox string) (msgs int, status []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.msgs[inbox], append([]string(nil), t.status[inbox]...)
}

// startPullConsumer runs pull consumer C of stream S, which holds n
// messages, over the log newLog makes (nil: the local log), leading.
func startPullConsumer(t *testing.T, n int, newLog func(streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op]) (*Consumer, *pullTransport) {
	t.Helper()
	return startPullConsumerAs(t, n, newLog, true)
}

// startPullConsumerAs is startPullConsumer, a replicated consumer leading
// only when lead is set.
func startPullConsumerAs(t *testing.T, n int, newLog func(streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op], lead bool) (*Consumer, *pullTransport) {
	t.Helper()
	scfg := stream.Config{Name: "S", Subjects: []string{"s.>"}, Storage: stream.MemoryStorage}
	scfg.SetDefaults()
	ms := memstore.New(scfg.StoreConfig())
	for i := range n {
		if _, err := ms.Append(store.Msg{Subject: fmt.Sprintf("s.%d", i), Data: []byte("x"), Time: time.Now().UnixNano()}); err != nil {
			t.Fatal(err)
		}
	}
	tr := &pullTransport{subs: map[string]map[int]streamrun.MsgHandler{}, msgs: map[string]int{}, status: map[string][]string{}}
	senv := streamrun.Env{Transport: tr, Now: time.Now, Logf: t.Logf,
		Storage: streamrun.NewStorage(nil, "", streamrun.NewUsage(), time.Now, t.Logf, t.Logf)}
	s := streamrun.New(senv, scfg, time.Now(), "", ms)
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	cfg := consumer.Config{Durable: "C", AckPolicy: consumer.AckExplicit, MaxAckPending: -1}
	if err := cfg.SetDefaults(&scfg, false); err != nil {
		t.Fatal(err)
	}
	env := Env{Transport: tr, Now: time.Now, Logf: t.Logf}
	if newLog != nil {
		env.NewLog = func(_, _ string, a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] { return newLog(a) }
	}
	c, err := New(env, s, "C", cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { c.Stop(nil) })
	if newLog != nil && lead {
		c.SetLeading(true)
	}
	synctest.Wait()
	return c, tr
}

// The leader of a replicated consumer whose group commits nothing stops
// at maxUncommitted deliveries; each commit that makes room lets it go
// on (a waiting pull request is served, a no_wait one that came while
// it was stopped is served rather than answered 404 No Messages), and
// its pull request's idle heartbeats go on while it waits. Without the
// window it delivered every message before anything committed.
func TestReplicatedLeaderStopsAtUncommittedBound(t *testing.T) {
	const total = 2*maxUncommitted + 176 // the second commit's room serves the rest
	synctest.Test(t, func(t *testing.T) {
		l := &heldLog{}
		c, tr := startPullConsumer(t, total, func(a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
			l.a = a
			return l
		})
		tr.pull(t, "inbox.1", fmt.Sprintf(`{"batch":%d,"expires":600000000000,"idle_heartbeat":1000000000}`, total-10))
		synctest.Wait()
		if n, _ := tr.got("inbox.1"); n != maxUncommitted {
			t.Fatalf("delivered %d messages with nothing committed, want the bound %d", n, maxUncommitted)
		}
		// Stopped, it still beats for its pull request and takes a
		// no_wait request without ending it.
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if n, st := tr.got("inbox.1"); n != maxUncommitted || len(st) == 0 || st[0] != "NATS/1.0 100 Idle Heartbeat" {
			t.Fatalf("while stopped: %d messages, statuses %q; want %d and idle heartbeats", n, st, maxUncommitted)
		}
		tr.pull(t, "inbox.2", `{"batch":10,"no_wait":true}`)
		synctest.Wait()
		if n, st := tr.got("inbox.2"); n != 0 || len(st) != 0 {
			t.Fatalf("a no_wait request while stopped got %d messages and %q", n, st)
		}
		// Each commit makes room for as many again, and both requests
		// are served (in turns, as nats-server serves them).
		for i, want := range []int{2 * maxUncommitted, total} {
			if l.commit(c) == 0 {
				t.Fatalf("commit %d: nothing flushed", i)
			}
			synctest.Wait()
			n1, _ := tr.got("inbox.1")
			n2, st := tr.got("inbox.2")
			if n1+n2 != want || len(st) != 0 {
				t.Fatalf("after commit %d: %d+%d messages (no_wait request's statuses %q), want %d", i, n1, n2, st, want)
			}
		}
		if n, _ := tr.got("inbox.2"); n != 10 {
			t.Fatalf("the no_wait request got %d messages once room came back, want 10", n)
		}
		l.commit(c)
		synctest.Wait()
		c.mu.Lock()
		sent, done := c.win.sent, c.win.done
		c.mu.Unlock()
		if sent != total || done != total {
			t.Fatalf("window counted %d sent, %d applied; want %d of each", sent, done, total)
		}
	})
}

// A consumer of one replica (the local log, which applies at once) has
// no window: one pull request gets everything at once.
func TestLocalConsumerNotWindowed(t *testing.T) {
	const total = 3 * maxUncommitted
	synctest.Test(t, func(t *testing.T) {
		_, tr := startPullConsumer(t, total, nil)
		tr.pull(t, "inbox.1", fmt.Sprintf(`{"batch":%d,"expires":600000000000}`, total))
		synctest.Wait()
		if n, _ := tr.got("inbox.1"); n != total {
			t.Fatalf("delivered %d of %d messages", n, total)
		}
	})
}

// A batch raft dropped after it was flushed (ReplicatedLog.Dropped)
// makes the leader step down, as a batch refused at Flush does: its
// delivering state went ahead of the log for good, and the window the
// batch's deliveries hold would never open again.
func TestReplicatedLeaderStepsDownOnDroppedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &heldLog{}
		c, tr := startPullConsumer(t, 100, func(a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
			l.a = a
			return l
		})
		tr.pull(t, "inbox.1", `{"batch":50,"expires":600000000000}`)
		synctest.Wait()
		l.mu.Lock()
		l.dropped = true
		l.mu.Unlock()
		c.Signal()
		synctest.Wait()
		l.mu.Lock()
		stepDowns := l.stepDowns
		l.mu.Unlock()
		if c.Leading() || stepDowns != 1 {
			t.Fatalf("after a dropped batch: leading %v, %d step-downs asked", c.Leading(), stepDowns)
		}
	})
}
