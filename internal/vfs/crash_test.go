package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

var allTails = []TailMode{TailDrop, TailKeep, TailPrefix, TailTorn, TailSectors, TailAny}

// pattern returns n bytes that are never zero and differ between seeds, so
// that garbage (zeros, or random bytes at one place) is detectable.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + (i*7+seed*13)%251)
	}
	return b
}

// crashCase is a scenario: setup runs on a fresh CrashFS holding the
// durable directory /d, then the FS crashes with each of modes (several
// seeds, random and zero garbage) and check runs on the result.
type crashCase struct {
	name  string
	modes []TailMode
	setup func(t *testing.T, fs *CrashFS)
	check func(t *testing.T, fs *CrashFS)
}

var (
	synced1000 = pattern(1, 1000)
	tail3000   = pattern(2, 3000)
)

// syncedThenTail writes 1000 synced bytes to a durable /d/f, then 3000
// unsynced ones.
func syncedThenTail(t *testing.T, fs *CrashFS) {
	f := mustCreate(t, fs, "/d/f")
	must(t, fs.SyncDir("/d"))
	write(t, f, string(synced1000))
	must(t, f.Sync())
	write(t, f, string(tail3000))
}

func TestCrashModel(t *testing.T) {
	for _, tc := range crashCases() {
		for _, mode := range tc.modes {
			for seed := range uint64(20) {
				name := fmt.Sprintf("%s/tail=%d/seed=%d", tc.name, mode, seed)
				t.Run(name, func(t *testing.T) {
					fs := NewCrashFS()
					must(t, fs.MkdirAll("/d"))
					must(t, fs.SyncDir("/"))
					tc.setup(t, fs)
					rnd := rand.New(rand.NewPCG(seed, 7))
					tc.check(t, fs.Crash(CrashOptions{Rand: rnd, Tail: mode, ZeroFill: seed%2 == 1}))
				})
			}
		}
	}
}

func crashCases() []crashCase {
	return append(fileCases(), namespaceCases()...)
}

func fileCases() []crashCase {
	return []crashCase{{
		name:  "synced bytes survive",
		modes: allTails,
		setup: syncedThenTail,
		check: func(t *testing.T, fs *CrashFS) {
			got := readFile(t, fs, "/d/f")
			if !bytes.HasPrefix(got, synced1000) || len(got) > 4000 {
				t.Fatalf("got %d bytes, synced prefix intact: %v", len(got), bytes.HasPrefix(got, synced1000))
			}
		},
	}, {
		name:  "drop loses the unsynced tail",
		modes: []TailMode{TailDrop},
		setup: syncedThenTail,
		check: wantContent("/d/f", synced1000),
	}, {
		name:  "keep keeps the unsynced tail",
		modes: []TailMode{TailKeep},
		setup: syncedThenTail,
		check: wantContent("/d/f", append(bytes.Clone(synced1000), tail3000...)),
	}, {
		name:  "prefix keeps a prefix of the tail",
		modes: []TailMode{TailPrefix},
		setup: syncedThenTail,
		check: func(t *testing.T, fs *CrashFS) {
			got := readFile(t, fs, "/d/f")
			if all := append(bytes.Clone(synced1000), tail3000...); !bytes.HasPrefix(all, got) || len(got) < 1000 {
				t.Fatalf("got %d bytes, not a prefix of the writes at least 1000 long", len(got))
			}
		},
	}, {
		name:  "unsynced truncate keeps the old or the new length",
		modes: allTails,
		setup: func(t *testing.T, fs *CrashFS) {
			must(t, fs.WriteFile("/d/f", synced1000))
			f, err := fs.OpenAppend("/d/f")
			must(t, err)
			must(t, f.Truncate(300))
		},
		check: wantOneOf("/d/f", synced1000, synced1000[:300]),
	}, {
		name:  "unsynced create over a file keeps the old content or a prefix of the new",
		modes: []TailMode{TailDrop, TailKeep, TailPrefix}, // the others add garbage
		setup: func(t *testing.T, fs *CrashFS) {
			must(t, fs.WriteFile("/d/f", synced1000))
			write(t, mustCreate(t, fs, "/d/f"), "new")
		},
		check: wantOneOf("/d/f", synced1000, nil, []byte("n"), []byte("ne"), []byte("new")),
	}}
}

func namespaceCases() []crashCase {
	return []crashCase{{
		name:  "synced create without SyncDir vanishes",
		modes: allTails,
		setup: func(t *testing.T, fs *CrashFS) {
			f := mustCreate(t, fs, "/d/f")
			write(t, f, "data")
			must(t, f.Sync())
		},
		check: func(t *testing.T, fs *CrashFS) { wantDir(t, fs, "/d") },
	}, {
		name:  "synced create with SyncDir survives",
		modes: allTails,
		setup: func(t *testing.T, fs *CrashFS) {
			f := mustCreate(t, fs, "/d/f")
			write(t, f, "data")
			must(t, f.Sync())
			must(t, fs.SyncDir("/d"))
		},
		check: wantContent("/d/f", []byte("data")),
	}, {
		name:  "rename without SyncDir is undone",
		modes: allTails,
		setup: renameOver(false),
		check: func(t *testing.T, fs *CrashFS) {
			wantDir(t, fs, "/d", "a", "tmp")
			wantFile(t, fs, "/d/a", "old")
			wantFile(t, fs, "/d/tmp", "new")
		},
	}, {
		name:  "rename with SyncDir is kept",
		modes: allTails,
		setup: renameOver(true),
		check: func(t *testing.T, fs *CrashFS) {
			wantDir(t, fs, "/d", "a")
			wantFile(t, fs, "/d/a", "new")
		},
	}, {
		name:  "remove without SyncDir is undone",
		modes: allTails,
		setup: func(t *testing.T, fs *CrashFS) {
			must(t, fs.WriteFile("/d/a", []byte("old")))
			must(t, fs.Remove("/d/a"))
		},
		check: wantContent("/d/a", []byte("old")),
	}, {
		name:  "remove with SyncDir is kept",
		modes: allTails,
		setup: func(t *testing.T, fs *CrashFS) {
			must(t, fs.WriteFile("/d/a", []byte("old")))
			must(t, fs.Remove("/d/a"))
			must(t, fs.SyncDir("/d"))
		},
		check: func(t *testing.T, fs *CrashFS) { wantDir(t, fs, "/d") },
	}, {
		name:  "a directory whose parent was not synced vanishes",
		modes: []TailMode{TailKeep},
		setup: func(t *testing.T, fs *CrashFS) {
			must(t, fs.MkdirAll("/d/x/y"))
			f := mustCreate(t, fs, "/d/x/y/f")
			must(t, f.Sync())
			must(t, fs.SyncDir("/d/x/y"))
			must(t, fs.SyncDir("/d/x"))
		},
		check: func(t *testing.T, fs *CrashFS) { wantDir(t, fs, "/d") },
	}, {
		name:  "a rename across directories synced only at the target leaves two names",
		modes: []TailMode{TailDrop},
		setup: func(t *testing.T, fs *CrashFS) {
			must(t, fs.WriteFile("/d/a", []byte("x")))
			must(t, fs.WriteFile("/e/keep", nil))
			must(t, fs.Rename("/d/a", "/e/a"))
			must(t, fs.SyncDir("/e"))
		},
		check: func(t *testing.T, fs *CrashFS) {
			f := mustOpenAppend(t, fs, "/d/a")
			write(t, f, "y")
			wantFile(t, fs, "/e/a", "xy") // one inode, two names
		},
	}}
}

// renameOver writes /d/a durably, then a synced /d/tmp renamed over it,
// with or without the final SyncDir.
func renameOver(syncDir bool) func(t *testing.T, fs *CrashFS) {
	return func(t *testing.T, fs *CrashFS) {
		must(t, fs.WriteFile("/d/a", []byte("old")))
		f := mustCreate(t, fs, "/d/tmp")
		write(t, f, "new")
		must(t, f.Sync())
		must(t, fs.SyncDir("/d"))
		must(t, fs.Rename("/d/tmp", "/d/a"))
		if syncDir {
			must(t, fs.SyncDir("/d"))
		}
	}
}

func wantContent(name string, want []byte) func(t *testing.T, fs *CrashFS) {
	return func(t *testing.T, fs *CrashFS) {
		if got := readFile(t, fs, name); !bytes.Equal(got, want) {
			t.Fatalf("%s: got %d bytes, want %d (equal prefix: %v)", name, len(got), len(want), bytes.HasPrefix(got, want))
		}
	}
}

func wantOneOf(name string, wants ...[]byte) func(t *testing.T, fs *CrashFS) {
	return func(t *testing.T, fs *CrashFS) {
		got := readFile(t, fs, name)
		for _, w := range wants {
			if bytes.Equal(got, w) {
				return
			}
		}
		t.Fatalf("%s: got %d bytes %.20q..., not one of the allowed outcomes", name, len(got), got)
	}
}

func readFile(t *testing.T, fs *CrashFS, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(name)
	must(t, err)
	return b
}

func mustOpenAppend(t *testing.T, fs FS, name string) File {
	t.Helper()
	f, err := fs.OpenAppend(name)
	must(t, err)
	return f
}

// TestCrashTornOnlyUnsynced checks, over many seeds, that a torn write
// changes bytes only inside one sector of the unsynced range and ends the
// file at that sector's end.
func TestCrashTornOnlyUnsynced(t *testing.T) {
	all := append(bytes.Clone(synced1000), tail3000...)
	for seed := range uint64(300) {
		fs := NewCrashFS()
		must(t, fs.MkdirAll("/d"))
		must(t, fs.SyncDir("/"))
		syncedThenTail(t, fs)
		got := readFile(t, fs.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 1)), Tail: TailTorn, ZeroFill: seed%2 == 0}), "/d/f")
		end := len(got)
		if end <= 1000 || (end != len(all) && end%SectorSize != 0) {
			t.Fatalf("seed %d: length %d is not the end of a sector of the tail", seed, end)
		}
		start := max(1000, (end-1)/SectorSize*SectorSize)
		if !bytes.Equal(got[:start], all[:start]) {
			t.Fatalf("seed %d: bytes before the torn sector [%d, %d) changed", seed, start, end)
		}
		if bytes.Equal(got[start:], all[start:end]) && seed%2 == 0 {
			t.Fatalf("seed %d: torn sector [%d, %d) has no zero garbage", seed, start, end)
		}
	}
}

// TestCrashSectorsOnlyUnsynced checks that scattered sectors are each
// either the written bytes or zeros, and that synced bytes never change.
func TestCrashSectorsOnlyUnsynced(t *testing.T) {
	all := append(bytes.Clone(synced1000), tail3000...)
	lengths := map[int]bool{}
	for seed := range uint64(300) {
		fs := NewCrashFS()
		must(t, fs.MkdirAll("/d"))
		must(t, fs.SyncDir("/"))
		syncedThenTail(t, fs)
		got := readFile(t, fs.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 2)), Tail: TailSectors, ZeroFill: true}), "/d/f")
		lengths[len(got)] = true
		if !bytes.HasPrefix(got, synced1000) {
			t.Fatalf("seed %d: synced bytes changed", seed)
		}
		for lo := 1000; lo < len(got); lo = (lo/SectorSize + 1) * SectorSize {
			hi := min(len(got), (lo/SectorSize+1)*SectorSize)
			s := got[lo:hi]
			if !bytes.Equal(s, all[lo:hi]) && !bytes.Equal(s, make([]byte, len(s))) {
				t.Fatalf("seed %d: sector [%d, %d) is neither written nor zero", seed, lo, hi)
			}
		}
	}
	if len(lengths) < 5 {
		t.Fatalf("only %d distinct lengths in 300 crashes", len(lengths))
	}
}

// TestCrashTruncateBothOutcomes checks that a random mode shows both the old
// and the truncated length of an unsynced Truncate.
func TestCrashTruncateBothOutcomes(t *testing.T) {
	seen := map[int]int{}
	for seed := range uint64(100) {
		fs := NewCrashFS()
		must(t, fs.WriteFile("/f", synced1000))
		must(t, mustOpenAppend(t, fs, "/f").Truncate(300))
		got := readFile(t, fs.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 3)), Tail: TailPrefix}), "/f")
		seen[len(got)]++
	}
	if len(seen) != 2 || seen[1000] == 0 || seen[300] == 0 {
		t.Fatalf("lengths after crash: %v, want both 1000 and 300", seen)
	}
}

func TestCrashDeterministic(t *testing.T) {
	fs := NewCrashFS()
	must(t, fs.MkdirAll("/d"))
	must(t, fs.SyncDir("/"))
	syncedThenTail(t, fs)
	for _, mode := range allTails {
		a := readFile(t, fs.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(5, 5)), Tail: mode}), "/d/f")
		b := readFile(t, fs.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(5, 5)), Tail: mode}), "/d/f")
		if !bytes.Equal(a, b) {
			t.Fatalf("tail %d: two crashes with one seed differ", mode)
		}
	}
}

// TestCrashOldFSUnusable checks that the crashed FS and its open Files
// refuse every operation, and that the new FS is independent of them.
func TestCrashOldFSUnusable(t *testing.T) {
	fs := NewCrashFS()
	f := mustCreate(t, fs, "/f")
	write(t, f, "x")
	must(t, fs.SyncAll())
	after := fs.Crash(CrashOptions{Tail: TailKeep})
	_, err1 := f.Write([]byte("y"))
	_, err2 := f.ReadAt(make([]byte, 1), 0)
	_, err3 := f.Size()
	_, err4 := fs.Create("/g")
	_, err5 := fs.Open("/f")
	_, _, err6 := fs.Stat("/f")
	_, err7 := fs.ReadDir("/")
	_, err8 := fs.ReadFile("/f")
	errs := []error{err1, err2, err3, err4, err5, err6, err7, err8,
		f.Sync(), f.Truncate(0), f.Close(), fs.Remove("/f"), fs.Rename("/f", "/g"),
		fs.MkdirAll("/x"), fs.SyncDir("/"), fs.WriteFile("/f", nil),
		fs.TruncateFile("/f", 0), fs.FlipBit("/f", 0), fs.SyncAll()}
	for i, err := range errs {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("operation %d after Crash: %v, want ErrCrashed", i, err)
		}
	}
	wantDir(t, after, "/", "f")
	wantFile(t, after, "/f", "x")
}

// TestCrashAgain checks that a crashed FS still yields outcomes of its
// pre-crash state.
func TestCrashAgain(t *testing.T) {
	fs := NewCrashFS()
	must(t, fs.WriteFile("/f", []byte("a")))
	write(t, mustOpenAppend(t, fs, "/f"), "b")
	wantFile(t, fs.Crash(CrashOptions{Tail: TailDrop}), "/f", "a")
	wantFile(t, fs.Crash(CrashOptions{Tail: TailKeep}), "/f", "ab")
}

func TestCrashInvalidTailPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	NewCrashFS().Crash(CrashOptions{Tail: TailAny + 1})
}

// TestCrashFSTools checks the durable test helpers.
func TestCrashFSTools(t *testing.T) {
	fs := NewCrashFS()
	must(t, fs.WriteFile("/a/b/f", []byte{0, 0xff}))
	write(t, mustOpenAppend(t, fs, "/a/b/f"), "\x00")
	must(t, fs.FlipBit("/a/b/f", 1))  // durable byte 0
	must(t, fs.FlipBit("/a/b/f", 15)) // durable byte 1
	must(t, fs.FlipBit("/a/b/f", 16)) // unsynced byte 2
	if err := fs.FlipBit("/a/b/f", 24); err == nil {
		t.Error("FlipBit past the end: no error")
	}
	wantFile(t, fs, "/a/b/f", "\x02\x7f\x01")
	dropped := fs.Crash(CrashOptions{Tail: TailDrop})
	wantFile(t, dropped, "/a/b/f", "\x02\x7f")

	must(t, dropped.TruncateFile("/a/b/f", 1))
	must(t, dropped.TruncateFile("/a/b/f", 3))
	wantFile(t, dropped.Crash(CrashOptions{Tail: TailDrop}), "/a/b/f", "\x02\x00\x00")
}

// TestCrashFSDurable checks that Durable shows what a power loss keeping
// nothing unsynced would leave, and leaves the file system as it was.
func TestCrashFSDurable(t *testing.T) {
	fs := NewCrashFS()
	must(t, fs.WriteFile("/d/f", []byte("synced")))
	f := mustOpenAppend(t, fs, "/d/f")
	write(t, f, "+tail")
	g, err := fs.Create("/d/new")
	must(t, err)
	write(t, g, "x")
	must(t, g.Sync()) // synced content, but its name is not durable

	d := fs.Durable()
	wantFile(t, d, "/d/f", "synced")
	if _, _, err := d.Stat("/d/new"); err == nil {
		t.Error("Durable holds a name whose directory was not synced")
	}
	write(t, f, "!") // fs is still usable, its unsynced bytes kept
	wantFile(t, fs, "/d/f", "synced+tail!")
	must(t, f.Sync())
	must(t, fs.SyncDir("/d"))
	d = fs.Durable()
	wantFile(t, d, "/d/f", "synced+tail!")
	wantFile(t, d, "/d/new", "x")
}

// TestCrashFSConcurrent runs writers, syncers and readers against a crash
// (for the race detector): after it, every call fails with ErrCrashed.
func TestCrashFSConcurrent(t *testing.T) {
	fs := NewCrashFS()
	var wg sync.WaitGroup
	for i := range 4 {
		f := mustCreate(t, fs, fmt.Sprintf("/f%d", i))
		wg.Go(func() { hammer(f, i%2 == 0) })
	}
	after := fs.Crash(CrashOptions{Tail: TailAny})
	wg.Wait()
	if _, err := after.ReadDir("/"); err != nil {
		t.Fatal(err)
	}
}

// hammer writes and syncs (or reads) f until the FS crashes.
func hammer(f File, writer bool) {
	buf := make([]byte, 100)
	for {
		var err error
		if writer {
			_, err = f.Write(buf)
			if err == nil {
				err = f.Sync()
			}
		} else if _, err = f.ReadAt(buf, 0); err != nil && !errors.Is(err, ErrCrashed) {
			err = nil // io.EOF before the first write
		}
		if err != nil {
			return
		}
	}
}

// TestCrashWriteAt: bytes written in place over synced ones and not
// synced since are unsynced: a crash keeps the synced bytes before them,
// and of the written ones none (the old content, or the file cut where
// they start), part or all; once synced, all of them.
func TestCrashWriteAt(t *testing.T) {
	zeros := make([]byte, 4*SectorSize)
	data := bytes.Repeat([]byte("w"), 2*SectorSize)
	written := append(append(bytes.Clone(zeros[:SectorSize]), data...), zeros[3*SectorSize:]...)
	outcomes := map[string]int{}
	for seed := range uint64(200) {
		fs, _ := writtenInPlace(t, zeros, data, SectorSize)
		got := readFile(t, fs.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 7)), Tail: TailAny}), "/f")
		if len(got) < SectorSize || !bytes.Equal(got[:SectorSize], zeros[:SectorSize]) {
			t.Fatalf("seed %d: the synced bytes before the write changed (%d bytes left)", seed, len(got))
		}
		switch {
		case bytes.Equal(got, zeros):
			outcomes["old content"]++
		case len(got) == SectorSize:
			outcomes["cut at the write"]++
		case bytes.HasPrefix(written, got):
			outcomes["part or all"]++
		default:
			outcomes["torn"]++
		}
	}
	if outcomes["old content"] == 0 || outcomes["part or all"] == 0 {
		t.Fatalf("outcomes %v: want the old content and a kept write among them", outcomes)
	}
	fs, f := writtenInPlace(t, zeros, data, SectorSize)
	must(t, f.Sync())
	got := readFile(t, fs.Crash(CrashOptions{Tail: TailDrop}), "/f")
	if !bytes.Equal(got, written) {
		t.Fatalf("after Sync a crash kept %d bytes, not the written content", len(got))
	}
	// The synced content it overwrote is not changed by the write (copy on write).
	fs2, _ := writtenInPlace(t, zeros, data, 0)
	if got := readFile(t, fs2.Crash(CrashOptions{Tail: TailDrop}), "/f"); !bytes.Equal(got, zeros) {
		t.Fatal("a crash dropping unsynced bytes kept an in-place write: the synced content was overwritten")
	}
}

// writtenInPlace returns a CrashFS whose /f holds old, synced, with p
// written over it in place at off and not synced, and the open file.
func writtenInPlace(t *testing.T, old, p []byte, off int64) (*CrashFS, InPlaceFile) {
	t.Helper()
	fs := NewCrashFS()
	must(t, fs.WriteFile("/f", old))
	f, err := fs.OpenInPlace("/f")
	must(t, err)
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
	return fs, f
}
