package vfs

import (
	"errors"
	"os"
)

// faultFile is a File of a FaultFS: each method asks the FaultFS rules
// (with the name the file was opened with) before calling the inner File.
type faultFile struct {
	fs    *FaultFS
	name  string
	inner File
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if r := f.fs.fault(OpReadAt, f.name); r != nil {
		return 0, r.err(OpReadAt, f.name)
	}
	return f.inner.ReadAt(p, off)
}

// Write fails as its rule says; a Short rule first writes a prefix of p.
func (f *faultFile) Write(p []byte) (int, error) {
	r := f.fs.fault(OpWrite, f.name)
	if r == nil {
		return f.inner.Write(p)
	}
	n := min(r.Short, max(len(p)-1, 0))
	if n > 0 {
		n, _ = f.inner.Write(p[:n])
	}
	return n, r.err(OpWrite, f.name)
}

// WriteAt writes in place on the inner file (OpenInPlace made it an
// InPlaceFile), failing as the rules of OpWrite say; a Short rule first
// writes a prefix of p.
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	ip, ok := f.inner.(InPlaceFile)
	if !ok {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: errors.ErrUnsupported}
	}
	r := f.fs.fault(OpWrite, f.name)
	if r == nil {
		return ip.WriteAt(p, off)
	}
	n := min(r.Short, max(len(p)-1, 0))
	if n > 0 {
		n, _ = ip.WriteAt(p[:n], off)
	}
	return n, r.err(OpWrite, f.name)
}

func (f *faultFile) Sync() error {
	if r := f.fs.fault(OpSync, f.name); r != nil {
		return r.err(OpSync, f.name)
	}
	return f.inner.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if r := f.fs.fault(OpTruncate, f.name); r != nil {
		return r.err(OpTruncate, f.name)
	}
	return f.inner.Truncate(size)
}

func (f *faultFile) Size() (int64, error) {
	if r := f.fs.fault(OpSize, f.name); r != nil {
		return 0, r.err(OpSize, f.name)
	}
	return f.inner.Size()
}

// Close closes the inner file even when a rule fails the call, as close(2)
// releases the descriptor even when it reports an error.
func (f *faultFile) Close() error {
	err := f.inner.Close()
	if r := f.fs.fault(OpClose, f.name); r != nil {
		return r.err(OpClose, f.name)
	}
	return err
}
