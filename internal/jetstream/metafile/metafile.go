// Package metafile writes and reads the metadata files of JetStream
// streams and consumers (meta.json), and removes directory trees, through
// the file-system seam (vfs).
//
// A meta.json holds the JSON of a value followed by a newline and the
// CRC-32C (Castagnoli) of the JSON as 8 hex digits on a line of its own:
//
//	{"config":{...},"created":"2026-01-02T03:04:05Z"}\n
//	1a2b3c4d\n
//
// It is replaced by write-new (meta.json.tmp), fsync, rename, fsync of
// the directory (docs/engine.md, "Durability": metadata files are
// replaced atomically). A file whose checksum or JSON fails gives an
// error wrapping ErrCorrupt; the caller reports it and leaves the
// directory alone, never deletes it.
package metafile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"strconv"

	"github.com/cairnmq/cairn/internal/vfs"
)

// Name is the metadata file's name in its directory; a replacement is
// written as tmpName first.
const (
	Name    = "meta.json"
	tmpName = "meta.json.tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks a meta.json that fails its checksum or decoding.
var ErrCorrupt = errors.New("jetstream: metadata file (meta.json) is corrupt")

// Encode returns the bytes of meta.json: the JSON of v, a newline,
// the CRC-32C of the JSON in 8 hex digits and a newline.
func Encode(v any) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := append(js, '\n')
	out = fmt.Appendf(out, "%08x\n", crc32.Checksum(js, castagnoli))
	return out, nil
}

// Decode checks meta.json and decodes it into v; damage returns an
// error wrapping ErrCorrupt.
func Decode(b []byte, v any) error {
	js, sum, ok := bytes.Cut(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if !ok {
		return fmt.Errorf("%w: no checksum line", ErrCorrupt)
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(js, castagnoli) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if err := json.Unmarshal(js, v); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}

// Write replaces dir/meta.json durably: write meta.json.tmp, fsync it,
// rename it over meta.json, fsync the directory.
func Write(fs vfs.FS, dir string, v any) error {
	b, err := Encode(v)
	if err != nil {
		return err
	}
	tmp := path.Join(dir, tmpName)
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
	if err := fs.Rename(tmp, path.Join(dir, Name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// Read reads and checks dir/meta.json into v.
func Read(fs vfs.FS, dir string, v any) error {
	f, err := fs.Open(path.Join(dir, Name))
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
		return fmt.Errorf("read %s: %w", Name, err)
	}
	return Decode(b, v)
}

// RemoveAll removes dir and everything under it through fs.
func RemoveAll(fs interface {
	ReadDir(string) ([]string, error)
	Stat(string) (int64, bool, error)
	Remove(string) error
}, dir string) error {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		_, isDir, err := fs.Stat(p)
		if err != nil {
			return err
		}
		if isDir {
			err = RemoveAll(fs, p)
		} else {
			err = fs.Remove(p)
		}
		if err != nil {
			return err
		}
	}
	return fs.Remove(dir)
}
