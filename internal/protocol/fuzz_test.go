package protocol

import (
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline"
	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// fuzzConfig uses small limits so that random inputs reach them.
var fuzzConfig = Config{MaxControlLine: 32, MaxPayload: 64}

// FuzzParse feeds the input whole and in random chunks (the chunk sizes come from a PRNG seeded
// with a hash of the input). It checks that the parser never panics, that chunking never changes
// the operations or the error, that Handler arguments respect the contract, and that scratch
// stays within MaxControlLine+MaxPayload+wireline.Slack.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		streamtest.CheckChunking(t, in, func(chunks [][]byte) streamtest.Result { return fuzzFeed(t, chunks) })
	})
}

// fuzzFeed parses chunks like feed, also checking the Handler contract and the scratch bound
// after every call.
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

// checker records operations and fails the test when an argument breaks the Handler contract.
type checker struct {
	recorder
	t *testing.T
}

func (c *checker) ProcessPub(subject, reply []byte, hdrLen int, msg []byte) error {
	if len(msg) > fuzzConfig.MaxPayload || hdrLen < -1 || hdrLen > len(msg) {
		c.t.Fatalf("ProcessPub hdr %d len %d", hdrLen, len(msg))
	}
	c.checkArgs(subject, reply)
	return c.recorder.ProcessPub(subject, reply, hdrLen, msg)
}

func (c *checker) ProcessSub(subject, queue, sid []byte) error {
	c.checkArgs(subject, queue, sid)
	return c.recorder.ProcessSub(subject, queue, sid)
}

func (c *checker) ProcessUnsub(sid []byte, max int64) error {
	if max < 0 {
		c.t.Fatalf("ProcessUnsub max %d", max)
	}
	c.checkArgs(sid)
	return c.recorder.ProcessUnsub(sid, max)
}

// checkArgs fails when a present argument is empty, too long or contains a separator.
func (c *checker) checkArgs(args ...[]byte) {
	for i, a := range args {
		if a == nil && i > 0 {
			continue
		}
		if len(a) == 0 || len(a) > fuzzConfig.MaxControlLine || slices.ContainsFunc(a, wireline.IsSpace) ||
			slices.Contains(a, '\n') {
			c.t.Fatalf("bad argument %q", a)
		}
	}
}
