package vfs

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// ErrCrashed is the error (inside an *os.PathError) of every operation on a
// CrashFS after its Crash, and on the Files opened from it.
var ErrCrashed = errors.New("vfs: file system crashed")

// CrashFS is an in-memory FS that simulates power loss; the package comment
// gives its crash model. Names are cleaned with path.Clean and all resolve
// from one root: "a/b", "/a/b" and "./a/b" name the same file. Directories
// cannot be opened as Files (EISDIR), and Stat reports size 0 for them.
// Errors are *os.PathError (*os.LinkError for Rename) holding an errno of
// package syscall (as os would on Linux), os.ErrClosed or ErrCrashed.
//
// A CrashFS and its Files are safe for concurrent use: one mutex guards the
// whole tree, and no method calls out while holding it.
type CrashFS struct {
	mu struct {
		sync.Mutex
		root    *inode // always a directory
		crashed bool   // set by Crash; every operation then fails
	}
}

// inode is a file or a directory of a CrashFS, guarded by the CrashFS mu.
// File contents are never written in place below the length of synced
// without a copy first (writeAt), so synced may share its backing array
// with data (see setData and sync).
type inode struct {
	isDir bool

	// Files. Invariants: low <= len(synced), low <= len(data),
	// data[:low] == synced[:low].
	data   []byte // current content
	synced []byte // durable content, as of the last Sync
	low    int    // smallest length since the last Sync

	// Directories.
	cur map[string]*inode // current entries
	dur map[string]*inode // durable entries, as of the last SyncDir
}

// NewCrashFS returns an empty CrashFS holding only its (durable) root
// directory.
func NewCrashFS() *CrashFS {
	fs := &CrashFS{}
	fs.mu.root = newDir()
	return fs
}

func newDir() *inode {
	return &inode{isDir: true, cur: map[string]*inode{}, dur: map[string]*inode{}}
}

// sync makes the current content durable. Later appends go past
// len(synced), and truncate caps data, so the shared array stays intact.
func (n *inode) sync() {
	n.synced = n.data[:len(n.data):len(n.data)]
	n.low = len(n.data)
}

// setData replaces both contents with b, durably; b must not be shared.
func (n *inode) setData(b []byte) {
	n.data = b
	n.sync()
}

// truncate sets the current length to size, zero-extending. Shrinking caps
// data so that the next append copies instead of overwriting synced bytes.
func (n *inode) truncate(size int) {
	if size > len(n.data) {
		n.data = append(n.data, make([]byte, size-len(n.data))...)
		return
	}
	n.data = n.data[:size:size]
	n.low = min(n.low, size)
}

// writeAt writes p at off in the current content, zero-extending it to
// off first, and lowers the low-water mark to off: the bytes from off on
// are unsynced. The synced content may share data's array (sync), so a
// write below its length copies data first.
func (n *inode) writeAt(p []byte, off int) {
	if off < len(n.synced) {
		n.data = bytes.Clone(n.data)
	}
	if end := off + len(p); end > len(n.data) {
		n.data = append(n.data, make([]byte, end-len(n.data))...)
	}
	copy(n.data[off:], p)
	n.low = min(n.low, off)
}

// splitPath returns the components of name below the root.
func splitPath(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: name, Err: err}
}

// checkLocked returns ErrCrashed once the FS has crashed.
func (fs *CrashFS) checkLocked() error {
	if fs.mu.crashed {
		return ErrCrashed
	}
	return nil
}

// walkLocked returns the inodes from the root to name, following current
// entries.
func (fs *CrashFS) walkLocked(parts []string) ([]*inode, error) {
	if err := fs.checkLocked(); err != nil {
		return nil, err
	}
	chain := []*inode{fs.mu.root}
	for _, p := range parts {
		dir := chain[len(chain)-1]
		if !dir.isDir {
			return nil, syscall.ENOTDIR
		}
		n := dir.cur[p]
		if n == nil {
			return nil, syscall.ENOENT
		}
		chain = append(chain, n)
	}
	return chain, nil
}

// lookupLocked returns the inode of name.
func (fs *CrashFS) lookupLocked(name string) (*inode, error) {
	chain, err := fs.walkLocked(splitPath(name))
	if err != nil {
		return nil, err
	}
	return chain[len(chain)-1], nil
}

// parentLocked returns the chain of inodes from the root to the parent
// directory of name, and the last component of name.
func (fs *CrashFS) parentLocked(name string) ([]*inode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", syscall.EINVAL // the root has no parent
	}
	chain, err := fs.walkLocked(parts[:len(parts)-1])
	if err == nil && !chain[len(chain)-1].isDir {
		err = syscall.ENOTDIR
	}
	return chain, parts[len(parts)-1], err
}

// Create creates name or truncates it (in place, like O_TRUNC), and opens it
// for reading and appending.
func (fs *CrashFS) Create(name string) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.createLocked(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &crashFile{fs: fs, name: name, n: n, writable: true}, nil
}

func (fs *CrashFS) createLocked(name string) (*inode, error) {
	chain, base, err := fs.parentLocked(name)
	if err != nil {
		return nil, err
	}
	dir := chain[len(chain)-1]
	n := dir.cur[base]
	switch {
	case n == nil:
		n = &inode{}
		dir.cur[base] = n
	case n.isDir:
		return nil, syscall.EISDIR
	default:
		n.truncate(0)
	}
	return n, nil
}

// Open opens the existing file name for reading only.
func (fs *CrashFS) Open(name string) (File, error) { return fs.open(name, false) }

// OpenAppend opens the existing file name for reading and appending.
func (fs *CrashFS) OpenAppend(name string) (File, error) { return fs.open(name, true) }

// OpenInPlace opens the existing file name for reading, appending and
// writing in place.
func (fs *CrashFS) OpenInPlace(name string) (InPlaceFile, error) {
	f, err := fs.open(name, true)
	if err != nil {
		return nil, err
	}
	return f.(*crashFile), nil
}

func (fs *CrashFS) open(name string, writable bool) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookupLocked(name)
	if err == nil && n.isDir {
		err = syscall.EISDIR
	}
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &crashFile{fs: fs, name: name, n: n, writable: writable}, nil
}

// Remove deletes the current entry of a file or an empty directory. Open
// Files of a removed file keep working.
func (fs *CrashFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return pathErr("remove", name, fs.removeLocked(name))
}

func (fs *CrashFS) removeLocked(name string) error {
	chain, base, err := fs.parentLocked(name)
	if err != nil {
		return err
	}
	dir := chain[len(chain)-1]
	n := dir.cur[base]
	switch {
	case n == nil:
		return syscall.ENOENT
	case n.isDir && len(n.cur) > 0:
		return syscall.ENOTEMPTY
	}
	delete(dir.cur, base)
	return nil
}

// Rename moves the current entry oldname to newname, replacing a file
// there; like os.Rename it fails with EEXIST if newname is a directory.
func (fs *CrashFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.renameLocked(oldname, newname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}

func (fs *CrashFS) renameLocked(oldname, newname string) error {
	oldChain, oldBase, err := fs.parentLocked(oldname)
	if err != nil {
		return err
	}
	n := oldChain[len(oldChain)-1].cur[oldBase]
	if n == nil {
		return syscall.ENOENT
	}
	newChain, newBase, err := fs.parentLocked(newname)
	if err != nil {
		return err
	}
	if slices.Contains(newChain, n) {
		return syscall.EINVAL // a directory into its own subtree
	}
	to := newChain[len(newChain)-1]
	target := to.cur[newBase]
	if target == n {
		return nil // the same name, or two names of one inode: no-op
	}
	if err := replaceable(n, target); err != nil {
		return err
	}
	delete(oldChain[len(oldChain)-1].cur, oldBase)
	to.cur[newBase] = n
	return nil
}

// replaceable reports why n may not replace target (nil if it may). Like
// os.Rename, it never replaces a directory.
func replaceable(n, target *inode) error {
	switch {
	case target == nil:
		return nil
	case target.isDir:
		return syscall.EEXIST
	case n.isDir:
		return syscall.ENOTDIR
	}
	return nil
}

// MkdirAll creates dir and its missing parents (current entries only).
func (fs *CrashFS) MkdirAll(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, err := fs.mkdirAllLocked(dir, false)
	return pathErr("mkdir", dir, err)
}

// mkdirAllLocked creates the directories of dir and returns the last one;
// with durable, every entry on the path is made durable too.
func (fs *CrashFS) mkdirAllLocked(dir string, durable bool) (*inode, error) {
	if err := fs.checkLocked(); err != nil {
		return nil, err
	}
	d := fs.mu.root
	for _, p := range splitPath(dir) {
		n := d.cur[p]
		if n == nil {
			n = newDir()
			d.cur[p] = n
		}
		if !n.isDir {
			return nil, syscall.ENOTDIR
		}
		if durable {
			d.dur[p] = n
		}
		d = n
	}
	return d, nil
}

// ReadDir returns the sorted names of the current entries of dir.
func (fs *CrashFS) ReadDir(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, err := fs.dirLocked(dir)
	if err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	return slices.Sorted(maps.Keys(d.cur)), nil
}

func (fs *CrashFS) dirLocked(dir string) (*inode, error) {
	d, err := fs.lookupLocked(dir)
	if err == nil && !d.isDir {
		err = syscall.ENOTDIR
	}
	return d, err
}

// SyncDir makes the current entries of dir its durable ones.
func (fs *CrashFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, err := fs.dirLocked(dir)
	if err != nil {
		return pathErr("sync", dir, err)
	}
	d.dur = maps.Clone(d.cur)
	return nil
}

// Stat returns the current size of a file (0 for a directory) and whether
// name is a directory.
func (fs *CrashFS) Stat(name string) (int64, bool, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookupLocked(name)
	if err != nil {
		return 0, false, pathErr("stat", name, err)
	}
	return int64(len(n.data)), n.isDir, nil
}
