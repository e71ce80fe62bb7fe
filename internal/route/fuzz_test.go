package route

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
)

// fuzzConfig uses small limits so that random inputs reach them.
var fuzzConfig = Config{MaxControlLine: 48, MaxPayload: 64}

// FuzzParse feeds the input whole, in random chunks (sizes from a PRNG
// seeded with a hash of the input) and byte by byte. It checks that the
// parser never panics, that chunking never changes the operations or the
// error, that Handler arguments respect the contract, and that scratch
// stays within MaxControlLine+MaxPayload+lineSlack.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Add(AppendMsgHeader(nil, "$G", []byte("a.b"), []byte("r"), []string{"q1", "q2"}, 2, 3))
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

// randomChunks cuts in at positions chosen by a PRNG seeded from the
// input's hash.
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

// fuzzFeed parses chunks like feed, also checking the Handler contract and
// the scratch bound after every call.
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
