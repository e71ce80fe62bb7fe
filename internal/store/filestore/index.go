package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"path"

	"github.com/cairnmq/cairn/internal/vfs"
)

// The index file of a sealed segment (package comment, "Index file"):
// what recovery needs of each of its records, so that a segment of large
// messages is opened without reading their payloads.

var idxMagic = []byte("CAIRNIDX")

const (
	// idxHeaderSize is the size of an index file's header: magic,
	// version, entry count, segment size, the segment's header and its
	// last 4 bytes.
	idxHeaderSize = 8 + 4 + 4 + 8 + SegmentHeaderSize + 4
	// idxEntryFixed is the size of an entry's fields before the record's
	// first bytes: its offset and its length uncompressed.
	idxEntryFixed = 8
	// idxMaxBytes bounds the entries an index builder keeps in memory; a
	// segment whose index would be larger gets none.
	idxMaxBytes = 128 << 10
	// idxPays is the ratio of segment to index size below which an index
	// is not written: reading the segment costs little more.
	idxPays = 16
)

// idxName returns the index file name of the segment with the given base.
func idxName(base uint64) string { return fmt.Sprintf("%020d.idx", base) }

// parseIdxName returns the base of an index file name.
func parseIdxName(name string) (uint64, bool) {
	if len(name) != 24 || name[20:] != ".idx" {
		return 0, false
	}
	return parseSegmentName(name[:20] + ".blk")
}

// idxBuilder collects the index of one segment as its records are
// written. It is owned by the flusher's writer (by Open before the
// flusher starts).
type idxBuilder struct {
	header  []byte // the segment's header
	entries []byte
	n       uint32
	end     int64  // the offset after the last record added
	tail    uint32 // the last 4 bytes of the last record added (its CRC)
	dead    bool   // too large, or the segment holds damage: no index
}

// newIdxBuilder starts the index of a segment whose header is header.
func newIdxBuilder(header []byte) *idxBuilder {
	return &idxBuilder{header: bytes.Clone(header[:SegmentHeaderSize]), end: SegmentHeaderSize}
}

// addRecords adds the records of data, which holds whole valid records
// written at file offset origin on.
func (x *idxBuilder) addRecords(data []byte, origin int64) {
	for p := 0; p+RecordOverhead <= len(data); {
		n := int(le.Uint32(data[p:]))
		if n < RecordOverhead || p+n > len(data) {
			x.kill()
			return
		}
		x.add(data[p:p+n], origin+int64(p))
		p += n
	}
}

// add adds the valid record r written at offset off.
func (x *idxBuilder) add(r []byte, off int64) {
	if x.dead {
		return
	}
	if off != x.end {
		x.kill() // not the record after the last one: a gap means damage
		return
	}
	x.end, x.tail = off+int64(len(r)), le.Uint32(r[len(r)-4:])
	if r[4] == recSyncMark {
		return
	}
	rec := decodeRecord(r)
	head := recordFixed + len(rec.subj) + len(rec.hdr)
	if rec.typ == recSkip {
		head += 8
	}
	plain := 0
	if rec.typ == recMsg {
		plain = rec.plainSize()
	}
	x.entries = le.AppendUint32(x.entries, uint32(off))
	x.entries = le.AppendUint32(x.entries, uint32(plain))
	x.entries = append(x.entries, r[:head]...)
	x.n++
	// Past 1 MiB of a segment whose entries already outweigh 1/16 of it
	// (small messages), the index will not pay: stop keeping it.
	if len(x.entries) > idxMaxBytes || x.end >= 1<<20 && int64(len(x.entries))*idxPays > x.end {
		x.kill()
	}
}

// kill gives up the index.
func (x *idxBuilder) kill() { x.dead, x.entries = true, nil }

// pays reports whether the index is worth writing: complete, not empty,
// and much smaller than the segment.
func (x *idxBuilder) pays() bool {
	return !x.dead && x.n > 0 && int64(len(x.entries))*idxPays <= x.end
}

// encode returns the index file's bytes.
func (x *idxBuilder) encode() []byte {
	b := make([]byte, 0, idxHeaderSize+len(x.entries)+4)
	b = append(b, idxMagic...)
	b = le.AppendUint32(b, formatVersion)
	b = le.AppendUint32(b, x.n)
	b = le.AppendUint64(b, uint64(x.end))
	b = append(b, x.header...)
	b = le.AppendUint32(b, x.tail)
	b = append(b, x.entries...)
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// writeIndex writes the index of the sealed segment g, if it pays. The
// file is not fsynced: one lost or torn by a crash fails its checks and
// the segment is read instead. An error is logged, not returned: the
// index is an optimisation.
func (s *Store) writeIndex(g *segment, x *idxBuilder) {
	if x == nil || !x.pays() {
		return
	}
	name := path.Join(s.msgsDir, idxName(g.base))
	f, err := s.fs.Create(name)
	if err == nil {
		_, err = f.Write(x.encode())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		s.cfg.Logf("filestore: %s: write the index of the segment: %v (the segment is read in full at the next open)", name, err)
		_ = s.fs.Remove(name)
	}
}

// removeIndex removes the index file of the segment with the given base,
// if any.
func (s *Store) removeIndex(base uint64) error {
	err := s.fs.Remove(path.Join(s.msgsDir, idxName(base)))
	if err != nil && !vfs.IsNotExist(err) {
		return err
	}
	return nil
}

// segIndex is a sealed segment opened through its index.
type segIndex struct {
	f       vfs.File
	hdr     segHeader
	size    int64
	entries []byte
	n       int // entries
	msgs    int // message entries
}

// errIdx says an index file does not describe its segment.
var errIdx = errors.New("index does not match its segment")

// openIndexed opens the segment file name through its index file: nil
// when there is no valid index for it as it is (missing, damaged, or of
// another segment's content: size, header or last bytes differ), and the
// segment is then read in full.
func (s *Store) openIndexed(name string, base uint64) *segIndex {
	b, err := readWhole(s.fs, path.Join(s.msgsDir, idxName(base)))
	if err != nil {
		return nil
	}
	f, err := s.fs.Open(path.Join(s.msgsDir, name))
	if err != nil {
		return nil
	}
	ix, err := checkIndex(b, f, base)
	if err == nil {
		ix.msgs, err = ix.count()
	}
	if err != nil {
		f.Close()
		return nil
	}
	return ix
}

// checkIndex checks the index file b against the segment file f.
func checkIndex(b []byte, f vfs.File, base uint64) (*segIndex, error) {
	if len(b) < idxHeaderSize+4 || !bytes.Equal(b[:8], idxMagic) || le.Uint32(b[8:]) != formatVersion ||
		crc32.Checksum(b[:len(b)-4], crcTable) != le.Uint32(b[len(b)-4:]) {
		return nil, errIdx
	}
	size, err := f.Size()
	if err != nil || uint64(size) != le.Uint64(b[16:]) || size < SegmentHeaderSize+RecordOverhead {
		return nil, errIdx
	}
	var head [SegmentHeaderSize]byte
	var tail [4]byte
	if err := readFull(f, head[:], 0); err != nil {
		return nil, err
	}
	if err := readFull(f, tail[:], size-4); err != nil {
		return nil, err
	}
	hb := b[24 : 24+SegmentHeaderSize]
	if !bytes.Equal(head[:], hb) || le.Uint32(b[24+SegmentHeaderSize:]) != le.Uint32(tail[:]) {
		return nil, errIdx
	}
	hdr, err := parseSegHeader(hb)
	if err != nil || hdr.base != base {
		return nil, errIdx
	}
	return &segIndex{f: f, hdr: hdr, size: size, entries: b[idxHeaderSize : len(b)-4], n: int(le.Uint32(b[12:]))}, nil
}

// records decodes the index's entries, in order, and calls fn with each
// record's offset and fields (no payload: data is nil, or a skip record's
// 8 bytes). It returns errIdx for an entry that is not well formed; fn
// has then been called for the entries before it.
func (ix *segIndex) records(fn func(off int, rec record)) error {
	e := ix.entries
	prevEnd := int64(SegmentHeaderSize)
	for k := 0; k < ix.n; k++ {
		if len(e) < idxEntryFixed+recordFixed {
			return errIdx
		}
		off, plain := int64(le.Uint32(e)), int(le.Uint32(e[4:]))
		r := e[idxEntryFixed:]
		n, typ, flags := int(le.Uint32(r)), r[4], r[5]
		s, h := int(le.Uint16(r[6:])), int(le.Uint32(r[24:]))
		head := recordFixed + s + h
		if typ == recSkip {
			head += 8
		}
		switch {
		case !knownTypeFlags(typ, flags) || typ == recSyncMark, off < prevEnd, n < RecordOverhead+s+h, off+int64(n) > ix.size,
			len(r) < head, typ == recSkip && n != skipRecordSize, typ == recMsg && (plain < RecordOverhead+s+h || plain > MaxRecordSize),
			typ == recMsg && flags != flagS2 && plain != n:
			return errIdx
		}
		rec := record{typ: typ, seq: le.Uint64(r[8:]), time: int64(le.Uint64(r[16:])), size: n,
			subj: r[recordFixed : recordFixed+s : recordFixed+s], hdr: r[recordFixed+s : recordFixed+s+h : recordFixed+s+h]}
		if typ == recSkip {
			rec.data = r[head-8 : head : head]
		}
		if typ == recMsg {
			rec.packed = flags == flagS2
			rec.plain = plain - n + len(rec.data) // plainSize() = plain
		}
		fn(int(off), rec)
		prevEnd = off + int64(n)
		e = r[head:]
	}
	if len(e) != 0 {
		return errIdx
	}
	return nil
}

// count checks every entry and returns the number of message entries.
func (ix *segIndex) count() (int, error) {
	k := 0
	err := ix.records(func(_ int, rec record) {
		if rec.typ == recMsg {
			k++
		}
	})
	return k, err
}
