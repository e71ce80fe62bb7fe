package protocol

import (
	"bytes"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// benchMsgs is the number of operations in one benchmark buffer.
const benchMsgs = 1000

// benchParse parses buf (benchMsgs operations) per iteration, in chunks of chunk bytes (0 =
// whole), and reports ns per message.
func benchParse(b *testing.B, buf []byte, chunk int) {
	c := &counter{}
	p := NewParser(Config{}, c)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if chunk == 0 {
			err = p.Parse(buf)
		} else {
			err = parseChunks(p, buf, chunk)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if c.pubs != b.N*benchMsgs {
		b.Fatalf("pubs %d, want %d", c.pubs, b.N*benchMsgs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchMsgs), "ns/msg")
}

// BenchmarkParsePub parses "PUB foo.bar 128\r\n<128 bytes>\r\n" messages from one buffer.
func BenchmarkParsePub(b *testing.B) { benchParse(b, pubStream(benchMsgs, 128), 0) }

// BenchmarkParseHPub parses HPUB messages with a reply, a 22-byte header and a 128-byte body.
func BenchmarkParseHPub(b *testing.B) { benchParse(b, hpubStream(benchMsgs, 128), 0) }

// BenchmarkParsePubReads parses the PUB stream in 4 KiB reads, so some lines and payloads are
// split across Parse calls.
func BenchmarkParsePubReads(b *testing.B) { benchParse(b, pubStream(benchMsgs, 128), 4096) }

// BenchmarkParseRandomSplits parses a stream of alternating PUB and HPUB messages (128-byte
// bodies) cut at random points into reads of 1 to 512 bytes (fixed seed), so control lines and
// payloads are split everywhere, as on a slow or busy socket.
func BenchmarkParseRandomSplits(b *testing.B) {
	pubs, hpubs := pubStream(benchMsgs/2, 128), hpubStream(benchMsgs/2, 128)
	one, hone := len(pubs)/(benchMsgs/2), len(hpubs)/(benchMsgs/2)
	var stream []byte
	for i := range benchMsgs / 2 {
		stream = append(stream, pubs[i*one:(i+1)*one]...)
		stream = append(stream, hpubs[i*hone:(i+1)*hone]...)
	}
	chunks := streamtest.CutRandomly(stream, 512)
	c := &counter{}
	p := NewParser(Config{}, c)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for _, ch := range chunks {
			if err := p.Parse(ch); err != nil {
				b.Fatal(err)
			}
		}
	}
	if c.pubs != b.N*benchMsgs {
		b.Fatalf("pubs %d, want %d", c.pubs, b.N*benchMsgs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchMsgs), "ns/msg")
}

// BenchmarkAppendMsg encodes one MSG with a reply and a 128-byte payload into a reused buffer.
func BenchmarkAppendMsg(b *testing.B) {
	dst := make([]byte, 0, 1024)
	subj, sid, reply, payload := []byte("foo.bar"), []byte("12"), []byte("_INBOX.x"), bytes.Repeat([]byte("x"), 128)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendMsg(dst[:0], subj, sid, reply, payload)
	}
}
