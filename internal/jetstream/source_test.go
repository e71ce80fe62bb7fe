package jetstream

import (
	"fmt"
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
	s := &sourcer{r: &runner{js: js, name: "M"}, src: stream.Source{Name: "O"}}
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
