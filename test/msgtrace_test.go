package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairnmq/cairn/internal/server"
)

// traceScenario publishes traced messages through nats.go to the server
// at url and returns, per step, the trace events received on the trace
// destination, and whether the plain subscriber got each message.
type traceResult struct {
	events    []map[string]any // one per step (a single server sends one event)
	delivered []bool
	stored    uint64 // messages in stream TS at the end
}

var traceSteps = []struct {
	name string
	subj string
	only bool
}{
	{"core", "tr.core", false},
	{"core trace only", "tr.core", true},
	{"jetstream", "ts.a", false},
	{"jetstream trace only", "ts.a", true},
	{"no interest", "tr.none", false},
}

func runTraceScenario(t *testing.T, url string) traceResult {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("tracer"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events, err := nc.SubscribeSync("trace.dest")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("tr.core")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("$JS.API.STREAM.CREATE.TS", []byte(`{"name":"TS","subjects":["ts.>"]}`), readTimeout); err != nil {
		t.Fatal(err)
	}
	var res traceResult
	for _, st := range traceSteps {
		m := nats.NewMsg(st.subj)
		m.Data = []byte("payload")
		m.Header.Set("Nats-Trace-Dest", "trace.dest")
		if st.only {
			m.Header.Set("Nats-Trace-Only", "true")
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		ev, err := events.NextMsg(readTimeout)
		if err != nil {
			t.Fatalf("%s: no trace event: %v", st.name, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(ev.Data, &doc); err != nil {
			t.Fatalf("%s: %v: %s", st.name, err, ev.Data)
		}
		res.events = append(res.events, doc)
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		_, err = sub.NextMsg(200 * time.Millisecond)
		res.delivered = append(res.delivered, err == nil && st.subj == "tr.core")
	}
	resp, err := nc.Request("$JS.API.STREAM.INFO.TS", nil, readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		State struct {
			Msgs uint64 `json:"messages"`
		} `json:"state"`
	}
	_ = json.Unmarshal(resp.Data, &info)
	res.stored = info.State.Msgs
	return res
}

// traceShape reduces a trace event to what both servers must agree on:
// the key sets of the document, of "server" and "request", and of every
// event, and the values that do not depend on the server or the
// connection (types, kinds, accounts, subjects, streams, errors, hops).
func traceShape(doc map[string]any) string {
	keys := func(v any) string {
		m, _ := v.(map[string]any)
		return strings.Join(slices.Sorted(maps.Keys(m)), ",")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "doc{%s} server{%s} request{%s}", keys(doc), keys(doc["server"]), keys(doc["request"]))
	req, _ := doc["request"].(map[string]any)
	fmt.Fprintf(&b, " header=%v msgsize=%v hops=%v", req["header"], req["msgsize"], doc["hops"])
	evs, _ := doc["events"].([]any)
	for _, e := range evs {
		m, _ := e.(map[string]any)
		fmt.Fprintf(&b, "\n  {%s}", keys(m))
		for _, k := range []string{"type", "kind", "acc", "subj", "sub", "queue", "stream", "subject", "nointerest", "error", "hop", "to"} {
			if v, ok := m[k]; ok {
				fmt.Fprintf(&b, " %s=%v", k, v)
			}
		}
	}
	return b.String()
}

// TestMsgTraceDifferential publishes with Nats-Trace-Dest (and
// Nats-Trace-Only) through nats.go to cairn and to nats-server v2.15.2:
// core and JetStream publishes, with and without delivery, and one to a
// subject nobody listens on. Both must send the same trace events (key
// sets and semantics), deliver and store the same.
func TestMsgTraceDifferential(t *testing.T) {
	diffRequireNatsServer(t)
	opts := server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, ServerName: "S1"}
	opts.StoreDir = t.TempDir()
	cu, _ := startCairn(t, opts)
	opts.StoreDir = t.TempDir()
	nu, _ := startNatsServer(t, opts)
	got := runTraceScenario(t, cu)
	want := runTraceScenario(t, nu)
	for i, st := range traceSteps {
		g, w := traceShape(got.events[i]), traceShape(want.events[i])
		if g != w {
			t.Errorf("%s: trace event\ncairn:       %s\nnats-server: %s", st.name, g, w)
		}
		if got.delivered[i] != want.delivered[i] {
			t.Errorf("%s: delivered %v, nats-server %v", st.name, got.delivered[i], want.delivered[i])
		}
	}
	if got.stored != want.stored {
		t.Errorf("stream holds %d messages, nats-server %d", got.stored, want.stored)
	}
}

// TestMsgTrace checks cairn alone (no nats-server needed): a traced core
// publish is delivered and traced, a trace-only one is traced but not
// delivered, and a trace-only JetStream publish is not stored.
func TestMsgTrace(t *testing.T) {
	url := startServer(t, func(o *server.Options) { o.JetStream = true })
	res := runTraceScenario(t, url)
	if want := []bool{true, false, false, false, false}; !reflect.DeepEqual(res.delivered, want) {
		t.Errorf("delivered %v, want %v", res.delivered, want)
	}
	if res.stored != 1 {
		t.Errorf("stream holds %d messages, want 1 (trace only stores nothing)", res.stored)
	}
	types := func(doc map[string]any) []string {
		var ts []string
		evs, _ := doc["events"].([]any)
		for _, e := range evs {
			ts = append(ts, e.(map[string]any)["type"].(string))
		}
		return ts
	}
	wantTypes := [][]string{{"in", "eg"}, {"in", "eg"}, {"in", "js"}, {"in", "js"}, {"in"}}
	for i, st := range traceSteps {
		if g := types(res.events[i]); !reflect.DeepEqual(g, wantTypes[i]) {
			t.Errorf("%s: event types %v, want %v", st.name, g, wantTypes[i])
		}
	}
}
