package filestore

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// imageSizes returns the length and capacity of the active segment's
// in-memory image and the capacity of the spare image.
func imageSizes(s *Store) (length, capacity, spare int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.activeLocked()
	return len(g.buf), cap(g.buf), cap(s.mu.spare)
}

// appendAll appends msgs in runs of 100 (as a stream's apply loop does)
// and waits for the last to be durable.
func appendAll(t *testing.T, s *Store, msgs []store.Msg) {
	t.Helper()
	var seq uint64
	for i := 0; i < len(msgs); i += 100 {
		s.BeginBatch()
		for _, m := range msgs[i:min(i+100, len(msgs))] {
			var err error
			if seq, err = s.Append(m); err != nil {
				t.Fatalf("Append: %v", err)
			}
		}
		s.EndBatch()
	}
	if err := s.WaitDurable(seq); err != nil {
		t.Fatalf("WaitDurable(%d): %v", seq, err)
	}
}

// TestActiveImageStaysSmall: the active segment keeps in memory only what
// is not written yet and the chunk being filled, not the whole segment.
// With the default BlockSize of 8 MiB, a store that took 6 MiB of
// messages into one segment held 6 MiB (and, after the first roll, a
// spare image as large) before; now its image stays under trimStep plus
// one chunk, whatever BlockSize is. Every message still loads, from the
// image or from the file, before and after a reopen.
func TestActiveImageStaysSmall(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), store.Config{})
	var msgs []store.Msg
	for i := range 6 * 1024 {
		msgs = append(msgs, store.Msg{Subject: fmt.Sprintf("s.%d", i%5), Data: jsonish(i, 1000), Time: int64(i + 1)})
	}
	appendAll(t, s, msgs)
	if n := len(s.mu.segs); n != 1 {
		t.Fatalf("%d segments, want 1 (the test is about the active segment)", n)
	}
	length, capacity, spare := imageSizes(s)
	t.Logf("6 MiB appended: image %d bytes (capacity %d), spare %d", length, capacity, spare)
	if length >= trimStep+chunkSize || capacity > keepImageCap || spare > keepImageCap {
		t.Fatalf("active image %d bytes (capacity %d), spare %d: want under %d (capacity and spare at most %d)",
			length, capacity, spare, trimStep+chunkSize, keepImageCap)
	}
	wantMsgs(t, s, msgs)
	s.Close()
	s = mustOpen(t, memConfig(fs, 0), store.Config{})
	defer s.Close()
	if length, _, _ := imageSizes(s); length >= chunkSize {
		t.Fatalf("after reopen the active image holds %d bytes, want less than a chunk", length)
	}
	wantMsgs(t, s, msgs)
}

// TestLargeMessageImageShrinks: a message larger than keepImageCap grows
// the image to hold it; once it is written, the image shrinks again
// instead of keeping that capacity for the life of the segment.
func TestLargeMessageImageShrinks(t *testing.T) {
	s := mustOpen(t, memConfig(vfs.NewCrashFS(), 0), store.Config{})
	defer s.Close()
	big := store.Msg{Subject: "big", Data: make([]byte, 3<<20), Time: 1}
	small := make([]store.Msg, 0, 64)
	for i := range cap(small) {
		small = append(small, store.Msg{Subject: "small", Data: jsonish(i, 100), Time: int64(i + 2)})
	}
	appendAll(t, s, append([]store.Msg{big}, small...))
	appendAll(t, s, small) // a second batch: the first one's bytes are written by now
	if _, capacity, spare := imageSizes(s); capacity > keepImageCap || spare > keepImageCap {
		t.Fatalf("after a 3 MiB message: image capacity %d, spare %d, want at most %d", capacity, spare, keepImageCap)
	}
	got, err := s.Load(1)
	if err != nil || len(got.Data) != len(big.Data) {
		t.Fatalf("Load(1) = %v, %v", got, err)
	}
}

// TestReadsAcrossTrims loads every message while the active segment
// grows: reads of written bytes go through the chunk cache, which must
// never keep a chunk the file had only in part.
func TestReadsAcrossTrims(t *testing.T) {
	s := mustOpen(t, memConfig(vfs.NewCrashFS(), 0), store.Config{})
	defer s.Close()
	var msgs []store.Msg
	for round := range 8 {
		for i := range 700 {
			n := round*700 + i
			msgs = append(msgs, store.Msg{Subject: "r", Data: jsonish(n, 50+n%300), Time: int64(n + 1)})
		}
		appendAll(t, s, msgs[round*700:])
		for seq := uint64(1); seq <= uint64(len(msgs)); seq++ {
			m, err := s.LoadNext([]string{"r"}, seq)
			if err != nil {
				t.Fatalf("round %d: LoadNext(%d): %v", round, seq, err)
			}
			if string(m.Data) != string(msgs[seq-1].Data) {
				t.Fatalf("round %d: LoadNext(%d) returned other bytes", round, seq)
			}
		}
	}
}

// TestConsumerUpdateMemory: storing a consumer state of 100,000 pending
// acknowledgements (a 2.4 MB file) allocates well under the file's size:
// the file is written in 64 KiB pieces straight from the state's sorted
// slice, and the store keeps no copy of it. Before, Update built the
// body, copied it behind the header, sorted the keys into a slice of
// their own and kept a clone of the state's maps: about four times the
// file's size, all of it garbage at once for a large pending set.
func TestConsumerUpdateMemory(t *testing.T) {
	s := mustOpen(t, Config{Dir: t.TempDir()}, store.Config{})
	defer s.Close()
	cs, err := s.ConsumerStore("big")
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	st := &store.ConsumerState{Delivered: store.SequencePair{Consumer: n, Stream: n}}
	for i := uint64(1); i <= n; i++ {
		st.Pending = append(st.Pending, store.StreamPending{Stream: i, Pending: store.Pending{Sequence: i, Timestamp: int64(i)}})
	}
	if err := cs.Update(st); err != nil { // directory entries and the like, once
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := cs.Update(st); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	file := 40 + 24*n
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(file)/10 {
		t.Fatalf("Update of a %d-byte state allocated %d bytes, want at most a tenth of it", file, got)
	}
	got, err := cs.State()
	if err != nil || len(got.Pending) != n || got.Pending[n-1] != st.Pending[n-1] {
		t.Fatalf("State() = %d pending, %v", len(got.Pending), err)
	}
}

// gateFS holds every Write of its files while its gate is shut, so that
// a test can look at the store while the flusher's writer waits in the
// middle of a batch.
type gateFS struct {
	vfs.FS
	mu      sync.Mutex
	gate    chan struct{} // nil: writes pass
	waiting chan struct{} // gets a token when a write starts to wait
}

func (g *gateFS) Create(name string) (vfs.File, error) { return g.wrap(g.FS.Create(name)) }
func (g *gateFS) Open(name string) (vfs.File, error)   { return g.wrap(g.FS.Open(name)) }
func (g *gateFS) OpenAppend(name string) (vfs.File, error) {
	return g.wrap(g.FS.OpenAppend(name))
}

func (g *gateFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, fs: g}, nil
}

// shut makes the next writes wait; open lets them through.
func (g *gateFS) shut() {
	g.mu.Lock()
	g.gate, g.waiting = make(chan struct{}), make(chan struct{}, 1)
	g.mu.Unlock()
}

func (g *gateFS) open() {
	g.mu.Lock()
	close(g.gate)
	g.gate = nil
	g.mu.Unlock()
}

type gateFile struct {
	vfs.File
	fs *gateFS
}

func (f *gateFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	gate, waiting := f.fs.gate, f.fs.waiting
	f.fs.mu.Unlock()
	if gate != nil {
		select {
		case waiting <- struct{}{}:
		default:
		}
		<-gate
	}
	return f.File.Write(p)
}

// TestSealedTailChunkNotCached: a record that straddles the start of
// the active segment's trimmed image is read from the file, whose last
// chunk is only partly written. If the segment is sealed while its tail
// still waits for the writer, that partial chunk must not be cached as
// the sealed segment's final one: once the tail is written, the records
// after the straddling one would read past the cached bytes and fail
// (the cache must treat a sealed segment as final only once its image
// is dropped, that is once all its bytes are in the file).
func TestSealedTailChunkNotCached(t *testing.T) {
	fs := &gateFS{FS: vfs.NewCrashFS()}
	s := mustOpen(t, memConfig(fs, 1<<20), store.Config{})
	defer s.Close()
	var msgs []store.Msg
	next := func() store.Msg {
		n := len(msgs)
		m := store.Msg{Subject: "t", Data: jsonish(n, 900+n%77), Time: int64(n + 1)}
		msgs = append(msgs, m)
		return m
	}
	for range 500 {
		next()
	}
	appendAll(t, s, msgs) // about 500 KB: the image is trimmed
	s.mu.RLock()
	g := s.activeLocked()
	first, straddle := g.base, uint64(0)
	for i := range g.offs {
		if off := int64(g.offs[i]); off < g.bufOff && off+int64(g.recordLen(i)) > g.bufOff {
			straddle = g.base + uint64(i)
		}
	}
	bufOff := g.bufOff
	s.mu.RUnlock()
	if bufOff == 0 || straddle == 0 {
		t.Fatalf("image from offset %d, record across it %d: the test needs a trimmed image and a record across its start", bufOff, straddle)
	}

	// Seal the segment with its tail unwritten: the writer waits in the
	// middle of the batch that holds the tail.
	fs.shut()
	s.BeginBatch()
	for {
		if _, err := s.Append(next()); err != nil {
			t.Fatal(err)
		}
		s.mu.RLock()
		rolled := s.activeLocked() != g
		s.mu.RUnlock()
		if rolled {
			break
		}
	}
	s.EndBatch()
	<-fs.waiting
	for _, seq := range []uint64{straddle - 1, straddle} { // a scan: through the chunk cache
		if got, err := s.Load(seq); err != nil || string(got.Data) != string(msgs[seq-first].Data) {
			t.Fatalf("Load(%d) while the tail waits: %v", seq, err)
		}
	}
	fs.open()
	if err := s.WaitDurable(uint64(len(msgs))); err != nil {
		t.Fatal(err)
	}
	for seq := straddle + 1; seq <= uint64(len(msgs)); seq++ {
		got, err := s.Load(seq)
		if err != nil || string(got.Data) != string(msgs[seq-1].Data) {
			t.Fatalf("Load(%d) after the tail was written: %v", seq, err)
		}
	}
}
