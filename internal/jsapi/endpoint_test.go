package jsapi

import (
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/jetstream"
)

// TestMsgGetStartTime: STREAM.MSG.GET by start_time returns the first
// message at or after the time (with next_by_subj: the first on that
// subject from there), 10037 when there is none, 10059 without the
// stream (nats-server v2.15.2 jsMsgGetRequest).
func TestMsgGetStartTime(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	c.request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"],"storage":"memory"}`, nil)
	c.request("s.a", "one", nil)
	c.request("s.b", "two", nil)
	cases := []struct{ subj, body, want string }{
		{"$JS.API.STREAM.MSG.GET.S", `{"start_time":"2000-01-01T00:00:00Z"}`, `"seq":1`},
		{"$JS.API.STREAM.MSG.GET.S", `{"start_time":"2000-01-01T00:00:00Z","next_by_subj":"s.b"}`, `"seq":2`},
		{"$JS.API.STREAM.MSG.GET.S", `{"start_time":"2200-01-01T00:00:00Z"}`, `"err_code":10037`},
		{"$JS.API.STREAM.MSG.GET.S", `{"start_time":"2000-01-01T00:00:00Z","seq":1}`, `"err_code":10003`},
		{"$JS.API.STREAM.MSG.GET.NOPE", `{"start_time":"2000-01-01T00:00:00Z","next_by_subj":"a"}`, `"err_code":10059`},
	}
	for _, tc := range cases {
		if got := c.request(tc.subj, tc.body, nil); !strings.Contains(got, tc.want) {
			t.Errorf("%s %s\n got: %s\nwant: ...%s...", tc.subj, tc.body, got, tc.want)
		}
	}
}

// TestMemoryMessage: MSG.GET on a memory stream returns the header block
// and payload in base64, and no_hdr leaves the header out.
func TestMemoryMessage(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	c.request("$JS.API.STREAM.CREATE.S", `{"name":"S","storage":"memory"}`, nil)
	if ack := c.request("S", "two", header("H1: v1")); ack != `{"stream":"S","seq":1}` {
		t.Fatalf("PubAck %s", ack)
	}
	got := normalize(c.request("$JS.API.STREAM.MSG.GET.S", `{"seq":1}`, nil))
	want := `{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"S","seq":1,"hdrs":"TkFUUy8xLjANCkgxOiB2MQ0KDQo=","data":"dHdv","time":"<time>"}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got = normalize(c.request("$JS.API.STREAM.MSG.GET.S", `{"last_by_subj":"S","no_hdr":true}`, nil))
	want = `{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"S","seq":1,"data":"dHdv","time":"<time>"}}`
	if got != want {
		t.Errorf("no_hdr: got  %s\nwant %s", got, want)
	}
}

// TestAccountLimits: $JS.API.INFO reports the account's limits, none (-1),
// also with the server's storage limits set, as nats-server v2.15.2 does.
func TestAccountLimits(t *testing.T) {
	tr := newMemTransport()
	js, err := jetstream.New(jetstream.Config{StoreDir: t.TempDir(), MaxMemory: 1 << 20, MaxStore: 1 << 30}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	a, err := New(js, tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got := newClient(t, tr).request("$JS.API.INFO", "", nil)
	if !strings.Contains(got, `"limits":{"max_memory":-1,"max_storage":-1,"max_streams":-1,`) {
		t.Errorf("INFO %s", got)
	}
}
