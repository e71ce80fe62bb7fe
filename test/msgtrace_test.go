package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
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

// traceOpaque matches the reply subjects each server makes up (a
// service import's _R_.<...>, nats.go's inboxes), which traceShape
// reduces to their prefix.
var traceOpaque = regexp.MustCompile(`^(_R_\.|_INBOX\.).*`)

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
		for _, k := range []string{"type", "kind", "acc", "subj", "sub", "queue", "stream", "subject", "nointerest", "error", "hop", "from", "to"} {
			if v, ok := m[k]; ok {
				fmt.Fprintf(&b, " %s=%v", k, traceOpaque.ReplaceAllString(fmt.Sprint(v), "$1*"))
			}
		}
	}
	return b.String()
}

// TestMsgTraceDifferential publishes with Nats-Trace-Dest (and
// Nats-Trace-Only) through nats.go to cairn and to nats-server v2.15.2:
// core and JetStream publishes, with and without delivery, and one to a
// subject nobody listens on; then, with accounts, across stream and
// service imports with and without allow_trace, and with a traceparent
// header (msgtrace_imports_test.go). Both must send the same trace
// events (key sets and semantics), deliver and store the same.
func TestMsgTraceDifferential(t *testing.T) {
	diffRequireNatsServer(t)
	t.Run("core", func(t *testing.T) {
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
	})
	t.Run("imports", testMsgTraceImportsDifferential)
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

// TestMsgTraceCluster publishes a traced message on n1 of a two-server
// cluster to a subscriber on n2: n1's event lists the egress to the route
// with hop "1" and hops 1, n2's the ingress from the route (kind 1) with
// Nats-Trace-Hop: 1 among its request headers and the egress to its
// client. With Nats-Trace-Only the message still crosses the route
// (nats-server v2.15.2 does the same) but n2 does not deliver it. It
// runs against nats-server with CAIRN_TEST_TARGET=nats-server.
func TestMsgTraceCluster(t *testing.T) {
	tc := startCluster(t, 2, nil)
	nc1, err := nats.Connect(tc.nodes[0].url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc1.Close()
	nc2, err := nats.Connect(tc.nodes[1].url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	events, _ := nc1.SubscribeSync("trace.dest")
	sub, _ := nc2.SubscribeSync("tr.core")
	nc1.Flush()
	nc2.Flush()
	// Wait until each server knows the other's interest.
	waitRouted := func(from *nats.Conn, s *nats.Subscription, subj string) {
		deadline := time.Now().Add(startTimeout)
		for time.Now().Before(deadline) {
			from.Publish(subj, []byte("probe"))
			from.Flush()
			if _, err := s.NextMsg(50 * time.Millisecond); err == nil {
				for { // drain later probes
					if _, err := s.NextMsg(50 * time.Millisecond); err != nil {
						return
					}
				}
			}
		}
		t.Fatalf("interest in %s never reached the other server", subj)
	}
	waitRouted(nc1, sub, "tr.core")
	waitRouted(nc2, events, "trace.dest")

	for _, only := range []bool{false, true} {
		m := nats.NewMsg("tr.core")
		m.Header.Set("Nats-Trace-Dest", "trace.dest")
		if only {
			m.Header.Set("Nats-Trace-Only", "true")
		}
		if err := nc1.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		byServer := map[string]map[string]any{}
		for range 2 {
			ev, err := events.NextMsg(readTimeout)
			if err != nil {
				t.Fatalf("only=%v: %d trace events, want 2: %v", only, len(byServer), err)
			}
			var doc map[string]any
			if err := json.Unmarshal(ev.Data, &doc); err != nil {
				t.Fatal(err)
			}
			byServer[doc["server"].(map[string]any)["name"].(string)] = doc
		}
		first, second := byServer["n1"], byServer["n2"]
		if first == nil || second == nil {
			t.Fatalf("only=%v: events from %v, want n1 and n2", only, slices.Collect(maps.Keys(byServer)))
		}
		if first["hops"] != float64(1) {
			t.Errorf("only=%v: n1 hops %v, want 1", only, first["hops"])
		}
		eg := first["events"].([]any)[1].(map[string]any)
		if eg["type"] != "eg" || eg["kind"] != float64(1) || eg["hop"] != "1" || eg["name"] != "n2" {
			t.Errorf("only=%v: n1 egress %v, want route egress to n2 with hop 1", only, eg)
		}
		in := second["events"].([]any)[0].(map[string]any)
		if in["type"] != "in" || in["kind"] != float64(1) || in["name"] != "n1" {
			t.Errorf("only=%v: n2 ingress %v, want from route n1", only, in)
		}
		hdr := second["request"].(map[string]any)["header"].(map[string]any)
		if h, _ := hdr["Nats-Trace-Hop"].([]any); len(h) != 1 || h[0] != "1" {
			t.Errorf("only=%v: n2 request headers %v, want Nats-Trace-Hop 1", only, hdr)
		}
		if len(second["events"].([]any)) != 2 {
			t.Errorf("only=%v: n2 events %v, want ingress and egress", only, second["events"])
		}
		_, err := sub.NextMsg(200 * time.Millisecond)
		if delivered := err == nil; delivered == only {
			t.Errorf("only=%v: delivered on n2 %v", only, delivered)
		}
	}
}
