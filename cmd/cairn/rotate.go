package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// rotator is the log file, rotated by size as nats-server v2.15.2 rotates
// it (logger/log.go fileLogger): once a write takes it past the limit
// (logfile_size_limit), the file is renamed
// <file>.<yyyy.mm.dd.hh.mm.ss.nnnnnnnnn> and a new one is started; with a
// maximum number of files (logfile_max_num), the oldest rotated files
// beyond it (the current file counts) are removed. Its mutex is a leaf;
// the logger writes through it.
type rotator struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	size   int64 // bytes in f
	limit  int64 // 0: no rotation
	maxNum int   // 0: keep every rotated file
}

func newRotator(path string, f *os.File, limit int64, maxNum int) *rotator {
	r := &rotator{path: path, f: f, limit: limit, maxNum: maxNum}
	if st, err := f.Stat(); err == nil {
		r.size = st.Size()
	}
	return r
}

func (r *rotator) name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.path
}

func (r *rotator) setLimits(limit int64, maxNum int) {
	r.mu.Lock()
	r.limit, r.maxNum = limit, maxNum
	r.mu.Unlock()
}

// Write writes b to the file, then rotates it if it passed the limit. A
// failed rotation keeps writing to the current file.
func (r *rotator) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.f.Write(b)
	r.size += int64(n)
	if err == nil && r.limit > 0 && r.size > r.limit {
		r.rotateLocked()
	}
	return n, err
}

func (r *rotator) rotateLocked() {
	now := time.Now()
	bak := fmt.Sprintf("%s.%04d.%02d.%02d.%02d.%02d.%02d.%09d", r.path,
		now.Year(), now.Month(), now.Day(), now.Hour(), now.Minute(), now.Second(), now.Nanosecond())
	if err := os.Rename(r.path, bak); err != nil {
		return
	}
	f, err := openLogFile(r.path)
	if err != nil {
		_ = os.Rename(bak, r.path) // keep writing to the old file
		return
	}
	_ = r.f.Close()
	r.f, r.size = f, 0
	if r.maxNum > 0 {
		r.purgeLocked()
	}
}

// purgeLocked removes the oldest rotated files so that at most maxNum
// files remain, the current one included.
func (r *rotator) purgeLocked() {
	dir, base := filepath.Dir(r.path), filepath.Base(r.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var backups []string
	for _, e := range entries {
		stamp, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || e.IsDir() {
			continue
		}
		if _, err := time.Parse("2006:01:02:15:04:05.999999999", strings.Replace(stamp, ".", ":", 5)); err == nil {
			backups = append(backups, e.Name())
		}
	}
	sort.Strings(backups) // the stamps sort by time
	for len(backups) > r.maxNum-1 {
		_ = os.Remove(filepath.Join(dir, backups[0]))
		backups = backups[1:]
	}
}

func (r *rotator) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.f.Close()
}
