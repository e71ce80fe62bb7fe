//go:build !unix

package vfs

// Space returns ErrNoSpaceInfo: this platform has no statfs(2).
func (osFS) Space(string) (free, total uint64, err error) {
	return 0, 0, ErrNoSpaceInfo
}
