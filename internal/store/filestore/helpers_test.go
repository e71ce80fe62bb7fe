package filestore

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// testLog collects a store's log lines for assertions.
type testLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *testLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// has reports whether some line contains sub.
func (l *testLog) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			return true
		}
	}
	return false
}

// memConfig returns a Config on a fresh CrashFS.
func memConfig(fs vfs.FS, blockSize int64) Config {
	return Config{Dir: "/store", FS: fs, BlockSize: blockSize}
}

// mustOpen opens a store or fails the test.
func mustOpen(t testing.TB, cfg Config, limits store.Config) *Store {
	t.Helper()
	s, err := Open(cfg, limits)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// msgN builds message n on subj: payload "<subj>#<n>".
func msgN(subj string, n int) store.Msg {
	return store.Msg{Subject: subj, Data: fmt.Appendf(nil, "%s#%d", subj, n), Time: int64(n) * 1e9}
}

// appendSync appends m and waits for it to be durable.
func appendSync(t testing.TB, s *Store, m store.Msg) uint64 {
	t.Helper()
	seq, err := s.Append(m)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := s.WaitDurable(seq); err != nil {
		t.Fatalf("WaitDurable(%d): %v", seq, err)
	}
	return seq
}
