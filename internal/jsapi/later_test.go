package jsapi

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
)

// laterCluster is a Cluster whose server answers nothing until answerAt,
// and says it will (AnswerLater) while hold is set; offline makes it
// answer STREAM.INFO as for a stream out of reach (OutOfReach).
type laterCluster struct {
	*jetstream.JetStream
	answerAt atomic.Int64 // unix nanoseconds
	hold     atomic.Bool
	offline  atomic.Bool
	asked    atomic.Int32 // Answers calls
}

func (c *laterCluster) Answers(string, string) bool {
	c.asked.Add(1)
	return time.Now().UnixNano() >= c.answerAt.Load()
}

func (c *laterCluster) Later(string, string, string) time.Duration {
	if !c.hold.Load() {
		return 0
	}
	return max(time.Until(time.Unix(0, c.answerAt.Load())), time.Millisecond)
}

func (c *laterCluster) OutOfReach(key, _, _ string) bool {
	return c.offline.Load() && key == "STREAM.INFO"
}

func newLaterAPI(t *testing.T) (*laterCluster, *client) {
	t.Helper()
	tr := newMemTransport()
	js, err := jetstream.New(jetstream.Config{StoreDir: t.TempDir(), ServerName: "n1", Version: testVersion, APILevel: APILevel}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Shutdown)
	cl := &laterCluster{JetStream: js}
	a, err := New(js, tr, Options{Cluster: cl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return cl, newClient(t, tr)
}

// A request this server does not answer yet, but will within moments
// (it waits before it answers for a leaderless group), is held and
// answered then, once; without AnswerLater's hold it is dropped.
func TestHeldRequestAnsweredLater(t *testing.T) {
	cl, c := newLaterAPI(t)
	cl.answerAt.Store(time.Now().Add(300 * time.Millisecond).UnixNano())
	cl.hold.Store(true)
	if got := c.request("$JS.API.STREAM.NAMES", "", nil); !strings.Contains(got, "stream_names_response") {
		t.Fatalf("held request: %s", got)
	}
	if n := cl.asked.Load(); n < 2 {
		t.Fatalf("Answers asked %d times, want the first time and again after the hold", n)
	}
	c.expectNoMore(100 * time.Millisecond)

	cl.answerAt.Store(time.Now().Add(300 * time.Millisecond).UnixNano())
	cl.hold.Store(false)
	if got := c.request("$JS.API.STREAM.NAMES", "", nil); got != "(timeout)" {
		t.Fatalf("request not held answered: %s", got)
	}
}

// A request held maxHold in all is dropped, not held again, whatever
// Later says.
func TestHeldRequestDroppedAfterMaxHold(t *testing.T) {
	tr := newMemTransport()
	js, err := jetstream.New(jetstream.Config{StoreDir: t.TempDir(), ServerName: "n1", Version: testVersion, APILevel: APILevel}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Shutdown)
	cl := &laterCluster{JetStream: js}
	cl.answerAt.Store(time.Now().Add(time.Hour).UnixNano())
	cl.hold.Store(true)
	a := &API{js: js, tr: tr, opts: Options{Cluster: cl}, queue: make(chan *request, 1)}
	t.Cleanup(func() { a.closed.Store(true) }) // the first hold's timer finds it closed
	r := newRequest("$JS.API.STREAM.NAMES", "_INBOX.x", nil, nil)
	if !a.hold(r) {
		t.Fatal("a request not held yet was not held")
	}
	r.held = time.Now().Add(-maxHold)
	if a.hold(r) {
		t.Fatal("a request held maxHold was held again")
	}
}

// A STREAM.INFO of a stream out of reach gets 10118 in a
// stream_info_response, 500 ms after it arrived (offlineDelay).
func TestOutOfReachAnswers10118(t *testing.T) {
	cl, c := newLaterAPI(t)
	cl.offline.Store(true)
	start := time.Now()
	got := c.request("$JS.API.STREAM.INFO.GONE", "", nil)
	if !strings.Contains(got, `"type":"io.nats.jetstream.api.v1.stream_info_response","error":{"code":500,"err_code":10118,"description":"stream is offline"}`) {
		t.Fatalf("got %s", got)
	}
	if d := time.Since(start); d < offlineDelay {
		t.Fatalf("answered after %v, before offlineDelay %v", d, offlineDelay)
	}
}
