package route

import (
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline"
	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// fuzzConfig uses small limits so that random inputs reach them.
var fuzzConfig = Config{MaxControlLine: 48, MaxPayload: 64}

// FuzzParse feeds the input whole, in random chunks (sizes from a PRNG
// seeded with a hash of the input) and byte by byte. It checks that the
// parser never panics, that chunking never changes the operations or the
// error, that Handler arguments respect the contract, and that scratch
// stays within MaxControlLine+MaxPayload+wireline.Slack.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Add(AppendMsgHeader(nil, "$G", []byte("a.b"), []byte("r"), []string{"q1", "q2"}, 2, 3))
	f.Fuzz(func(t *testing.T, in []byte) {
		streamtest.CheckChunking(t, in, func(chunks [][]byte) streamtest.Result { return fuzzFeed(t, chunks) })
	})
}

// fuzzFeed parses chunks like feed, also checking the Handler contract and
// the scratch bound after every call.
func fuzzFeed(t *testing.T, chunks [][]byte) streamtest.Result {
	r := &checker{t: t}
	p := NewParser(fuzzConfig, r)
	limit := fuzzConfig.MaxControlLine + fuzzConfig.MaxPayload + wireline.Slack
	err := streamtest.Feed(chunks, func(buf []byte) error {
		err := p.Parse(buf)
		if cap(p.scratch) > limit {
			t.Fatalf("scratch cap %d > %d", cap(p.scratch), limit)
		}
		return err
	})
	return streamtest.Result{Ops: r.Ops, Err: err}
}

// checker records operations and fails the test when an argument breaks
// the Handler contract.
type checker struct {
	recorder
	t *testing.T
}

func (c *checker) ProcessSub(account, subject, queue []byte, weight int) error {
	c.checkArgs(account, subject)
	if queue != nil {
		c.checkArgs(queue)
	}
	if (queue == nil) != (weight == 0) || weight < 0 {
		c.t.Fatalf("RS+ queue %q weight %d", queue, weight)
	}
	return c.recorder.ProcessSub(account, subject, queue, weight)
}

func (c *checker) ProcessUnsub(account, subject, queue []byte) error {
	c.checkArgs(account, subject)
	if queue != nil {
		c.checkArgs(queue)
	}
	return c.recorder.ProcessUnsub(account, subject, queue)
}

func (c *checker) ProcessMsg(m *Msg) error {
	if len(m.Payload) > fuzzConfig.MaxPayload || m.HdrLen < -1 || m.HdrLen > len(m.Payload) {
		c.t.Fatalf("RMSG hdr %d len %d", m.HdrLen, len(m.Payload))
	}
	c.checkArgs(m.Account, m.Subject)
	if m.Reply != nil {
		c.checkArgs(m.Reply)
	}
	c.checkArgs(m.Queues...)
	return c.recorder.ProcessMsg(m)
}

// checkArgs fails when an argument is empty, too long or contains a
// separator.
func (c *checker) checkArgs(args ...[]byte) {
	for _, a := range args {
		if len(a) == 0 || len(a) > fuzzConfig.MaxControlLine || slices.ContainsFunc(a, isSep) {
			c.t.Fatalf("bad argument %q", a)
		}
	}
}
