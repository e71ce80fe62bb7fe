package filestore

import (
	"runtime"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// letFlusherRun yields until the flusher has taken the pending kick, so
// that a flusher that would write on it has had its chance.
func letFlusherRun(s *Store) {
	for len(s.kick) > 0 {
		runtime.Gosched()
	}
	runtime.Gosched()
}

// A run of appends between BeginBatch and EndBatch is written and fsynced
// once, at EndBatch, however often the flusher runs meanwhile; runs may
// overlap, and the last EndBatch releases them.
func TestBatchIsSyncedOnce(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewCrashFS())
	s := mustOpen(t, memConfig(ffs, 1<<20), store.Config{})
	defer s.Close()
	appendSync(t, s, msgN("a", 0)) // creates the segment file
	syncs := ffs.Calls(vfs.OpSync)

	s.BeginBatch()
	s.BeginBatch()
	var last uint64
	for i := 1; i <= 50; i++ {
		seq, err := s.Append(msgN("a", i))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		last = seq
		letFlusherRun(s)
	}
	s.EndBatch()
	letFlusherRun(s)
	if d := s.DurableSeq(); d != 1 {
		t.Fatalf("DurableSeq = %d while a run is held, want 1", d)
	}
	s.EndBatch()
	if err := s.WaitDurable(last); err != nil {
		t.Fatalf("WaitDurable(%d): %v", last, err)
	}
	if got := ffs.Calls(vfs.OpSync) - syncs; got != 1 {
		t.Fatalf("%d fsyncs for one run of 50 appends, want 1", got)
	}
}

// DeleteMany makes all its removals durable with one fsync, where a
// Delete per message would sync once each, and they stay removed after a
// reopen.
func TestDeleteManySyncsOnce(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewCrashFS())
	cfg := memConfig(ffs, 1<<20)
	s := mustOpen(t, cfg, store.Config{})
	var seqs []uint64
	for i := range 40 {
		seqs = append(seqs, appendSync(t, s, msgN("a", i)))
	}
	syncs := ffs.Calls(vfs.OpSync)
	if n, err := s.DeleteMany(seqs[:30]); err != nil || n != 30 {
		t.Fatalf("DeleteMany = %d, %v; want 30", n, err)
	}
	if got := ffs.Calls(vfs.OpSync) - syncs; got != 1 {
		t.Fatalf("%d fsyncs for DeleteMany of 30 messages, want 1", got)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = mustOpen(t, cfg, store.Config{})
	defer s.Close()
	if st := s.State(false); st.Msgs != 10 || st.FirstSeq != seqs[30] {
		t.Fatalf("after reopen: %d messages from %d, want 10 from %d", st.Msgs, st.FirstSeq, seqs[30])
	}
}

// Calls that wait for their own change are written at once, even inside
// a run held by their own goroutine (the stream's apply loop deleting a
// message nobody is interested in, or Append waiting for the flusher to
// catch up), instead of waiting for EndBatch forever.
func TestBatchDoesNotHoldWaitingCalls(t *testing.T) {
	cases := map[string]func(t *testing.T, s *Store){
		"Delete": func(t *testing.T, s *Store) {
			seq, err := s.Append(msgN("a", 1))
			if err != nil {
				t.Errorf("Append: %v", err)
				return
			}
			if err := s.Delete(seq); err != nil {
				t.Errorf("Delete: %v", err)
			}
		},
		"Append backpressure": func(t *testing.T, s *Store) {
			// Records of about 40 bytes in 512-byte segments: the run seals far
			// more segments than maxSealedBacklog.
			for i := range 20 * maxSealedBacklog * 8 {
				if _, err := s.Append(msgN("a", i)); err != nil {
					t.Errorf("Append %d: %v", i, err)
					return
				}
			}
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			s := mustOpen(t, memConfig(vfs.NewCrashFS(), 512), store.Config{})
			defer s.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.BeginBatch()
				defer s.EndBatch()
				run(t, s)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("a call inside BeginBatch waited for EndBatch")
			}
			if err := s.WaitDurable(s.State(false).LastSeq); err != nil {
				t.Fatalf("WaitDurable: %v", err)
			}
		})
	}
}
