package filestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/s2"
)

// Sizes that are part of the on-disk format (see the package comment).
const (
	// SegmentHeaderSize is the size in bytes of a segment file's header.
	SegmentHeaderSize = 48
	// RecordOverhead is the size in bytes of a record's fixed fields: 28
	// before the subject and 4 of CRC at the end.
	RecordOverhead = 32
	// MaxSubjectLen is the longest subject a record holds (a u16 field).
	MaxSubjectLen = 1<<16 - 1
	// MaxRecordSize is the largest record, overhead included.
	MaxRecordSize = 128 << 20
)

// formatVersion is the version of every file this package writes, but
// for segments that may hold compressed records (segVersionS2).
const formatVersion = 1

// segVersionS2 is the version of a segment that may hold records with
// flagS2: a build that does not know compression refuses it.
const segVersionS2 = 2

// flagS2 marks a message record whose payload is one S2 block.
const flagS2 byte = 0x01

// recordFixed is the size of a record's fields before the subject.
const recordFixed = 28

// Record types. The values are on disk: append only.
const (
	recMsg      byte = 1 // a message
	recDelete   byte = 2 // seq was removed
	recCompact  byte = 3 // every sequence below seq was removed
	recSyncMark byte = 4 // the first seq bytes of the file were synced
	recSkip     byte = 5 // sequences from the payload's u64 to seq-1 were never stored
)

// lastRecType is the highest record type this version knows.
const lastRecType = recSkip

// skipRecordSize is L of a skip record: its payload is one u64.
const skipRecordSize = RecordOverhead + 8

var (
	le       = binary.LittleEndian
	crcTable = crc32.MakeTable(crc32.Castagnoli)
	segMagic = []byte("CAIRNSEG")
)

// Reasons a record or header fails its checks. They are sentinels so that
// the resynchronizing scan allocates nothing.
var (
	errShort    = errors.New("truncated")
	errLength   = errors.New("bad length")
	errType     = errors.New("unknown type or flags")
	errCRC      = errors.New("checksum mismatch")
	errMagic    = errors.New("bad magic")
	errVersion  = errors.New("unsupported format version")
	errMismatch = errors.New("base differs from the file name")
	errSkip     = errors.New("bad skip record")
	errS2       = errors.New("bad compressed payload")
)

// record is a decoded record. Its slices point into the buffer it was
// decoded from.
type record struct {
	typ  byte
	seq  uint64
	time int64
	subj []byte
	hdr  []byte
	data []byte // the payload as stored: an S2 block when packed
	size int    // L, the whole record
	// packed says data is S2-compressed (flagS2); plain is the length of
	// the payload it decodes to (len(data) when not packed).
	packed bool
	plain  int
}

// recordSize returns L for a record with these fields.
func recordSize(subj string, hdr, data []byte) int {
	return RecordOverhead + len(subj) + len(hdr) + len(data)
}

// recordCRC returns the CRC of the record body b (everything but the CRC)
// written at offset off of the segment with the given base.
func recordCRC(base uint64, off int64, b []byte) uint32 {
	var seed [16]byte
	le.PutUint64(seed[0:], base)
	le.PutUint64(seed[8:], uint64(off))
	return crc32.Update(crc32.Update(0, crcTable, seed[:]), crcTable, b)
}

// appendRecord appends one record to buf, which holds the segment's bytes
// from offset 0, so len(buf) is the record's offset in the file.
func appendRecord(buf []byte, base uint64, typ byte, seq uint64, tm int64, subj string, hdr, data []byte) []byte {
	return appendRecordFlags(buf, base, typ, 0, seq, tm, subj, hdr, data)
}

// appendRecordFlags is appendRecord with a flags byte: flagS2 when data is
// an S2 block.
func appendRecordFlags(buf []byte, base uint64, typ, flags byte, seq uint64, tm int64, subj string, hdr, data []byte) []byte {
	return appendRecordAt(buf, 0, base, typ, flags, seq, tm, subj, hdr, data)
}

// appendRecordAt is appendRecordFlags for a buf that holds the segment's
// bytes from file offset origin: origin+len(buf) is the record's offset,
// which its CRC covers.
func appendRecordAt(buf []byte, origin int64, base uint64, typ, flags byte, seq uint64, tm int64, subj string, hdr, data []byte) []byte {
	off := len(buf)
	buf = le.AppendUint32(buf, uint32(recordSize(subj, hdr, data)))
	buf = append(buf, typ, flags)
	buf = le.AppendUint16(buf, uint16(len(subj)))
	buf = le.AppendUint64(buf, seq)
	buf = le.AppendUint64(buf, uint64(tm))
	buf = le.AppendUint32(buf, uint32(len(hdr)))
	buf = append(buf, subj...)
	buf = append(buf, hdr...)
	buf = append(buf, data...)
	return le.AppendUint32(buf, recordCRC(base, origin+int64(off), buf[off:]))
}

// checkRecord verifies the record at the start of r, which was read from
// offset off of the segment with the given base, and returns its length.
func checkRecord(r []byte, base uint64, off int64) (int, error) {
	if len(r) < RecordOverhead {
		return 0, errShort
	}
	n := int(le.Uint32(r))
	switch {
	case n < RecordOverhead || n > MaxRecordSize:
		return 0, errLength
	case n > len(r):
		return 0, errShort
	case !knownTypeFlags(r[4], r[5]):
		return 0, errType
	case int(le.Uint16(r[6:]))+int(le.Uint32(r[24:])) > n-RecordOverhead:
		return 0, errLength
	case r[4] == recSkip && !validSkip(r[:n]):
		return 0, errSkip
	case recordCRC(base, off, r[:n-4]) != le.Uint32(r[n-4:]):
		return 0, errCRC
	case r[5] == flagS2:
		if _, err := packedLen(r[:n]); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// knownTypeFlags reports whether a record's type and flags bytes are ones
// this version writes: a known type with flags 0, or a message with
// flagS2.
func knownTypeFlags(typ, flags byte) bool {
	return typ >= recMsg && typ <= lastRecType && (flags == 0 || flags == flagS2 && typ == recMsg)
}

// packedLen returns P, the decoded length of the S2 payload of the record
// r (checked to have valid L, S and H), or errS2 when it cannot be read
// or the record it decodes to would exceed MaxRecordSize.
func packedLen(r []byte) (int, error) {
	n := len(r)
	sh := int(le.Uint16(r[6:])) + int(le.Uint32(r[24:]))
	p, err := s2.DecodedLen(r[recordFixed+sh : n-4])
	if err != nil || p > MaxRecordSize-RecordOverhead-sh {
		return 0, errS2
	}
	return p, nil
}

// unpack returns the payload of rec decoded: rec.data itself when it is
// not packed, else a new buffer of rec.plain bytes. It returns errS2 when
// the block does not decode to exactly rec.plain bytes; it never allocates
// more than rec.plain, which checkRecord bounded by MaxRecordSize.
func unpack(rec record) ([]byte, error) {
	if !rec.packed {
		return rec.data, nil
	}
	if p, err := s2.DecodedLen(rec.data); err != nil || p != rec.plain || p > MaxRecordSize {
		return nil, errS2
	}
	out, err := s2.Decode(make([]byte, rec.plain), rec.data)
	if err != nil || len(out) != rec.plain {
		return nil, errS2
	}
	return out, nil
}

// decodeRecord decodes the record at the start of b, which checkRecord
// has accepted.
func decodeRecord(b []byte) record {
	n := int(le.Uint32(b))
	s := int(le.Uint16(b[6:]))
	h := int(le.Uint32(b[24:]))
	rec := record{
		typ:  b[4],
		seq:  le.Uint64(b[8:]),
		time: int64(le.Uint64(b[16:])),
		subj: b[recordFixed : recordFixed+s : recordFixed+s],
		hdr:  b[recordFixed+s : recordFixed+s+h : recordFixed+s+h],
		data: b[recordFixed+s+h : n-4 : n-4],
		size: n,
	}
	rec.plain = len(rec.data)
	if b[5] == flagS2 {
		rec.packed = true
		rec.plain, _ = packedLen(b[:n])
	}
	return rec
}

// plainSize returns L of the record as it would be uncompressed: the
// length store.MsgSize is derived from.
func (r record) plainSize() int { return r.size - len(r.data) + r.plain }

// segHeader is the decoded header of a segment file.
type segHeader struct {
	base     uint64
	lowWater uint64
	lastTime int64
	s2       bool // version segVersionS2: may hold compressed records
}

// encode returns the header's bytes.
func (h segHeader) encode() []byte {
	b := make([]byte, 0, SegmentHeaderSize)
	b = append(b, segMagic...)
	v := uint32(formatVersion)
	if h.s2 {
		v = segVersionS2
	}
	b = le.AppendUint32(b, v)
	b = le.AppendUint32(b, SegmentHeaderSize)
	b = le.AppendUint64(b, h.base)
	b = le.AppendUint64(b, h.lowWater)
	b = le.AppendUint64(b, uint64(h.lastTime))
	b = le.AppendUint32(b, 0)
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// parseSegHeader decodes and checks a segment header. errVersion means a
// valid header of a format this code does not know.
func parseSegHeader(b []byte) (segHeader, error) {
	if len(b) < SegmentHeaderSize {
		return segHeader{}, errShort
	}
	if string(b[:8]) != string(segMagic) {
		return segHeader{}, errMagic
	}
	if crc32.Checksum(b[:44], crcTable) != le.Uint32(b[44:]) {
		return segHeader{}, errCRC
	}
	v := le.Uint32(b[8:])
	if v != formatVersion && v != segVersionS2 || le.Uint32(b[12:]) != SegmentHeaderSize {
		return segHeader{}, errVersion
	}
	h := segHeader{base: le.Uint64(b[16:]), lowWater: le.Uint64(b[24:]), lastTime: int64(le.Uint64(b[32:]))}
	h.s2 = v == segVersionS2
	return h, nil
}

// segmentName returns the file name of the segment with the given base.
func segmentName(base uint64) string { return fmt.Sprintf("%020d.blk", base) }

// parseSegmentName returns the base of a segment file name, or false for
// a name that is not exactly 20 digits and ".blk".
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != 24 || name[20:] != ".blk" {
		return 0, false
	}
	var base uint64
	for _, c := range []byte(name[:20]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if base > (1<<64-1-d)/10 {
			return 0, false
		}
		base = base*10 + d
	}
	return base, base > 0
}
