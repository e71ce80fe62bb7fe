package jserr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

type source struct {
	Constant    string `json:"constant"`
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"error_code"`
	Description string `json:"description"`
}

func readSource(t *testing.T) []source {
	t.Helper()
	b, err := os.ReadFile("errors.json")
	if err != nil {
		t.Fatal(err)
	}
	var s []source
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCatalogUniqueAndReachable checks that errors.json has each err_code
// and constant once, and that every entry is reachable through New with
// its code and description.
func TestCatalogUniqueAndReachable(t *testing.T) {
	src := readSource(t)
	codes := make(map[uint16]string)
	consts := make(map[string]bool)
	for _, s := range src {
		if prev, dup := codes[s.ErrCode]; dup {
			t.Errorf("err_code %d used by %s and %s", s.ErrCode, prev, s.Constant)
		}
		if consts[s.Constant] {
			t.Errorf("constant %s used twice", s.Constant)
		}
		codes[s.ErrCode] = s.Constant
		consts[s.Constant] = true

		e := New(ErrCode(s.ErrCode))
		if e.Code != s.Code || e.ErrCode != s.ErrCode || e.Description != s.Description {
			t.Errorf("%s: New gives %+v", s.Constant, *e)
		}
	}
	if len(catalog) != len(src) {
		t.Errorf("catalog has %d entries, errors.json %d", len(catalog), len(src))
	}
}

var marker = regexp.MustCompile(`\{([a-z_]+)\}`)

// TestMarkersSubstitutable checks that every brace in a description is part
// of a {name} marker and that Sub fills every marker.
func TestMarkersSubstitutable(t *testing.T) {
	for c, e := range catalog {
		if rest := marker.ReplaceAllString(e.desc, ""); strings.ContainsAny(rest, "{}") {
			t.Errorf("%d: stray brace in %q", c, e.desc)
		}
		var args []Arg
		want := e.desc
		for _, m := range marker.FindAllStringSubmatch(e.desc, -1) {
			args = append(args, Sub(m[1], "<"+m[1]+">"))
			want = strings.ReplaceAll(want, m[0], "<"+m[1]+">")
		}
		if got := New(c, args...).Description; got != want || strings.ContainsAny(got, "{}") {
			t.Errorf("%d: description %q, want %q", c, got, want)
		}
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{New(StreamNotFound), `{"code":404,"err_code":10059,"description":"stream not found"}`},
		{New(ConsumerNotFound), `{"code":404,"err_code":10014,"description":"consumer not found"}`},
		{New(StreamWrongLastSequence, Sub("seq", uint64(41))), `{"code":400,"err_code":10071,"description":"wrong last sequence: 41"}`},
		{New(InvalidJSON, Sub("err", os.ErrNotExist)), `{"code":400,"err_code":10025,"description":"invalid JSON: file does not exist"}`},
		{New(StreamStoreFailed, Sub("err", "maximum messages exceeded")), `{"code":503,"err_code":10077,"description":"maximum messages exceeded"}`},
		{New(StreamReplicasNotSupported), `{"code":500,"err_code":10074,"description":"replicas \u003e 1 not supported in non-clustered mode"}`},
		{New(StreamTooManyRequests), `{"code":429,"err_code":10167,"description":"too many requests"}`},
		{New(StreamWrongLastSequence), `{"code":400,"err_code":10071,"description":"wrong last sequence: {seq}"}`},
		{New(StreamExternalApiOverlap, Sub("prefix", "{subject}"), Sub("subject", "orders.>")),
			`{"code":400,"err_code":10021,"description":"stream external api prefix {subject} must not overlap with orders.\u003e"}`},
		{&Error{Code: 503, Description: "x"}, `{"code":503,"description":"x"}`},
		{&Error{}, `{"code":0}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.err)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

func TestIsAndFrom(t *testing.T) {
	seq := New(StreamWrongLastSequence, Sub("seq", 7))
	if got := seq.Error(); got != "wrong last sequence: 7 (10071)" {
		t.Errorf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("publish: %w", seq)
	if !errors.Is(wrapped, New(StreamWrongLastSequence)) {
		t.Error("wrapped error does not match its err_code")
	}
	if errors.Is(wrapped, New(StreamWrongLastSequenceConstant)) {
		t.Error("matched another err_code")
	}
	if errors.Is(&Error{Code: 400, Description: "a"}, &Error{Code: 400, Description: "b"}) {
		t.Error("errors without err_code matched on code alone")
	}
	if From(wrapped, StreamCreate) != seq {
		t.Error("From did not pass the API error through")
	}
	if got := From(os.ErrPermission, StreamCreate); *got != (Error{500, 10049, "permission denied"}) {
		t.Errorf("From = %+v", *got)
	}
}

func TestNewUnknownPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(1) did not panic")
		}
	}()
	New(1)
}

// TestGeneratedUpToDate runs gen.go and compares its output with the
// committed catalog_gen.go.
func TestGeneratedUpToDate(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found:", err)
	}
	cmd := exec.Command(gotool, "run", "gen.go", "-o", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run gen.go: %v\n%s", err, stderr.Bytes())
	}
	have, err := os.ReadFile("catalog_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Error("catalog_gen.go is out of date with errors.json: run go generate ./internal/jserr")
	}
}
