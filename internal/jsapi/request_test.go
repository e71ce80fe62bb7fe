package jsapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// TestCheckLevel: Nats-Required-Api-Level is read as nats-server v2.15.2's
// sliceHeader and strconv.Atoi read it; above APILevel or not a number is
// 10185.
func TestCheckLevel(t *testing.T) {
	cases := []struct {
		hdr  []byte
		fail bool
	}{
		{nil, false},
		{header("Nats-Required-Api-Level: 0"), false},
		{header("Nats-Required-Api-Level:0"), false},
		{header("Nats-Required-Api-Level:    0"), false},
		{header("Nats-Required-Api-Level: -1"), false},
		{header("Nats-Required-Api-Level: +0"), false},
		{header("Nats-Required-Api-Level: "), false},
		{header("A: 1", "Nats-Required-Api-Level: 0"), false},
		{header("nats-required-api-level: 5"), false}, // the name is case-sensitive
		{header("X-Nats-Required-Api-Level: 5"), false},
		{header("Nats-Required-Api-Level-X: 5"), false},
		{header("Nats-Required-Api-Level: 4"), false},
		{header("Nats-Required-Api-Level: 5"), true},
		{header("A: 1", "Nats-Required-Api-Level: 5"), true},
		{header("Nats-Required-Api-Level: x"), true},
		{header("Nats-Required-Api-Level: 0 "), true},
		{header("Nats-Required-Api-Level: 0.5"), true},
		{header("A: Nats-Required-Api-Level: 3", "Nats-Required-Api-Level: 5"), true},
	}
	for _, c := range cases {
		r := &request{hdr: c.hdr}
		err := r.checkLevel()
		if (err != nil) != c.fail {
			t.Errorf("%q: checkLevel = %v", c.hdr, err)
		}
		if err != nil && err.ErrCode != uint16(jserr.RequiredApiLevel) {
			t.Errorf("%q: %v", c.hdr, err)
		}
	}
}

// TestBodyShapes: which bodies count as empty (STREAM.DELETE, MSG.GET) and
// which are decoded by endpoints with optional input (nats-server v2.15.2
// isEmptyRequest and isJSONObjectOrArray).
func TestBodyShapes(t *testing.T) {
	for body, want := range map[string][2]bool{
		"":        {true, false},
		"{}":      {true, true},
		"{ }":     {true, true},
		" {}\n":   {true, true},
		"  ":      {false, false},
		"x":       {false, false},
		"[]":      {false, true},
		"\t[1]":   {false, true},
		`{"a":1}`: {false, true},
		"null":    {false, false},
		"{":       {false, true},
	} {
		if got := [2]bool{isEmptyRequest([]byte(body)), isJSONObjectOrArray([]byte(body))}; got != want {
			t.Errorf("%q: empty, object = %v, want %v", body, got, want)
		}
	}
}

// TestDecode: every JSON value of the body is decoded in turn, and errors
// read as nats-server v2.15.2's (" at offset N" for syntax errors).
func TestDecode(t *testing.T) {
	var v JSApiStreamNamesRequest
	if err := decode([]byte(`{"offset":1}{"subject":"a"} `), &v); err != nil || v.Offset != 1 || v.Subject != "a" {
		t.Fatalf("decode = %v, %+v", err, v)
	}
	for body, want := range map[string]string{
		`{`:                "invalid JSON: unexpected EOF",
		`{"offset":1}}`:    "invalid JSON: invalid character '}' looking for beginning of value at offset 13",
		`{"offset":"a"}`:   "invalid JSON: json: cannot unmarshal string into Go struct field JSApiStreamNamesRequest.ApiPagedRequest.offset of type int",
		`{"subject":true}`: "invalid JSON: json: cannot unmarshal bool into Go struct field JSApiStreamNamesRequest.subject of type string",
	} {
		err := decode([]byte(body), &JSApiStreamNamesRequest{})
		if err == nil || err.ErrCode != uint16(jserr.InvalidJSON) || err.Description != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestRoute: keys, argument counts and the tokens kept.
func TestRoute(t *testing.T) {
	cases := []struct {
		subject, key, stream, consumer, filter string
	}{
		{"$JS.API.INFO", "INFO", "", "", ""},
		{"$JS.API.STREAM.MSG.GET.S", "STREAM.MSG.GET", "S", "", ""},
		{"$JS.API.STREAM.INFO.MSG", "STREAM.INFO", "MSG", "", ""},
		{"$JS.API.CONSUMER.CREATE.S", "CONSUMER.CREATE", "S", "", ""},
		{"$JS.API.CONSUMER.CREATE.S.C.a.*.>", "CONSUMER.CREATE", "S", "C", "a.*.>"},
		{"$JS.API.CONSUMER.DURABLE.CREATE.S.C", "CONSUMER.DURABLE.CREATE", "S", "C", ""},
		{"$JS.API.CONSUMER.LEADER.STEPDOWN.S.C", "CONSUMER.LEADER.STEPDOWN", "S", "C", ""},
		{"$JS.API.STREAM.INFO.S.X", "", "", "", ""},
		{"$JS.API.CONSUMER.DURABLE.CREATE.S.C.X", "", "", "", ""},
		{"$JS.API.CONSUMER.NAMES", "", "", "", ""},
		{"$JS.APIX.INFO", "", "", "", ""},
	}
	for _, c := range cases {
		r := &request{subject: c.subject}
		_, ok := route(r)
		if ok != (c.key != "") || r.key != c.key || r.stream != c.stream || r.consumer != c.consumer || r.filter != c.filter {
			t.Errorf("%s: ok %v, %+v", c.subject, ok, r)
		}
	}
}

// TestEveryEndpointAnswersLevel: every endpoint checks
// Nats-Required-Api-Level and answers 10185 in its own response type.
func TestEveryEndpointAnswersLevel(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	for key, ep := range endpoints {
		subj := "$JS.API." + key + strings.Repeat(".X", ep.minArgs)
		body := ""
		if strings.HasPrefix(key, "CONSUMER.") && strings.HasSuffix(key, "CREATE") {
			body = "{}" // consumer create decodes the body first
		}
		got := c.request(subj, body, header(fmt.Sprintf("Nats-Required-Api-Level: %d", APILevel+1)))
		want := fmt.Sprintf(`{"type":"io.nats.jetstream.api.v1.%s","error":{"code":412,"err_code":10185,"description":"JetStream minimum api level required"}`, ep.typ)
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s", subj, got)
		}
	}
}

// TestPageSubjects: STREAM.INFO pages subjects 100000 at a time in name
// order; the requested offset is reported even past the end.
func TestPageSubjects(t *testing.T) {
	all := map[string]uint64{}
	for i := range subjectsInfoLimit + 5 {
		all[fmt.Sprintf("s.%06d", i)] = uint64(i)
	}
	st := &jetstream.StreamState{Subjects: all}
	var p apiPaged
	pageSubjects(&p, st, 0)
	if p != (apiPaged{Total: subjectsInfoLimit + 5, Limit: subjectsInfoLimit}) || len(st.Subjects) != subjectsInfoLimit {
		t.Fatalf("first page: %+v, %d subjects", p, len(st.Subjects))
	}
	if _, ok := st.Subjects["s.099999"]; !ok {
		t.Fatal("first page is not the first 100000 names")
	}
	st = &jetstream.StreamState{Subjects: all}
	pageSubjects(&p, st, subjectsInfoLimit)
	if p.Offset != subjectsInfoLimit || len(st.Subjects) != 5 || st.Subjects["s.100004"] != 100004 {
		t.Fatalf("second page: %+v, %v", p, st.Subjects)
	}
	st = &jetstream.StreamState{Subjects: map[string]uint64{"a": 1}}
	pageSubjects(&p, st, 7)
	if p != (apiPaged{Total: 1, Offset: 7, Limit: subjectsInfoLimit}) || st.Subjects != nil {
		t.Fatalf("past the end: %+v, %v", p, st.Subjects)
	}
}
