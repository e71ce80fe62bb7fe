package sourcing

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/vfs"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// memTransport is an in-memory streamrun.Transport: handlers run on the
// publisher's goroutine, as the server runs them.
type memTransport struct {
	mu   sync.Mutex
	subs map[*memSub]struct{}
}

type memSub struct {
	t       *memTransport
	subject string
	h       streamrun.MsgHandler
}

func (t *memTransport) Subscribe(subj, _ string, h streamrun.MsgHandler) (streamrun.Subscription, error) {
	s := &memSub{t: t, subject: subj, h: h}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.mu.Unlock()
	return s, nil
}

func (s *memSub) Unsubscribe() {
	s.t.mu.Lock()
	delete(s.t.subs, s)
	s.t.mu.Unlock()
}

func (t *memTransport) Publish(subj, reply string, hdr, data []byte) bool {
	return t.PublishAs(subj, subj, reply, hdr, data)
}

func (t *memTransport) HasInterest(subj string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.subs {
		if subject.Match(subj, s.subject) {
			return true
		}
	}
	return false
}

func (t *memTransport) PublishAs(route, subj, reply string, hdr, data []byte) bool {
	t.mu.Lock()
	var hs []streamrun.MsgHandler
	for s := range t.subs {
		if subject.Match(route, s.subject) {
			hs = append(hs, s.h)
		}
	}
	t.mu.Unlock()
	for _, h := range hs {
		h(subj, reply, hdr, data)
	}
	return len(hs) > 0
}

// engine runs memory streams with their sourcers, as the jetstream
// engine does, for the tests of this package.
type engine struct {
	t       *testing.T
	tr      *memTransport
	mu      sync.Mutex
	streams map[string]*streamrun.Stream
	storage *streamrun.Storage
	batches stream.BatchInflight
}

func newEngine(t *testing.T) *engine {
	e := &engine{t: t, tr: &memTransport{subs: map[*memSub]struct{}{}}, streams: map[string]*streamrun.Stream{}}
	e.storage = streamrun.NewStorage(vfs.NewCrashFS(), "/sd", streamrun.NewUsage(), time.Now, t.Logf, t.Logf)
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, s := range e.streams {
			_ = s.Stop(nil)
		}
	})
	return e
}

func (e *engine) lookup(name string) *streamrun.Stream {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streams[name]
}

func (e *engine) env() Env { return Env{Now: time.Now, Logf: e.t.Logf, Lookup: e.lookup} }

// add creates and starts a memory stream of cfg with its sourcers.
func (e *engine) add(cfg stream.Config) *streamrun.Stream {
	e.t.Helper()
	cfg.Storage = stream.MemoryStorage
	cfg.SetDefaults()
	env := streamrun.Env{Transport: e.tr, Now: time.Now, Logf: e.t.Logf, Storage: e.storage, BatchLimits: stream.BatchLimits{}.WithDefaults(), Batches: &e.batches}
	s := streamrun.New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
	if err := s.Open(); err != nil {
		e.t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		e.t.Fatal(err)
	}
	set := NewSet(e.env(), s)
	s.SetSources(set)
	e.mu.Lock()
	e.streams[cfg.Name] = s
	e.mu.Unlock()
	set.Start(cfg, e.lookup)
	return s
}

// waitUntil polls cond until it holds, failing after 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for %s", what)
		}
	}
}

// waitMsgs waits until s holds n messages.
func waitMsgs(t *testing.T, s *streamrun.Stream, n uint64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("stream %s to hold %d messages", s.Name(), n), func() bool { return s.Store().State(false).Msgs == n })
}

// A copy the stream keeps refusing is logged once, then once a minute,
// and at once when the reason changes (it is retried every second).
func TestSourcerRefusalLogIsRateLimited(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var lines []string
	m := streamrun.New(streamrun.Env{Now: clk.now}, stream.Config{Name: "M"}, time.Time{}, "", memstore.New(store.Config{}))
	env := Env{Now: clk.now, Logf: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}
	s := &sourcer{env: env, r: m, src: stream.Source{Name: "O"}}
	for i := 0; i < 30; i++ { // half a minute of retries
		s.logRefusal(7, "maximum messages exceeded")
		clk.advance(time.Second)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "stream M: source O: message 7: maximum messages exceeded") {
		t.Fatalf("after 30 refusals: %q", lines)
	}
	s.logRefusal(7, "insufficient resources")
	clk.advance(time.Minute)
	s.logRefusal(7, "insufficient resources")
	if len(lines) != 3 {
		t.Fatalf("a new reason and a minute later: %q", lines)
	}
}

// A sourcer asked to stop does not start another copy round, however
// much the origin still holds (the quit check between rounds).
func TestSourcerStopsBetweenRounds(t *testing.T) {
	e := newEngine(t)
	busy := e.add(stream.Config{Name: "BUSY", Subjects: []string{"busy.>"}})
	target := e.add(stream.Config{Name: "T", Subjects: []string{"t"}})
	for i := 0; i < 2*sourceBatchMsgs; i++ {
		e.tr.Publish("busy.x", "", nil, []byte("x"))
	}
	waitMsgs(t, busy, 2*sourceBatchMsgs)
	s := newSourcer(e.env(), target, stream.Source{Name: "BUSY"}, false)
	close(s.quit)
	s.run()
	if n := target.Store().State(false).Msgs; n != 0 {
		t.Fatalf("a stopped sourcer copied %d messages", n)
	}
}

// A source's lag is what the origin holds for it to copy when the round
// ends, refused messages included: not as of the round's start, which a
// round that waits after a refusal would report a second late.
func TestSourceLagCountsUpToTheRoundsEnd(t *testing.T) {
	e := newEngine(t)
	o := e.add(stream.Config{Name: "O", Subjects: []string{"o"}})
	r := e.add(stream.Config{Name: "T", Subjects: []string{"t"}, MaxMsgs: 1, Discard: stream.DiscardNew})
	e.tr.Publish("t", "", nil, []byte("fills T"))
	for range 3 {
		e.tr.Publish("o", "", nil, []byte("x"))
	}
	waitMsgs(t, r, 1)
	waitMsgs(t, o, 3)
	s := newSourcer(e.env(), r, stream.Source{Name: "O"}, false)
	close(s.quit) // the wait after the refusal returns at once

	release := r.Hold()
	done := make(chan struct{})
	go func() { s.copyRound(o); close(done) }()
	waitUntil(t, "the round to read O and wait for T", func() bool { return r.Queued() > 0 })
	for range 2 {
		e.tr.Publish("o", "", nil, []byte("y"))
	}
	waitUntil(t, "O's 5 messages to be durable", func() bool { return o.Acknowledged() == 5 })
	release()
	<-done
	if info := s.info(time.Now()); info.Lag != 5 {
		t.Fatalf("lag %d after a refused round, want the 5 messages left", info.Lag)
	}
}

// A sourcer registered with an interest origin before it knows where it
// starts needs everything, so what the sourcer it replaces copies
// meanwhile stays in the origin; once it has resumed past those copies
// the origin drops them (found by the review: an update of the sources
// left thousands of copied messages in the origin until the next one).
func TestResumeLetsInterestOriginDropCopies(t *testing.T) {
	e := newEngine(t)
	o := e.add(stream.Config{Name: "O", Subjects: []string{"o.>"}, Retention: stream.InterestPolicy})
	target := e.add(stream.Config{Name: "T", Sources: []*stream.Source{{Name: "O", FilterSubject: "o.>"}}})
	next := newSourcer(e.env(), target, stream.Source{Name: "O", FilterSubject: "o.a"}, false)
	next.sole = true // as when an update narrows T's only source
	o.Watch(next)
	for range 5 {
		e.tr.Publish("o.a", "", nil, []byte("x"))
	}
	waitMsgs(t, target, 5)
	waitMsgs(t, o, 5) // copied, but next still needs them

	next.copyRound(o) // resumes, and finds nothing to copy
	if next.next != 6 {
		t.Fatalf("resumed at origin sequence %d, want 6 (after the copies)", next.next)
	}
	waitMsgs(t, o, 0)
}
