package filestore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Benchmarks run on the real disk: in CAIRN_BENCH_DIR when set, else in
// a temporary directory. Figures are in msgs/s and MB/s of payload.

// benchDir returns a fresh directory for a benchmark.
func benchDir(b *testing.B) string {
	if d := os.Getenv("CAIRN_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkAppend measures appends that wait for durability (SyncAlways,
// group commit) with 1, 16 and 256 concurrent appenders.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{128, 4096} {
		for _, writers := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("size=%d/appenders=%d", size, writers), func(b *testing.B) {
				benchAppend(b, size, writers)
			})
		}
	}
}

// BenchmarkAppendS2 is BenchmarkAppend with compression on and
// compressible (JSON-like) payloads of 4 KiB: every payload is stored
// compressed. MB/s counts the payload uncompressed.
func BenchmarkAppendS2(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("size=4096/appenders=%d", writers), func(b *testing.B) {
			benchAppendWith(b, jsonish(1, 4096), writers, store.Config{Compress: true})
		})
	}
}

func benchAppend(b *testing.B, size, writers int) {
	benchAppendWith(b, make([]byte, size), writers, store.Config{})
}

func benchAppendWith(b *testing.B, data []byte, writers int, limits store.Config) {
	s := mustOpen(b, Config{Dir: filepath.Join(benchDir(b), "s")}, limits)
	defer s.Close()
	size := len(data)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subj := fmt.Sprintf("bench.%d", w)
			for next.Add(1) <= int64(b.N) {
				seq, err := s.Append(store.Msg{Subject: subj, Data: data})
				if err == nil {
					err = s.WaitDurable(seq)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el, "msgs/s")
	b.ReportMetric(float64(b.N)*float64(size)/el/1e6, "MB/s")
}

// BenchmarkRawWrite is the disk's limit for the same bytes: the records
// BenchmarkAppend writes (payload plus overhead), written sequentially in
// 1 MiB writes, then one fsync.
func BenchmarkRawWrite(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			f, err := vfs.OS().Create(filepath.Join(benchDir(b), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			rec := size + RecordOverhead + len("bench.0")
			total := int64(b.N) * int64(rec)
			chunk := make([]byte, 1<<20)
			b.ResetTimer()
			start := time.Now()
			for left := total; left > 0; left -= int64(len(chunk)) {
				if _, err := f.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/el, "msgs/s")
			b.ReportMetric(float64(b.N)*float64(size)/el/1e6, "MB/s")
		})
	}
}

// BenchmarkFsync is the latency of one fsync after a 4 KiB append.
func BenchmarkFsync(b *testing.B) {
	f, err := vfs.OS().Create(filepath.Join(benchDir(b), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointNote is what the checkpoint adds to each group
// commit on the real disk: one record appended without fsync (and, every
// 4096 records, a replacement with one fsync), to compare with
// BenchmarkFsync.
func BenchmarkCheckpointNote(b *testing.B) {
	dir := benchDir(b)
	c := newCheckpoint(vfs.OS(), dir, ckptCompactMax)
	if err := c.replace(0); err != nil {
		b.Fatal(err)
	}
	defer c.close()
	b.ResetTimer()
	for i := range b.N {
		if err := c.note(uint64(i) + 1); err != nil {
			b.Fatal(err)
		}
		if c.full() {
			if err := c.replace(0); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchStores caches the big stores that the load and recovery
// benchmarks read, by size, for the whole run.
var benchStores = struct {
	sync.Mutex
	dirs map[string]string
}{dirs: map[string]string{}}

// benchStoreMsgs is the size of the read benchmarks' store:
// CAIRN_BENCH_MSGS, default 1,000,000.
func benchStoreMsgs() int {
	if v, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_MSGS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// bigStore returns the directory of a closed store of n messages of 128 B
// on 100 subjects ("big.0".."big.99"; "big.0" gets one message in 1000).
func bigStore(b *testing.B, n int) string {
	benchStores.Lock()
	defer benchStores.Unlock()
	key := strconv.Itoa(n)
	if d, ok := benchStores.dirs[key]; ok {
		return d
	}
	dir, reuse, err := bigStoreDir(n)
	if err != nil {
		b.Fatal(err)
	}
	benchStores.dirs[key] = dir
	if reuse {
		return dir
	}
	s := mustOpen(b, Config{Dir: dir}, store.Config{})
	data := make([]byte, 128)
	var last uint64
	for i := range n {
		subj := "big." + strconv.Itoa(1+i%99)
		if i%1000 == 0 {
			subj = "big.0"
		}
		if last, err = s.Append(store.Msg{Subject: subj, Data: data, Time: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.WaitDurable(last); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// bigStoreDir returns the directory for a big store of n messages. With
// CAIRN_BENCH_KEEP and CAIRN_BENCH_DIR set, the store is kept between runs
// (bigstore-<n>) and reused, so that a run can start with a cold page
// cache; reuse reports that it already exists.
func bigStoreDir(n int) (dir string, reuse bool, err error) {
	root := os.Getenv("CAIRN_BENCH_DIR")
	if root == "" || os.Getenv("CAIRN_BENCH_KEEP") == "" {
		dir, err = os.MkdirTemp(root, "bigstore")
		return dir, false, err
	}
	dir = filepath.Join(root, fmt.Sprintf("bigstore-%d", n))
	_, err = os.Stat(filepath.Join(dir, "meta"))
	return dir, err == nil, nil
}

// TestMain removes the benchmarks' big stores.
func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("CAIRN_BENCH_KEEP") == "" {
		for _, d := range benchStores.dirs {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// BenchmarkLoad loads random sequences from a big store.
func BenchmarkLoad(b *testing.B) {
	n := benchStoreMsgs()
	s := mustOpen(b, Config{Dir: bigStore(b, n)}, store.Config{})
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 1))
	b.ResetTimer()
	for range b.N {
		if _, err := s.Load(1 + r.Uint64N(uint64(n))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadNextFiltered scans a big store with filters: a literal
// subject holding one message in 1000, and a wildcard that matches all.
func BenchmarkLoadNextFiltered(b *testing.B) {
	n := benchStoreMsgs()
	s := mustOpen(b, Config{Dir: bigStore(b, n)}, store.Config{})
	defer s.Close()
	for _, filter := range []string{"big.0", "big.*", "big.5"} {
		b.Run(filter, func(b *testing.B) {
			seq := uint64(1)
			b.ResetTimer()
			for range b.N {
				m, err := s.LoadNext([]string{filter}, seq)
				if err == store.ErrEOF {
					seq = 1
					continue
				}
				if err != nil {
					b.Fatal(err)
				}
				seq = m.Seq + 1
			}
		})
	}
}

// BenchmarkNumPending counts on a big store (CAIRN_BENCH_MSGS messages,
// default 1,000,000, on 100 subjects): unfiltered, a literal subject
// holding one message in 99, one holding one in 1000, and a wildcard
// matching all, each over the whole stream (a consumer delivering all),
// from the middle, and over the last 10 sequences (new appends).
func BenchmarkNumPending(b *testing.B) {
	n := uint64(benchStoreMsgs())
	s := mustOpen(b, Config{Dir: bigStore(b, int(n))}, store.Config{})
	defer s.Close()
	filters := []struct {
		name    string
		filters []string
		want    uint64 // over the whole stream
	}{
		{"all", nil, n},
		{"literal", []string{"big.5"}, s.NumPending([]string{"big.5"}, 0, 0)},
		{"sparse", []string{"big.0"}, (n + 999) / 1000},
		{"wildcard", []string{"big.*"}, n},
	}
	ranges := []struct {
		name       string
		start, end uint64
	}{
		{"deliver-all", 1, 0},
		{"from-middle", n / 2, 0},
		{"new-10", n - 9, 0},
	}
	for _, f := range filters {
		if got := s.NumPending(f.filters, 1, 0); got != f.want {
			b.Fatalf("NumPending(%q) = %d, want %d", f.filters, got, f.want)
		}
		for _, rg := range ranges {
			b.Run(f.name+"/"+rg.name, func(b *testing.B) {
				for b.Loop() {
					s.NumPending(f.filters, rg.start, rg.end)
				}
			})
		}
	}
}

// segmentFiles returns the segment files of a store directory and their
// total size.
func segmentPaths(b *testing.B, dir string) ([]string, int64) {
	entries, err := os.ReadDir(filepath.Join(dir, "msgs"))
	if err != nil {
		b.Fatal(err)
	}
	var paths []string
	var bytes int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			paths = append(paths, filepath.Join(dir, "msgs", e.Name()))
			bytes += fi.Size()
		}
	}
	return paths, bytes
}

// BenchmarkRecovery opens a big store: msgs/s and MB/s of segment data
// read and verified, the index bytes per message, the heap the open store
// holds per message, and the bytes allocated during recovery.
func BenchmarkRecovery(b *testing.B) {
	n := benchStoreMsgs()
	dir := bigStore(b, n)
	_, bytes := segmentPaths(b, dir)
	var heap, index, alloc float64
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := mustOpen(b, Config{Dir: dir}, store.Config{})
		runtime.ReadMemStats(&after)
		alloc = float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
		index = float64(s.indexBytes()) / float64(n)
		s.Close()
	}
	el := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(float64(n)/el, "msgs/s")
	b.ReportMetric(float64(bytes)/el/1e6, "MB/s")
	b.ReportMetric(index, "index-B/msg")
	b.ReportMetric(heap, "heap-B/msg")
	b.ReportMetric(alloc, "alloc-B/msg")
}

// BenchmarkRawRead is the disk's limit for recovery: the big store's
// segment files read sequentially in 1 MiB reads.
func BenchmarkRawRead(b *testing.B) {
	paths, bytes := segmentPaths(b, bigStore(b, benchStoreMsgs()))
	buf := make([]byte, 1<<20)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			for {
				if k, _ := f.Read(buf); k == 0 {
					break
				}
			}
			f.Close()
		}
	}
	el := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(float64(bytes)/el/1e6, "MB/s")
}

// indexBytes returns the memory of the per-slot index.
func (s *Store) indexBytes() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, g := range s.mu.segs {
		n += g.indexBytes()
	}
	return n
}
