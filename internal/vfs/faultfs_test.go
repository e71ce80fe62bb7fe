package vfs

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// syncs calls Sync n times on a new file name and returns which calls
// failed (1-based) and the last error.
func syncs(t *testing.T, fs FS, name string, n int) ([]int, error) {
	t.Helper()
	f := mustCreate(t, fs, name)
	var failed []int
	var last error
	for i := 1; i <= n; i++ {
		if err := f.Sync(); err != nil {
			failed, last = append(failed, i), err
		}
	}
	return failed, last
}

func TestFaultRules(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		file string
		want []int
	}{
		{"nth call", Rule{Op: OpSync, After: 2, Count: 1}, "/f", []int{3}},
		{"every call after", Rule{Op: OpSync, After: 3}, "/f", []int{4, 5, 6}},
		{"count limit", Rule{Op: OpSync, After: 1, Count: 2}, "/f", []int{2, 3}},
		{"path matches", Rule{Op: OpSync, Path: "msgs/", Count: 1}, "/s/msgs/1.blk", []int{1}},
		{"path does not match", Rule{Op: OpSync, Path: "msgs/"}, "/s/meta.inf", nil},
		{"predicate", Rule{Op: OpSync, Match: func(n string) bool { return strings.HasSuffix(n, ".blk") }}, "/s/1.blk", []int{1, 2, 3, 4, 5, 6}},
		{"predicate refuses", Rule{Op: OpSync, Match: func(string) bool { return false }}, "/s/1.blk", nil},
		{"other op", Rule{Op: OpWrite}, "/f", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			crash := NewCrashFS()
			must(t, crash.MkdirAll("/s/msgs"))
			fs := NewFaultFS(crash)
			fs.Inject(tc.rule)
			got, err := syncs(t, fs, tc.file, 6)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("failed calls %v, want %v", got, tc.want)
			}
			if fs.Calls(OpSync) != 6 || fs.Injected(OpSync) != len(tc.want) {
				t.Fatalf("Calls %d, Injected %d", fs.Calls(OpSync), fs.Injected(OpSync))
			}
			var pe *os.PathError
			if err != nil && (!errors.Is(err, syscall.EIO) || !errors.As(err, &pe) || pe.Path != tc.file) {
				t.Fatalf("error %#v, want *os.PathError with EIO on %s", err, tc.file)
			}
		})
	}
}

// TestFaultProbability checks that a Prob rule draws one Float64 per
// eligible call from its Rand, so the failures are reproducible.
func TestFaultProbability(t *testing.T) {
	fs := NewFaultFS(NewCrashFS())
	fs.Inject(Rule{Op: OpSync, After: 2, Prob: 0.3, Rand: rand.New(rand.NewPCG(4, 2))})
	got, _ := syncs(t, fs, "/f", 200)
	replay := rand.New(rand.NewPCG(4, 2))
	var want []int
	for i := 3; i <= 200; i++ {
		if replay.Float64() < 0.3 {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) || len(want) < 30 || len(want) > 90 {
		t.Fatalf("failed calls %v, want %v", got, want)
	}
}

// TestFaultRuleOrder checks that every matching rule counts a call and the
// first that fires decides.
func TestFaultRuleOrder(t *testing.T) {
	fs := NewFaultFS(NewCrashFS())
	fs.Inject(Rule{Op: OpSync, Count: 1, Err: syscall.ENOSPC})
	fs.Inject(Rule{Op: OpSync, Count: 1})
	f := mustCreate(t, fs, "/f")
	if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("call 1: %v, want ENOSPC", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("call 2: %v, want EIO", err)
	}
	must(t, f.Sync())
	fs.Inject(Rule{Op: OpSync})
	fs.Clear()
	must(t, f.Sync())
}

// TestFaultKthSync shows how a test fails each fsync of a workload in turn:
// count them in a clean run, then fail the k-th.
func TestFaultKthSync(t *testing.T) {
	workload := func(fs FS) (int, error) {
		f, err := fs.Create("/f")
		for i := 0; err == nil && i < 5; i++ {
			if _, err = f.Write([]byte("x")); err == nil {
				err = f.Sync()
			}
		}
		size, _ := f.Size()
		return int(size), err
	}
	clean := NewFaultFS(NewCrashFS())
	if _, err := workload(clean); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= clean.Calls(OpSync); k++ {
		fs := NewFaultFS(NewCrashFS())
		fs.Inject(Rule{Op: OpSync, After: k - 1, Count: 1})
		if n, err := workload(fs); !errors.Is(err, syscall.EIO) || n != k {
			t.Fatalf("k=%d: stopped after %d writes with %v", k, n, err)
		}
	}
}

func TestFaultShortWrite(t *testing.T) {
	crash := NewCrashFS()
	fs := NewFaultFS(crash)
	fs.Inject(Rule{Op: OpWrite, After: 1, Count: 1, Short: 3, Err: syscall.ENOSPC})
	f := mustCreate(t, fs, "/f")
	write(t, f, "ab")
	n, err := f.Write([]byte("cdefg"))
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("short write = %d, %v; want 3, ENOSPC", n, err)
	}
	fs.Inject(Rule{Op: OpWrite, Short: 100})
	if n, _ := f.Write([]byte("hi")); n != 1 {
		t.Fatalf("Short beyond the buffer wrote %d bytes, want 1 (always short)", n)
	}
	if got := readFile(t, crash, "/f"); string(got) != "abcdeh" {
		t.Fatalf("file holds %q", got)
	}
}

// TestFaultNoSideEffects checks that failed calls leave the inner FS alone:
// no file created, no rename, no remove, data left unsynced.
func TestFaultNoSideEffects(t *testing.T) {
	crash := NewCrashFS()
	must(t, crash.WriteFile("/a", []byte("a")))
	fs := NewFaultFS(crash)
	for _, op := range []Op{OpCreate, OpRename, OpRemove, OpSyncDir, OpTruncate, OpReadAt, OpMkdirAll} {
		fs.Inject(Rule{Op: op, Err: syscall.EIO})
	}
	if _, err := fs.Create("/b"); err == nil {
		t.Error("Create: no error")
	}
	var le *os.LinkError
	if err := fs.Rename("/x", "/a"); !errors.As(err, &le) || !errors.Is(err, syscall.EIO) {
		t.Errorf("Rename matching the new name: %v, want *os.LinkError with EIO", err)
	}
	if err := fs.Remove("/a"); err == nil {
		t.Error("Remove: no error")
	}
	if err := fs.MkdirAll("/m"); err == nil {
		t.Error("MkdirAll: no error")
	}
	if err := fs.SyncDir("/"); err == nil {
		t.Error("SyncDir: no error")
	}
	f := mustOpenAppend(t, fs, "/a")
	if err := f.Truncate(0); err == nil {
		t.Error("Truncate: no error")
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); err == nil {
		t.Error("ReadAt: no error")
	}
	wantDir(t, crash, "/", "a")
	wantFile(t, crash, "/a", "a")
}

// TestFaultFailedSyncLosesData checks that a failed Sync leaves the data
// unsynced on a CrashFS below.
func TestFaultFailedSyncLosesData(t *testing.T) {
	crash := NewCrashFS()
	must(t, crash.WriteFile("/a", nil))
	fs := NewFaultFS(crash)
	fs.Inject(Rule{Op: OpSync})
	f := mustOpenAppend(t, fs, "/a")
	write(t, f, "lost")
	if err := f.Sync(); err == nil {
		t.Fatal("Sync: no error")
	}
	wantFile(t, crash.Crash(CrashOptions{Tail: TailDrop}), "/a", "")
}

func TestFaultInvalidRulesPanic(t *testing.T) {
	for _, r := range []Rule{
		{Op: numOps},
		{Op: OpSync, Prob: 1.5, Rand: rand.New(rand.NewPCG(1, 1))},
		{Op: OpSync, Prob: 0.5},
		{Op: OpSync, After: -1},
		{Op: OpSync, Short: 1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Inject(%+v): no panic", r)
				}
			}()
			NewFaultFS(NewCrashFS()).Inject(r)
		}()
	}
}

func TestOpString(t *testing.T) {
	if OpSyncDir.String() != "syncdir" || OpClose.String() != "close" || Op(-1).String() != "unknown" {
		t.Fatal("Op.String")
	}
}

// TestFaultEveryOp checks that each method asks the rules under its own Op
// (and only that one), by failing each Op in turn with a distinct errno.
func TestFaultEveryOp(t *testing.T) {
	calls := map[Op]func(fs FS, f File) error{
		OpCreate:     func(fs FS, _ File) error { _, err := fs.Create("/g"); return err },
		OpOpen:       func(fs FS, _ File) error { _, err := fs.Open("/f"); return err },
		OpOpenAppend: func(fs FS, _ File) error { _, err := fs.OpenAppend("/f"); return err },
		OpRemove:     func(fs FS, _ File) error { return fs.Remove("/f") },
		OpRename:     func(fs FS, _ File) error { return fs.Rename("/f", "/g") },
		OpMkdirAll:   func(fs FS, _ File) error { return fs.MkdirAll("/m") },
		OpReadDir:    func(fs FS, _ File) error { _, err := fs.ReadDir("/"); return err },
		OpSyncDir:    func(fs FS, _ File) error { return fs.SyncDir("/") },
		OpStat:       func(fs FS, _ File) error { _, _, err := fs.Stat("/f"); return err },
		OpWrite:      func(_ FS, f File) error { _, err := f.Write([]byte("x")); return err },
		OpReadAt:     func(_ FS, f File) error { _, err := f.ReadAt(make([]byte, 1), 0); return err },
		OpSync:       func(_ FS, f File) error { return f.Sync() },
		OpTruncate:   func(_ FS, f File) error { return f.Truncate(0) },
		OpSize:       func(_ FS, f File) error { _, err := f.Size(); return err },
		OpClose:      func(_ FS, f File) error { return f.Close() },
	}
	for op := range numOps {
		crash := NewCrashFS()
		must(t, crash.WriteFile("/f", []byte("data")))
		fs := NewFaultFS(crash)
		f := mustOpenAppend(t, fs, "/f")
		fs.Inject(Rule{Op: op, Err: syscall.EDOM})
		if err := calls[op](fs, f); !errors.Is(err, syscall.EDOM) {
			t.Errorf("%v: %v, want the injected EDOM", op, err)
		}
		if fs.Calls(op) != 1+btoi(op == OpOpenAppend) || fs.Injected(op) != 1 {
			t.Errorf("%v: Calls %d, Injected %d", op, fs.Calls(op), fs.Injected(op))
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFaultWriteAt: the rules of OpWrite fail WriteAt too, a Short one
// after writing a prefix in place.
func TestFaultWriteAt(t *testing.T) {
	crash := NewCrashFS()
	must(t, crash.WriteFile("/f", []byte("..........")))
	fs := NewFaultFS(crash)
	f, err := fs.OpenInPlace("/f")
	must(t, err)
	fs.Inject(Rule{Op: OpWrite, Count: 1, Short: 2, Err: syscall.EIO})
	if n, err := f.WriteAt([]byte("abcd"), 3); n != 2 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WriteAt = %d, %v; want 2, EIO", n, err)
	}
	if n, err := f.WriteAt([]byte("xy"), 8); n != 2 || err != nil {
		t.Fatalf("WriteAt after the rule = %d, %v", n, err)
	}
	if got := readFile(t, crash, "/f"); string(got) != "...ab...xy" {
		t.Fatalf("file holds %q", got)
	}
	fs.Inject(Rule{Op: OpOpenAppend, Count: 1})
	if _, err := fs.OpenInPlace("/f"); err == nil {
		t.Fatal("OpenInPlace under an OpOpenAppend rule: no error")
	}
}
