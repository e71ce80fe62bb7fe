package stream

import (
	"encoding/json"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
)

// transformCases are stream create bodies with a subject_transform and the
// error object nats-server v2.15.2 answered each with, or "ok" (nats-server v2.15.2 validation, checkStreamCfg and checkConsumerCfg; checkStreamCfgLocked checks the transform after the
// subjects and before republish).
var transformCases = []struct {
	name, in, want string
}{
	{"ok", `{"name":"T1","subjects":["a.>"],"subject_transform":{"src":"a.*.*","dest":"b.$2.$1"}}`, `ok`},
	{"no subjects", `{"name":"U2","subject_transform":{"src":"a","dest":"b"}}`, `ok`},
	{"empty destination", `{"name":"U7","subjects":["x7"],"subject_transform":{"src":"a.*","dest":""}}`, `ok`},
	{"empty source", `{"name":"U8","subjects":["x8"],"subject_transform":{"src":"","dest":"y.>"}}`, `ok`},
	{"empty object", `{"name":"U10","subjects":["x10.>"],"subject_transform":{}}`, `ok`},
	{"source invalid", `{"name":"U3","subjects":["x"],"subject_transform":{"src":"a..b","dest":"b"}}`, `{"code":400,"err_code":10155,"description":"stream transform source: invalid subject a..b"}`},
	{"source with a space", `{"name":"U4","subjects":["x"],"subject_transform":{"src":"a b","dest":"b"}}`, `{"code":400,"err_code":10155,"description":"stream transform source: invalid subject a b"}`},
	{"index out of range", `{"name":"U5","subjects":["x"],"subject_transform":{"src":"a.*","dest":"b.$2"}}`, `{"code":400,"err_code":10156,"description":"stream transform: invalid mapping destination: wildcard index out of range in $2: [2]"}`},
	{"destination with a space", `{"name":"U6","subjects":["x"],"subject_transform":{"src":"a.*","dest":"b c"}}`, `{"code":400,"err_code":10156,"description":"stream transform: invalid mapping destination: invalid transform"}`},
	{"destination with a wildcard", `{"name":"U15","subjects":["x15"],"subject_transform":{"src":"a.*","dest":"b.*"}}`, `{"code":400,"err_code":10156,"description":"stream transform: invalid subject"}`},
	{"destination with an empty token", `{"name":"U16","subjects":["x16"],"subject_transform":{"src":"a.*","dest":"b..c"}}`, `{"code":400,"err_code":10156,"description":"stream transform: invalid mapping destination: invalid transform"}`},
	{"destination with a token after >", `{"name":"U17","subjects":["x17"],"subject_transform":{"src":"a.*","dest":"b.>.c"}}`, `{"code":400,"err_code":10156,"description":"stream transform: invalid mapping destination: invalid transform in c"}`},
	{"unknown function", `{"name":"V1","subjects":["v1"],"subject_transform":{"src":"a.*","dest":"{{foo(1)}}"}}`, `{"code":400,"err_code":10156,"description":"stream transform: invalid mapping destination: unknown function in {{foo(1)}}"}`},
	{"subjects are checked first", `{"name":"U11","subjects":["a..b"],"subject_transform":{"src":"a..b","dest":"b"}}`, `{"code":500,"err_code":10052,"description":"invalid subject"}`},
	{"limits are checked first", `{"name":"U19","subjects":["x19"],"max_age":5,"subject_transform":{"src":"a..*","dest":"b"}}`, `{"code":500,"err_code":10052,"description":"max age needs to be \u003e= 100ms"}`},
	{"checked before republish", `{"name":"V2","subjects":["v2"],"subject_transform":{"src":"a.*","dest":"$2"},"republish":{"dest":"v2"}}`, `{"code":400,"err_code":10156,"description":"stream transform: invalid mapping destination: wildcard index out of range in $2: [2]"}`},
}

func TestValidateSubjectTransform(t *testing.T) {
	for _, tc := range transformCases {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
				t.Fatal(err)
			}
			if got := errJSON(createCheck(&c)); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestSubjectTransformRoundTrip: the config keeps subject_transform as
// sent, an empty src included, as nats-server returns it (nats.go checks
// that the key is in the create response).
func TestSubjectTransformRoundTrip(t *testing.T) {
	c := mustConfig(t, `{"name":"S","subjects":["s.>"],"subject_transform":{"src":"","dest":"t.>"}}`)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		SubjectTransform json.RawMessage `json:"subject_transform"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, want := string(back.SubjectTransform), `{"src":"","dest":"t.\u003e"}`; got != want {
		t.Errorf("subject_transform encodes as %s; want %s", got, want)
	}
}

// storedSubject returns the subject stored at seq.
func storedSubject(t *testing.T, s *Stream, seq uint64) string {
	t.Helper()
	sm, err := s.Store().Load(seq)
	if err != nil {
		t.Fatalf("Load(%d): %v", seq, err)
	}
	return sm.Subject
}

// TestApplySubjectTransform: the stream stores a message under its
// mapped subject, and a subject the transform's source does not match
// unchanged (nats-server v2.15.2 processJetStreamMsg step 2; nats-server
// processJetStreamMsgWithBatch).
func TestApplySubjectTransform(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["orders.>"],"subject_transform":{"src":"orders.*.*","dest":"o.$2.{{partition(4,1)}}.$1"}}`)
	for _, c := range []struct{ pub, stored string }{
		{"orders.eu.42", "o.42.3.eu"},
		{"orders.us.7", "o.7.1.us"},
		{"orders.eu", "orders.eu"},
		{"orders.eu.42.x", "orders.eu.42.x"},
	} {
		r := apply(s, c.pub, "", "x", t0)
		if r.Err != nil {
			t.Fatalf("publish %s: %v", c.pub, r.Err)
		}
		if got := storedSubject(t, s, r.Seq); got != c.stored || r.Subject != c.stored {
			t.Errorf("publish %s: stored as %s, Result.Subject %s; want %s", c.pub, got, r.Subject, c.stored)
		}
	}
}

// TestApplyTransformBeforeChecks: the header checks see the mapped
// subject. Nats-Expected-Last-Subject-Sequence is checked against the
// last message on the mapped subject, and a "sub" rollup purges the
// mapped subject.
func TestApplyTransformBeforeChecks(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["in.*"],"allow_rollup_hdrs":true,"subject_transform":{"src":"in.*","dest":"out.$1"}}`)
	wantSeq(t, apply(s, "in.a", "", "1", t0), 1, false)
	wantSeq(t, apply(s, "in.b", "", "2", t0), 2, false)
	wantErr(t, apply(s, "in.a", "Nats-Expected-Last-Subject-Sequence:2", "x", t0), jserr.StreamWrongLastSequence)
	wantSeq(t, apply(s, "in.a", "Nats-Expected-Last-Subject-Sequence:1", "3", t0), 3, false)
	r := apply(s, "in.a", "Nats-Rollup:sub", "4", t0)
	wantSeq(t, r, 4, false)
	if r.Purged != 2 {
		t.Errorf("rollup on out.a purged %d messages; want 2", r.Purged)
	}
}

// TestSetConfigSubjectTransform: an update that adds, changes or removes
// subject_transform applies from the next publish.
func TestSetConfigSubjectTransform(t *testing.T) {
	s := newTestStream(t, `{"name":"S","subjects":["in.*"]}`)
	steps := []struct {
		transform   *SubjectTransform
		pub, stored string
	}{
		{nil, "in.a", "in.a"},
		{&SubjectTransform{Source: "in.*", Destination: "one.$1"}, "in.b", "one.b"},
		{&SubjectTransform{Source: "in.*", Destination: "two.$1"}, "in.c", "two.c"},
		{&SubjectTransform{Source: "in.*"}, "in.d", "in.d"},
		{nil, "in.e", "in.e"},
	}
	for i, st := range steps {
		n := s.Config()
		n.SubjectTransform = st.transform
		if err := n.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := CheckUpdate(new(s.Config()), &n); err != nil {
			t.Fatal(err)
		}
		if err := s.SetConfig(n); err != nil {
			t.Fatal(err)
		}
		r := apply(s, st.pub, "", "x", t0)
		wantSeq(t, r, uint64(i+1), false)
		if got := storedSubject(t, s, r.Seq); got != st.stored {
			t.Errorf("step %d: %s stored as %s; want %s", i, st.pub, got, st.stored)
		}
	}
}
