package stream

import (
	"strings"
	"testing"
)

// TestHeaderValue covers the lookup rules of nats-server's sliceHeader
// (the NATS header block (ADR-4)): exact case, the name at a line start after
// the first line and followed at once by ':', leading spaces skipped,
// trailing spaces kept, first field wins.
func TestHeaderValue(t *testing.T) {
	tests := []struct {
		hdr, key, want string
		ok             bool
	}{
		{"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n", "Nats-Msg-Id", "a", true},
		{"NATS/1.0\r\nnats-msg-id: a\r\n\r\n", "Nats-Msg-Id", "", false},
		{"NATS/1.0\r\nNats-Msg-Id:a\r\n\r\n", "Nats-Msg-Id", "a", true},
		{"NATS/1.0\r\nNats-Msg-Id:    a b  \r\n\r\n", "Nats-Msg-Id", "a b  ", true},
		{"NATS/1.0\r\nNats-Msg-Id:\ta\r\n\r\n", "Nats-Msg-Id", "\ta", true},
		{"NATS/1.0\r\nNats-Msg-Id :a\r\n\r\n", "Nats-Msg-Id", "", false},
		{"NATS/1.0\r\nNats-Msg-Id: \r\n\r\n", "Nats-Msg-Id", "", true},
		{"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-Msg-Id: b\r\n\r\n", "Nats-Msg-Id", "a", true},
		{"NATS/1.0\r\nX-Nats-Msg-Id: a\r\n\r\n", "Nats-Msg-Id", "", false},
		{"NATS/1.0\r\nX: Nats-Msg-Id: a\r\n\r\n", "Nats-Msg-Id", "", false},
		{"Nats-Msg-Id: a\r\n\r\n", "Nats-Msg-Id", "", false},
		{"NATS/1.0 503\r\nNats-Msg-Id: a\r\n\r\n", "Nats-Msg-Id", "a", true},
		{"NATS/1.0\r\nNats-Expected-Last-Subject-Sequence-Subject: s\r\n\r\n", "Nats-Expected-Last-Subject-Sequence", "", false},
		{"NATS/1.0\r\nNats-Expected-Last-Subject-Sequence-Subject: s\r\nNats-Expected-Last-Subject-Sequence: 4\r\n\r\n", "Nats-Expected-Last-Subject-Sequence", "4", true},
		{"NATS/1.0\r\nNats-Msg-Id: a", "Nats-Msg-Id", "a", true},
		{"", "Nats-Msg-Id", "", false},
		{"NATS/1.0\r\n\r\n", "Nats-Msg-Id", "", false},
	}
	for _, tc := range tests {
		v, ok := headerValue([]byte(tc.hdr), tc.key)
		if string(v) != tc.want || ok != tc.ok {
			t.Errorf("headerValue(%q, %q) = %q %v, want %q %v", tc.hdr, tc.key, v, ok, tc.want, tc.ok)
		}
	}
}

// TestStripStatusAndRemoveHeader covers nats-server's
// removeHeaderStatusIfPresent and removeHeaderIfPresent.
func TestStripStatusAndRemoveHeader(t *testing.T) {
	strip := []struct{ in, want string }{
		{"NATS/1.0\r\nA: 1\r\n\r\n", "NATS/1.0\r\nA: 1\r\n\r\n"},
		{"NATS/1.0 503\r\nA: 1\r\n\r\n", "NATS/1.0\r\nA: 1\r\n\r\n"},
		{"NATS/1.0 408 Request Timeout\r\n\r\n", ""},
		{"NATS/1.0\r\n\r\n", "NATS/1.0\r\n\r\n"},
		{"", ""},
		{"HTTP/1.1 200\r\n\r\n", "HTTP/1.1 200\r\n\r\n"},
	}
	for _, tc := range strip {
		if got := stripStatus([]byte(tc.in)); string(got) != tc.want {
			t.Errorf("stripStatus(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	remove := []struct{ in, want string }{
		{"NATS/1.0\r\nA: 1\r\nR: x\r\nB: 2\r\n\r\n", "NATS/1.0\r\nA: 1\r\nB: 2\r\n\r\n"},
		{"NATS/1.0\r\nR: x\r\nR: y\r\n\r\n", ""},
		{"NATS/1.0\r\nRR: x\r\n\r\n", "NATS/1.0\r\nRR: x\r\n\r\n"},
		{"NATS/1.0\r\nA: R: x\r\n\r\n", "NATS/1.0\r\nA: R: x\r\n\r\n"},
		{"", ""},
	}
	for _, tc := range remove {
		if got := removeHeader([]byte(tc.in), "R"); string(got) != tc.want {
			t.Errorf("removeHeader(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestParseSeq: digits only, anything else is -1 (the largest uint64).
func TestParseSeq(t *testing.T) {
	const bad = ^uint64(0)
	for in, want := range map[string]uint64{"0": 0, "42": 42, "007": 7, "": bad, "-1": bad, "+1": bad, "1 ": bad, " 1": bad, "1e3": bad, "x": bad} {
		if got := parseSeq([]byte(in)); got != want {
			t.Errorf("parseSeq(%q) = %d, want %d", in, got, want)
		}
	}
}

// setHeader builds the block nats-server's removeHeaderIfPresent and
// genHeader build: the field moves to the end, every copy of it goes.
func TestSetHeader(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "NATS/1.0\r\nNats-TTL: 5\r\n\r\n"},
		{"NATS/1.0\r\nNats-TTL: 1s\r\n\r\n", "NATS/1.0\r\nNats-TTL: 5\r\n\r\n"},
		{"NATS/1.0\r\nNats-TTL: 1s\r\nA: b\r\n\r\n", "NATS/1.0\r\nA: b\r\nNats-TTL: 5\r\n\r\n"},
		{"NATS/1.0\r\nA: b\r\nNats-TTL: 1\r\nNats-TTL: 2\r\nC: d\r\n\r\n", "NATS/1.0\r\nA: b\r\nC: d\r\nNats-TTL: 5\r\n\r\n"},
	}
	for _, tc := range tests {
		in := []byte(tc.in)
		if got := string(setHeader(in, "Nats-TTL", "5")); got != tc.want {
			t.Errorf("setHeader(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if string(in) != tc.in {
			t.Errorf("setHeader modified its input %q", tc.in)
		}
	}
}

// FuzzHeaderValue checks that lookups and removal never panic and agree
// with each other: after removeHeader the field is gone and the others
// keep their values.
func FuzzHeaderValue(f *testing.F) {
	f.Add([]byte("NATS/1.0\r\nNats-Msg-Id: a\r\nX: 1\r\n\r\n"), "Nats-Msg-Id")
	f.Add([]byte("NATS/1.0 503\r\n\r\n"), "X")
	f.Add([]byte("\r\n\r\n:\r\n"), ":")
	f.Fuzz(func(t *testing.T, hdr []byte, key string) {
		if key == "" || strings.ContainsAny(key, ":\r\n") {
			return
		}
		other, otherOK := headerValue(hdr, "X")
		out := removeHeader(hdr, key)
		if _, ok := headerValue(out, key); ok {
			t.Fatalf("%q still has %q after removal: %q", hdr, key, out)
		}
		if key != "X" && len(out) > 0 {
			v, ok := headerValue(out, "X")
			if ok != otherOK || string(v) != string(other) {
				t.Fatalf("removing %q from %q changed X: %q -> %q", key, hdr, other, v)
			}
		}
		_ = stripStatus(hdr)
	})
}
