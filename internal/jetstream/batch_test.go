package jetstream

import (
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// batchRecorder is a memory store that records, for every Append, the
// run of appends (BeginBatch .. EndBatch) it came in, numbered from 1;
// 0 means outside any run.
type batchRecorder struct {
	store.Store
	mu   sync.Mutex
	run  int   // the open run, 0 if none
	runs int   // runs begun
	in   []int // per Append, its run
}

func (b *batchRecorder) BeginBatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs++
	b.run = b.runs
}

func (b *batchRecorder) EndBatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.run = 0
}

func (b *batchRecorder) Append(m store.Msg) (uint64, error) {
	b.mu.Lock()
	b.in = append(b.in, b.run)
	b.mu.Unlock()
	return b.Store.Append(m)
}

// The apply loop brackets each batch it takes from the ingest queue with
// BeginBatch and EndBatch, so that the file store writes and fsyncs the
// publishes queued together once: here 100 publishes queued while the
// loop was busy are appended in one run.
func TestApplyLoopBracketsBatches(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	cfg := stream.Config{Name: "B", Subjects: []string{"b"}, Storage: stream.MemoryStorage}
	cfg.SetDefaults()
	rec := &batchRecorder{Store: memstore.New(cfg.StoreConfig())}
	r := newRunner(js, cfg, time.Now(), "", rec)
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	defer r.stop(nil)

	// Keep the loop busy, and publish only once it is: otherwise it may
	// take the first publishes in the same batch as this operation.
	busy, release := make(chan struct{}), make(chan struct{})
	r.in.pushOp(item{op: func(*stream.Stream) { close(busy); <-release }})
	<-busy
	acks := tr.inbox("_INBOX.b")
	const n = 100
	for i := range n {
		tr.Publish("b", "_INBOX.b", nil, []byte{byte(i)})
	}
	close(release)
	for range n {
		acks.next(t)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.in) != n {
		t.Fatalf("%d appends, want %d", len(rec.in), n)
	}
	for i, run := range rec.in {
		if run == 0 || run != rec.in[0] {
			t.Fatalf("append %d came in run %d, the first in run %d; want all in one run", i+1, run, rec.in[0])
		}
	}
}
