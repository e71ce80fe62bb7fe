//go:build unix

package vfs

import "syscall"

// Space reports the free (available to unprivileged writers) and total
// bytes of the file system holding dir, from statfs(2).
func (osFS) Space(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bs := uint64(st.Bsize)
	return st.Bavail * bs, st.Blocks * bs, nil
}
