package protocol

import "github.com/cairnmq/cairn/internal/wireline/streamtest"

// recorder is a Handler that records every operation as a string, copying all bytes.
type recorder struct{ streamtest.Log }

func (r *recorder) ProcessConnect(arg []byte) error { return r.Add("CONNECT %q", arg) }
func (r *recorder) ProcessInfo(arg []byte) error    { return r.Add("INFO %q", arg) }
func (r *recorder) ProcessPing() error              { return r.Add("PING") }
func (r *recorder) ProcessPong() error              { return r.Add("PONG") }

func (r *recorder) ProcessPub(subject, reply []byte, hdrLen int, msg []byte) error {
	return r.Add("PUB %q %q %d %q", subject, reply, hdrLen, msg)
}

func (r *recorder) ProcessSub(subject, queue, sid []byte) error {
	return r.Add("SUB %q %q %q", subject, queue, sid)
}

func (r *recorder) ProcessUnsub(sid []byte, max int64) error {
	return r.Add("UNSUB %q %d", sid, max)
}

// feed parses chunks in order with a new Parser and returns what it recorded (streamtest.Feed).
func feed(cfg Config, noHeaders bool, chunks ...[]byte) streamtest.Result {
	r := &recorder{}
	p := NewParser(cfg, r)
	p.SetHeaders(!noHeaders)
	err := streamtest.Feed(chunks, p.Parse)
	return streamtest.Result{Ops: r.Ops, Err: err}
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
