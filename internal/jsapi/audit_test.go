package jsapi

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
)

// reqTransport is a memTransport that tells the API who published each
// request (RequestSubscriber), as the server does.
type reqTransport struct {
	*memTransport
	from *fakeRequester
}

func (t *reqTransport) SubscribeRequests(subj string, h RequestHandler) (jetstream.Subscription, error) {
	return t.Subscribe(subj, "", func(subject, reply string, hdr, data []byte) {
		h(subject, reply, hdr, data, t.from)
	})
}

// fakeRequester describes every requester as the same client and counts
// how often it was asked.
type fakeRequester struct{ asked atomic.Int64 }

const fakeClient = `{"host":"127.0.0.1","id":7,"acc":"$G","kind":"Client","client_type":"nats"}`

func (f *fakeRequester) AppendClientInfo(dst, _ []byte) []byte {
	f.asked.Add(1)
	return append(dst, fakeClient...)
}

// auditAPI starts the API over a reqTransport, with domain D1.
func auditAPI(t *testing.T) (*reqTransport, *fakeRequester) {
	t.Helper()
	f := &fakeRequester{}
	tr := &reqTransport{memTransport: newMemTransport(), from: f}
	js, err := jetstream.New(jetstream.Config{StoreDir: t.TempDir(), ServerName: "n1", Domain: "D1", Version: testVersion, APILevel: APILevel}, tr)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(js, tr, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		js.Shutdown()
	})
	return tr, f
}

// audits subscribes to the audit advisory and returns its messages.
func audits(tr *reqTransport) chan map[string]any {
	ch := make(chan map[string]any, 64)
	_, _ = tr.Subscribe(AuditSubject, "", func(_, _ string, _, data []byte) {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			m = map[string]any{"$bad": string(data)}
		}
		m["$keys"] = jsonKeys(data)
		ch <- m
	})
	return ch
}

// jsonKeys returns the top-level keys of a JSON object in their order.
func jsonKeys(b []byte) string {
	d := json.NewDecoder(strings.NewReader(string(b)))
	var keys []string
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return strings.Join(keys, ",")
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 && d.More() {
				keys = append(keys, v)
				// skip the value
				var skip json.RawMessage
				_ = d.Decode(&skip)
			}
		}
	}
}

func nextAudit(t *testing.T, ch chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no audit advisory")
		return nil
	}
}

// TestAuditAdvisory: every request the API answers and counts is
// audited on $JS.EVENT.ADVISORY.API with nats-server v2.15.2's keys, in
// its order, the request body (left out when empty), the response sent,
// the requester's ClientInfo and the domain; a successful MSG.GET is
// not, nor is anything else while nobody listens.
func TestAuditAdvisory(t *testing.T) {
	tr, from := auditAPI(t)
	c := newClient(t, tr.memTransport)

	// Nobody listens: no requester is asked, nothing is published.
	c.request("$JS.API.INFO", "", nil)
	c.request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"],"storage":"memory"}`, nil)
	if n := from.asked.Load(); n != 0 {
		t.Fatalf("the requester was described %d times with nobody listening", n)
	}

	ch := audits(tr)
	for _, tc := range []struct {
		subj, body string
		audited    bool
	}{
		{"$JS.API.INFO", "", true},
		{"$JS.API.STREAM.INFO.S", "", true},
		{"$JS.API.STREAM.INFO.NOPE", "", true}, // an error
		{"$JS.API.STREAM.MSG.GET.S", `{"seq":1}`, true},
		{"$JS.API.FOO", "x", true}, // unknown: 10003, counted
	} {
		got := c.request(tc.subj, tc.body, nil)
		m := nextAudit(t, ch)
		if want := "type,id,timestamp,server,client,subject,request,response,domain"; tc.body == "" {
			want = strings.Replace(want, "request,", "", 1)
			if m["$keys"] != want {
				t.Errorf("%s: keys %v, want %s", tc.subj, m["$keys"], want)
			}
		} else if m["$keys"] != want {
			t.Errorf("%s: keys %v, want %s", tc.subj, m["$keys"], want)
		}
		if m["type"] != "io.nats.jetstream.advisory.v1.api_audit" || m["server"] != "n1" || m["domain"] != "D1" ||
			m["subject"] != tc.subj || m["response"] != got || (tc.body != "" && m["request"] != tc.body) {
			t.Errorf("%s: audit %v (response %s)", tc.subj, m, got)
		}
		if cl, _ := json.Marshal(m["client"]); !strings.Contains(string(cl), `"id":7`) {
			t.Errorf("%s: client %s", tc.subj, cl)
		}
		if ts, _ := m["timestamp"].(string); !strings.HasSuffix(ts, "Z") {
			t.Errorf("%s: timestamp %q", tc.subj, ts)
		}
	}

	// A successful MSG.GET is neither counted nor audited; a request
	// without a reply subject is audited.
	if ack := c.request("s.1", "one", nil); !strings.Contains(ack, `"seq":1`) {
		t.Fatalf("publish: %s", ack)
	}
	if got := c.request("$JS.API.STREAM.MSG.GET.S", `{"seq":1}`, nil); !strings.Contains(got, `"message"`) {
		t.Fatalf("msg get: %s", got)
	}
	tr.Publish("$JS.API.STREAM.INFO.S", "", nil, nil)
	m := nextAudit(t, ch)
	if m["subject"] != "$JS.API.STREAM.INFO.S" {
		t.Fatalf("after a successful MSG.GET: audit of %v", m["subject"])
	}
	select {
	case m := <-ch:
		t.Fatalf("extra audit %v", m)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestAuditDisabled: an account without JetStream audits its 10039
// answers too, as nats-server v2.15.2 does.
func TestAuditDisabled(t *testing.T) {
	f := &fakeRequester{}
	tr := &reqTransport{memTransport: newMemTransport(), from: f}
	d, err := NewDisabled(tr, "n2", "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ch := audits(tr)
	c := newClient(t, tr.memTransport)
	got := c.request("$JS.API.INFO", "", nil)
	m := nextAudit(t, ch)
	if m["$keys"] != "type,id,timestamp,server,client,subject,response" || m["server"] != "n2" || m["response"] != got ||
		!strings.Contains(got, `"err_code":10039`) {
		t.Fatalf("audit %v of %s", m, got)
	}
}

// TestAuditClientUnknown: without a RequestSubscriber transport, or a
// requester that cannot tell, the audit says "client":null.
func TestAuditClientUnknown(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	ch := make(chan string, 4)
	_, _ = tr.Subscribe(AuditSubject, "", func(_, _ string, _, data []byte) { ch <- string(data) })
	c := newClient(t, tr)
	c.request("$JS.API.INFO", "", nil)
	select {
	case a := <-ch:
		if !strings.Contains(a, `"client":null,"subject":"$JS.API.INFO"`) {
			t.Fatalf("audit %s", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no audit")
	}
}
