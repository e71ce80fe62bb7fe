package protocol

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
)

// fuzzConfig uses small limits so that random inputs reach them.
var fuzzConfig = Config{MaxControlLine: 32, MaxPayload: 64}

// FuzzParse feeds the input whole and in random chunks (the chunk sizes come from a PRNG seeded
// with a hash of the input). It checks that the parser never panics, that chunking never changes
// the operations or the error, that Handler arguments respect the contract, and that scratch
// stays within MaxControlLine+MaxPayload+lineSlack.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := fuzzFeed(t, [][]byte{in})
		chunks := randomChunks(in)
		if got := fuzzFeed(t, chunks); !got.equal(whole) {
			t.Fatalf("chunked %q\n got %v\nwant %v", chunks, got, whole)
		}
		if got := fuzzFeed(t, bytewise(in)); !got.equal(whole) {
			t.Fatalf("bytewise\n got %v\nwant %v", got, whole)
		}
	})
}

// randomChunks cuts in at positions chosen by a PRNG seeded from the input's hash.
func randomChunks(in []byte) [][]byte {
	h := fnv.New64a()
	h.Write(in)
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(len(in))))
	var out [][]byte
	for len(in) > 0 {
		n := 1 + rng.IntN(min(len(in), 1+rng.IntN(80)))
		out = append(out, in[:n])
		in = in[n:]
	}
	return out
}

// fuzzFeed parses chunks like feed, also checking the Handler contract and the scratch bound
// after every call.
func fuzzFeed(t *testing.T, chunks [][]byte) result {
	r := &checker{t: t}
	p := NewParser(fuzzConfig, r)
	limit := fuzzConfig.MaxControlLine + fuzzConfig.MaxPayload + lineSlack
	for _, c := range chunks {
		buf := slices.Clone(c)
		err := p.Parse(buf)
		for i := range buf {
			buf[i] = 'X'
		}
		if cap(p.scratch) > limit {
			t.Fatalf("scratch cap %d > %d", cap(p.scratch), limit)
		}
		if err != nil {
			return result{r.ops, err}
		}
	}
	return result{r.ops, nil}
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
		if len(a) == 0 || len(a) > fuzzConfig.MaxControlLine || slices.ContainsFunc(a, isSpace) ||
			slices.Contains(a, '\n') {
			c.t.Fatalf("bad argument %q", a)
		}
	}
}
