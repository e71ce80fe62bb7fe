//go:build linux

// Command fsync measures what one fsync costs on the file system of a
// directory, for the ways a log can grow a file (docs/cluster.md, "The
// WAL's preallocated space"): it writes -size bytes and fsyncs, -n times
// per run, in a new file each run, the modes alternating for -runs runs,
// and prints each mode's per-fsync times (median of the runs first).
//
// Modes:
//
//	append          append, fsync (the file grows at every fsync)
//	append-datasync append, fdatasync
//	fallocate       fallocate the file's room ahead (keeping its size), append, fsync
//	zeros           write zeros ahead (fsynced), write over them in place, fsync
//	zeros-datasync  write zeros ahead (fsynced), write over them in place, fdatasync (the raft WAL)
//
// Usage:
//
//	go run ./bench/fsync -dir /path/on/the/disk -runs 5
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the file system to measure")
	runs := flag.Int("runs", 5, "runs of each mode, alternating")
	n := flag.Int("n", 400, "fsyncs per run")
	size := flag.Int("size", 4096, "bytes written before each fsync")
	flag.Parse()
	modes := []string{"append", "append-datasync", "fallocate", "zeros", "zeros-datasync"}
	res := map[string][]time.Duration{}
	for r := 0; r < *runs; r++ {
		for _, m := range modes {
			d, err := run(filepath.Join(*dir, "fsync-bench-"+m), m, *n, *size)
			if err != nil {
				fmt.Fprintln(os.Stderr, m+":", err)
				os.Exit(1)
			}
			res[m] = append(res[m], d)
		}
	}
	fmt.Printf("%d B written per fsync, %d fsyncs per run, %d runs, in %s\n", *size, *n, *runs, *dir)
	for _, m := range modes {
		sorted := slices.Clone(res[m])
		slices.Sort(sorted)
		fmt.Printf("%-16s median %8v  runs %v\n", m, sorted[len(sorted)/2].Round(time.Microsecond), round(res[m]))
	}
}

// run measures one mode in a new file name and returns the time per fsync.
func run(name, mode string, n, size int) (time.Duration, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(name)
	defer f.Close()
	total := int64(n * size)
	switch mode {
	case "zeros", "zeros-datasync":
		if _, err := f.Write(make([]byte, total)); err != nil {
			return 0, err
		}
	case "fallocate":
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, total); err != nil {
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := f.WriteAt(buf, int64(i*size)); err != nil {
			return 0, err
		}
		if mode == "append-datasync" || mode == "zeros-datasync" {
			err = syscall.Fdatasync(int(f.Fd()))
		} else {
			err = f.Sync()
		}
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

func round(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Microsecond)
	}
	return out
}
