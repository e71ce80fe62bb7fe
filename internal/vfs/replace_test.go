package vfs

import (
	"math/rand/v2"
	"testing"
)

// ReplaceFile: after a power loss at any point of a replacement, the
// file holds its old bytes or all of the new ones; once it returned, the
// new ones.
func TestReplaceFile(t *testing.T) {
	for seed := range uint64(50) {
		fs := NewCrashFS()
		if err := fs.MkdirAll("/d"); err != nil {
			t.Fatal(err)
		}
		if err := fs.SyncDir("/"); err != nil { // the directory's own entry: the caller's
			t.Fatal(err)
		}
		if err := ReplaceFile(fs, "/d", "f", []byte("old contents")); err != nil {
			t.Fatal(err)
		}
		if err := ReplaceFile(fs, "/d", "f", []byte("the new contents")); err != nil {
			t.Fatal(err)
		}
		got := readFile(t, fs.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 2)), Tail: TailAny}), "/d/f")
		if string(got) != "the new contents" {
			t.Fatalf("seed %d: after a power loss the file holds %q", seed, got)
		}
	}
}
