package stream

import (
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

// scriptCounter was run against nats-server v2.15.2 on
// {"name":"CY","subjects":["cy.>"],"allow_msg_counter":true} (ADR-49).
var scriptCounter = []pubStep{
	{"cy.a", "Nats-Incr:+1", "", `{"stream":"CY","seq":1,"val":"1"}`},
	{"cy.a", "Nats-Incr:41", "", `{"stream":"CY","seq":2,"val":"42"}`},
	{"cy.a", "Nats-Incr:-100", "", `{"stream":"CY","seq":3,"val":"-58"}`},
	{"cy.a", "Nats-Incr:99999999999999999999999999999999", "", `{"stream":"CY","seq":4,"val":"99999999999999999999999999999941"}`},
	{"cy.a", "Nats-Incr:1", "x", `{"error":{"code":400,"err_code":10170,"description":"message counter has payload"},"stream":"CY","seq":0}`},
	{"cy.a", "", "", `{"error":{"code":400,"err_code":10169,"description":"message counter increment is missing"},"stream":"CY","seq":0}`},
	{"cy.a", "", "y", `{"error":{"code":400,"err_code":10169,"description":"message counter increment is missing"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:", "", `{"error":{"code":400,"err_code":10169,"description":"message counter increment is missing"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1x", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1_0", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:abc", "x", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Expected-Last-Sequence:4", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Rollup:sub", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Expected-Stream:CY", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Expected-Last-Msg-Id:x", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Expected-Last-Subject-Sequence:1", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Expected-Last-Subject-Sequence-Subject:cy.a", "", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Stream-Source:x", "", `{"error":{"code":400,"err_code":10227,"description":"message stream source header is not allowed"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Schedule:@every 1s", "", `{"error":{"code":400,"err_code":10188,"description":"message schedules is disabled"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-TTL:abc|Nats-Incr:1", "", `{"error":{"code":400,"err_code":10165,"description":"invalid per-message TTL"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-TTL:5s|Nats-Incr:1", "", `{"error":{"code":400,"err_code":10166,"description":"per-message TTL is disabled"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Batch-Id:x", "", `{"error":{"code":400,"err_code":10174,"description":"atomic publish is disabled"},"stream":"CY","seq":0}`},
	{"cy.a", "Nats-Incr:1|Nats-Msg-Id:a", "", `{"stream":"CY","seq":5,"val":"99999999999999999999999999999942"}`},
	{"cy.a", "Nats-Incr:1|Nats-Msg-Id:a", "", `{"stream":"CY","seq":5,"duplicate": true}`},
	{"cy.a", "Nats-Msg-Id:a", "", `{"stream":"CY","seq":5,"duplicate": true}`},
	{"cy.b", "Nats-Incr:0", "", `{"stream":"CY","seq":6,"val":"0"}`},
	{"cy.b", "Nats-Incr:-0", "", `{"stream":"CY","seq":7,"val":"0"}`},
	{"cy.c", "X:1|Nats-Incr:5|Y:2", "", `{"stream":"CY","seq":8,"val":"5"}`},
	{"cy.d", "Nats-Incr:1|Nats-Counter-Sources:bad", "", `{"stream":"CY","seq":9,"val":"1"}`},
	{"cy.d", "Nats-Incr:1", "", `{"error":{"code":400,"err_code":10172,"description":"message counter is broken"},"stream":"CY","seq":0}`},
}

// scriptCounterSize: {"name":"CZ","subjects":["cz.>"],
// "allow_msg_counter":true,"max_msg_size":40}; nats-server v2.15.2 checks
// the counter message it built against max_msg_size again.
var scriptCounterSize = []pubStep{
	{"cz.a", "Nats-Incr:1", "", `{"stream":"CZ","seq":1,"val":"1"}`},
	{"cz.a", "Nats-Incr:1000000", "", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"CZ","seq":0}`},
	{"cz.a", "Nats-Incr:+2", "", `{"stream":"CZ","seq":2,"val":"3"}`},
	{"cz.a", "Nats-Incr:1|Nats-Rollup:sub", "", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"CZ","seq":0}`},
}

func TestCounterScripts(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		steps     []pubStep
	}{
		{"counter", `{"name":"CY","subjects":["cy.>"],"allow_msg_counter":true}`, scriptCounter},
		{"size", `{"name":"CZ","subjects":["cz.>"],"allow_msg_counter":true,"max_msg_size":40}`, scriptCounterSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runScript(t, newTestStream(t, tc.cfg), tc.steps)
		})
	}
}

// TestCounterStoredMessage checks the stored counter message: the
// publish's header kept, the body {"val":"..."}; and a client's own
// Nats-Counter-Sources kept (as nats-server v2.15.2 keeps it) and then
// carried on by the next increment, appended at the end.
func TestCounterStoredMessage(t *testing.T) {
	s := newTestStream(t, `{"name":"CY","subjects":["cy.>"],"allow_msg_counter":true}`)
	apply := func(hdr string) Result {
		t.Helper()
		r := s.Apply(Entry{Subject: "cy.a", Header: []byte(hdr), Time: t0})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r
	}
	checkMsg := func(seq uint64, hdr, data string) {
		t.Helper()
		m, err := s.store.Load(seq)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Header) != hdr || string(m.Data) != data {
			t.Errorf("seq %d: stored %q %q, want %q %q", seq, m.Header, m.Data, hdr, data)
		}
	}
	apply("NATS/1.0\r\nX: 1\r\nNats-Incr: 5\r\n\r\n")
	checkMsg(1, "NATS/1.0\r\nX: 1\r\nNats-Incr: 5\r\n\r\n", `{"val":"5"}`)
	apply("NATS/1.0\r\nNats-Counter-Sources: {\"A\":{\"a\":\"5\"}}\r\nNats-Incr: 1\r\n\r\n")
	checkMsg(2, "NATS/1.0\r\nNats-Counter-Sources: {\"A\":{\"a\":\"5\"}}\r\nNats-Incr: 1\r\n\r\n", `{"val":"6"}`)
	if r := apply("NATS/1.0\r\nNats-Incr: 1\r\n\r\n"); r.Value != "7" {
		t.Errorf("value %q, want 7", r.Value)
	}
	checkMsg(3, "NATS/1.0\r\nNats-Incr: 1\r\nNats-Counter-Sources: {\"A\":{\"a\":\"5\"}}\r\n\r\n", `{"val":"7"}`)
}

// TestCounterBroken: a last message on the subject that is not a
// counter's is 10172; a "val" that is not a number reads as math/big
// reads it, as in nats-server.
func TestCounterBroken(t *testing.T) {
	s := newTestStream(t, `{"name":"CY","subjects":["cy.>"],"allow_msg_counter":true}`)
	for _, m := range []store.Msg{
		{Subject: "cy.bad", Data: []byte("x")},
		{Subject: "cy.num", Data: []byte(`{"val":7}`)},
		{Subject: "cy.partial", Data: []byte(`{"val":"12x"}`)},
		{Subject: "cy.empty", Data: []byte(`{}`)},
	} {
		if _, err := s.store.Append(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ subj, want string }{
		{"cy.bad", `{"error":{"code":400,"err_code":10172,"description":"message counter is broken"},"stream":"CY","seq":0}`},
		{"cy.num", `{"error":{"code":400,"err_code":10172,"description":"message counter is broken"},"stream":"CY","seq":0}`},
		{"cy.partial", `{"stream":"CY","seq":5,"val":"13"}`},
		{"cy.empty", `{"stream":"CY","seq":6,"val":"1"}`},
	} {
		r := s.Apply(Entry{Subject: tc.subj, Header: hdrBlock("Nats-Incr:1"), Time: t0})
		if got := string(AppendPubAck(nil, "CY", r, "")); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.subj, got, tc.want)
		}
	}
}

// TestCounterMaxPayload: the counter message must fit the max_payload
// the proposer put into the entry (nats-server v2.15.2 checks its own
// max_payload); without one there is no such limit.
func TestCounterMaxPayload(t *testing.T) {
	s := newTestStream(t, `{"name":"CY","subjects":["cy.>"],"allow_msg_counter":true}`)
	hdr := hdrBlock("Nats-Incr:1") // 26 bytes, and a body of 11
	if r := s.Apply(Entry{Subject: "cy.a", Header: hdr, MaxPayload: 36}); r.Err == nil || r.Err.ErrCode != 10054 {
		t.Fatalf("over max_payload: %+v, want 10054", r)
	}
	if r := s.Apply(Entry{Subject: "cy.a", Header: hdr, MaxPayload: 37}); r.Err != nil || r.Value != "1" {
		t.Fatalf("within max_payload: %+v", r)
	}
	if r := s.Apply(Entry{Subject: "cy.a", Header: hdrBlock("Nats-Incr:" + strings.Repeat("9", 5000))}); r.Err != nil {
		t.Fatalf("no max_payload: %+v", r)
	}
}

// TestCounterSources replays what nats-server v2.15.2 stored for an
// aggregate counter AG sourcing the counters O1 and O2 (subjects mapped
// o1.> and o2.> to ag.>), with a local increment between: each copy adds
// what its origin gained since the value last seen from it, and
// Nats-Counter-Sources keeps that value per origin stream and subject.
func TestCounterSources(t *testing.T) {
	o1 := newTestStream(t, `{"name":"O1","subjects":["o1.>"],"allow_msg_counter":true}`)
	o2 := newTestStream(t, `{"name":"O2","subjects":["o2.>"],"allow_msg_counter":true}`)
	ag := newTestStream(t, `{"name":"AG","subjects":["ag.>"],"allow_msg_counter":true,"sources":[{"name":"O1","subject_transforms":[{"src":"o1.>","dest":"ag.>"}]},{"name":"O2","subject_transforms":[{"src":"o2.>","dest":"ag.>"}]}]}`)
	nc := newTestStream(t, `{"name":"NC","subjects":["nc.>"],"sources":[{"name":"O1"}]}`)
	incr := func(s *Stream, subj, by string) *store.StoredMsg {
		t.Helper()
		r := s.Apply(Entry{Subject: subj, Header: hdrBlock("Nats-Incr:" + by), Time: t0})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		m, err := s.store.Load(r.Seq)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	idents := map[string]string{"O1": "v6y2rkt1", "O2": "KyP5k5aY"}
	copyTo := func(origin string, m *store.StoredMsg, wantVal, wantHdr string) {
		t.Helper()
		iname := origin + " " + strings.ToLower(origin) + ".> ag.>"
		e := SourcedEntry(m, iname, idents[origin], "ag.hits", t0)
		r := ag.Apply(e)
		if r.Err != nil || r.Value != wantVal {
			t.Fatalf("copy from %s: %+v, want value %s", origin, r, wantVal)
		}
		got, _ := ag.store.Load(r.Seq)
		if string(got.Header) != wantHdr || string(got.Data) != `{"val":"`+wantVal+`"}` {
			t.Errorf("copy from %s stored\n %q %q\nwant\n %q", origin, got.Header, got.Data, wantHdr)
		}
	}
	copyTo("O1", incr(o1, "o1.hits", "10"), "10",
		"NATS/1.0\r\nNats-Incr: 10\r\nNats-Stream-Source: O1 1 o1.> ag.> o1.hits v6y2rkt1\r\nNats-Counter-Sources: {\"O1\":{\"o1.hits\":\"10\"}}\r\n\r\n")
	copyTo("O2", incr(o2, "o2.hits", "5"), "15",
		"NATS/1.0\r\nNats-Incr: 5\r\nNats-Stream-Source: O2 1 o2.> ag.> o2.hits KyP5k5aY\r\nNats-Counter-Sources: {\"O1\":{\"o1.hits\":\"10\"},\"O2\":{\"o2.hits\":\"5\"}}\r\n\r\n")
	// O1 gains 3 while AG misses a copy: the next copy brings both.
	incr(o1, "o1.hits", "3")
	copyTo("O1", incr(o1, "o1.hits", "4"), "22",
		"NATS/1.0\r\nNats-Incr: 7\r\nNats-Stream-Source: O1 3 o1.> ag.> o1.hits v6y2rkt1\r\nNats-Counter-Sources: {\"O1\":{\"o1.hits\":\"17\"},\"O2\":{\"o2.hits\":\"5\"}}\r\n\r\n")
	local := incr(ag, "ag.hits", "100")
	if want := "NATS/1.0\r\nNats-Incr: 100\r\nNats-Counter-Sources: {\"O1\":{\"o1.hits\":\"17\"},\"O2\":{\"o2.hits\":\"5\"}}\r\n\r\n"; string(local.Header) != want {
		t.Errorf("local increment stored %q, want %q", local.Header, want)
	}
	copyTo("O2", incr(o2, "o2.hits", "-2"), "120",
		"NATS/1.0\r\nNats-Incr: -2\r\nNats-Stream-Source: O2 2 o2.> ag.> o2.hits KyP5k5aY\r\nNats-Counter-Sources: {\"O1\":{\"o1.hits\":\"17\"},\"O2\":{\"o2.hits\":\"3\"}}\r\n\r\n")

	// A stream without counters stores the copy as it is.
	m, _ := o1.store.Load(1)
	r := nc.Apply(SourcedEntry(m, "O1 > >", idents["O1"], "o1.hits", t0))
	got, _ := nc.store.Load(r.Seq)
	if r.Err != nil || r.Value != "" || string(got.Data) != `{"val":"10"}` ||
		string(got.Header) != "NATS/1.0\r\nNats-Incr: 10\r\nNats-Stream-Source: O1 1 > > o1.hits v6y2rkt1\r\n\r\n" {
		t.Errorf("copy to a stream without counters: %+v, stored %q %q", r, got.Header, got.Data)
	}
}

// TestCounterBatch: the messages of an atomic batch add up on the
// running value of their subject before any is stored, and a counter
// message of a fast batch is built as for a publish.
func TestCounterBatch(t *testing.T) {
	s := newTestStream(t, `{"name":"CB","subjects":["cb.>"],"allow_msg_counter":true,"allow_atomic":true}`)
	if r := s.Apply(Entry{Subject: "cb.a", Header: hdrBlock("Nats-Incr:10")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	c := BatchCommit{ID: "b", Time: t0, Entries: []Entry{
		{Subject: "cb.a", Header: hdrBlock("Nats-Incr:1")},
		{Subject: "cb.b", Header: hdrBlock("Nats-Incr:5")},
		{Subject: "cb.a", Header: hdrBlock("Nats-Incr:2")},
		{Subject: "cb.a", Header: hdrBlock("Nats-Incr:3|Nats-Batch-Commit:1")},
	}}
	rs, err := s.ApplyBatch(c)
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, r := range rs {
		vals = append(vals, r.Value)
	}
	if got := strings.Join(vals, ","); got != "11,5,13,16" {
		t.Errorf("batch values %s, want 11,5,13,16", got)
	}
	// A message without Nats-Incr fails the whole batch.
	c.Entries = append(c.Entries[:1:1], Entry{Subject: "cb.a", Data: []byte("x")})
	if _, err := s.ApplyBatch(c); err == nil || err.ErrCode != 10169 {
		t.Errorf("batch without Nats-Incr: %v, want 10169", err)
	}
	// The batch's max_payload bounds its counter messages.
	c.Entries = []Entry{{Subject: "cb.a", Header: hdrBlock("Nats-Incr:1|Nats-Batch-Commit:1")}}
	c.MaxPayload = 30
	if _, err := s.ApplyBatch(c); err == nil || err.ErrCode != 10054 {
		t.Errorf("batch over max_payload: %v, want 10054", err)
	}
	if last, _ := s.store.LoadLast("cb.a"); string(last.Data) != `{"val":"16"}` {
		t.Errorf("last cb.a %s, want 16", last.Data)
	}
}
