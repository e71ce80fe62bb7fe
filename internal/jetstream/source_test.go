package jetstream

import (
	"fmt"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A copy the stream keeps refusing is logged once, then once a minute,
// and at once when the reason changes (it is retried every second).
func TestSourcerRefusalLogIsRateLimited(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var lines []string
	js := &JetStream{cfg: Config{Now: clk.now, Logf: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}}
	m := streamrun.New(streamrun.Env{Now: clk.now}, stream.Config{Name: "M"}, time.Time{}, "", memstore.New(store.Config{}))
	s := &sourcer{r: &streamEntry{js: js, Stream: m}, src: stream.Source{Name: "O"}}
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
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	defer js.Shutdown()
	origin := stream.Config{Name: "BUSY", Subjects: []string{"busy.>"}, Storage: stream.MemoryStorage}
	target := stream.Config{Name: "T", Subjects: []string{"t"}, Storage: stream.MemoryStorage}
	for _, cfg := range []stream.Config{origin, target} {
		if _, err := js.AddStream(cfg); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2*sourceBatchMsgs; i++ {
		tr.Publish("busy.x", "", nil, []byte("x"))
	}
	waitState(t, js, "BUSY", 2*sourceBatchMsgs)
	s := newSourcer(js.streamNamed("T"), stream.Source{Name: "BUSY"}, false)
	close(s.quit)
	s.run()
	if info, _ := js.StreamInfo("T", InfoOptions{}); info.State.Msgs != 0 {
		t.Fatalf("a stopped sourcer copied %d messages", info.State.Msgs)
	}
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

// waitState waits until stream name holds n messages.
func waitState(t *testing.T, js *JetStream, name string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := js.StreamInfo(name, InfoOptions{})
		if err == nil && info.State.Msgs == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: %v messages, want %d", name, info, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A source's lag is what the origin holds for it to copy when the round
// ends, refused messages included: not as of the round's start, which a
// round that waits after a refusal would report a second late.
func TestSourceLagCountsUpToTheRoundsEnd(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	defer js.Shutdown()
	origin := stream.Config{Name: "O", Subjects: []string{"o"}, Storage: stream.MemoryStorage}
	full := stream.Config{Name: "T", Subjects: []string{"t"}, Storage: stream.MemoryStorage, MaxMsgs: 1, Discard: stream.DiscardNew}
	for _, cfg := range []stream.Config{origin, full} {
		if _, err := js.AddStream(cfg); err != nil {
			t.Fatal(err)
		}
	}
	tr.Publish("t", "", nil, []byte("fills T"))
	for range 3 {
		tr.Publish("o", "", nil, []byte("x"))
	}
	waitState(t, js, "T", 1)
	waitState(t, js, "O", 3)
	o, r := js.streamNamed("O"), js.streamNamed("T")
	s := newSourcer(r, stream.Source{Name: "O"}, false)
	close(s.quit) // the wait after the refusal returns at once

	release := holdApply(r)
	done := make(chan struct{})
	go func() { s.copyRound(o); close(done) }()
	waitUntil(t, "the round to read O and wait for T", func() bool {
		return r.Queued() > 0
	})
	for range 2 {
		tr.Publish("o", "", nil, []byte("y"))
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
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	defer js.Shutdown()
	origin := stream.Config{Name: "O", Subjects: []string{"o.>"}, Storage: stream.MemoryStorage, Retention: stream.InterestPolicy}
	target := stream.Config{Name: "T", Storage: stream.MemoryStorage, Sources: []*stream.Source{{Name: "O", FilterSubject: "o.>"}}}
	for _, cfg := range []stream.Config{origin, target} {
		if _, err := js.AddStream(cfg); err != nil {
			t.Fatal(err)
		}
	}
	o := js.streamNamed("O")
	next := newSourcer(js.streamNamed("T"), stream.Source{Name: "O", FilterSubject: "o.a"}, false)
	next.sole = true // as when an update narrows T's only source
	o.watch(next)
	for range 5 {
		tr.Publish("o.a", "", nil, []byte("x"))
	}
	waitState(t, js, "T", 5)
	waitState(t, js, "O", 5) // copied, but next still needs them

	next.copyRound(o) // resumes, and finds nothing to copy
	if next.next != 6 {
		t.Fatalf("resumed at origin sequence %d, want 6 (after the copies)", next.next)
	}
	waitState(t, js, "O", 0)
}
