package filestore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"path"

	"github.com/cairnmq/cairn/internal/vfs"
)

// The checkpoint file (package comment, "Checkpoint file") records, outside
// the segments, how far the log was durable: recovery compares it with
// what the segments still hold, so that a cut or removed last segment is
// reported lost and its sequences are never assigned again.

const (
	// ckptName is the checkpoint file's name in the store's directory.
	ckptName = "checkpoint"
	// ckptHeaderSize is the size of its header, ckptRecordSize of each
	// record after it.
	ckptHeaderSize = 16
	ckptRecordSize = 16
	// ckptCompactMax is the size above which the syncer replaces the
	// checkpoint file with one of a single record (every 4096 notes), and
	// Open one it could otherwise keep appending to.
	ckptCompactMax = 64 << 10
)

var ckptMagic = []byte("CAIRNCKP")

// encodeCkptHeader returns the checkpoint file's header.
func encodeCkptHeader() []byte {
	b := append(make([]byte, 0, ckptHeaderSize), ckptMagic...)
	b = le.AppendUint32(b, formatVersion)
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// appendCkptRecord appends the record of seq written at offset off.
func appendCkptRecord(b []byte, off int64, seq uint64) []byte {
	start := len(b)
	b = le.AppendUint64(b, seq)
	b = le.AppendUint32(b, 0)
	return le.AppendUint32(b, ckptRecordCRC(off, b[start:]))
}

// ckptRecordCRC is the CRC of the record body b (seq and reserved) written
// at offset off.
func ckptRecordCRC(off int64, b []byte) uint32 {
	var seed [8]byte
	le.PutUint64(seed[:], uint64(off))
	return crc32.Update(crc32.Update(0, crcTable, seed[:]), crcTable, b)
}

// ckptScan is what a checkpoint file holds.
type ckptScan struct {
	found  bool   // the file exists
	seq    uint64 // the largest seq of a valid record; 0 when none
	valid  int    // valid records
	size   int    // bytes of the file
	hdrBad bool   // the file exists but its header fails its checks
	clean  bool   // a valid header, then only valid records, nothing else
}

// scanCheckpoint reads the checkpoint file of the store in dir. A damaged
// header or record is skipped (records carry their own CRC); only an I/O
// error other than a missing file is returned.
func scanCheckpoint(fs vfs.FS, dir string) (ckptScan, error) {
	b, err := readWhole(fs, path.Join(dir, ckptName))
	if vfs.IsNotExist(err) {
		return ckptScan{}, nil
	}
	if err != nil {
		return ckptScan{}, err
	}
	sc := ckptScan{found: true, size: len(b)}
	hdrOK := len(b) >= ckptHeaderSize && string(b[:8]) == string(ckptMagic) &&
		crc32.Checksum(b[:12], crcTable) == le.Uint32(b[12:])
	if hdrOK && le.Uint32(b[8:]) != formatVersion {
		return ckptScan{}, fmt.Errorf("%w %d", errCkptVersion, le.Uint32(b[8:]))
	}
	for off := ckptHeaderSize; off+ckptRecordSize <= len(b); off += ckptRecordSize {
		r := b[off : off+ckptRecordSize]
		if le.Uint32(r[8:]) != 0 || ckptRecordCRC(int64(off), r[:12]) != le.Uint32(r[12:]) {
			continue
		}
		sc.seq = max(sc.seq, le.Uint64(r))
		sc.valid++
	}
	sc.hdrBad = !hdrOK
	sc.clean = hdrOK && (len(b)-ckptHeaderSize)%ckptRecordSize == 0 &&
		sc.valid == (len(b)-ckptHeaderSize)/ckptRecordSize
	return sc, nil
}

// errCkptVersion is a checkpoint header of a version this build does not
// know.
var errCkptVersion = errors.New("checkpoint: unsupported format version")

// checkpoint writes the checkpoint file. It has one owner at a time:
// Open, then the flusher's syncer, then Close once the syncer has
// stopped; so it has no lock.
type checkpoint struct {
	fs   vfs.FS
	dir  string
	max  int64    // the size past which full reports true
	f    vfs.File // open for appending; nil when closed
	seq  uint64   // the largest seq written to the file
	size int64    // bytes of the file
}

func newCheckpoint(fs vfs.FS, dir string, max int64) *checkpoint {
	return &checkpoint{fs: fs, dir: dir, max: max}
}

// keep opens an existing, clean checkpoint file holding seq for appending.
func (c *checkpoint) keep(seq uint64) error {
	f, err := c.fs.OpenAppend(path.Join(c.dir, ckptName))
	if err != nil {
		return err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return err
	}
	c.f, c.seq, c.size = f, seq, size
	return nil
}

// note appends a record of seq if it is above the largest written,
// without fsync: every sequence through seq must be durable already (the
// syncer notes after its fsync). A closed checkpoint ignores it.
func (c *checkpoint) note(seq uint64) error {
	if c.f == nil || seq <= c.seq {
		return nil
	}
	rec := appendCkptRecord(make([]byte, 0, ckptRecordSize), c.size, seq)
	if _, err := c.f.Write(rec); err != nil {
		return fmt.Errorf("write %s: %w", path.Join(c.dir, ckptName), err)
	}
	c.seq, c.size = seq, c.size+ckptRecordSize
	return nil
}

// full reports whether the file has grown past its maximum
// (ckptCompactMax).
func (c *checkpoint) full() bool { return c.f != nil && c.size > c.max }

// replace puts in place of the checkpoint file a new one holding
// max(floor, the largest seq written), and appends to it from now on:
// write-new, fsync, rename. floor must be durable already. The directory
// is not fsynced: after a power loss either file may be there, and each
// holds only true records (the old one, a lower value).
func (c *checkpoint) replace(floor uint64) error {
	seq := max(floor, c.seq)
	tmp, name := path.Join(c.dir, ckptName+".new"), path.Join(c.dir, ckptName)
	f, err := c.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	b := appendCkptRecord(encodeCkptHeader(), ckptHeaderSize, seq)
	if err := writeSync(f, tmp, b); err != nil {
		f.Close()
		return err
	}
	if err := c.fs.Rename(tmp, name); err != nil {
		f.Close()
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if c.f != nil {
		c.f.Close()
	}
	c.f, c.seq, c.size = f, seq, int64(len(b))
	return nil
}

// close fsyncs and closes the file: what the notes wrote survives a
// power loss after a clean shutdown.
func (c *checkpoint) close() error {
	if c.f == nil {
		return nil
	}
	err := c.f.Sync()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	if err != nil {
		return fmt.Errorf("sync %s: %w", path.Join(c.dir, ckptName), err)
	}
	return nil
}
