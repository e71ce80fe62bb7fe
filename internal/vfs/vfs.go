// Package vfs is the file-system seam of cairn's storage: every file
// operation of the file store (and, later, of the raft log) goes through
// FS, so tests can simulate power loss, torn writes, bit flips, full disks
// and I/O errors (../shared/DESIGN.md section 2;
// ../shared/reference/reliability.md section 5.3).
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
package vfs

import (
	"io"
	"os"
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
	Close() error
}

// IsNotExist reports whether err says a file does not exist, for every FS
// implementation.
func IsNotExist(err error) bool { return os.IsNotExist(err) }
