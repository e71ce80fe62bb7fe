package filestore

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A store created where no directory of its path exists survives a power
// loss right after its first durable message: prepareDirs made every
// directory it created durable, up to the one that existed.
func TestNewStoreDirsAreDurable(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := Config{Dir: "/a/b/store", FS: fs}
	s := mustOpen(t, cfg, store.Config{})
	seq, err := s.Append(msgN("x", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDurable(seq); err != nil {
		t.Fatal(err)
	}
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	s2 := mustOpen(t, Config{Dir: "/a/b/store", FS: crashed}, store.Config{})
	defer s2.Close()
	if st := s2.State(false); st.Msgs != 1 {
		t.Fatalf("after power loss: %+v, want the durable message", st)
	}
}

// Reopening a store syncs one directory, its segments' (recovery's
// finish: a segment created just before a kill -9 may not have its entry
// durable yet), not the chain of directories above it: a restart of many
// streams must not pay that for each.
func TestReopenSyncsNoDirectory(t *testing.T) {
	inner := vfs.NewCrashFS()
	s := mustOpen(t, Config{Dir: "/a/b/store", FS: inner}, store.Config{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewFaultFS(inner)
	s2 := mustOpen(t, Config{Dir: "/a/b/store", FS: fs}, store.Config{})
	defer s2.Close()
	if n := fs.Calls(vfs.OpSyncDir); n != 1 {
		t.Fatalf("reopen synced %d directories, want 1", n)
	}
}
