package vfs

import (
	"io"
	"os"
	"syscall"
)

// crashFile is a File of a CrashFS. Its fields, and the inode, are guarded
// by the CrashFS mu.
type crashFile struct {
	fs       *CrashFS
	name     string
	n        *inode
	writable bool // opened by Create or OpenAppend
	closed   bool
}

// checkLocked returns why the file cannot be used for op, if it cannot.
func (f *crashFile) checkLocked(op string, write bool) error {
	var err error
	switch {
	case f.fs.mu.crashed:
		err = ErrCrashed
	case f.closed:
		err = os.ErrClosed
	case write && !f.writable:
		err = syscall.EBADF
	}
	return pathErr(op, f.name, err)
}

// ReadAt reads from the current content; it returns io.EOF when it reads
// fewer than len(p) bytes.
func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Write appends p to the current content.
func (f *crashFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	f.n.data = append(f.n.data, p...)
	return len(p), nil
}

// WriteAt writes p at off (InPlaceFile).
func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	f.n.writeAt(p, int(off))
	return len(p), nil
}

// Sync makes the current content durable.
func (f *crashFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("sync", false); err != nil {
		return err
	}
	f.n.sync()
	return nil
}

// Truncate sets the current length to size, zero-extending if it grows.
func (f *crashFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.n.truncate(int(size))
	return nil
}

// Size returns the current length.
func (f *crashFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

// Close marks the file closed; later calls fail with os.ErrClosed.
func (f *crashFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}
