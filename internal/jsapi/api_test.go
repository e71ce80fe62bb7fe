package jsapi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
)

const badRequest = `{"type":"io.nats.jetstream.api.v1.system_response","error":{"code":400,"err_code":10003,"description":"bad request"}}`

// TestUnknownSubjects: a $JS.API subject without an endpoint, or with the
// wrong number of tokens, gets 10003 in a system_response (the API's
// error object, ADR-1). nats-server v2.15.2 sends nothing to these from a
// client account (the requester times out); cairn answers
// (docs/compatibility.md).
func TestUnknownSubjects(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	for _, subj := range []string{
		"$JS.API.FOO",
		"$JS.API.STREAM.FOO",
		"$JS.API.STREAM.FOO.X",
		"$JS.API.STREAM.INFO",
		"$JS.API.STREAM.INFO.A.B",
		"$JS.API.STREAM.NAMES.X",
		"$JS.API.STREAM.MSG.GET",
		"$JS.API.CONSUMER.CREATE",
		"$JS.API.CONSUMER.INFO.S",
		"$JS.API.CONSUMER.INFO.S.C.D",
		"$JS.API.CONSUMER.DURABLE.CREATE.S",
		"$JS.API.CONSUMER.PEER.REMOVE.S",
		"$JS.API.STREAM.CANCEL_MOVE",
	} {
		if got := c.request(subj, "", header("Nats-Required-Api-Level: 9")); got != badRequest {
			t.Errorf("%s: got %s", subj, got)
		}
	}
}

// TestNotSubscribed: MSG.NEXT, RESET and DIRECT.GET belong to consumers
// and streams, which must answer 503 no-responders when missing (clients
// retry on it, ADR-22), so the API does not subscribe to them; nor
// to the system-account subjects. Other subjects outside apiSubjects
// ($JS.API.INFO.X) get no-responders too, where nats-server v2.15.2 lets
// the requester time out.
func TestNotSubscribed(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	for _, subj := range []string{
		"$JS.API.CONSUMER.MSG.NEXT.S.C",
		"$JS.API.CONSUMER.RESET.S.C",
		"$JS.API.DIRECT.GET.S",
		"$JS.API.DIRECT.GET.S.a.b",
		"$JS.API.META.LEADER.STEPDOWN",
		"$JS.API.SERVER.REMOVE",
		"$JS.API.ACCOUNT.PURGE.A",
		"$JS.API",
		"$JS.API.INFO.X",
		"$JS.API.FOO.BAR",
	} {
		if got := c.request(subj, "", nil); got != "(no responders)" {
			t.Errorf("%s: got %s", subj, got)
		}
	}
}

// TestLenientJSON: unknown keys are ignored (nats-server v2.15.2 item 3),
// where nats-server v2.15.2 answers 10025 `invalid JSON: json: unknown
// field "x"`.
func TestLenientJSON(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	got := c.request("$JS.API.STREAM.CREATE.S", `{"name":"S","storage":"memory","x":1,"future_key":{"a":[1]}}`, nil)
	if !strings.Contains(got, `"did_create":true`) {
		t.Fatalf("create with unknown keys: %s", got)
	}
	for subj, body := range map[string]string{
		"$JS.API.STREAM.INFO.S":       `{"x":1}`,
		"$JS.API.STREAM.NAMES":        `{"x":1}`,
		"$JS.API.STREAM.LIST":         `{"x":1}`,
		"$JS.API.STREAM.MSG.GET.S":    `{"seq":1,"x":1}`,
		"$JS.API.CONSUMER.NAMES.S":    `{"x":1}`,
		"$JS.API.STREAM.PURGE.S":      `{"x":1}`,
		"$JS.API.STREAM.UPDATE.S":     `{"name":"S","storage":"memory","x":1}`,
		"$JS.API.STREAM.MSG.DELETE.S": `{"seq":1,"x":1}`,
	} {
		if got := c.request(subj, body, nil); strings.Contains(got, "10025") {
			t.Errorf("%s %s: %s", subj, body, got)
		}
	}
}

// TestDecodeErrorsNameOurPackage documents a difference: a type error
// about the whole request names the Go package, "jsapi." where
// nats-server v2.15.2 says "server.".
func TestDecodeErrorsNameOurPackage(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	want := `{"type":"io.nats.jetstream.api.v1.stream_names_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: cannot unmarshal array into Go value of type jsapi.JSApiStreamNamesRequest"},"total":0,"offset":0,"limit":0,"streams":null}`
	if got := c.request("$JS.API.STREAM.NAMES", "[]", nil); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestNoReply: a request without a reply subject still runs, and no
// response is published (the create advisory is).
func TestNoReply(t *testing.T) {
	_, js, tr := testAPI(t, Options{})
	var mu sync.Mutex
	var published []string
	_, _ = tr.Subscribe(">", "", func(subj, _ string, _, _ []byte) {
		mu.Lock()
		published = append(published, subj)
		mu.Unlock()
	})
	tr.Publish("$JS.API.STREAM.CREATE.S", "", nil, []byte(`{"name":"S","storage":"memory"}`))
	deadline := time.Now().Add(2 * time.Second)
	for len(js.Names("")) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if names := js.Names(""); len(names) != 1 || names[0] != "S" {
		t.Fatalf("stream not created: %v", names)
	}
	c := newClient(t, tr)
	c.request("$JS.API.INFO", "", nil) // every earlier request has been served
	mu.Lock()
	defer mu.Unlock()
	for _, subj := range published {
		advisory := strings.HasPrefix(subj, "$JS.EVENT.ADVISORY.")
		if !strings.HasPrefix(subj, "$JS.API.") && subj != c.inbox && !advisory {
			t.Errorf("published to %s", subj)
		}
	}
}

// TestOneResponsePerRequest: many concurrent requests through several
// workers each get exactly one answer.
func TestOneResponsePerRequest(t *testing.T) {
	_, _, tr := testAPI(t, Options{Workers: 3})
	const n = 200
	replies := make(chan string, 2*n)
	for i := range n {
		inbox := fmt.Sprintf("_INBOX.%d", i)
		_, _ = tr.Subscribe(inbox, "", func(subj, _ string, _, _ []byte) { replies <- subj })
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tr.Publish("$JS.API.STREAM.NAMES", fmt.Sprintf("_INBOX.%d", i), nil, nil)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for range n {
		select {
		case s := <-replies:
			if seen[s] {
				t.Fatalf("two replies to %s", s)
			}
			seen[s] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("%d replies of %d", len(seen), n)
		}
	}
	select {
	case s := <-replies:
		t.Fatalf("extra reply to %s", s)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestQueueFullDrops: the read loop never blocks; a full queue drops the
// request and logs a warning (at most one a second).
func TestQueueFullDrops(t *testing.T) {
	var logs []string
	a := &API{queue: make(chan *request, 1), audit: auditor{tr: newMemTransport()}, opts: Options{QueueLen: 1, Logf: func(f string, args ...any) {
		logs = append(logs, fmt.Sprintf(f, args...))
	}}}
	for range 3 {
		a.enqueue("$JS.API.INFO", "r", nil, nil, nil)
	}
	if len(a.queue) != 1 {
		t.Fatalf("queued %d", len(a.queue))
	}
	want := `jsapi: request queue full (1), dropped 1 request(s), last on "$JS.API.INFO"`
	if len(logs) != 1 || logs[0] != want {
		t.Fatalf("logs %q", logs)
	}
	if a.dropped.Load() != 1 {
		t.Fatalf("dropped since the warning: %d", a.dropped.Load())
	}
}

// TestEnqueueCopies: the handler copies what it keeps, since the caller
// reuses its buffers after the handler returns.
func TestEnqueueCopies(t *testing.T) {
	a := &API{queue: make(chan *request, 1), audit: auditor{tr: newMemTransport()}, opts: Options{Logf: t.Logf}}
	hdr, data := []byte("NATS/1.0\r\nA: b\r\n\r\n"), []byte(`{"x":1}`)
	a.enqueue("$JS.API.INFO", "r", hdr, data, nil)
	clear(hdr)
	clear(data)
	r := <-a.queue
	if string(r.hdr) != "NATS/1.0\r\nA: b\r\n\r\n" || string(r.data) != `{"x":1}` || r.reply != "r" {
		t.Fatalf("request %+v", r)
	}
}

// TestClose: after Close nothing is subscribed; Close is idempotent.
func TestClose(t *testing.T) {
	a, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	a.Close()
	a.Close()
	if got := c.request("$JS.API.INFO", "", nil); got != "(no responders)" {
		t.Fatalf("after Close: %s", got)
	}
	a.enqueue("$JS.API.INFO", "r", nil, nil, nil) // a late delivery is ignored
	if len(a.queue) != 0 {
		t.Fatal("queued after Close")
	}
}

// TestNewNeedsEngine: New refuses a nil engine or transport.
func TestNewNeedsEngine(t *testing.T) {
	if _, err := New(nil, newMemTransport(), Options{}); err == nil {
		t.Fatal("New(nil, ...) succeeded")
	}
	tr := newMemTransport()
	js, err := jetstream.New(jetstream.Config{StoreDir: t.TempDir()}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	if _, err := New(js, nil, Options{}); err == nil {
		t.Fatal("New(js, nil) succeeded")
	}
}
