package test

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A stream's subject_transform (docs/protocol.md sections 3.1 and 4.1): the
// stream stores each message under its mapped subject, the header checks
// see the mapped subject, a subject the transform's source does not match
// is stored unchanged, and an update changes the mapping from the next
// publish. Everything here passes against nats-server v2.15.2 too.

// partitionOf is what {{partition(n,...)}} makes of key: FNV-1a 32 modulo
// n, as nats-server computes it.
func partitionOf(key string, n uint32) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return strconv.FormatUint(uint64(h.Sum32()%n), 10)
}

// storedSubject returns the subject of the message stored at seq.
func storedSubject(t *testing.T, s jetstream.Stream, seq uint64) string {
	t.Helper()
	m, err := s.GetMsg(tctx(t), seq)
	if err != nil {
		t.Fatalf("GetMsg(%d): %v", seq, err)
	}
	return m.Subject
}

func TestTransformStoresMappedSubject(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	tr := &jetstream.SubjectTransformConfig{Source: "in.*.*", Destination: "out.$2.{{partition(3,1)}}.$1"}
	s := createStream(t, js, jetstream.StreamConfig{Name: "TR", Subjects: []string{"in.>"}, SubjectTransform: tr})
	if got := s.CachedInfo().Config.SubjectTransform; got == nil || *got != *tr {
		t.Fatalf("create response subject_transform = %+v, want %+v", got, tr)
	}
	for i, c := range []struct{ pub, stored string }{
		{"in.eu.42", "out.42." + partitionOf("eu", 3) + ".eu"},
		{"in.us.7", "out.7." + partitionOf("us", 3) + ".us"},
		{"in.x", "in.x"},         // the source does not match: stored as is
		{"in.a.b.c", "in.a.b.c"}, // nor here
	} {
		wantAck(t, jsPublish(t, js, c.pub, strconv.Itoa(i)), "TR", uint64(i+1), false)
		if got := storedSubject(t, s, uint64(i+1)); got != c.stored {
			t.Errorf("published to %s, stored as %s; want %s", c.pub, got, c.stored)
		}
	}
	info := streamInfo(t, s, jetstream.WithSubjectFilter(">"))
	if _, ok := info.State.Subjects["in.eu.42"]; ok || len(info.State.Subjects) != 4 {
		t.Errorf("stream subjects %v: want the four stored subjects", info.State.Subjects)
	}

	// A consumer filters on the stored subjects.
	c := cxCreate(t, js, "TR", jetstream.ConsumerConfig{Durable: "OUT", FilterSubject: "out.>", AckPolicy: jetstream.AckExplicitPolicy})
	msgs := cxFetch(t, c, 10, jsTimeout/10)
	if got := cxBodies(msgs); len(got) != 2 || got[0] != "0" || got[1] != "1" {
		t.Errorf("consumer on out.> got %v, want [0 1]", got)
	}
	if len(msgs) > 0 && msgs[0].Subject() != "out.42."+partitionOf("eu", 3)+".eu" {
		t.Errorf("delivered subject %s", msgs[0].Subject())
	}
}

// TestTransformHeaderChecks: Nats-Expected-Last-Subject-Sequence is
// checked against the last message on the mapped subject.
func TestTransformHeaderChecks(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	tr := &jetstream.SubjectTransformConfig{Source: "in.*", Destination: "out.$1"}
	createStream(t, js, jetstream.StreamConfig{Name: "TRH", Subjects: []string{"in.*"}, SubjectTransform: tr})
	jsPublish(t, js, "in.a", "1")
	jsPublish(t, js, "in.b", "2")
	_, err := js.Publish(tctx(t), "in.a", []byte("x"), jetstream.WithExpectLastSequencePerSubject(2))
	wantAPIError(t, err, 400, 10071, "wrong last sequence: 1")
	wantAck(t, jsPublish(t, js, "in.a", "3", jetstream.WithExpectLastSequencePerSubject(1)), "TRH", 3, false)
}

// TestTransformInterestRetention: an interest stream keeps a message
// that a consumer filtering on its mapped subject will deliver, and drops
// one no consumer wants.
func TestTransformInterestRetention(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	tr := &jetstream.SubjectTransformConfig{Source: "in.*", Destination: "out.$1"}
	s := createStream(t, js, jetstream.StreamConfig{Name: "TRI", Subjects: []string{"in.*"},
		Retention: jetstream.InterestPolicy, SubjectTransform: tr})
	cxCreate(t, js, "TRI", jetstream.ConsumerConfig{Durable: "A", FilterSubject: "out.a", AckPolicy: jetstream.AckExplicitPolicy})
	jsPublish(t, js, "in.a", "kept")
	jsPublish(t, js, "in.b", "dropped")
	wantState(t, streamInfo(t, s).State, 1, 1, 2)
	if got := storedSubject(t, s, 1); got != "out.a" {
		t.Errorf("stored subject %s, want out.a", got)
	}
}

// TestTransformConfigErrors: invalid transforms are refused with
// nats-server's err_codes and texts.
func TestTransformConfigErrors(t *testing.T) {
	nc, _ := jsConnect(t, startJS(t))
	for _, c := range []struct {
		body    string
		errCode int
		desc    string
	}{
		{`{"name":"E1","subjects":["e1"],"subject_transform":{"src":"a..b","dest":"b"}}`, 10155,
			"stream transform source: invalid subject a..b"},
		{`{"name":"E2","subjects":["e2"],"subject_transform":{"src":"a.*","dest":"b.$2"}}`, 10156,
			"stream transform: invalid mapping destination: wildcard index out of range in $2: [2]"},
		{`{"name":"E3","subjects":["e3"],"subject_transform":{"src":"a.*","dest":"b.*"}}`, 10156,
			"stream transform: invalid subject"},
		{`{"name":"E4","subjects":["e4"],"subject_transform":{"src":"a.*","dest":"{{foo(1)}}"}}`, 10156,
			"stream transform: invalid mapping destination: unknown function in {{foo(1)}}"},
		{`{"name":"E5","subjects":["e5"],"subject_transform":{"src":"a.*","dest":"{{split(1)}}"}}`, 10156,
			"stream transform: invalid mapping destination: not enough arguments passed to the function in {{split(1)}}"},
		{`{"name":"E6","subjects":["e6"],"subject_transform":{"src":"a","dest":"{{wildcard(1)}}"}}`, 10156,
			"stream transform: invalid mapping destination: wildcard index out of range in {{wildcard(1)}}"},
		{`{"name":"E7","subjects":["e7"],"subject_transform":{"src":"a.*","dest":"b c"}}`, 10156,
			"stream transform: invalid mapping destination: invalid transform"},
	} {
		name := jsonName(t, c.body)
		apiErr(t, nc, "$JS.API.STREAM.CREATE."+name, c.body, "stream_create_response", 400, c.errCode, c.desc)
	}
	// The same checks on update.
	apiOK(t, nc, "$JS.API.STREAM.CREATE.E8", `{"name":"E8","subjects":["e8"]}`, "stream_create_response")
	apiErr(t, nc, "$JS.API.STREAM.UPDATE.E8", `{"name":"E8","subjects":["e8"],"subject_transform":{"src":"e8","dest":"$1"}}`,
		"stream_update_response", 400, 10156, "stream transform: invalid mapping destination: wildcard index out of range in $1")
}

// jsonName returns the "name" of a JSON stream config.
func jsonName(t *testing.T, body string) string {
	t.Helper()
	var v struct{ Name string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v.Name
}

// TestTransformUpdate: an update that adds, changes or removes the
// transform applies from the next publish; stored messages keep their
// subjects.
func TestTransformUpdate(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	cfg := jetstream.StreamConfig{Name: "TRU", Subjects: []string{"in.*"}}
	s := createStream(t, js, cfg)
	for i, st := range []struct {
		tr          *jetstream.SubjectTransformConfig
		pub, stored string
	}{
		{nil, "in.a", "in.a"},
		{&jetstream.SubjectTransformConfig{Source: "in.*", Destination: "one.$1"}, "in.b", "one.b"},
		{&jetstream.SubjectTransformConfig{Source: "in.*", Destination: "two.{{splitfromleft(1,1)}}"}, "in.cd", "two.c.d"},
		{&jetstream.SubjectTransformConfig{Source: "in.*"}, "in.e", "in.e"},
		{nil, "in.f", "in.f"},
	} {
		cfg.SubjectTransform = st.tr
		us, err := js.UpdateStream(tctx(t), cfg)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if got := us.CachedInfo().Config.SubjectTransform; (got == nil) != (st.tr == nil) || got != nil && *got != *st.tr {
			t.Errorf("update %d: subject_transform %+v, want %+v", i, got, st.tr)
		}
		wantAck(t, jsPublish(t, js, st.pub, "x"), "TRU", uint64(i+1), false)
		if got := storedSubject(t, s, uint64(i+1)); got != st.stored {
			t.Errorf("update %d: %s stored as %s, want %s", i, st.pub, got, st.stored)
		}
	}
	if got := storedSubject(t, s, 2); got != "one.b" {
		t.Errorf("after the updates message 2 has subject %s, want one.b", got)
	}
}

// TestTransformRandom: {{random(n)}} picks a number below n for each
// message.
func TestTransformRandom(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	tr := &jetstream.SubjectTransformConfig{Source: "in.*", Destination: "r.{{random(3)}}.$1"}
	s := createStream(t, js, jetstream.StreamConfig{Name: "TRR", Subjects: []string{"in.*"}, SubjectTransform: tr})
	for i := 1; i <= 10; i++ {
		jsPublish(t, js, "in.x", "x")
		switch got := storedSubject(t, s, uint64(i)); got {
		case "r.0.x", "r.1.x", "r.2.x":
		default:
			t.Errorf("stored subject %s, want r.[0-2].x", got)
		}
	}
}

// TestTransformRestart: a file stream maps with its transform after a
// restart.
func TestTransformRestart(t *testing.T) {
	opts := jsIn(t.TempDir())
	u, stop := startServerStoppable(t, opts)
	nc, js := jsConnect(t, u)
	tr := &jetstream.SubjectTransformConfig{Source: "in.>", Destination: "out.>"}
	createStream(t, js, jetstream.StreamConfig{Name: "TRS", Subjects: []string{"in.>"}, SubjectTransform: tr})
	jsPublish(t, js, "in.a.b", "1")
	nc.Close()
	stop()

	u2, _ := startServerStoppable(t, opts)
	_, js2 := jsConnect(t, u2)
	s := cxStreamByName(t, js2, "TRS")
	m := nats.NewMsg("in.c")
	m.Data = []byte("2")
	wantAck(t, jsPublishMsg(t, js2, m), "TRS", 2, false)
	for seq, want := range map[uint64]string{1: "out.a.b", 2: "out.c"} {
		if got := storedSubject(t, s, seq); got != want {
			t.Errorf("message %d stored as %s, want %s", seq, got, want)
		}
	}
}
