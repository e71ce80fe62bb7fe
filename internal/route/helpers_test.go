package route

import (
	"fmt"

	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// recorder is a Handler that records every operation as a string, copying
// all bytes.
type recorder struct{ streamtest.Log }

func (r *recorder) ProcessInfo(arg []byte) error    { return r.Add("INFO %q", arg) }
func (r *recorder) ProcessConnect(arg []byte) error { return r.Add("CONNECT %q", arg) }
func (r *recorder) ProcessPing() error              { return r.Add("PING") }
func (r *recorder) ProcessPong() error              { return r.Add("PONG") }
func (r *recorder) ProcessErr(text []byte) error    { return r.Add("ERR %q", text) }

func (r *recorder) ProcessSub(account, subject, queue []byte, weight int) error {
	return r.Add("RS+ %q %q %q %d", account, subject, queue, weight)
}

func (r *recorder) ProcessUnsub(account, subject, queue []byte) error {
	return r.Add("RS- %q %q %q", account, subject, queue)
}

func (r *recorder) ProcessMsg(m *Msg) error {
	return r.Add("MSG %q %q %q %q %d %q", m.Account, m.Subject, m.Reply, m.Queues, m.HdrLen, m.Payload)
}

// feed parses chunks in order with a new Parser and returns what it
// recorded (streamtest.Feed).
func feed(cfg Config, chunks ...[]byte) streamtest.Result {
	r := &recorder{}
	p := NewParser(cfg, r)
	err := streamtest.Feed(chunks, p.Parse)
	return streamtest.Result{Ops: r.Ops, Err: err}
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
