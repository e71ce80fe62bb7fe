// Package vfs is the file-system seam of cairn's storage: every file
// operation of the file store (and, later, of the raft log) goes through
// FS, so tests can simulate power loss, torn writes, bit flips, full disks
// and I/O errors (docs/durability.md section 5).
//
// Implementations:
//
//   - OS: the real file system (package os), with SyncDir doing an fsync of
//     the directory.
//   - CrashFS: an in-memory file system that remembers, per file, what has
//     been synced, and per directory which entries have been synced.
//     Crash returns a new CrashFS holding what a power loss would leave:
//     the synced state plus, at the tester's choice, none, part or all of
//     each file's unsynced writes, possibly torn at a 512-byte boundary;
//     unsynced creations, removals and renames are undone.
//   - FaultFS: a wrapper that makes chosen operations fail (ENOSPC, EIO) by
//     rule, for the error-path tests.
//
// Names are slash-separated paths as given to the os package; the store
// always passes paths under its own directory.
//
// # The crash model of CrashFS
//
// CrashFS follows the strict model of pebble's crashable MemFS: only what
// was explicitly synced is guaranteed, and nothing is made durable as a side
// effect of anything else.
//
//  1. A file (an inode) has a current content, which every read sees, and a
//     durable content: the current content as of its last File.Sync. It also
//     has a low-water mark L: the smallest length the file had since that
//     Sync (Truncate and Create of an existing name lower it). The first L
//     bytes of the current and the durable content are always equal; the
//     bytes from L to the current length are the unsynced tail.
//  2. A directory has a current set of entries (name -> inode), which
//     lookups see, and a durable set: the current set as of its last
//     SyncDir. Create, Remove, Rename and MkdirAll change only current
//     sets. The root directory always exists.
//  3. Crash rebuilds the tree from the root through durable sets only. A
//     creation, removal or rename not followed by SyncDir of the directory
//     concerned is undone: a created and synced file whose directory was
//     never synced vanishes; a file renamed over another reappears under
//     its old name, and the replaced file under the new name, each with its
//     own content. A rename between two directories is undone or kept per
//     directory, so syncing only the target directory leaves the inode
//     under both names (like a hard link) and syncing only the source
//     directory loses it. File.Sync makes content durable, never a name.
//  4. Each surviving file keeps its first L bytes, followed by what
//     CrashOptions.Tail keeps of its unsynced tail, as listed below (if L is
//     below the durable length, point 5 applies first). Bytes below L are
//     never changed by a crash.
//  5. A Truncate (or a Create that truncates an existing file) not followed
//     by Sync leaves, after a crash, either the old length or the truncated
//     one: TailDrop gives the durable content (old length and bytes),
//     TailKeep the current content, and the random modes give, with
//     probability 1/2 each, the durable content or the first L bytes plus
//     the tail handled as above.
//  6. The old CrashFS is marked crashed: every later operation on it and on
//     its open Files fails with ErrCrashed, so a store still running cannot
//     write into the new world. Crash may be called again on a crashed
//     CrashFS to draw other outcomes from the same pre-crash state.
//
// The tail modes of point 4. Sectors are SectorSize-byte ranges at absolute
// file offsets; garbage is random bytes, or zeros with
// CrashOptions.ZeroFill.
//
//   - TailDrop: the durable content exactly.
//   - TailKeep: the current content exactly.
//   - TailPrefix: the first L bytes and a random prefix of the tail.
//   - TailTorn: the tail was written in order and power failed inside a
//     random sector of it: sectors before it are intact, the torn sector
//     holds new bytes up to a random offset and at least one byte of
//     garbage after it, and the file ends at the end of the torn sector
//     (or at the current length, if that comes first).
//   - TailSectors: each sector of the tail is written or not, at random
//     (writes reordered); the file ends at the end of the last written
//     sector (or at L if none was), and the unwritten sectors before it are
//     garbage.
//   - TailAny: one of the above, drawn per file.
//
// All random choices come from CrashOptions.Rand, in a fixed order (files
// visited in name order), so one seed gives one outcome. Tests craft or
// damage disk images with the CrashFS methods WriteFile, TruncateFile,
// FlipBit and SyncAll, which change the durable state directly, and look
// at files with ReadFile.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// FS is every file operation the store performs. Errors are those of the
// os package (wrapped *os.PathError), or the injected ones of FaultFS.
type FS interface {
	// Create creates name, truncating it if it exists, opened for reading
	// and appending. The new directory entry is durable only after SyncDir
	// of its parent.
	Create(name string) (File, error)
	// Open opens an existing file for reading only.
	Open(name string) (File, error)
	// OpenAppend opens an existing file for reading and appending.
	OpenAppend(name string) (File, error)
	// Remove deletes a file or an empty directory. Durable after SyncDir.
	Remove(name string) error
	// Rename atomically replaces newname with oldname. Durable after
	// SyncDir of the directory (or directories) involved.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents (durable after SyncDir
	// of each parent).
	MkdirAll(dir string) error
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// SyncDir makes the entries of dir (creations, removals, renames)
	// durable.
	SyncDir(dir string) error
	// Stat returns the size in bytes of name, and whether it is a directory.
	Stat(name string) (size int64, isDir bool, err error)
}

// InPlaceFS is implemented by an FS whose files can also be written in
// place: OS, CrashFS, and FaultFS over one of them. The raft WAL
// (internal/raftnode) writes its records over zeros it wrote ahead, so
// that an fsync finds no file size or block allocation to record, only
// data: measured on ext4, 2 to 4 times faster than an fsync after an
// append (docs/cluster.md, "The WAL's preallocated space"). An FS that
// wraps another by embedding FS does not implement it, and its users
// fall back to appending.
type InPlaceFS interface {
	FS
	// OpenInPlace opens an existing file for reading, appending (Write)
	// and writing in place (WriteAt). An FS that cannot (a FaultFS over
	// an FS without it) returns an error wrapping errors.ErrUnsupported.
	OpenInPlace(name string) (InPlaceFile, error)
}

// InPlaceFile is a File opened by InPlaceFS.OpenInPlace.
type InPlaceFile interface {
	File
	// WriteAt writes p at off, over what the file holds there, and
	// extends the file if p ends past its end (zero-filled from its end
	// to off if off is past it). It is durable after Sync, as an append.
	// CrashFS treats the bytes from off on as unsynced (the package
	// comment's low-water mark drops to off), so a crash keeps none, part
	// or all of them and cuts the file after what it keeps, or loses the
	// write and keeps the synced content; FaultFS matches it with the
	// rules of OpWrite.
	WriteAt(p []byte, off int64) (int, error)
}

// File is an open file. Writes append at the end of the file; ReadAt may
// read anywhere. A File is not safe for concurrent Write calls, but ReadAt
// may run concurrently with Write and with other ReadAt calls.
type File interface {
	io.ReaderAt
	// Write appends p at the end of the file.
	Write(p []byte) (int, error)
	// Sync makes every byte written so far durable (fdatasync semantics
	// are enough: the file size is included).
	Sync() error
	// Truncate cuts the file to size bytes; durable after Sync.
	Truncate(size int64) error
	// Size returns the current size in bytes (including unsynced writes).
	Size() (int64, error)
	// Close releases the file. It does not sync: unsynced writes stay
	// unsynced.
	Close() error
}

// IsNotExist reports whether err says a file does not exist, for every FS
// implementation, through any wrapping (errors.Is with fs.ErrNotExist).
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// ReplaceFile replaces dir/name with data durably: it writes
// dir/name.new, fsyncs it, renames it over dir/name and fsyncs dir, so
// that after a crash dir/name holds either its old bytes or all of data
// (a leftover name.new is ignored by readers and replaced by the next
// call). dir's own entry in its parent is the caller's to make durable.
// Errors are the file system's, wrapped with the step that failed.
func ReplaceFile(fs FS, dir, name string, data []byte) error {
	tmp, final := path.Join(dir, name+".new"), path.Join(dir, name)
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, final); err != nil {
		return err
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
