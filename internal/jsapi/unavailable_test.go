package jsapi

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/stream"
)

// leaderlessCluster is a Cluster whose server answers every request, as
// a server that has known no meta leader for a while does, and says the
// meta group's requests are unavailable while unavailable is set.
type leaderlessCluster struct {
	*jetstream.JetStream
	unavailable atomic.Bool
}

func (c *leaderlessCluster) Answers(string, string) bool { return true }

func (c *leaderlessCluster) Unavailable(key, _, _ string, _ []byte) bool {
	return c.unavailable.Load() && key != "STREAM.MSG.GET"
}

// A server that answers for the meta group without leading it (it knows
// no meta leader: a restart still replaying its log, a lost quorum)
// answers 10008 in the endpoint's response, as nats-server's leaderless
// servers do, and never its own view of the streams, which may lack
// them: STREAM.NAMES does not list an empty account, STREAM.INFO does not
// say 10059 of a stream the meta group holds.
func TestMetaUnavailableAnswers10008(t *testing.T) {
	tr := newMemTransport()
	js, err := jetstream.New(jetstream.Config{StoreDir: t.TempDir(), ServerName: "n1", Version: testVersion, APILevel: APILevel}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Shutdown)
	cl := &leaderlessCluster{JetStream: js}
	a, err := New(js, tr, Options{Cluster: cl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if _, jerr := js.StreamCreate(jetstream.StreamRequest{Config: stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}}}); jerr != nil {
		t.Fatal(jerr)
	}
	c := newClient(t, tr)
	cl.unavailable.Store(true)
	for _, tc := range []struct{ subj, typ string }{
		{"$JS.API.STREAM.NAMES", "stream_names_response"},
		{"$JS.API.STREAM.LIST", "stream_list_response"},
		{"$JS.API.STREAM.INFO.MISSING", "stream_info_response"},
		{"$JS.API.INFO", "account_info_response"},
		{"$JS.API.CONSUMER.NAMES.ORDERS", "consumer_names_response"},
	} {
		got := c.request(tc.subj, "", nil)
		var resp struct {
			Type  string `json:"type"`
			Error *struct {
				Code    int `json:"code"`
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &resp); err != nil {
			t.Fatalf("%s: %s", tc.subj, got)
		}
		if resp.Type != "io.nats.jetstream.api.v1."+tc.typ || resp.Error == nil || resp.Error.Code != 503 || resp.Error.ErrCode != 10008 {
			t.Errorf("%s: %s, want 10008 in a %s", tc.subj, got, tc.typ)
		}
		if strings.Contains(got, "ORDERS") {
			t.Errorf("%s: answered with this server's own streams: %s", tc.subj, got)
		}
	}
	cl.unavailable.Store(false)
	if got := c.request("$JS.API.STREAM.NAMES", "", nil); !strings.Contains(got, `"streams":["ORDERS"]`) {
		t.Fatalf("available again: %s", got)
	}
}
