package filestore

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/storetest"
	"github.com/cairnmq/cairn/internal/vfs"
)

// TestConformance runs the engine-independent suite, reopening the store
// on the same file system where the suite asks for it, with small
// segments so that rolls and segment removals happen, and once with every
// payload stored compressed (forceS2: the suite's payloads are too small
// for compression to pay, so it is forced).
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name string
		bs   int64
		s2   bool
	}{{"default-blocks", 0, false}, {"small-blocks", 512, false}, {"small-blocks-s2", 512, true}} {
		t.Run(v.name, func(t *testing.T) {
			storetest.Run(t, storetest.Engine{
				Name: "filestore",
				New: func(t *testing.T, cfg store.Config) store.Store {
					c := memConfig(vfs.NewCrashFS(), v.bs)
					c.forceS2 = v.s2
					return mustOpen(t, c, cfg)
				},
				Reopen: func(t *testing.T, s store.Store, cfg store.Config) store.Store {
					fst := s.(*Store)
					if err := fst.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					return mustOpen(t, fst.cfg, cfg)
				},
			})
		})
	}
}

// TestConformanceOS runs the suite on the real file system.
func TestConformanceOS(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	storetest.Run(t, storetest.Engine{
		Name: "filestore-os",
		New: func(t *testing.T, cfg store.Config) store.Store {
			return mustOpen(t, Config{Dir: t.TempDir() + "/s"}, cfg)
		},
		Reopen: func(t *testing.T, s store.Store, cfg store.Config) store.Store {
			fst := s.(*Store)
			if err := fst.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return mustOpen(t, fst.cfg, cfg)
		},
	})
}
