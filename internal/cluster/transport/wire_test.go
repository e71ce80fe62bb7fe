package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// frames encodes each frame with its length prefix (package comment,
// "Wire format").
func frames(fs ...string) []byte {
	var b []byte
	for _, f := range fs {
		b = appendFrameHeader(b, len(f))
		b = append(b, f...)
	}
	return b
}

// readAll reads frames from r until an error, which it returns with them.
func readAll(r io.Reader, max int) ([]string, error) {
	var got []string
	for {
		f, err := readFrame(r, max)
		if err != nil {
			return got, err
		}
		got = append(got, string(f))
	}
}

// TestReadFrameSplit: frames and their length prefixes split across reads
// at every byte come out whole and in order; the stream ending between
// frames is io.EOF.
func TestReadFrameSplit(t *testing.T) {
	want := []string{"a", strings.Repeat("b", 300), "c", strings.Repeat("d", 2*readChunk+5)}
	got, err := readAll(iotest.OneByteReader(bytes.NewReader(frames(want...))), MaxFrameBytes)
	if err != io.EOF {
		t.Fatalf("err %v, want io.EOF", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("frame %d differs (len %d, want %d)", i, len(got[i]), len(want[i]))
		}
	}
}

// TestReadFrameBadInput: a length of 0 or above the limit is refused
// before any body is read; a stream ending inside a frame or its prefix is
// io.ErrUnexpectedEOF; a length the peer does not follow with bytes costs
// no more memory than a chunk.
func TestReadFrameBadInput(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"zero length", frames(""), 100, errBadLength},
		{"over the limit", frames(strings.Repeat("x", 101)), 100, errBadLength},
		{"over the hard cap", []byte{0xff, 0xff, 0xff, 0xff}, MaxFrameBytes, errBadLength},
		{"cut in the prefix", []byte{5, 0}, 100, io.ErrUnexpectedEOF},
		{"cut in the body", frames("hello")[:7], 100, io.ErrUnexpectedEOF},
		{"lying length", append(appendFrameHeader(nil, MaxFrameBytes), "short"...), MaxFrameBytes, io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		got, err := readAll(bytes.NewReader(append(frames("ok"), tc.in...)), tc.max)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if len(got) != 1 || got[0] != "ok" {
			t.Errorf("%s: frames before the bad one %q", tc.name, got)
		}
	}
	in := append(appendFrameHeader(nil, MaxFrameBytes), "short"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _ = readFrame(bytes.NewReader(in), MaxFrameBytes)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4*readChunk {
		t.Errorf("%d bytes allocated for a lying length", n)
	}
}

// TestHelloRoundTrip: the hello line parses back to what was sent, and
// lines that are not a hello are errors.
func TestHelloRoundTrip(t *testing.T) {
	h := &hello{V: Version, Name: "n1", Cluster: "C", User: "u", Pass: "p w", Inc: strings.Repeat("ab", 16), Tags: []string{"az:1"},
		Known: map[string]string{"n2": strings.Repeat("cd", 16)}, Meta: true, Members: []string{"n1", "n2"}}
	got, err := parseHello(appendHello(nil, h))
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got, err := parseHello([]byte("raft\t{\"v\":1,\"name\":\"x\"}\n")); err != nil || got.Name != "x" {
		t.Fatalf("lower case, tab, LF: %+v, %v", got, err)
	}
	for _, bad := range []string{"RAFT\r\n", "RAFT {\r\n", "RAFTX {}\r\n", "CONNECT {}\r\n", "RAFT []\r\n"} {
		if _, err := parseHello([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzReadFrame: whatever the bytes, the frame reader neither panics nor
// reads past a bad length, and the frames it returns re-encode to a
// prefix of the input (nothing invented, nothing skipped).
func FuzzReadFrame(f *testing.F) {
	f.Add(frames("a", "bc"), 16)
	f.Add(frames(""), 16)
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 1, 2, 3}, 1<<20)
	f.Add(frames(strings.Repeat("z", 40)), 32)
	f.Add([]byte{3, 0, 0}, 8)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<20 {
			max = 1 << 20
		}
		got, err := readAll(iotest.HalfReader(bytes.NewReader(data)), max)
		if err == nil {
			t.Fatal("readAll ended without an error")
		}
		enc := frames(got...)
		if !bytes.HasPrefix(data, enc) {
			t.Fatalf("frames %q are not a prefix of the input", got)
		}
		for _, g := range got {
			if len(g) == 0 || len(g) > max {
				t.Fatalf("frame of %d bytes (limit %d)", len(g), max)
			}
		}
		if err == io.EOF && len(enc) != len(data) {
			t.Fatalf("io.EOF with %d bytes left", len(data)-len(enc))
		}
	})
}

// TestBeatQueuedOnce: a liveness-only frame is not queued behind another
// one still waiting for the writer (raftnode package comment, "Frames";
// MemNetwork does the same), but is queued again once the writer took the
// first; other frames always queue.
func TestBeatQueuedOnce(t *testing.T) {
	beat := []byte{1, 1, 0, 0, 0} // version 1, one envelope
	beat = append(beat, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0)
	beat = binary.LittleEndian.AppendUint32(beat, crc32.Checksum(beat, crc32.MakeTable(crc32.Castagnoli)))
	if !raftnode.BeatOnly(beat) {
		t.Fatal("the test's beat is not one")
	}
	tr := &Transport{cfg: Config{MaxQueueBytes: 1 << 20}}
	p := newPeer(tr, "x")
	p.mu.addr = "127.0.0.1:1"
	for _, f := range [][]byte{beat, beat, []byte("other"), beat} {
		if err := p.enqueue(f); err != nil {
			t.Fatal(err)
		}
	}
	if q := p.take(nil); len(q) != 2 {
		t.Fatalf("%d frames queued, want the beat and the other frame", len(q))
	}
	if err := p.enqueue(beat); err != nil {
		t.Fatal(err)
	}
	if q := p.take(nil); len(q) != 1 {
		t.Fatalf("%d frames queued after the writer took the first beat, want 1", len(q))
	}
}

// raftnode derives the largest entry a follower can receive from this
// transport's largest frame, the raftnode frame without the length
// prefix (raftnode.DefaultMaxFrameBytes, DefaultMaxEntryBytes): a frame
// of exactly MaxFrameBytes is carried, one byte more is refused.
func TestMaxFrameIsRaftnodes(t *testing.T) {
	if MaxFrameBytes != raftnode.DefaultMaxFrameBytes {
		t.Fatalf("MaxFrameBytes %d, raftnode's %d", MaxFrameBytes, raftnode.DefaultMaxFrameBytes)
	}
	const max = 1 << 10
	in := frames(strings.Repeat("x", max), strings.Repeat("y", max+1))
	got, err := readAll(bytes.NewReader(in), max)
	if len(got) != 1 || len(got[0]) != max || !errors.Is(err, errBadLength) {
		t.Fatalf("frames of %d and %d bytes under a limit of %d: read %d, %v", max, max+1, max, len(got), err)
	}
}
