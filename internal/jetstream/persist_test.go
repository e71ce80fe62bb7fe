package jetstream

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// holdFS holds the Syncs of the files whose names contain a prefix the
// test holds (hold), until it releases the prefix; everything else
// passes. It counts the Syncs it let through per prefix.
type holdFS struct {
	vfs.FS
	mu    sync.Mutex
	holds map[string]*syncHold
}

type syncHold struct {
	release chan struct{}
	entered chan struct{} // gets a token when a Sync starts to wait
	done    atomic.Int64  // Syncs of the prefix that returned since hold
}

func newHoldFS(inner vfs.FS) *holdFS { return &holdFS{FS: inner, holds: map[string]*syncHold{}} }

func (h *holdFS) Create(name string) (vfs.File, error) {
	f, err := h.FS.Create(name)
	return h.wrap(name, f, err)
}

func (h *holdFS) OpenAppend(name string) (vfs.File, error) {
	f, err := h.FS.OpenAppend(name)
	return h.wrap(name, f, err)
}

func (h *holdFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &holdFile{File: f, fs: h, name: name}, nil
}

// hold makes the Syncs of files whose names contain prefix wait.
func (h *holdFS) hold(prefix string) *syncHold {
	s := &syncHold{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	h.mu.Lock()
	h.holds[prefix] = s
	h.mu.Unlock()
	return s
}

// releaseAll lets every held Sync through.
func (h *holdFS) releaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, s := range h.holds {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		delete(h.holds, p)
	}
}

func (h *holdFS) holdOf(name string) *syncHold {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, s := range h.holds {
		if strings.Contains(name, p) {
			return s
		}
	}
	return nil
}

type holdFile struct {
	vfs.File
	fs   *holdFS
	name string
}

func (f *holdFile) Sync() error {
	s := f.fs.holdOf(f.name)
	if s == nil {
		return f.File.Sync()
	}
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	err := f.File.Sync()
	s.done.Add(1)
	return err
}

// TestAsyncPersistAcksBeforeFsync: a file stream with persist_mode async
// sends its PubAck once the message is written, while the fsync that
// would make it durable is held; its consumers still see only what is
// fsynced, a crash of the process keeps the acknowledged message and a
// power loss may take it (docs/durability.md section 3). A default stream
// on the same disk still answers only after the fsync, and keeps its
// acknowledged messages through the power loss.
func TestAsyncPersistAcksBeforeFsync(t *testing.T) {
	crash := vfs.NewCrashFS()
	hfs := newHoldFS(crash)
	tr := newMemTransport()
	js := newTestJS(t, hfs, tr)
	defer func() {
		hfs.releaseAll()
		js.Shutdown()
	}()
	for _, cfg := range []stream.Config{
		{Name: "A", Subjects: []string{"a"}, PersistMode: stream.AsyncPersist},
		{Name: "D", Subjects: []string{"d"}},
	} {
		if _, err := js.AddStream(cfg); err != nil {
			t.Fatal(err)
		}
	}
	acksA, acksD := tr.inbox("_INBOX.a"), tr.inbox("_INBOX.d")
	tr.Publish("a", "_INBOX.a", nil, []byte("a1"))
	tr.Publish("d", "_INBOX.d", nil, []byte("d1"))
	if got := acksA.next(t); got != `{"stream":"A","seq":1}` {
		t.Fatalf("A: %s", got)
	}
	if got := acksD.next(t); got != `{"stream":"D","seq":1}` {
		t.Fatalf("D: %s", got)
	}

	// a1's PubAck came once written; its fsync moves the durable
	// sequence a moment later: wait for it before holding the fsyncs.
	deadline := time.Now().Add(10 * time.Second)
	for js.streamRuntime("A").DurableSeq() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}

	// The async stream: the PubAck comes while every fsync of its files
	// is held (a wait for the fsync would never end).
	holdA := hfs.hold("/streams/A/")
	tr.Publish("a", "_INBOX.a", nil, []byte("a2"))
	if got := acksA.next(t); got != `{"stream":"A","seq":2}` {
		t.Fatalf("A: %s", got)
	}
	if n := holdA.done.Load(); n != 0 {
		t.Fatalf("A: %d fsyncs of its files before the PubAck, want none", n)
	}
	if got := js.streamRuntime("A").DurableSeq(); got != 1 {
		t.Fatalf("A: durable sequence %d with its fsync held, want 1 (consumers see only what is fsynced)", got)
	}

	// The default stream: its PubAck waits for its fsync.
	holdD := hfs.hold("/streams/D/")
	arrived := make(chan int64, 1)
	_, _ = tr.Subscribe("_INBOX.d2", "", func(_, _ string, _, data []byte) {
		arrived <- holdD.done.Load()
	})
	tr.Publish("d", "_INBOX.d2", nil, []byte("d2"))
	select {
	case <-holdD.entered: // written, its fsync waiting
	case <-time.After(5 * time.Second):
		t.Fatal("D: no fsync within 5 s")
	}
	select {
	case <-arrived:
		t.Fatal("D: PubAck while its fsync is held")
	default:
	}
	close(holdD.release)
	select {
	case n := <-arrived:
		if n == 0 {
			t.Fatal("D: PubAck before its fsync returned")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("D: no PubAck within 5 s of its fsync")
	}

	// A's second message is written but not fsynced: a crash of the
	// process keeps it, a power loss takes it; D keeps both.
	processCrash := crash.Crash(vfs.CrashOptions{Tail: vfs.TailKeep})
	powerLoss := crash.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	for _, tc := range []struct {
		name  string
		fs    vfs.FS
		wantA uint64
	}{{"process crash", processCrash, 2}, {"power loss", powerLoss, 1}} {
		js2 := newTestJS(t, tc.fs, newMemTransport())
		for name, want := range map[string]uint64{"A": tc.wantA, "D": 2} {
			info, err := js2.StreamInfo(name, InfoOptions{})
			if err != nil {
				t.Fatalf("%s: %s: %v", tc.name, name, err)
			}
			if info.State.Msgs != want || info.State.LastSeq != want {
				t.Errorf("%s: %s holds %d messages, last %d; want %d", tc.name, name, info.State.Msgs, info.State.LastSeq, want)
			}
		}
		js2.Shutdown()
	}
}

// TestAsyncPersistWriteErrorAnswered: a write that fails is answered
// with an error PubAck on a persist_mode async stream too, never with a
// success.
func TestAsyncPersistWriteErrorAnswered(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewCrashFS())
	tr := newMemTransport()
	js := newTestJS(t, ffs, tr)
	defer js.Shutdown()
	if _, err := js.AddStream(stream.Config{Name: "A", Subjects: []string{"a"}, PersistMode: stream.AsyncPersist}); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.a")
	tr.Publish("a", "_INBOX.a", nil, []byte("a1"))
	if got := acks.next(t); got != `{"stream":"A","seq":1}` {
		t.Fatalf("%s", got)
	}
	ffs.Inject(vfs.Rule{Op: vfs.OpWrite, Path: "/streams/A/msgs/"})
	tr.Publish("a", "_INBOX.a", nil, []byte("a2"))
	if got := acks.next(t); !strings.Contains(got, `"err_code":10077`) {
		t.Fatalf("PubAck after a failed write: %s, want error 10077", got)
	}
}
