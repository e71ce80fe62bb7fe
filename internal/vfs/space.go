package vfs

import "errors"

// Space is implemented by an FS that can tell how much room the file
// system holding a directory has left (OS does, with statfs(2)). Free is
// what an unprivileged writer may still use, in bytes; total is the file
// system's size in bytes.
type Space interface {
	Space(dir string) (free, total uint64, err error)
}

// ErrNoSpaceInfo is Space's error where the platform cannot tell.
var ErrNoSpaceInfo = errors.New("vfs: free space unknown on this platform")
