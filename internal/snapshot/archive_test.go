package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// testdata/nats-server-2.15.2.arc.s2 is the stream.arc.s2 that `nats
// stream backup BK --consumers` wrote from nats-server v2.15.2: stream BK
// with messages 1 and 3 on bk.a (2 deleted), each with header X-A, and a
// durable pull consumer C1 that delivered and acknowledged message 1.
func TestReadsNatsServerSnapshot(t *testing.T) {
	f, err := os.Open("testdata/nats-server-2.15.2.arc.s2")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := NewReader(f)
	var got []string
	for {
		h, p, err := rd.Next()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if h.IsEnd() {
			break
		}
		switch {
		case h.Name == StateName:
			var st struct {
				Msgs      uint64 `json:"messages"`
				LastSeq   uint64 `json:"last_seq"`
				Consumers int    `json:"consumer_count"`
			}
			if err := json.Unmarshal(p, &st); err != nil || st.Msgs != 2 || st.LastSeq != 3 || st.Consumers != 1 {
				t.Fatalf("state %s: %+v %v", p, st, err)
			}
		case strings.HasPrefix(h.Name, ConsumerPrefix):
			var ce ConsumerEntry
			if err := json.Unmarshal(p, &ce); err != nil || ce.State == nil || ce.State.AckFloor.Stream != 1 {
				t.Fatalf("consumer %s: %+v %v", p, ce, err)
			}
		default:
			if h.HeaderSize != 20 || string(p[h.HeaderSize:]) != "msg "+string(rune('0'+h.Sequence)) {
				t.Fatalf("message %+v %q", h, p)
			}
		}
		got = append(got, h.Name)
	}
	if want := "state.json consumers/C1 bk.a bk.a"; strings.Join(got, " ") != want {
		t.Fatalf("entries %v, want %s", got, want)
	}
	if _, _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after the end entry: %v, want io.EOF", err)
	}
}

func writeSample(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	entries := []struct {
		h Header
		p string
	}{
		{Header{Name: StateName, Timestamp: 7, PayloadSize: 14}, `{"messages":1}`},
		{Header{Name: "a.b", Timestamp: -5, Sequence: 3, HeaderSize: 12, PayloadSize: 2}, "NATS/1.0\r\n\r\nhi"},
		{Header{Name: "c", Timestamp: 1 << 62, Sequence: 1 << 40, PayloadSize: 3 << 10}, strings.Repeat("x", 3<<10)},
	}
	for _, e := range entries {
		if err := w.WriteEntry(e.h, []byte(e.p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	rd := NewReader(bytes.NewReader(writeSample(t)))
	var names []string
	for {
		h, p, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if h.IsEnd() {
			break
		}
		if int64(len(p)) != h.HeaderSize+h.PayloadSize {
			t.Fatalf("%q: %d bytes for %+v", h.Name, len(p), h)
		}
		if h.Name == "a.b" && (h.Timestamp != -5 || h.Sequence != 3 || string(p) != "NATS/1.0\r\n\r\nhi") {
			t.Fatalf("a.b: %+v %q", h, p)
		}
		names = append(names, h.Name)
	}
	if len(names) != 3 {
		t.Fatalf("entries %v", names)
	}
}

func TestWriteEntryChecksSizes(t *testing.T) {
	w := NewWriter(io.Discard)
	if err := w.WriteEntry(Header{Name: "x", PayloadSize: 2}, []byte("abc")); err == nil {
		t.Fatal("sizes that do not add up to the payload were accepted")
	}
}

// readAll reads until the end entry or an error.
func readAll(b []byte) error {
	rd := NewReader(bytes.NewReader(b))
	rd.MaxPayload = 1 << 20
	for {
		h, _, err := rd.Next()
		if err != nil {
			return err
		}
		if h.IsEnd() {
			return nil
		}
	}
}

// A damaged or cut snapshot is never read as a good one: a flipped bit
// anywhere fails (the S2 chunk's CRC-32C, or the framing), and so does
// a cut anywhere before the end entry (with io.EOF only at an entry
// boundary, which a restore reports as truncated).
func TestDamageIsDetected(t *testing.T) {
	good := writeSample(t)
	if err := readAll(good); err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(good)
			b[i] ^= bit
			if err := readAll(b); err == nil {
				t.Fatalf("byte %d ^ %#x: read as a good snapshot", i, bit)
			}
		}
	}
	for n := range len(good) {
		if err := readAll(good[:n]); err == nil {
			t.Fatalf("cut to %d of %d bytes: read as a good snapshot", n, len(good))
		}
	}
}

func TestCRCMismatchText(t *testing.T) {
	good := writeSample(t)
	b := bytes.Clone(good)
	b[len(b)-3] ^= 0x40 // inside the last chunk's data
	err := readAll(b)
	if err == nil || !strings.Contains(err.Error(), "s2: corrupt input") {
		t.Fatalf("got %v, want an s2 corrupt input error", err)
	}
}

func TestMalformedArchive(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	// A payload size over MaxInt64 as int64 is negative.
	if _, err := io.WriteString(w.enc, Magic+"\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"); err != nil {
		t.Fatal(err)
	}
	_ = w.enc.Close()
	if err := readAll(buf.Bytes()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative size: %v, want ErrInvalid", err)
	}
	buf.Reset()
	w = NewWriter(&buf)
	_, _ = io.WriteString(w.enc, "NATSARC0")
	_ = w.enc.Close()
	if err := readAll(buf.Bytes()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad magic: %v, want ErrInvalid", err)
	}
	buf.Reset()
	w = NewWriter(&buf)
	if err := w.WriteEntry(Header{Name: "big", PayloadSize: 2 << 20}, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	_ = w.End()
	if err := readAll(buf.Bytes()); err == nil || !strings.Contains(err.Error(), "exceeds the maximum") {
		t.Fatalf("entry over MaxPayload: %v", err)
	}
}

// FuzzReader: any bytes read as a snapshot end in an error or the end
// entry, never a panic or an allocation past MaxPayload.
func FuzzReader(f *testing.F) {
	f.Add([]byte{})
	if b, err := os.ReadFile("testdata/nats-server-2.15.2.arc.s2"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewReader(bytes.NewReader(b))
		rd.MaxPayload = 1 << 16
		for range 10000 {
			h, p, err := rd.Next()
			if err != nil || h.IsEnd() {
				return
			}
			if int64(len(p)) != h.HeaderSize+h.PayloadSize {
				t.Fatalf("entry %+v with %d bytes", h, len(p))
			}
		}
	})
}
