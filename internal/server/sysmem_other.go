//go:build !linux

package server

// systemMemory returns 0 (unknown) outside Linux: the memory storage
// limit then defaults to 256 MiB, as nats-server's does where it cannot
// read the memory.
func systemMemory() int64 { return 0 }
