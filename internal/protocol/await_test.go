package protocol

import (
	"errors"
	"testing"
)

var errNotConnect = errors.New("not a CONNECT")

// SetAwaitConnect: while set, an operation that does not begin with C or
// c is refused at its first byte, before its line is complete; a CONNECT
// passes; a check that accepts is forgotten.
func TestAwaitConnect(t *testing.T) {
	r := &recorder{}
	p := NewParser(Config{}, r)
	calls := 0
	p.SetAwaitConnect(func() error { calls++; return errNotConnect })
	if err := p.Parse([]byte("connect {}\r\nCONNECT {}\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.Parse([]byte("P")); !errors.Is(err, errNotConnect) || calls != 1 {
		t.Fatalf("first byte of PING: %v, %d calls", err, calls)
	}
	if len(r.Ops) != 2 {
		t.Fatalf("ops %q", r.Ops)
	}

	r = &recorder{}
	p = NewParser(Config{}, r)
	p.SetAwaitConnect(func() error { calls++; return nil })
	calls = 0
	if err := p.Parse([]byte("PING\r\nPUB a 1\r\nx\r\n")); err != nil || calls != 1 || len(r.Ops) != 2 {
		t.Fatalf("accepting check: %v, %d calls, ops %q", err, calls, r.Ops)
	}

	// A refused client cannot make the parser buffer a payload first.
	r = &recorder{}
	p = NewParser(Config{}, r)
	p.SetAwaitConnect(func() error { return errNotConnect })
	if err := p.Parse([]byte("PUB a 1000000\r\n")); !errors.Is(err, errNotConnect) || len(r.Ops) != 0 {
		t.Fatalf("PUB before CONNECT: %v %q", err, r.Ops)
	}
}
