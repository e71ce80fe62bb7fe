package vfs

import (
	"bytes"
	"maps"
	"strings"
	"syscall"
)

// This file holds the CrashFS methods that only tests use: they look at or
// change the disk directly, durably, as a crafted or damaged disk image
// would be, bypassing the crash model.

// ReadFile returns a copy of the current content of the file name.
func (fs *CrashFS) ReadFile(name string) ([]byte, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.fileLocked(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return bytes.Clone(n.data), nil
}

// WriteFile creates or replaces the file name with a copy of data, creating
// missing parent directories, and makes all of it durable: the content and
// every directory entry on the path (as though synced, but without syncing
// anything else). An existing file keeps its identity.
func (fs *CrashFS) WriteFile(name string, data []byte) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return pathErr("open", name, fs.writeFileLocked(name, data))
}

func (fs *CrashFS) writeFileLocked(name string, data []byte) error {
	parts := splitPath(name)
	if len(parts) == 0 {
		return syscall.EISDIR
	}
	dir, err := fs.mkdirAllLocked(strings.Join(parts[:len(parts)-1], "/"), true)
	if err != nil {
		return err
	}
	base := parts[len(parts)-1]
	n := dir.cur[base]
	if n == nil {
		n = &inode{}
	} else if n.isDir {
		return syscall.EISDIR
	}
	dir.cur[base], dir.dur[base] = n, n
	n.setData(bytes.Clone(data))
	return nil
}

// TruncateFile sets the length of the file name to size bytes (cutting, or
// extending with zeros) and makes its whole current content durable, as
// though synced. Directory entries are not touched.
func (fs *CrashFS) TruncateFile(name string, size int64) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.fileLocked(name)
	if err == nil && size < 0 {
		err = syscall.EINVAL
	}
	if err != nil {
		return pathErr("truncate", name, err)
	}
	b := make([]byte, size)
	copy(b, n.data)
	n.setData(b)
	return nil
}

// FlipBit inverts bit bitOffset%8 (0 is the least significant) of byte
// bitOffset/8 of the file name, in its current content and, if that byte
// is durable, in its durable content too, like a media error. It fails with
// EINVAL if the byte is beyond the current length.
func (fs *CrashFS) FlipBit(name string, bitOffset int64) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.fileLocked(name)
	i := bitOffset / 8
	if err == nil && (bitOffset < 0 || i >= int64(len(n.data))) {
		err = syscall.EINVAL
	}
	if err != nil {
		return pathErr("flipbit", name, err)
	}
	mask := byte(1) << (bitOffset % 8)
	n.data = bytes.Clone(n.data) // never write in place: synced may share it
	n.data[i] ^= mask
	if i < int64(len(n.synced)) {
		n.synced = bytes.Clone(n.synced)
		n.synced[i] ^= mask
	}
	return nil
}

// SyncAll makes everything reachable from the root durable, like sync(2)
// followed by a clean shutdown: every file's content and every directory's
// entries. It is for test setup, not a substitute for the store's syncs.
func (fs *CrashFS) SyncAll() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.checkLocked(); err != nil {
		return pathErr("sync", "/", err)
	}
	syncTree(fs.mu.root, map[*inode]bool{})
	return nil
}

func syncTree(n *inode, seen map[*inode]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	if !n.isDir {
		n.sync()
		return
	}
	n.dur = maps.Clone(n.cur)
	for _, c := range n.cur {
		syncTree(c, seen)
	}
}

// Durable returns a new CrashFS holding what a power loss that keeps
// nothing unsynced (TailDrop) would leave on the disk now, and leaves fs
// as it is, usable: a look at what is durable at this moment (a
// simulator checks what a majority of its nodes hold durably). A crashed
// fs gives its last state.
func (fs *CrashFS) Durable() *CrashFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c := &cloner{opts: CrashOptions{Tail: TailDrop}, done: map[*inode]*inode{}}
	out := &CrashFS{}
	out.mu.root = c.clone(fs.mu.root)
	return out
}

// fileLocked returns the inode of the file (not directory) name.
func (fs *CrashFS) fileLocked(name string) (*inode, error) {
	n, err := fs.lookupLocked(name)
	if err == nil && n.isDir {
		err = syscall.EISDIR
	}
	return n, err
}
