// Package streamtest feeds a protocol parser a byte stream cut into pieces and records what it
// reports, for the tests, fuzz targets and benchmarks of cairn's two line-protocol parsers
// (internal/protocol and internal/route). Its one job is the stream side of those tests: the
// parser-specific Handler checks stay in each package.
package streamtest

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
)

// Log records a parser's Handler calls as strings; Add is the body of a recording Handler method.
type Log struct {
	Ops []string
	Err error // returned by every Add when set
}

// Add appends the operation formatted with fmt.Sprintf(format, args...) and returns l.Err.
func (l *Log) Add(format string, args ...any) error {
	l.Ops = append(l.Ops, fmt.Sprintf(format, args...))
	return l.Err
}

// Result is what one parse run produced: the recorded operations and the error that stopped
// it (nil when the whole stream was consumed).
type Result struct {
	Ops []string
	Err error
}

// Equal reports whether a and b hold the same operations and the identical error value.
func (a Result) Equal(b Result) bool { return slices.Equal(a.Ops, b.Ops) && a.Err == b.Err }

// String formats r for a test failure.
func (a Result) String() string { return fmt.Sprintf("ops=%q err=%v", a.Ops, a.Err) }

// Feed passes chunks in order to parse and returns the first error, or nil. Each chunk is
// copied into a fresh buffer that is overwritten with 'X' once parse returns, so a parser that
// kept a reference to its input would report garbage later.
func Feed(chunks [][]byte, parse func([]byte) error) error {
	for _, c := range chunks {
		buf := slices.Clone(c)
		err := parse(buf)
		for i := range buf {
			buf[i] = 'X'
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckChunking is the body of a parser's fuzz target: it runs feed on in whole, cut by
// RandomChunks and byte by byte, and fails t unless all three report the same operations and
// error, since a parser must accept any split of its stream.
func CheckChunking(t testing.TB, in []byte, feed func(chunks [][]byte) Result) {
	t.Helper()
	whole := feed([][]byte{in})
	chunks := RandomChunks(in)
	if got := feed(chunks); !got.Equal(whole) {
		t.Fatalf("chunked %q\n got %v\nwant %v", chunks, got, whole)
	}
	if got := feed(Bytewise(in)); !got.Equal(whole) {
		t.Fatalf("bytewise\n got %v\nwant %v", got, whole)
	}
}

// RandomChunks cuts in into pieces of 1 to 80 bytes at points chosen by a PRNG seeded from a
// hash of in, so a fuzz input is always cut the same way.
func RandomChunks(in []byte) [][]byte {
	h := fnv.New64a()
	h.Write(in)
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(len(in))))
	var out [][]byte
	for len(in) > 0 {
		n := 1 + rng.IntN(min(len(in), 1+rng.IntN(80)))
		out, in = append(out, in[:n]), in[n:]
	}
	return out
}

// CutRandomly cuts s into pieces of 1 to most bytes drawn from a PRNG with a fixed seed, for
// benchmarks that must see the same cuts in every run.
func CutRandomly(s []byte, most int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var out [][]byte
	for len(s) > 0 {
		n := min(len(s), 1+rng.IntN(most))
		out, s = append(out, s[:n]), s[n:]
	}
	return out
}

// Bytewise returns s as one-byte chunks.
func Bytewise(s []byte) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}
