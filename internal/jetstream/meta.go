package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"strconv"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// metaFile is the content of a stream's meta.json.
type metaFile struct {
	Config  stream.Config `json:"config"`
	Created time.Time     `json:"created"`
}

const (
	metaName    = "meta.json"
	metaTmpName = "meta.json.tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errMetaCorrupt marks a meta.json that fails its checksum or decoding.
var errMetaCorrupt = errors.New("jetstream: metadata file (meta.json) is corrupt")

// consumerMeta is the content of a persisted consumer's meta.json (durable or ephemeral).
type consumerMeta struct {
	Config  consumer.Config `json:"config"`
	Created time.Time       `json:"created"`
}

// encodeMeta returns the bytes of meta.json: the JSON of v, a newline,
// the CRC-32C of the JSON in 8 hex digits and a newline.
func encodeMeta(v any) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := append(js, '\n')
	out = fmt.Appendf(out, "%08x\n", crc32.Checksum(js, castagnoli))
	return out, nil
}

// decodeMeta checks meta.json and decodes it into v; damage returns an
// error wrapping errMetaCorrupt.
func decodeMeta(b []byte, v any) error {
	js, sum, ok := bytes.Cut(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if !ok {
		return fmt.Errorf("%w: no checksum line", errMetaCorrupt)
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(js, castagnoli) {
		return fmt.Errorf("%w: checksum mismatch", errMetaCorrupt)
	}
	if err := json.Unmarshal(js, v); err != nil {
		return fmt.Errorf("%w: %v", errMetaCorrupt, err)
	}
	return nil
}

// writeMeta replaces dir/meta.json durably: write meta.json.tmp, fsync it,
// rename it over meta.json, fsync the directory.
func writeMeta(fs vfs.FS, dir string, v any) error {
	b, err := encodeMeta(v)
	if err != nil {
		return err
	}
	tmp := path.Join(dir, metaTmpName)
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path.Join(dir, metaName)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// readMeta reads and checks dir/meta.json into v.
func readMeta(fs vfs.FS, dir string, v any) error {
	f, err := fs.Open(path.Join(dir, metaName))
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return err
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return fmt.Errorf("read %s: %w", metaName, err)
	}
	return decodeMeta(b, v)
}
