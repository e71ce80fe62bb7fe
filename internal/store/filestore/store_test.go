package filestore

import (
	"errors"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// TestConfigErrors refuses impossible configurations.
func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Dir: "/s", BlockSize: 10},
		{Dir: "/s", Sync: SyncEveryInterval},
		{Dir: "/s", SyncInterval: time.Second},
		{Dir: "/s", Sync: 7},
	} {
		cfg.FS = vfs.NewCrashFS()
		if s, err := Open(cfg, store.Config{}); err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

// TestWaitDurableBeyondLast refuses to wait for a sequence never
// appended.
func TestWaitDurableBeyondLast(t *testing.T) {
	s := mustOpen(t, memConfig(vfs.NewCrashFS(), 0), store.Config{})
	defer s.Close()
	appendSync(t, s, msgN("a", 1))
	if err := s.WaitDurable(2); !errors.Is(err, store.ErrBadRequest) {
		t.Fatalf("WaitDurable(2) = %v", err)
	}
	if got := s.DurableSeq(); got != 1 {
		t.Fatalf("DurableSeq = %d", got)
	}
}

// TestSyncEveryInterval acknowledges at once and makes the data durable
// on the interval, and at Close.
func TestSyncEveryInterval(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := Config{Dir: "/s", FS: fs, Sync: SyncEveryInterval, SyncInterval: 20 * time.Millisecond}
	s := mustOpen(t, cfg, store.Config{})
	seq, err := s.Append(msgN("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDurable(seq); err != nil {
		t.Fatal(err)
	}
	if s.DurableSeq() != 0 {
		t.Fatalf("durable before the interval")
	}
	if err := s.note.waitSeq(seq); err != nil { // the flusher's tick
		t.Fatal(err)
	}
	cfg.FS = fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	s.Close()
	s2 := mustOpen(t, cfg, store.Config{})
	if _, err := s2.Load(seq); err != nil {
		t.Fatalf("after the interval and a power loss: %v", err)
	}
	seq2, _ := s2.Append(msgN("a", 2))
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := mustOpen(t, cfg, store.Config{})
	defer s3.Close()
	if _, err := s3.Load(seq2); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}

// TestFencedReads serves nothing past the durable sequence once fenced.
func TestFencedReads(t *testing.T) {
	inner := vfs.NewCrashFS()
	ffs := vfs.NewFaultFS(inner)
	s := mustOpen(t, memConfig(ffs, 0), store.Config{})
	defer s.Close()
	good := appendSync(t, s, msgN("a", 1))
	ffs.Inject(vfs.Rule{Op: vfs.OpSync, Err: syscall.EIO})
	bad, err := s.Append(msgN("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDurable(bad); !errors.Is(err, store.ErrFenced) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable = %v, want ErrFenced wrapping EIO", err)
	}
	if _, err := s.Load(good); err != nil {
		t.Fatalf("Load(durable) = %v", err)
	}
	if _, err := s.Load(bad); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Load(not durable) = %v", err)
	}
	if _, err := s.Append(msgN("a", 3)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Append = %v", err)
	}
}

// TestBackpressure bounds the bytes waiting for the flusher when appends
// do not wait for durability.
func TestBackpressure(t *testing.T) {
	s := mustOpen(t, memConfig(vfs.NewCrashFS(), 1024), store.Config{})
	defer s.Close()
	data := make([]byte, 200)
	for i := range 5000 {
		if _, err := s.Append(store.Msg{Subject: "a", Data: data, Time: int64(i)}); err != nil {
			t.Fatal(err)
		}
		s.mu.RLock()
		n := len(s.mu.sealedOut)
		s.mu.RUnlock()
		if n > maxSealedBacklog+1 {
			t.Fatalf("%d sealed segments wait for the flusher", n)
		}
	}
}

// TestSegmentsRemoved removes front segments once their messages are
// gone, and keeps the rest.
func TestSegmentsRemoved(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 512), store.Config{MaxMsgs: 20})
	for i := range 300 {
		appendSync(t, s, msgN("a", i))
	}
	if _, err := s.Compact(290); err != nil { // waits for a batch: removals done
		t.Fatal(err)
	}
	appendSync(t, s, msgN("a", 301))
	names, _ := fs.ReadDir("/store/msgs")
	if len(names) > 4 {
		t.Fatalf("%d segment files left: %v", len(names), names)
	}
	mustCheck(t, s, "limits")
	st := s.State(false)
	s.Close()
	s2 := mustOpen(t, memConfig(fs, 512), store.Config{MaxMsgs: 20})
	defer s2.Close()
	if got := s2.State(false); got.FirstSeq != st.FirstSeq || got.Msgs != st.Msgs || got.LastSeq != st.LastSeq {
		t.Fatalf("after reopen %+v, before %+v", got, st)
	}
}

// TestConcurrentReadersWriters runs loads, scans and appends at once,
// under the race detector in CI.
func TestConcurrentReadersWriters(t *testing.T) {
	s := mustOpen(t, memConfig(vfs.NewCrashFS(), 2048), store.Config{MaxMsgs: 500})
	defer s.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-done:
					return
				default:
				}
				st := s.State(false)
				if st.LastSeq > 0 {
					s.Load(1 + r.Uint64N(st.LastSeq))
					s.LoadNext([]string{"s.*"}, 1+r.Uint64N(st.LastSeq))
					s.LoadLast("s.1")
				}
			}
		}()
	}
	for i := range 3000 {
		seq, err := s.Append(msgN("s."+string(rune('0'+i%3)), i))
		if err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			s.WaitDurable(seq)
			s.Delete(seq - 3)
		}
	}
	close(done)
	mustCheck(t, s, "concurrent")
}
