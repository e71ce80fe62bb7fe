package vfs

import "os"

// OS returns the FS of the real file system (package os). Files are created
// with permission 0o600 and directories with 0o700, readable by the
// server's user only, as nats-server v2.15.2's stores (filestore.go
// defaultFilePerms, defaultDirPerms): messages and credentials in them
// are no business of other users of the host. File.Sync and
// SyncDir call fsync(2) (os.File.Sync), which also covers what fdatasync
// would. Errors are those of package os, mostly *os.PathError.
func OS() FS { return osFS{} }

// osFS is the FS of OS.
type osFS struct{}

// osFile is a File over an *os.File opened by osFS.
type osFile struct {
	*os.File
}

func (osFS) Create(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND)
}

func (osFS) Open(name string) (File, error) { return openOS(name, os.O_RDONLY) }

func (osFS) OpenAppend(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_APPEND)
}

// OpenInPlace opens name for reading and writing without O_APPEND (which
// refuses pwrite): Write appends by writing at the file's current size.
func (osFS) OpenInPlace(name string) (InPlaceFile, error) {
	f, err := os.OpenFile(name, os.O_RDWR, filePerm)
	if err != nil {
		return nil, err
	}
	return osInPlaceFile{osFile{f}}, nil
}

// osInPlaceFile is a File of OpenInPlace.
type osInPlaceFile struct {
	osFile
}

// Write appends p at the file's current end.
func (f osInPlaceFile) Write(p []byte) (int, error) {
	size, err := f.Size()
	if err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, size)
}

func openOS(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, filePerm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) MkdirAll(dir string) error { return os.MkdirAll(dir, dirPerm) }

// The permissions of what OS creates.
const (
	filePerm = 0o600
	dirPerm  = 0o700
)

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, err
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

func (osFS) Stat(name string) (int64, bool, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, false, err
	}
	return fi.Size(), fi.IsDir(), nil
}

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
