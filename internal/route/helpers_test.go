package route

import (
	"fmt"
	"slices"
)

// recorder is a Handler that records every operation as a string, copying
// all bytes.
type recorder struct {
	ops []string
	err error // returned by every Handler method when set
}

func (r *recorder) add(format string, args ...any) error {
	r.ops = append(r.ops, fmt.Sprintf(format, args...))
	return r.err
}

func (r *recorder) ProcessInfo(arg []byte) error    { return r.add("INFO %q", arg) }
func (r *recorder) ProcessConnect(arg []byte) error { return r.add("CONNECT %q", arg) }
func (r *recorder) ProcessPing() error              { return r.add("PING") }
func (r *recorder) ProcessPong() error              { return r.add("PONG") }
func (r *recorder) ProcessErr(text []byte) error    { return r.add("ERR %q", text) }

func (r *recorder) ProcessSub(account, subject, queue []byte, weight int) error {
	return r.add("RS+ %q %q %q %d", account, subject, queue, weight)
}

func (r *recorder) ProcessUnsub(account, subject, queue []byte) error {
	return r.add("RS- %q %q %q", account, subject, queue)
}

func (r *recorder) ProcessMsg(m *Msg) error {
	return r.add("MSG %q %q %q %q %d %q", m.Account, m.Subject, m.Reply, m.Queues, m.HdrLen, m.Payload)
}

// result is what a parse run produced: the operations and the final error.
type result struct {
	ops []string
	err error
}

func (a result) equal(b result) bool { return slices.Equal(a.ops, b.ops) && a.err == b.err }

func (a result) String() string { return fmt.Sprintf("ops=%q err=%v", a.ops, a.err) }

// feed parses chunks in order with a new Parser. Each chunk is copied into
// a fresh buffer that is overwritten after Parse returns, so a Parser that
// kept a reference to it would record garbage. Parsing stops at the first
// error.
func feed(cfg Config, chunks ...[]byte) result {
	r := &recorder{}
	p := NewParser(cfg, r)
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

// bytewise returns s as one-byte chunks.
func bytewise(s []byte) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}

// Expected-operation builders, in the recorder's format.
func rsub(acc, subj, queue string, w int) string {
	return fmt.Sprintf("RS+ %q %q %q %d", acc, subj, queue, w)
}

func runsub(acc, subj, queue string) string { return fmt.Sprintf("RS- %q %q %q", acc, subj, queue) }

func rmsg(acc, subj, reply string, queues []string, hdr int, payload string) string {
	q := make([][]byte, len(queues))
	for i, s := range queues {
		q[i] = []byte(s)
	}
	return fmt.Sprintf("MSG %q %q %q %q %d %q", acc, subj, reply, q, hdr, payload)
}
