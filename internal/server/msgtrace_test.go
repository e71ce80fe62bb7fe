package server

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/cairnmq/cairn/internal/config"
)

// A traceparent's flags are its fourth field, two hex digits read as a
// signed byte whose bit 0 is the sampled flag (nats-server v2.15.2
// genHeaderMapIfTraceHeadersPresent).
func TestTraceParentSampled(t *testing.T) {
	for v, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-7f": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-81": false, // beyond a signed byte
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1":  false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-01":                  false,
		"00-a-b-c-01":                                             false,
	} {
		if got := traceParentSampled([]byte(v)); got != want {
			t.Errorf("traceParentSampled(%q) = %v, want %v", v, got, want)
		}
	}
}

// traceHeaders finds what asks for a trace: Nats-Trace-Dest (exact
// case), or a sampled traceparent (any case), which alone makes the
// trace the account's; "trace disabled" or nothing of either asks for
// none.
func TestTraceHeaders(t *testing.T) {
	const sampled, unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	cases := []struct {
		name, hdr string
		want      map[string][]string // nil: no trace
		external  bool
	}{
		{"destination", "Nats-Trace-Dest: t.d\r\nX:  y \r\n", map[string][]string{"Nats-Trace-Dest": {"t.d"}, "X": {"y"}}, false},
		{"traceparent", "traceparent: " + sampled + "\r\n", map[string][]string{"traceparent": {sampled}}, true},
		{"traceparent in upper case", "TraceParent: " + sampled + "\r\n", map[string][]string{"TraceParent": {sampled}}, true},
		{"both", "traceparent: " + sampled + "\r\nNats-Trace-Dest: t.d\r\n", map[string][]string{"traceparent": {sampled}, "Nats-Trace-Dest": {"t.d"}}, false},
		{"a later traceparent sampled", "traceparent: " + unsampled + "\r\ntraceparent: " + sampled + "\r\n", map[string][]string{"traceparent": {unsampled, sampled}}, true},
		{"traceparent not sampled", "traceparent: " + unsampled + "\r\n", nil, false},
		{"trace disabled", "Nats-Trace-Dest: trace disabled\r\ntraceparent: " + sampled + "\r\n", nil, false},
		{"destination in another case", "nats-trace-dest: t.d\r\n", nil, false},
		{"neither", "X: y\r\n", nil, false},
	}
	for _, tc := range cases {
		m, external := traceHeaders([]byte("NATS/1.0\r\n" + tc.hdr + "\r\n"))
		if !reflect.DeepEqual(m, tc.want) || external != tc.external {
			t.Errorf("%s: %v external %v, want %v external %v", tc.name, m, external, tc.want, tc.external)
		}
	}
}

// The account's sampling: always outside 1..99, otherwise when the drawn
// number out of 100 is at most the percentage (nats-server's <=).
func TestSampled(t *testing.T) {
	draw := func(n int32) func(int32) int32 {
		return func(max int32) int32 {
			if max != 100 {
				t.Fatalf("drawn out of %d, want 100", max)
			}
			return n
		}
	}
	never := func(int32) int32 { t.Fatal("drew for a sampling outside 1..99"); return 0 }
	for _, tc := range []struct {
		sampling int
		intn     func(int32) int32
		want     bool
	}{
		{100, never, true}, {0, never, true}, {-5, never, true}, {150, never, true},
		{50, draw(0), true}, {50, draw(50), true}, {50, draw(51), false}, {1, draw(2), false}, {99, draw(99), true},
	} {
		if got := sampled(tc.sampling, tc.intn); got != tc.want {
			t.Errorf("sampled(%d) = %v, want %v", tc.sampling, got, tc.want)
		}
	}
}

// How an egress event beyond a stream import names the importer's
// subscription: the subject nats-server's shadow subscription has in the
// exporter (checked against nats-server v2.15.2 by
// TestMsgTraceDifferential for the prefix and "to" cases).
func TestExporterSubject(t *testing.T) {
	prefix := &streamImport{from: "sa.on.>", local: "imp.sa.on.>"}
	mapped := &streamImport{from: "sm.*.x", local: "mapped.*.y"}
	same := &streamImport{from: "s.*.>", local: "s.*.>"}
	literal := &streamImport{from: "lit.a", local: "imported.a"}
	for _, tc := range []struct {
		si        *streamImport
		sub, want string
	}{
		{prefix, "imp.sa.on.>", "sa.on.>"},
		{prefix, "imp.>", "sa.on.>"},
		{prefix, "imp.sa.on.*", "sa.on.*"},
		{prefix, "imp.sa.on.x", "sa.on.x"},
		{prefix, "imp.sa.on.x.>", "sa.on.x.>"},
		{prefix, "imp.*.on.x", "sa.on.x"},
		{mapped, "mapped.*.y", "sm.*.x"},
		{mapped, "mapped.q.y", "sm.q.x"},
		{mapped, "mapped.>", "sm.*.x"},
		{same, "s.a.b", "s.a.b"},
		{same, ">", "s.*.>"},
		{literal, "imported.a", "lit.a"},
		{literal, "imported.*", "lit.a"},
	} {
		if got := tc.si.exporterSubject(tc.sub); got != tc.want {
			t.Errorf("import %s as %s, subscription %s: %q, want %q", tc.si.from, tc.si.local, tc.sub, got, tc.want)
		}
	}
}

// The "se" and "si" events carry nats-server v2.15.2's keys
// (MsgTraceStreamExport, MsgTraceServiceImport).
func TestTraceImportEvents(t *testing.T) {
	tr := &msgTrace{}
	tr.traceStreamExport("B", "imp.sa.on.x")
	tr.traceServiceImport("A", "ask.on", "svc.on")
	var got []map[string]any
	b, err := json.Marshal(tr.ev.Events)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, e := range got {
		ts, err := time.Parse(time.RFC3339Nano, e["ts"].(string))
		if err != nil || time.Since(ts) > time.Hour {
			t.Errorf("ts %v: %v", e["ts"], err)
		}
		delete(e, "ts")
	}
	want := []map[string]any{
		{"type": "se", "acc": "B", "to": "imp.sa.on.x"},
		{"type": "si", "acc": "A", "from": "ask.on", "to": "svc.on"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// A traceparent in an account with msg_trace is traced to its
// destination when the draw samples it; otherwise the message goes on
// with Nats-Trace-Dest: trace disabled, so that no peer traces it.
func TestTraceParentSampling(t *testing.T) {
	o := Options{
		Host: "127.0.0.1", Port: RandomPort,
		Auth: config.Auth{
			Users:    []config.User{{Name: "u", Password: "u", Account: "ACC"}},
			Accounts: []config.Account{{Name: "ACC", Trace: &config.MsgTrace{Dest: "acc.trace", Sampling: 30}}},
		},
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var draw atomic.Int32
	s.traceIntN = func(int32) int32 { return draw.Load() }
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	tc, _ := dialAs(t, s, "u")
	tc.send("SUB acc.trace 1\r\nSUB tp.x 2\r\nPING\r\n")
	tc.expect("PONG\r\n")
	const hdr = "NATS/1.0\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n"
	pub := "HPUB tp.x " + strconv.Itoa(len(hdr)) + " " + strconv.Itoa(len(hdr)) + "\r\n" + hdr + "\r\n"

	draw.Store(31) // not sampled at 30%
	tc.send(pub + "PING\r\n")
	const off = "NATS/1.0\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nNats-Trace-Dest: trace disabled\r\n\r\n"
	tc.expect("HMSG tp.x 2 " + strconv.Itoa(len(off)) + " " + strconv.Itoa(len(off)) + "\r\n")
	tc.expect(off + "\r\n")
	tc.expect("PONG\r\n")

	draw.Store(30) // sampled
	tc.send(pub)
	var gotMsg, gotEvent bool
	for !gotMsg || !gotEvent {
		l := tc.line()
		switch {
		case strings.HasPrefix(l, "HMSG tp.x 2 "):
			tc.expect(hdr + "\r\n")
			gotMsg = true
		case strings.HasPrefix(l, "MSG acc.trace 1 "):
			ev := tc.line()
			var doc struct {
				Events []map[string]any `json:"events"`
			}
			if err := json.Unmarshal([]byte(ev), &doc); err != nil {
				t.Fatalf("event %q: %v", ev, err)
			}
			if len(doc.Events) != 2 || doc.Events[0]["type"] != "in" || doc.Events[0]["acc"] != "ACC" || doc.Events[1]["type"] != "eg" {
				t.Errorf("event %s", ev)
			}
			gotEvent = true
		default:
			t.Fatalf("unexpected %q", l)
		}
	}
}

// An account's traceparent destination comes from its configuration or
// its JWT (nats-server v2.15.2 UpdateAccountClaims: an invalid
// destination is none, a sampling outside 1..100 is 100), and a reload
// replaces it.
func TestAccountTraceDest(t *testing.T) {
	auth := func(tr *config.MsgTrace) config.Auth {
		return config.Auth{
			Users:    []config.User{{Name: "u", Password: "u", Account: "ACC"}},
			Accounts: []config.Account{{Name: "ACC", Trace: tr}},
		}
	}
	s := startWith(t, Options{Host: "127.0.0.1", Port: RandomPort, Auth: auth(nil)})
	if tr := s.account("ACC").trace.Load(); tr != nil {
		t.Fatalf("trace %+v before the reload", tr)
	}
	want := &config.MsgTrace{Dest: "acc.trace", Sampling: 40}
	if err := s.ReloadSecurity(SecurityOptions{Auth: auth(want)}); err != nil {
		t.Fatal(err)
	}
	if tr := s.account("ACC").trace.Load(); !reflect.DeepEqual(tr, want) {
		t.Errorf("trace %+v after the reload, want %+v", tr, want)
	}

	for _, tc := range []struct {
		in   *jwt.MsgTrace
		want *config.MsgTrace
	}{
		{nil, nil},
		{&jwt.MsgTrace{Destination: "t.d", Sampling: 25}, &config.MsgTrace{Dest: "t.d", Sampling: 25}},
		{&jwt.MsgTrace{Destination: "t.d"}, &config.MsgTrace{Dest: "t.d", Sampling: 100}},
		{&jwt.MsgTrace{Destination: "t.d", Sampling: 150}, &config.MsgTrace{Dest: "t.d", Sampling: 100}},
		{&jwt.MsgTrace{Destination: "t.*", Sampling: 25}, nil},
	} {
		if got := jwtTrace(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("jwtTrace(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
