package server

import "syscall"

// systemMemory returns the machine's memory in bytes, from sysinfo(2)
// (nats-server v2.15.2 sysmem.Memory on Linux), or 0 when unknown.
func systemMemory() int64 {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0
	}
	return int64(info.Totalram) * int64(info.Unit)
}
