package jetstream

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
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
	mu    sync.Mutex
	run   int   // the open run, 0 if none
	runs  int   // runs begun
	in    []int // per Append, its run
	dels  int   // Delete calls
	many  []int // per DeleteMany call, its run
	nexts int   // LoadNext calls
}

func (b *batchRecorder) LoadNext(filters []string, start uint64) (*store.StoredMsg, error) {
	b.mu.Lock()
	b.nexts++
	b.mu.Unlock()
	return b.Store.LoadNext(filters, start)
}

func (b *batchRecorder) Delete(seq uint64) error {
	b.mu.Lock()
	b.dels++
	b.mu.Unlock()
	return b.Store.Delete(seq)
}

func (b *batchRecorder) DeleteMany(seqs []uint64) (uint64, error) {
	b.mu.Lock()
	b.many = append(b.many, b.run)
	b.mu.Unlock()
	return b.Store.DeleteMany(seqs)
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

// startRecorded starts a runner of cfg (in memory) over a batchRecorder;
// the runner stops, and its JetStream shuts down, with the test.
func startRecorded(t *testing.T, cfg stream.Config) (*streamEntry, *batchRecorder, *memTransport) {
	t.Helper()
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	t.Cleanup(js.Shutdown)
	cfg.Storage = stream.MemoryStorage
	cfg.SetDefaults()
	rec := &batchRecorder{Store: memstore.New(cfg.StoreConfig())}
	r := js.newEntry(cfg, time.Now(), "", rec)
	if err := r.Open(); err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(nil) })
	return r, rec, tr
}

// holdApply keeps the apply goroutine busy until release is called, so
// that what the test queues meanwhile is taken as one batch (queued
// before the hold, it could share a batch with the holding operation).
func holdApply(r *streamEntry) (release func()) { return r.Hold() }

// publishHeld publishes n messages on subj while the apply goroutine is
// held, so that it takes them as one batch, and returns the inbox of
// their PubAcks.
func publishHeld(r *streamEntry, tr *memTransport, subj string, n int) *inbox {
	release := holdApply(r)
	defer release()
	acks := tr.inbox("_INBOX." + subj)
	for i := range n {
		tr.Publish(subj, "_INBOX."+subj, nil, []byte{byte(i)})
	}
	return acks
}

// The apply loop brackets each batch it takes from the ingest queue with
// BeginBatch and EndBatch, so that the file store writes and fsyncs the
// publishes queued together once: here 100 publishes queued while the
// loop was busy are appended in one run.
func TestApplyLoopBracketsBatches(t *testing.T) {
	r, rec, tr := startRecorded(t, stream.Config{Name: "B", Subjects: []string{"b"}})

	const n = 100
	acks := publishHeld(r, tr, "b", n)
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

// An interest stream without consumers keeps nothing (nats-server
// acknowledges and drops): the messages of one batch are removed with one
// DeleteMany inside the batch's run, so that the file store syncs them
// once, not once per message (1.7k against nats-server's 55k async
// publishes a second before).
func TestUninterestedDropsAreBatched(t *testing.T) {
	r, rec, tr := startRecorded(t, stream.Config{Name: "I", Subjects: []string{"i"}, Retention: stream.InterestPolicy})

	const n = 100
	acks := publishHeld(r, tr, "i", n)
	for i := 1; i <= n; i++ {
		if got, want := acks.next(t), fmt.Sprintf(`{"stream":"I","seq":%d}`, i); got != want {
			t.Fatalf("PubAck %q, want %q", got, want)
		}
	}
	// A memory stream's PubAcks go out as each message is applied, the
	// removal at the end of the batch: wait for the batch to end.
	r.Barrier()
	if st := rec.State(false); st.Msgs != 0 || st.LastSeq != n {
		t.Fatalf("store after %d publishes without interest: %+v, want none kept", n, st)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.dels != 0 || len(rec.many) != 1 || rec.many[0] == 0 || rec.many[0] != rec.in[0] {
		t.Fatalf("%d Delete calls, DeleteMany in runs %v, appends from run %d; want one DeleteMany in the appends' run", rec.dels, rec.many, rec.in[0])
	}
}

// Removals queued while the apply goroutine is busy (single acks of a
// workqueue stream, say) are made by one DeleteMany, so one fsync, not
// one operation and fsync per ack: before, a workqueue consumer acking
// each message left the stream removing 18k acknowledged messages
// seconds after the consumer was done.
func TestQueuedRemovalsAreCoalesced(t *testing.T) {
	r, rec, tr := startRecorded(t, stream.Config{Name: "W", Subjects: []string{"w"}, Retention: stream.WorkQueuePolicy})
	acks := tr.inbox("_INBOX.w")
	const n = 50
	for i := range n {
		tr.Publish("w", "_INBOX.w", nil, []byte{byte(i)})
		acks.next(t)
	}

	release := holdApply(r)
	for seq := uint64(1); seq <= n; seq++ {
		r.RemoveMsgs([]uint64{seq}, false)
	}
	release()
	r.Barrier() // after the removals' operation

	if st := rec.State(false); st.Msgs != 0 {
		t.Fatalf("%d messages left after removing all %d", st.Msgs, n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.many) != 1 || rec.dels != 0 {
		t.Fatalf("%d DeleteMany and %d Delete calls for %d queued removals, want one DeleteMany", len(rec.many), rec.dels, n)
	}
}

// An interest stream looks for messages nobody needs (after a consumer
// is deleted or refiltered, and at every start) only below the position
// of its unfiltered consumers: they need everything above it. With one
// that has delivered nothing, there is nothing to read at all (a start
// read every message of a large stream before).
func TestDropUnneededStopsAtUnfilteredConsumer(t *testing.T) {
	r, rec, tr := startRecorded(t, stream.Config{Name: "I", Subjects: []string{"i.>"}, Retention: stream.InterestPolicy})
	r.js.mu.Lock()
	r.js.streams["I"] = r
	r.js.mu.Unlock()
	for _, cfg := range []consumer.Config{{Durable: "ALL", AckPolicy: consumer.AckExplicit}, {Durable: "B", FilterSubject: "i.b", AckPolicy: consumer.AckExplicit}} {
		if _, err := r.js.CreateConsumer("I", cfg, CreateOrUpdate, false); err != nil {
			t.Fatal(err)
		}
	}
	acks := publishHeld(r, tr, "i.a", 50)
	for range 50 {
		acks.next(t)
	}
	rec.mu.Lock()
	before := rec.nexts
	rec.mu.Unlock()
	r.DropUnneeded()
	rec.mu.Lock()
	read := rec.nexts - before
	rec.mu.Unlock()
	if read != 0 {
		t.Errorf("dropUnneeded read %d messages that an unfiltered consumer still needs", read)
	}
	if st := rec.State(false); st.Msgs != 50 {
		t.Fatalf("%d messages left, want all 50", st.Msgs)
	}
}
