package route

import (
	"bytes"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// benchMsgs is the number of messages in one benchmark stream.
const benchMsgs = 1000

// msgCounter is a Handler that only counts messages, for benchmarks.
type msgCounter struct {
	recorder
	msgs int
}

func (c *msgCounter) ProcessMsg(*Msg) error { c.msgs++; return nil }

// msgStream returns benchMsgs messages alternating an RMSG with a reply and an HMSG for a
// queue group with a 22-byte header block, each with a 128-byte body.
func msgStream() []byte {
	hdr, body := "NATS/1.0\r\nA: bcdefg\r\n\r\n", bytes.Repeat([]byte("x"), 128)
	var s []byte
	for range benchMsgs / 2 {
		s = AppendMsgHeader(s, "$G", []byte("foo.bar"), []byte("_INBOX.x"), nil, -1, len(body))
		s = append(append(s, body...), "\r\n"...)
		s = AppendMsgHeader(s, "$G", []byte("foo.bar"), nil, []string{"q1"}, len(hdr), len(hdr)+len(body))
		s = append(append(append(s, hdr...), body...), "\r\n"...)
	}
	return s
}

// benchChunks parses chunks (together benchMsgs messages, n bytes) per iteration and reports
// ns per message.
func benchChunks(b *testing.B, chunks [][]byte, n int) {
	c := &msgCounter{}
	p := NewParser(Config{}, c)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, ch := range chunks {
			if err := p.Parse(ch); err != nil {
				b.Fatal(err)
			}
		}
	}
	if c.msgs != b.N*benchMsgs {
		b.Fatalf("msgs %d, want %d", c.msgs, b.N*benchMsgs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchMsgs), "ns/msg")
}

// BenchmarkParseMsgs parses the RMSG/HMSG stream from one buffer.
func BenchmarkParseMsgs(b *testing.B) {
	s := msgStream()
	benchChunks(b, [][]byte{s}, len(s))
}

// BenchmarkParseRandomSplits parses the RMSG/HMSG stream cut at random points into reads of 1
// to 512 bytes (fixed seed), so control lines and payloads are split everywhere.
func BenchmarkParseRandomSplits(b *testing.B) {
	s := msgStream()
	benchChunks(b, streamtest.CutRandomly(s, 512), len(s))
}
