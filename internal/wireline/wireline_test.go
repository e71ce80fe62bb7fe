package wireline

import (
	"errors"
	"strings"
	"testing"
)

type op uint8

const (
	opBad     op = Bad
	opPartial op = Partial
	opSep     op = iota // "sep", Spaced
	opJoin              // "join", Joined
	opBare              // "bare", Bare
)

var (
	errUnknown = errors.New("unknown")
	errLong    = errors.New("long")
	testOps    = []Op{opSep: {Name: "sep"}, opJoin: {Name: "join", Rule: Joined}, opBare: {Name: "bare", Rule: Bare}}
	testGram   = Grammar{Ops: testOps, Match: func(l []byte) int { return int(testMatch(l)) }, ErrUnknownOp: errUnknown, ErrControlLine: errLong}
)

// testMatch is a protocol's first-byte switch followed by Check.
func testMatch(line []byte) op {
	if len(line) == 0 {
		return opPartial
	}
	switch Lower(line[0]) {
	case 's':
		return Check(line, opSep, "sep")
	case 'j':
		return Check(line, opJoin, "join")
	case 'b':
		return Check(line, opBare, "bare")
	}
	return opBad
}

// TestCheck pins the case-insensitive name match: whole name, prefix, mismatch.
func TestCheck(t *testing.T) {
	for in, want := range map[string]op{
		"": opPartial, "s": opPartial, "SE": opPartial, "sEp": opSep, "SEP x": opSep, "sepx": opSep,
		"sx": opBad, "x": opBad, "JOIN{}": opJoin, "bArE": opBare,
	} {
		if got := testMatch([]byte(in)); got != want {
			t.Errorf("match %q = %d, want %d", in, got, want)
		}
	}
}

// TestArg pins the argument of a complete line: separators, \r, the limit and Bare lines.
func TestArg(t *testing.T) {
	cases := []struct {
		in, arg string
		err     error
	}{
		{"sep  a b\r", "a b", nil},
		{"sep\tabcd", "abcd", nil},
		{"sep abcde", "", errLong},
		{"sep abcd \r", "", errLong},
		{"sepa", "", errUnknown},
		{"sep", "", errUnknown},
		{"join{}", "{}", nil},
		{"join", "", nil},
		{"bare " + strings.Repeat("x", 100), "", nil},
		{"se", "", errUnknown},
		{"x", "", errUnknown},
	}
	for _, c := range cases {
		arg, err := testGram.Arg([]byte(c.in), int(testMatch([]byte(c.in))), 4)
		if string(arg) != c.arg || err != c.err {
			t.Errorf("Arg(%q) = %q, %v; want %q, %v", c.in, arg, err, c.arg, c.err)
		}
	}
}

// TestAccumulate checks that a line split across reads is checked as it grows and compacted,
// and that its buffer stays within maxArg+Slack.
func TestAccumulate(t *testing.T) {
	var partial []byte
	for _, piece := range []string{"S", "EP \t ", " ab", "cd\r"} {
		if err := testGram.Accumulate(&partial, []byte(piece), 4); err != nil {
			t.Fatalf("Accumulate(%q) = %v", piece, err)
		}
	}
	if string(partial) != "SEP abcd\r" {
		t.Fatalf("partial %q", partial)
	}
	for in, want := range map[string]error{"x": errUnknown, "sepx": errUnknown, "sep abcde": errLong, "join  abcd": nil} {
		partial = nil
		if err := testGram.Accumulate(&partial, []byte(in), 4); err != want {
			t.Errorf("Accumulate(%q) error %v, want %v", in, err, want)
		}
	}
	partial = nil
	for range 1000 {
		if err := testGram.Accumulate(&partial, []byte("bare "+strings.Repeat("y", 50)), 4); err != nil {
			t.Fatal(err)
		}
	}
	if string(partial) != "bare" || cap(partial) > 4+Slack {
		t.Fatalf("a long Bare line kept %q, cap %d", partial, cap(partial))
	}
}

// TestParseSize pins nats-server's parseSize: 1 to 9 decimal digits, else -1.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "123": 123, "999999999": 999999999, "": -1,
		"1234567890": -1, "12a": -1, "-1": -1, " 1": -1} {
		if got := ParseSize([]byte(in)); got != want {
			t.Errorf("ParseSize(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestTrimAndDropCR pins the argument trimming helpers.
func TestTrimAndDropCR(t *testing.T) {
	if got := string(Trim([]byte(" \t\r{} \r\t"))); got != "{}" {
		t.Errorf("Trim = %q", got)
	}
	if got := string(DropCR([]byte("a\r\r"))); got != "a\r" {
		t.Errorf("DropCR = %q", got)
	}
}
