package meta

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path"

	"github.com/cairnmq/cairn/internal/vfs"
)

// checkpointName is the checkpoint file in Config.Dir (package comment,
// "Snapshot encoding": | applied index (8, LE) | snapshot | CRC-32C (4) |).
const checkpointName = "meta.snap"

// writeCheckpoint replaces dir/meta.snap durably: write meta.snap.new,
// fsync it, rename it, fsync the directory.
func writeCheckpoint(fs vfs.FS, dir string, index uint64, snap []byte) error {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, 12+len(snap)), index)
	b = append(b, snap...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	if err := vfs.ReplaceFile(fs, dir, checkpointName, b); err != nil {
		return err
	}
	return fs.SyncDir(path.Dir(dir)) // the directory itself, when this made it
}

// readCheckpoint returns the state and index of dir/meta.snap, or a nil
// state if there is no such file. Damage is an error wrapping
// ErrBadSnapshot.
func readCheckpoint(fs vfs.FS, dir string) (*State, uint64, error) {
	f, err := fs.Open(path.Join(dir, checkpointName))
	if vfs.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, 0, err
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, 0, fmt.Errorf("meta: read %s: %w", checkpointName, err)
	}
	if len(b) < 12 || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, 0, fmt.Errorf("%w: %s: checksum", ErrBadSnapshot, checkpointName)
	}
	st, err := DecodeSnapshot(b[8 : len(b)-4])
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", checkpointName, err)
	}
	return st, binary.LittleEndian.Uint64(b), nil
}
