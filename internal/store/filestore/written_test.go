package filestore

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// syncGateFS holds every Sync of its files while its gate is shut, so
// that a test can look at the store while the flusher's syncer waits in
// an fsync; writes pass.
type syncGateFS struct {
	vfs.FS
	mu      sync.Mutex
	gate    chan struct{} // nil: syncs pass
	entered chan struct{} // gets a token when a sync starts to wait
}

func (g *syncGateFS) Create(name string) (vfs.File, error) { return g.wrap(g.FS.Create(name)) }
func (g *syncGateFS) OpenAppend(name string) (vfs.File, error) {
	return g.wrap(g.FS.OpenAppend(name))
}

func (g *syncGateFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &syncGateFile{File: f, fs: g}, nil
}

// shut makes the next syncs wait; open lets them through.
func (g *syncGateFS) shut() {
	g.mu.Lock()
	g.gate, g.entered = make(chan struct{}), make(chan struct{}, 1)
	g.mu.Unlock()
}

func (g *syncGateFS) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

type syncGateFile struct {
	vfs.File
	fs *syncGateFS
}

func (f *syncGateFile) Sync() error {
	f.fs.mu.Lock()
	gate, entered := f.fs.gate, f.fs.entered
	f.fs.mu.Unlock()
	if gate != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-gate
	}
	return f.File.Sync()
}

// waitErr waits up to 5 s for the error of a call running on its own
// goroutine.
func waitErr(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5 s", what)
		return nil
	}
}

// TestWaitWrittenBeforeSync: WaitWritten returns once the message is in
// its segment file while the fsync that would make it durable is held;
// a crash of the process then keeps it, a power loss does not (the
// promise of persist_mode async, docs/durability.md).
func TestWaitWrittenBeforeSync(t *testing.T) {
	crash := vfs.NewCrashFS()
	gate := &syncGateFS{FS: crash}
	defer gate.open()
	cfg := memConfig(gate, 0)
	s := mustOpen(t, cfg, store.Config{})
	first := appendSync(t, s, msgN("a", 1)) // creates the segment file
	gate.shut()
	seq, err := s.Append(msgN("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.WaitWritten(seq) }()
	if err := waitErr(t, "WaitWritten with the fsync held", done); err != nil {
		t.Fatalf("WaitWritten(%d) = %v", seq, err)
	}
	if got := s.DurableSeq(); got != first {
		t.Fatalf("DurableSeq = %d with the fsync held, want %d", got, first)
	}

	processCrash := crash.Crash(vfs.CrashOptions{Tail: vfs.TailKeep})
	powerLoss := crash.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	gate.open()
	s.Close() // fails: the file system crashed under it
	kept := mustOpen(t, memConfig(processCrash, 0), store.Config{})
	defer kept.Close()
	if _, err := kept.Load(seq); err != nil {
		t.Fatalf("after a crash of the process, the written message: %v", err)
	}
	lost := mustOpen(t, memConfig(powerLoss, 0), store.Config{})
	defer lost.Close()
	if st := lost.State(false); st.LastSeq != first {
		t.Fatalf("after a power loss, last sequence %d, want %d (the unsynced write gone)", st.LastSeq, first)
	}
}

// TestWaitWrittenErrors: a sequence never appended is a bad request; a
// failed write fences and WaitWritten reports it; under
// SyncEveryInterval it returns at once, as WaitDurable does.
func TestWaitWrittenErrors(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewCrashFS())
	s := mustOpen(t, memConfig(ffs, 0), store.Config{})
	defer s.Close()
	appendSync(t, s, msgN("a", 1))
	if err := s.WaitWritten(2); !errors.Is(err, store.ErrBadRequest) {
		t.Fatalf("WaitWritten(2) = %v, want ErrBadRequest", err)
	}
	ffs.Inject(vfs.Rule{Op: vfs.OpWrite, Err: syscall.EIO})
	seq, err := s.Append(msgN("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitWritten(seq); !errors.Is(err, store.ErrFenced) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitWritten after a failed write = %v, want ErrFenced wrapping EIO", err)
	}

	iv := mustOpen(t, Config{Dir: "/iv", FS: vfs.NewCrashFS(), Sync: SyncEveryInterval, SyncInterval: time.Hour}, store.Config{})
	defer iv.Close()
	seq, err = iv.Append(msgN("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := iv.WaitWritten(seq); err != nil {
		t.Fatalf("WaitWritten under SyncEveryInterval = %v", err)
	}
}

// seenSyncFS records, at every Sync of its files, what seen returns.
type seenSyncFS struct {
	vfs.FS
	seen func() uint64
	mu   sync.Mutex
	at   []uint64
}

func (g *seenSyncFS) Create(name string) (vfs.File, error) { return g.wrap(g.FS.Create(name)) }
func (g *seenSyncFS) OpenAppend(name string) (vfs.File, error) {
	return g.wrap(g.FS.OpenAppend(name))
}

func (g *seenSyncFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &seenSyncFile{File: f, fs: g}, nil
}

type seenSyncFile struct {
	vfs.File
	fs *seenSyncFS
}

func (f *seenSyncFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.at = append(f.fs.at, f.fs.seen())
	f.fs.mu.Unlock()
	return f.File.Sync()
}

// TestWaitWrittenRunsBeforeTheSync: once a write woke waiters of
// WaitWritten, the writer yields before it hands the batch to the
// syncer (writer.yieldToWaiters), so that they run before the syncer's
// fsync holds the P: the send readies the syncer in their place on the
// writer's P, and on the loaded 2-core machine a replicated stream's
// PubAck (which waits for the write) left 93 and 116 µs (medians of two
// runs) after the write without the yield, 0.5 µs with it
// (docs/benchmarks.md, "Where a synchronous publish's time goes"). The
// test checks the order (the yield, then the fsync of the batch), not
// Go's scheduler.
func TestWaitWrittenRunsBeforeTheSync(t *testing.T) {
	var yields atomic.Uint64
	fs := &seenSyncFS{FS: vfs.NewCrashFS(), seen: yields.Load}
	cfg := memConfig(fs, 0)
	cfg.yield = func() { yields.Add(1) }
	s := mustOpen(t, cfg, store.Config{})
	defer s.Close()
	appendSync(t, s, msgN("a", 1)) // creates the segment file
	for i := 2; i <= 6; i++ {
		s.BeginBatch() // the writer waits for EndBatch
		seq, err := s.Append(msgN("a", i))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.WaitWritten(seq) }()
		for deadline := time.Now().Add(5 * time.Second); ; {
			s.note.mu.Lock()
			waiting := s.note.mu.wch != nil
			s.note.mu.Unlock()
			if waiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("WaitWritten did not wait in 5 s")
			}
			time.Sleep(time.Millisecond)
		}
		fs.mu.Lock()
		before := len(fs.at)
		fs.mu.Unlock()
		y0 := yields.Load()
		s.EndBatch()
		if err := waitErr(t, "WaitWritten", done); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitDurable(seq); err != nil {
			t.Fatal(err)
		}
		fs.mu.Lock()
		at := slices.Clone(fs.at[before:])
		fs.mu.Unlock()
		if len(at) == 0 || at[0] <= y0 {
			t.Errorf("message %d: %d yields before the write, %v at the syncs that made it durable: no yield between its write and its fsync", seq, y0, at)
		}
	}
}
