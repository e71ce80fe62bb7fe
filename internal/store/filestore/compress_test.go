package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"path"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// jsonish returns a compressible payload of about size bytes, different
// for each n.
func jsonish(n, size int) []byte {
	var b []byte
	for i := 0; len(b) < size; i++ {
		b = fmt.Appendf(b, `{"order":%d,"line":%d,"status":"shipped","warehouse":"north"},`, n, i)
	}
	return b[:size]
}

// diskUse returns the bytes of the store's segment files and counts its
// message records by kind.
func diskUse(t *testing.T, fs *vfs.CrashFS, dir string) (size int64, packed, plain int) {
	t.Helper()
	names, err := fs.ReadDir(dir + "/msgs")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		base, _ := parseSegmentName(name)
		data, err := fs.ReadFile(path.Join(dir, "msgs", name))
		if err != nil {
			t.Fatal(err)
		}
		size += int64(len(data))
		good, _ := scanRecords(data, base, nil)
		for _, off := range good {
			switch r := decodeRecord(data[off:]); {
			case r.typ != recMsg:
			case r.packed:
				packed++
			default:
				plain++
			}
		}
	}
	return size, packed, plain
}

// fillStore appends msgs to a new store on its own CrashFS, closes it and
// returns the file system.
func fillStore(t *testing.T, limits store.Config, msgs []store.Msg) *vfs.CrashFS {
	t.Helper()
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), limits)
	for _, m := range msgs {
		appendSync(t, s, m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return fs
}

// wantMsgs fails unless the store holds exactly msgs from sequence 1 and
// State.Bytes is their uncompressed store.MsgSize.
func wantMsgs(t *testing.T, s *Store, msgs []store.Msg) {
	t.Helper()
	var bytesWant uint64
	for i, m := range msgs {
		got, err := s.Load(uint64(i + 1))
		if err != nil {
			t.Fatalf("Load(%d): %v", i+1, err)
		}
		if got.Subject != m.Subject || !bytes.Equal(got.Header, m.Header) || !bytes.Equal(got.Data, m.Data) || got.Time != m.Time {
			t.Fatalf("Load(%d) = %q %q (%d bytes), want %q (%d bytes)", i+1, got.Subject, got.Header, len(got.Data), m.Subject, len(m.Data))
		}
		bytesWant += store.MsgSize(m.Subject, m.Header, m.Data)
	}
	if st := s.State(false); st.Msgs != uint64(len(msgs)) || st.Bytes != bytesWant || st.Lost != nil {
		t.Fatalf("State = %+v, want %d msgs, %d bytes", st, len(msgs), bytesWant)
	}
	mustCheck(t, s, "wantMsgs")
}

// TestCompressedTakesLessDisk stores compressible payloads with and
// without Compress: the compressed store's files are less than half as
// large, and both serve the same messages and the same State.Bytes, before
// and after a reopen.
func TestCompressedTakesLessDisk(t *testing.T) {
	var msgs []store.Msg
	for i := range 300 {
		m := store.Msg{Subject: fmt.Sprintf("orders.%d", i%7), Data: jsonish(i, 1000+i*7), Time: int64(i + 1)}
		if i%3 == 0 {
			m.Header = []byte("NATS/1.0\r\nNats-Msg-Id: x\r\n\r\n")
		}
		msgs = append(msgs, m)
	}
	plainFS := fillStore(t, store.Config{}, msgs)
	s2FS := fillStore(t, store.Config{Compress: true}, msgs)
	plainSize, _, _ := diskUse(t, plainFS, "/store")
	s2Size, packed, plain := diskUse(t, s2FS, "/store")
	t.Logf("300 messages of ~2 KB: %d bytes on disk uncompressed, %d compressed", plainSize, s2Size)
	if packed != len(msgs) || plain != 0 || s2Size*2 > plainSize {
		t.Fatalf("compressed store: %d bytes (%d packed, %d plain records), uncompressed %d", s2Size, packed, plain, plainSize)
	}
	for _, fs := range []*vfs.CrashFS{plainFS, s2FS} {
		s := mustOpen(t, memConfig(fs, 0), store.Config{Compress: true})
		wantMsgs(t, s, msgs)
		s.Close()
	}
}

// TestSmallMessagesNotCompressed: payloads below minPack and
// incompressible ones are stored as without compression, to the byte
// count.
func TestSmallMessagesNotCompressed(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var msgs []store.Msg
	for i := range 200 {
		data := make([]byte, 128)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if i%2 == 0 {
			data = bytes.Repeat([]byte("z"), 40) // compressible, but too small to try
		}
		msgs = append(msgs, store.Msg{Subject: "small", Data: data, Time: int64(i + 1)})
	}
	plainSize, _, _ := diskUse(t, fillStore(t, store.Config{}, msgs), "/store")
	fs := fillStore(t, store.Config{Compress: true}, msgs)
	s2Size, packed, _ := diskUse(t, fs, "/store")
	if packed != 0 || s2Size != plainSize {
		t.Fatalf("compressed store: %d bytes, %d packed records; uncompressed %d bytes", s2Size, packed, plainSize)
	}
	s := mustOpen(t, memConfig(fs, 0), store.Config{Compress: true})
	defer s.Close()
	wantMsgs(t, s, msgs)
}

// TestCompressionSwitch turns compression on and off with UpdateConfig:
// records written before stay as they are, new segments follow the
// setting, and after a reopen every message of both kinds is served.
func TestCompressionSwitch(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, 4096)
	s := mustOpen(t, cfg, store.Config{})
	var msgs []store.Msg
	add := func(n int) {
		for range n {
			m := store.Msg{Subject: "sw", Data: jsonish(len(msgs), 600), Time: int64(len(msgs) + 1)}
			appendSync(t, s, m)
			msgs = append(msgs, m)
		}
	}
	add(20)
	if _, packed, _ := diskUse(t, fs, "/store"); packed != 0 {
		t.Fatalf("%d packed records before compression was on", packed)
	}
	if err := s.UpdateConfig(store.Config{Compress: true}); err != nil {
		t.Fatal(err)
	}
	add(40) // the active segment fills, then new ones are compressed
	_, packedOn, plainOn := diskUse(t, fs, "/store")
	if packedOn == 0 || plainOn < 20 {
		t.Fatalf("after turning compression on: %d packed, %d plain records", packedOn, plainOn)
	}
	if err := s.UpdateConfig(store.Config{}); err != nil {
		t.Fatal(err)
	}
	add(20) // plain at once, in the compressed segment too
	_, packedOff, plainOff := diskUse(t, fs, "/store")
	if packedOff != packedOn || plainOff != plainOn+20 {
		t.Fatalf("after turning compression off: %d packed, %d plain; before %d, %d", packedOff, plainOff, packedOn, plainOn)
	}
	wantMsgs(t, s, msgs)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, cfg, store.Config{})
	defer s.Close()
	wantMsgs(t, s, msgs)
}

// packedRecord returns a message record at offset SegmentHeaderSize of
// segment 1 whose payload is block, flagged S2, with a valid CRC.
func packedRecord(block []byte) []byte {
	hdr := make([]byte, SegmentHeaderSize)
	b := appendRecordFlags(hdr, 1, recMsg, flagS2, 1, 1, "a", nil, block)
	return b[SegmentHeaderSize:]
}

// TestHostileBlocks feeds records whose CRC matches but whose S2 block is
// damaged or lies about its length: checkRecord refuses a length past
// MaxRecordSize before anything is allocated, and unpack returns errS2
// for the rest, never panicking and never allocating more than the
// length checkRecord accepted.
func TestHostileBlocks(t *testing.T) {
	huge := s2.Encode(nil, bytes.Repeat([]byte("q"), 1000))
	big := append(binaryUvarint(1<<40), huge[2:]...)
	if _, err := checkRecord(packedRecord(big), 1, SegmentHeaderSize); !errors.Is(err, errS2) {
		t.Fatalf("a block claiming 1 TiB: checkRecord = %v, want errS2", err)
	}
	over := append(binaryUvarint(MaxRecordSize), huge[2:]...)
	if _, err := checkRecord(packedRecord(over), 1, SegmentHeaderSize); !errors.Is(err, errS2) {
		t.Fatalf("a block decoding past MaxRecordSize: checkRecord = %v, want errS2", err)
	}
	// The largest length checkRecord accepts, with garbage after it: one
	// allocation of that length at most (what a real message of that size
	// costs too).
	most := MaxRecordSize - RecordOverhead - 1
	hostileBlock(t, append(binaryUvarint(uint64(most)), 0xff, 0xfe, 0x01), true)
	r := rand.New(rand.NewPCG(7, 8))
	valid := s2.Encode(nil, jsonish(1, 3000))
	for i := range 3000 {
		block := append([]byte(nil), valid...)
		switch i % 3 {
		case 0: // random bytes after a modest length (a random length is
			// mostly huge, and each costs an allocation of that size)
			block = binaryUvarint(r.Uint64N(1 << 16))
			for range r.IntN(64) {
				block = append(block, byte(r.Uint32()))
			}
		case 1: // flipped bits
			for range 1 + r.IntN(4) {
				block[r.IntN(len(block))] ^= 1 << r.IntN(8)
			}
		case 2: // cut short
			block = block[:r.IntN(len(block))]
		}
		hostileBlock(t, block, i%50 == 0)
	}
}

// hostileBlock checks one block as TestHostileBlocks describes; measure
// checks the allocation too (reading the memory statistics is slow).
func hostileBlock(t *testing.T, block []byte, measure bool) {
	t.Helper()
	rec := packedRecord(block)
	if _, err := checkRecord(rec, 1, SegmentHeaderSize); err != nil {
		return // refused before any decoding
	}
	d := decodeRecord(rec)
	var before, after runtime.MemStats
	if measure {
		runtime.ReadMemStats(&before)
	}
	out, err := unpack(d)
	if measure {
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(d.plain)+64<<10 {
			t.Fatalf("unpack of %d bytes claiming %d allocated %d bytes", len(block), d.plain, grew)
		}
	}
	if cap(out) > d.plain {
		t.Fatalf("unpack returned %d bytes of capacity for %d", cap(out), d.plain)
	}
	if err == nil {
		if want, derr := s2.Decode(nil, block); derr != nil || !bytes.Equal(out, want) {
			t.Fatalf("unpack accepted a block s2 refuses (%v)", derr)
		}
	} else if !errors.Is(err, errS2) {
		t.Fatalf("unpack: %v", err)
	}
}

// FuzzUnpack: no block makes checkRecord or unpack panic or allocate past
// the checked length. `go test -fuzz FuzzUnpack` explores further.
func FuzzUnpack(f *testing.F) {
	f.Add(s2.Encode(nil, jsonish(2, 500)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, block []byte) { hostileBlock(t, block, true) })
}

// binaryUvarint returns v as a uvarint.
func binaryUvarint(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestUndecodableBlockIsCorrupt stores a record whose CRC matches but
// whose block does not decode (a writer bug, or damage that the CRC did
// not catch): the load reports it corrupt and lost, never garbage, and
// the rest of the store is served.
func TestUndecodableBlockIsCorrupt(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, 0)
	cfg.forceS2 = true
	s := mustOpen(t, cfg, store.Config{})
	msgs := []store.Msg{{Subject: "a", Data: jsonish(1, 500), Time: 1}, {Subject: "a", Data: jsonish(2, 500), Time: 2}}
	for _, m := range msgs {
		appendSync(t, s, m)
	}
	s.Close()
	p := "/store/msgs/" + segmentName(1)
	data, _ := fs.ReadFile(p)
	base := uint64(1)
	good, _ := scanRecords(data, base, nil)
	var off uint32
	for _, o := range good {
		if rec := decodeRecord(data[o:]); rec.typ == recMsg && rec.seq == 1 {
			off = o
		}
	}
	rec := decodeRecord(data[off:])
	n := len(rec.data)
	start := int(off) + rec.size - 4 - n
	for j := start + 2; j < start+n; j++ { // keep the length prefix, spoil the stream
		data[j] = 0xff
	}
	le.PutUint32(data[int(off)+rec.size-4:], recordCRC(base, int64(off), data[off:int(off)+rec.size-4]))
	if err := fs.WriteFile(p, data); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, memConfig(fs, 0), store.Config{})
	defer s.Close()
	if _, err := s.Load(1); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Load(1) = %v, want ErrCorrupt", err)
	}
	if st := s.State(false); st.Lost == nil || st.Lost.Msgs[0] != 1 || st.Msgs != 1 {
		t.Fatalf("State = %+v, want seq 1 lost and 1 message", st)
	}
	got, err := s.Load(2)
	if err != nil || !bytes.Equal(got.Data, msgs[1].Data) {
		t.Fatalf("Load(2) = %v", err)
	}
}

// TestOldBuildRefusesCompressedSegments: a segment that may hold
// compressed records has a version-2 header, and a header of a version
// above 2 fails Open as a newer format.
func TestOldBuildRefusesCompressedSegments(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), store.Config{Compress: true})
	appendSync(t, s, store.Msg{Subject: "a", Data: jsonish(1, 500), Time: 1})
	s.Close()
	p := "/store/msgs/" + segmentName(1)
	data, _ := fs.ReadFile(p)
	if v := le.Uint32(data[8:]); v != segVersionS2 {
		t.Fatalf("segment version %d, want %d", v, segVersionS2)
	}
	le.PutUint32(data[8:], 3)
	le.PutUint32(data[44:], crc32.Checksum(data[:44], crcTable))
	if err := fs.WriteFile(p, data); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(memConfig(fs, 0), store.Config{}); !errors.Is(err, errVersion) {
		t.Fatalf("Open of a version-3 segment = %v, want errVersion", err)
	}
}
