package jsapi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/subject"
)

// memTransport is an in-memory jetstream.Transport: subscriptions match
// with subject.Match and handlers run on the publisher's goroutine, as
// the server runs them.
type memTransport struct {
	mu   sync.Mutex
	subs map[*memSub]struct{}
}

type memSub struct {
	t       *memTransport
	subject string
	h       jetstream.MsgHandler
}

func newMemTransport() *memTransport { return &memTransport{subs: map[*memSub]struct{}{}} }

func (t *memTransport) Subscribe(subj, _ string, h jetstream.MsgHandler) (jetstream.Subscription, error) {
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
	var hs []jetstream.MsgHandler
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

// client sends requests through a memTransport and collects the replies
// on its inbox.
type client struct {
	t     *testing.T
	tr    *memTransport
	inbox string
	ch    chan string
}

func newClient(t *testing.T, tr *memTransport) *client {
	c := &client{t: t, tr: tr, inbox: "_INBOX.test", ch: make(chan string, 64)}
	_, _ = tr.Subscribe(c.inbox, "", func(_, _ string, _, data []byte) {
		c.ch <- string(data)
	})
	return c
}

// header returns a NATS header block with the given "Name: value" lines.
func header(lines ...string) []byte {
	if len(lines) == 0 {
		return nil
	}
	return []byte("NATS/1.0\r\n" + strings.Join(lines, "\r\n") + "\r\n\r\n")
}

// request publishes body to subj with the client's inbox as reply and
// returns the one reply; "(no responders)" when nothing is subscribed and
// "(timeout)" when nothing answers.
func (c *client) request(subj, body string, hdr []byte) string {
	c.t.Helper()
	if !c.tr.Publish(subj, c.inbox, hdr, []byte(body)) {
		return "(no responders)"
	}
	select {
	case r := <-c.ch:
		return r
	case <-time.After(2 * time.Second):
		return "(timeout)"
	}
}

// expectNoMore fails if another reply arrives within d.
func (c *client) expectNoMore(d time.Duration) {
	c.t.Helper()
	select {
	case r := <-c.ch:
		c.t.Fatalf("unexpected extra reply %s", r)
	case <-time.After(d):
	}
}

// testAPI starts the engine (store in t.TempDir(), server name n1, version
// testVersion) and the
// API over a fresh memTransport.
func testAPI(t *testing.T, opts Options) (*API, *jetstream.JetStream, *memTransport) {
	t.Helper()
	tr := newMemTransport()
	js, err := jetstream.New(jetstream.Config{StoreDir: t.TempDir(), ServerName: "n1", Version: testVersion, APILevel: APILevel}, tr)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(js, tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		js.Shutdown()
	})
	return a, js, tr
}

func (t *memTransport) String() string { return fmt.Sprintf("memTransport(%d subs)", len(t.subs)) }

// Close returns within Options.CloseWait even while a request is stuck
// being served (issue 12: one request must not hold a shutdown), and
// other requests were answered meanwhile by the other workers.
func TestCloseDoesNotWaitForAStuckRequest(t *testing.T) {
	stuck, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	opts := Options{Workers: 2, CloseWait: 50 * time.Millisecond}
	opts.serveHook = func(subject string) {
		if strings.HasSuffix(subject, "STREAM.NAMES") {
			close(stuck)
			<-release
		}
	}
	a, _, tr := testAPI(t, opts)
	c := newClient(t, tr)
	tr.Publish("$JS.API.STREAM.NAMES", "_INBOX.stuck", nil, nil)
	select {
	case <-stuck:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached a worker")
	}
	if got := c.request("$JS.API.INFO", "", nil); !strings.Contains(got, `"type":"io.nats.jetstream.api.v1.account_info_response"`) {
		t.Fatalf("INFO behind a stuck request: %s", got)
	}
	closed := make(chan struct{})
	go func() {
		a.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a request stuck in a worker")
	}
}
