package logger

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"
)

func TestLineFormat(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, false, false)
	l.now = func() time.Time { return time.Date(2026, 11, 29, 10, 8, 39, 123456000, time.UTC) }
	l.Noticef("Listening for client connections on %s", "0.0.0.0:4222")
	l.Debugf("hidden")
	l.Tracef("hidden")
	l.Errorf("boom")
	want := regexp.MustCompile(`^\[\d+\] 2026/11/29 10:08:39\.123456 \[INF\] Listening for client connections on 0\.0\.0\.0:4222\n` +
		`\[\d+\] 2026/11/29 10:08:39\.123456 \[ERR\] boom\n$`)
	if !want.Match(out.Bytes()) {
		t.Fatalf("unexpected log output:\n%s", out.String())
	}
}

func TestDebugTrace(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, true, true)
	l.Debugf("d")
	l.Tracef("t")
	if !bytes.Contains(out.Bytes(), []byte("[DBG] d\n")) || !bytes.Contains(out.Bytes(), []byte("[TRC] t\n")) {
		t.Fatalf("debug/trace lines missing:\n%s", out.String())
	}
}

// logtime: false drops the timestamp ("[pid] [INF] msg", as nats-server
// prints it); logtime_utc prints it in UTC. Levels change while in use.
func TestSetTimeAndLevels(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, false, false)
	l.now = func() time.Time { return time.Date(2026, 11, 29, 10, 8, 39, 0, time.FixedZone("X", 3600)) }
	l.SetTime(false, false)
	l.Noticef("a")
	l.SetTime(true, true)
	l.Noticef("b")
	l.Debugf("hidden")
	l.SetDebug(true)
	l.SetTrace(true)
	l.Debugf("c")
	l.Tracef("d")
	if !l.TraceEnabled() {
		t.Error("TraceEnabled after SetTrace(true)")
	}
	want := regexp.MustCompile(`^\[\d+\] \[INF\] a\n\[\d+\] 2026/11/29 09:08:39\.000000 \[INF\] b\n` +
		`\[\d+\] 2026/11/29 09:08:39\.000000 \[DBG\] c\n\[\d+\] 2026/11/29 09:08:39\.000000 \[TRC\] d\n$`)
	if !want.Match(out.Bytes()) {
		t.Fatalf("unexpected log output:\n%s", out.String())
	}
}

// log_format: json writes one JSON object per line that a collector can
// parse, with the message escaped, and follows logtime and logtime_utc.
func TestJSONLines(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, true, false)
	l.now = func() time.Time { return time.Date(2026, 11, 29, 10, 8, 39, 123456000, time.FixedZone("X", 3600)) }
	l.SetJSON(true)
	l.SetTime(true, true)
	l.Warnf("disk %q is \"full\"\n<%d>", "/sd", 7)
	l.SetTime(false, false)
	l.Debugf("d")
	lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatalf("line 1 is not JSON: %v\n%s", err, lines[0])
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatalf("line 2 is not JSON: %v\n%s", err, lines[1])
	}
	if first["time"] != "2026-11-29T09:08:39.123456Z" || first["level"] != "WRN" ||
		first["msg"] != "disk \"/sd\" is \"full\"\n<7>" || first["pid"] != float64(os.Getpid()) {
		t.Errorf("line 1: %v", first)
	}
	if _, ok := second["time"]; ok || second["level"] != "DBG" || second["msg"] != "d" {
		t.Errorf("line 2 (logtime: false): %v", second)
	}
	l.SetJSON(false)
	out.Reset()
	l.Noticef("plain")
	if !regexp.MustCompile(`^\[\d+\] \[INF\] plain\n$`).Match(out.Bytes()) {
		t.Errorf("back to text: %q", out.String())
	}
}
