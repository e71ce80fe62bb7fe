package test

import (
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Distributed counters (ADR-49; nats-server v2.15.2 allow_msg_counter,
// Nats-Incr), through nats.go's jetstream package: the PubAck's Value,
// the stored {"val":"..."}, arbitrary precision, a restart, concurrent
// publishers and sources aggregating counters.

// incrMsg returns a Nats-Incr publish of by on subj.
func incrMsg(subj, by string) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Header.Set("Nats-Incr", by)
	return m
}

// counterValue reads the counter value of the last message on subj.
func counterValue(t testing.TB, s jetstream.Stream, subj string) string {
	t.Helper()
	m, err := s.GetLastMsgForSubject(tctx(t), subj)
	if err != nil {
		t.Fatalf("last %s: %v", subj, err)
	}
	var v struct {
		Val string `json:"val"`
	}
	if err := json.Unmarshal(m.Data, &v); err != nil {
		t.Fatalf("last %s: body %q: %v", subj, m.Data, err)
	}
	return v.Val
}

// A counter stream adds each Nats-Incr to the last value of its subject,
// answers the new value in the PubAck, keeps the increment in the header
// of the stored message, and refuses what ADR-49 refuses.
func TestCounterIncrements(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "HITS", Subjects: []string{"hits.>"}, AllowMsgCounter: true, AllowDirect: true})
	if info := streamInfo(t, s); !info.Config.AllowMsgCounter || info.Config.Metadata["_nats.req.level"] != "2" {
		t.Fatalf("config %+v", info.Config)
	}
	for i, step := range []struct{ by, want string }{
		{"+1", "1"}, {"41", "42"}, {"-100", "-58"},
		{"99999999999999999999999999999999", "99999999999999999999999999999941"},
		{"-99999999999999999999999999999999", "-58"}, {"0", "-58"},
	} {
		ack := jsPublishMsg(t, js, incrMsg("hits.page", step.by))
		if ack.Value != step.want || ack.Sequence != uint64(i+1) {
			t.Errorf("Nats-Incr %s: ack %+v, want value %s", step.by, ack, step.want)
		}
	}
	if got := counterValue(t, s, "hits.page"); got != "-58" {
		t.Errorf("stored value %s, want -58", got)
	}
	m, err := s.GetMsg(tctx(t), 2)
	if err != nil || m.Header.Get("Nats-Incr") != "41" || string(m.Data) != `{"val":"42"}` {
		t.Errorf("message 2: %+v %v", m, err)
	}
	if ack := jsPublishMsg(t, js, incrMsg("hits.other", "7")); ack.Value != "7" {
		t.Errorf("another subject starts at 0: %+v", ack)
	}
	for _, tc := range []struct {
		name    string
		msg     *nats.Msg
		errCode uint16
		desc    string
	}{
		{"no increment", nats.NewMsg("hits.page"), 10169, "message counter increment is missing"},
		{"not a number", incrMsg("hits.page", "1.5"), 10171, "message counter increment is invalid"},
		{"payload", func() *nats.Msg { m := incrMsg("hits.page", "1"); m.Data = []byte("x"); return m }(), 10170, "message counter has payload"},
		{"expected sequence", func() *nats.Msg {
			m := incrMsg("hits.page", "1")
			m.Header.Set("Nats-Expected-Last-Sequence", "7")
			return m
		}(), 10171, "message counter increment is invalid"},
	} {
		_, err := js.PublishMsg(tctx(t), tc.msg)
		wantAPIError(t, err, 400, tc.errCode, tc.desc)
	}
	// Without allow_msg_counter an increment is refused.
	createStream(t, js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain"}})
	_, err = js.PublishMsg(tctx(t), incrMsg("plain", "1"))
	wantAPIError(t, err, 400, 10168, "message counters is disabled")
	// The setting cannot change after the create.
	_, err = js.UpdateStream(tctx(t), jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain"}, AllowMsgCounter: true})
	wantAPIError(t, err, 500, 10052, "stream configuration update can not change message counter setting")
}

// Configs a counter stream cannot have are refused with nats-server's
// errors.
func TestCounterConfigs(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	for _, tc := range []struct {
		cfg     jetstream.StreamConfig
		code    int
		errCode uint16
		desc    string
	}{
		{jetstream.StreamConfig{Name: "A", Subjects: []string{"a"}, AllowMsgCounter: true, Discard: jetstream.DiscardNew}, 500, 10052, "counter stream cannot use discard new"},
		{jetstream.StreamConfig{Name: "B", Subjects: []string{"b"}, AllowMsgCounter: true, AllowMsgTTL: true}, 500, 10052, "counter stream cannot use message TTLs"},
		{jetstream.StreamConfig{Name: "C", Subjects: []string{"c"}, AllowMsgCounter: true, Retention: jetstream.InterestPolicy}, 500, 10052, "counter stream can only use limits retention"},
		{jetstream.StreamConfig{Name: "D", AllowMsgCounter: true, Mirror: &jetstream.StreamSource{Name: "A"}}, 400, 10173, "stream mirrors can not also calculate counters"},
	} {
		_, err := js.CreateStream(tctx(t), tc.cfg)
		wantAPIError(t, err, tc.code, tc.errCode, tc.desc)
	}
}

// Concurrent publishers lose no increment, and the value survives a
// restart of a file stream (the apply function reads it from the store).
func TestCounterConcurrentAndRestart(t *testing.T) {
	opts := jsIn(t.TempDir())
	u, stop := startServerStoppable(t, opts)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "C", Subjects: []string{"c.>"}, AllowMsgCounter: true})
	const pubs, each = 4, 50
	var wg sync.WaitGroup
	for p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := js.PublishMsg(tctx(t), incrMsg("c.total", strconv.Itoa(p*each+i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := strconv.Itoa(pubs * each * (pubs*each - 1) / 2)
	s, err := js.Stream(tctx(t), "C")
	if err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, s, "c.total"); got != want {
		t.Fatalf("value %s, want %s", got, want)
	}
	nc.Close()
	stop()
	u2, _ := startServerStoppable(t, opts)
	_, js2 := jsConnect(t, u2)
	ack := jsPublishMsg(t, js2, incrMsg("c.total", "1"))
	n, _ := new(big.Int).SetString(want, 10)
	if ack.Value != n.Add(n, big.NewInt(1)).String() {
		t.Errorf("after a restart: %+v, want %s+1", ack, want)
	}
}

// A stream sourcing counters adds what each origin gained since the value
// last seen from it (Nats-Counter-Sources), and a local increment adds to
// the total; a stream without counters stores the copies as they are.
func TestCounterSources(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "EU", Subjects: []string{"eu.>"}, AllowMsgCounter: true})
	createStream(t, js, jetstream.StreamConfig{Name: "US", Subjects: []string{"us.>"}, AllowMsgCounter: true})
	jsPublishMsg(t, js, incrMsg("eu.hits", "10"))
	jsPublishMsg(t, js, incrMsg("us.hits", "5"))
	all := createStream(t, js, jetstream.StreamConfig{Name: "ALL", Subjects: []string{"all.>"}, AllowMsgCounter: true, Sources: []*jetstream.StreamSource{
		{Name: "EU", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "eu.>", Destination: "all.>"}}},
		{Name: "US", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "us.>", Destination: "all.>"}}},
	}})
	raw := createStream(t, js, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw"}, Sources: []*jetstream.StreamSource{{Name: "EU"}}})
	waitValue := func(want string) {
		t.Helper()
		waitFor(t, 10*time.Second, "ALL to reach "+want, func() bool {
			m, err := all.GetLastMsgForSubject(tctx(t), "all.hits")
			return err == nil && string(m.Data) == `{"val":"`+want+`"}`
		})
	}
	waitValue("15")
	jsPublishMsg(t, js, incrMsg("eu.hits", "3"))
	waitValue("18")
	if ack := jsPublishMsg(t, js, incrMsg("all.hits", "100")); ack.Value != "118" {
		t.Errorf("local increment: %+v", ack)
	}
	jsPublishMsg(t, js, incrMsg("us.hits", "-2"))
	waitValue("116")
	m, err := all.GetLastMsgForSubject(tctx(t), "all.hits")
	if err != nil {
		t.Fatal(err)
	}
	var sources map[string]map[string]string
	if err := json.Unmarshal([]byte(m.Header.Get("Nats-Counter-Sources")), &sources); err != nil ||
		sources["EU"]["eu.hits"] != "13" || sources["US"]["us.hits"] != "3" || m.Header.Get("Nats-Incr") != "-2" {
		t.Errorf("last message's headers %v (%v)", m.Header, err)
	}
	waitFor(t, 10*time.Second, "RAW to copy EU", func() bool {
		info, err := raw.Info(tctx(t))
		return err == nil && info.State.Msgs == 2
	})
	if m, err := raw.GetMsg(tctx(t), 2); err != nil || string(m.Data) != `{"val":"13"}` || m.Header.Get("Nats-Incr") != "3" {
		t.Errorf("RAW message 2: %+v %v", m, err)
	}
}

// The counter message must fit the server's max_payload.
func TestCounterMaxPayload(t *testing.T) {
	u := startServer(t, func(o *server.Options) { o.JetStream = true; o.MaxPayload = 1024 })
	_, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "C", Subjects: []string{"c"}, AllowMsgCounter: true})
	m := incrMsg("c", "1")
	m.Header.Set("X-Pad", stringOf('p', 1024-40))
	_, err := js.PublishMsg(tctx(t), m)
	wantAPIError(t, err, 400, 10054, "message size exceeds maximum allowed")
}

// stringOf returns n copies of c.
func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// The nats CLI's counter commands (natscli v0.5.0 nats counter, which
// uses orbit.go's counters over direct gets) and nats stream add
// --allow-counter.
func TestCounterCLI(t *testing.T) {
	u := startJS(t)
	runCLI(t, u, "stream", "add", "CTR", "--subjects", "ctr.>", "--allow-counter", "--allow-direct", "--defaults")
	_, js := jsConnect(t, u)
	s, err := js.Stream(tctx(t), "CTR")
	if err != nil {
		t.Fatal(err)
	}
	if !streamInfo(t, s).Config.AllowMsgCounter {
		t.Fatal("nats stream add --allow-counter: allow_msg_counter not set")
	}
	if out, _ := runCLI(t, u, "counter", "incr", "ctr.hits", "10"); strings.TrimSpace(out) != "10" {
		t.Errorf("nats counter incr: %q, want 10", out)
	}
	if out, _ := runCLI(t, u, "counter", "decr", "ctr.hits", "3"); strings.TrimSpace(out) != "7" {
		t.Errorf("nats counter decr: %q, want 7", out)
	}
	jsPublishMsg(t, js, incrMsg("ctr.other", "99999999999999999999999"))
	if out, _ := runCLI(t, u, "counter", "get", "ctr.other"); strings.TrimSpace(out) != "99999999999999999999999" {
		t.Errorf("nats counter get: %q", out)
	}
	var names []string
	cliJSON(t, u, &names, "counter", "ls", "ctr.>")
	slices.Sort(names) // listed from stream info's subjects, a map
	if strings.Join(names, ",") != "ctr.hits,ctr.other" {
		t.Errorf("nats counter ls: %v", names)
	}
	if got := counterValue(t, s, "ctr.hits"); got != "7" {
		t.Errorf("stored value %s, want 7", got)
	}
}
