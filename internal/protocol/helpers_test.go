package protocol

import (
	"fmt"
	"slices"
)

// recorder is a Handler that records every operation as a string, copying all bytes.
type recorder struct {
	ops []string
	err error // returned by every Handler method when set
}

func (r *recorder) add(format string, args ...any) error {
	r.ops = append(r.ops, fmt.Sprintf(format, args...))
	return r.err
}

func (r *recorder) ProcessConnect(arg []byte) error { return r.add("CONNECT %q", arg) }
func (r *recorder) ProcessInfo(arg []byte) error    { return r.add("INFO %q", arg) }
func (r *recorder) ProcessPing() error              { return r.add("PING") }
func (r *recorder) ProcessPong() error              { return r.add("PONG") }

func (r *recorder) ProcessPub(subject, reply []byte, hdrLen int, msg []byte) error {
	return r.add("PUB %q %q %d %q", subject, reply, hdrLen, msg)
}

func (r *recorder) ProcessSub(subject, queue, sid []byte) error {
	return r.add("SUB %q %q %q", subject, queue, sid)
}

func (r *recorder) ProcessUnsub(sid []byte, max int64) error {
	return r.add("UNSUB %q %d", sid, max)
}

// result is what a parse run produced: the operations and the final error.
type result struct {
	ops []string
	err error
}

func (a result) equal(b result) bool {
	return slices.Equal(a.ops, b.ops) && a.err == b.err
}

func (a result) String() string { return fmt.Sprintf("ops=%q err=%v", a.ops, a.err) }

// feed parses chunks in order with a new Parser and returns what it recorded. Each chunk is
// copied into a fresh buffer that is overwritten after Parse returns, so a Parser that kept a
// reference to it would record garbage. Parsing stops at the first error.
func feed(cfg Config, noHeaders bool, chunks ...[]byte) result {
	r := &recorder{}
	p := NewParser(cfg, r)
	p.SetHeaders(!noHeaders)
	for _, c := range chunks {
		buf := slices.Clone(c)
		err := p.Parse(buf)
		for i := range buf {
			buf[i] = 'X'
		}
		if err != nil {
			return result{r.ops, err}
		}
	}
	return result{r.ops, nil}
}

// splitAt returns s cut at the given increasing offsets.
func splitAt(s []byte, cuts ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, s[prev:c])
		prev = c
	}
	return append(out, s[prev:])
}

// bytewise returns s as one-byte chunks.
func bytewise(s []byte) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}

// counter is a Handler that only counts, for allocation tests and benchmarks.
type counter struct{ pubs, bytes, other int }

func (c *counter) ProcessConnect([]byte) error { c.other++; return nil }
func (c *counter) ProcessInfo([]byte) error    { c.other++; return nil }
func (c *counter) ProcessPing() error          { c.other++; return nil }
func (c *counter) ProcessPong() error          { c.other++; return nil }
func (c *counter) ProcessPub(_, _ []byte, _ int, msg []byte) error {
	c.pubs++
	c.bytes += len(msg)
	return nil
}
func (c *counter) ProcessSub(_, _, _ []byte) error      { c.other++; return nil }
func (c *counter) ProcessUnsub(_ []byte, _ int64) error { c.other++; return nil }
