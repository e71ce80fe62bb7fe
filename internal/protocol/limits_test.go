package protocol

import (
	"errors"
	"strings"
	"testing"
)

// SetLimits (a configuration reload) applies from the next operation: a
// payload or control line already partly read completes under the limits
// it began with, and the following ones meet the new limits.
func TestSetLimitsAppliesAtTheNextOperation(t *testing.T) {
	var r recorder
	p := NewParser(Config{MaxPayload: 10, MaxControlLine: 64}, &r)
	if err := p.Parse([]byte("PUB a 5\r\nhel")); err != nil {
		t.Fatal(err)
	}
	p.SetLimits(Config{MaxPayload: 2, MaxControlLine: 8})
	// The SUB begins after the call: its 13-byte argument exceeds 8.
	if err := p.Parse([]byte("lo\r\nSUB a.b.c.d.e 1")); !errors.Is(err, ErrControlLine) {
		t.Fatalf("long line after SetLimits: %v, want ErrControlLine", err)
	}
	if len(r.Ops) != 1 || r.Ops[0] != `PUB "a" "" -1 "hello"` {
		t.Fatalf("ops %q", r.Ops)
	}

	// A control line split across reads keeps its limits too.
	var r1 recorder
	p = NewParser(Config{MaxControlLine: 64}, &r1)
	if err := p.Parse([]byte("SUB abcdefgh")); err != nil {
		t.Fatal(err)
	}
	p.SetLimits(Config{MaxControlLine: 4})
	if err := p.Parse([]byte("ij 1\r\n")); err != nil || len(r1.Ops) != 1 {
		t.Fatalf("a line begun before SetLimits: %v, ops %q", err, r1.Ops)
	}

	var r2 recorder
	p = NewParser(Config{MaxPayload: 10}, &r2)
	p.SetLimits(Config{MaxPayload: 2})
	if err := p.Parse([]byte("PUB a 2\r\nok\r\nPUB a 3\r\nbad\r\n")); !errors.Is(err, ErrMaxPayload) {
		t.Fatalf("payload over the new limit: %v, want ErrMaxPayload", err)
	}
	// Raising a limit works the same way.
	p = NewParser(Config{MaxPayload: 2}, &r2)
	p.SetLimits(Config{MaxPayload: 100})
	if err := p.Parse([]byte("PUB a 50\r\n" + strings.Repeat("x", 50) + "\r\n")); err != nil {
		t.Fatalf("payload under the raised limit: %v", err)
	}
}
