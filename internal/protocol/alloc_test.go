package protocol

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline"
)

// pubStream returns n copies of "PUB foo.bar <size>\r\n<size bytes>\r\n".
func pubStream(n, size int) []byte {
	one := "PUB foo.bar " + strconv.Itoa(size) + "\r\n" + strings.Repeat("x", size) + "\r\n"
	return []byte(strings.Repeat(one, n))
}

// hpubStream returns n copies of an HPUB with a 22-byte header block and a size-byte body.
func hpubStream(n, size int) []byte {
	hdr := "NATS/1.0\r\nA: bcdefg\r\n\r\n"
	one := "HPUB foo.bar _INBOX.x " + strconv.Itoa(len(hdr)) + " " + strconv.Itoa(len(hdr)+size) + "\r\n" +
		hdr + strings.Repeat("x", size) + "\r\n"
	return []byte(strings.Repeat(one, n))
}

// TestZeroAllocs enforces the hot-path property (style rule 13): parsing PUB and HPUB, whole or
// split into steady-state chunks, and encoding MSG do not allocate.
func TestZeroAllocs(t *testing.T) {
	pubs, hpubs := pubStream(10, 128), hpubStream(10, 128)
	cases := []struct {
		name string
		run  func(p *Parser) error
	}{
		{"pub whole", func(p *Parser) error { return p.Parse(pubs) }},
		{"hpub whole", func(p *Parser) error { return p.Parse(hpubs) }},
		{"pub split", func(p *Parser) error { return parseChunks(p, pubs, 7) }},
		{"hpub split", func(p *Parser) error { return parseChunks(p, hpubs, 100) }},
	}
	for _, c := range cases {
		p := NewParser(Config{}, &counter{})
		if err := c.run(p); err != nil { // warm up the scratch buffer
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = c.run(p) }); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", c.name, n)
		}
	}
	dst := make([]byte, 0, 1024)
	subj, sid, reply, payload := []byte("foo.bar"), []byte("12"), []byte("_INBOX.x"), bytes.Repeat([]byte("x"), 128)
	if n := testing.AllocsPerRun(100, func() { dst = AppendMsg(dst[:0], subj, sid, reply, payload) }); n != 0 {
		t.Errorf("AppendMsg: %v allocs per run, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { dst = AppendHMsg(dst[:0], subj, sid, reply, 10, payload) }); n != 0 {
		t.Errorf("AppendHMsg: %v allocs per run, want 0", n)
	}
}

// parseChunks feeds buf in chunks of size n.
func parseChunks(p *Parser, buf []byte, n int) error {
	for len(buf) > 0 {
		k := min(n, len(buf))
		if err := p.Parse(buf[:k]); err != nil {
			return err
		}
		buf = buf[k:]
	}
	return nil
}

// TestScratchReleased checks that a big split payload does not stay pinned in scratch, and that
// scratch is sized from the declared payload size, bounded by MaxPayload.
func TestScratchReleased(t *testing.T) {
	c := &counter{}
	p := NewParser(Config{}, c)
	big := pubStream(1, 200<<10)
	if err := p.Parse(big[:1000]); err != nil {
		t.Fatal(err)
	}
	if limit := p.maxLine + p.maxPayload + wireline.Slack; cap(p.scratch) > limit || cap(p.scratch) < 200<<10 {
		t.Fatalf("scratch cap %d while stashing a %d-byte payload", cap(p.scratch), 200<<10)
	}
	if err := p.Parse(big[1000:]); err != nil {
		t.Fatal(err)
	}
	if c.pubs != 1 || c.bytes != 200<<10 {
		t.Fatalf("pubs %d bytes %d", c.pubs, c.bytes)
	}
	if p.scratch != nil {
		t.Fatalf("scratch cap %d kept after a big payload", cap(p.scratch))
	}
}
