package streamrun

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// DurableBarrier returns false at its deadline while the apply goroutine
// cannot reach it (held, as a stuck store would keep it), so that an API
// request waiting on it is answered; once the goroutine runs again, a
// barrier is reached, and a stopped stream refuses one at once.
func TestDurableBarrierDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCkptStream(t)
		release := r.Hold()
		start := time.Now()
		if r.DurableBarrier(start.Add(300 * time.Millisecond)) {
			t.Fatal("a barrier behind a held apply goroutine was reached")
		}
		if waited := time.Since(start); waited != 300*time.Millisecond {
			t.Fatalf("DurableBarrier returned after %v, want its deadline, 300ms", waited)
		}
		release()
		if !r.DurableBarrier(time.Now().Add(time.Second)) {
			t.Fatal("a barrier of a running stream was not reached")
		}
		r.Stop(nil)
		if r.DurableBarrier(time.Now().Add(time.Second)) {
			t.Fatal("a stopped stream reached a barrier")
		}
	})
}

// gatedStore is a store whose messages become durable only once gate is
// closed, as a file store's wait for its fsync.
type gatedStore struct {
	*memstore.Store
	gate    chan struct{}
	durable atomic.Uint64
}

func (s *gatedStore) WaitDurable(seq uint64) error {
	<-s.gate
	s.durable.Store(max(s.durable.Load(), seq))
	return s.Store.WaitDurable(seq)
}

func (s *gatedStore) DurableSeq() uint64 { return min(s.durable.Load(), s.Store.DurableSeq()) }

// For a file stream, DurableBarrier waits for the ack goroutine too: a
// message applied but not yet durable is not counted by consumers
// (DurableSeq), so a reader of the pending counts waits for its fsync,
// and for no longer than its deadline.
func TestDurableBarrierWaitsForDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := stream.Config{Name: "F", Subjects: []string{"f.>"}, Storage: stream.FileStorage}
		cfg.SetDefaults()
		st := &gatedStore{Store: memstore.New(cfg.StoreConfig()), gate: make(chan struct{})}
		env := Env{Transport: nopTransport{}, Now: time.Now, Logf: t.Logf, Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf)}
		r := New(env, cfg, time.Now(), "dir", st)
		if err := r.Open(); err != nil {
			t.Fatal(err)
		}
		if err := r.Serve(); err != nil {
			t.Fatal(err)
		}
		opened := func() {
			select {
			case <-st.gate:
			default:
				close(st.gate)
			}
		}
		defer r.Stop(nil)
		defer opened() // before Stop, which waits for the ack goroutine
		if err := r.SetLeader(true); err != nil {
			t.Fatal(err)
		}
		r.handlePublish("f.x", "", nil, []byte("x"))
		start := time.Now()
		if r.DurableBarrier(start.Add(300 * time.Millisecond)) {
			t.Fatal("a barrier passed a message not yet durable")
		}
		if waited := time.Since(start); waited != 300*time.Millisecond || r.DurableSeq() != 0 {
			t.Fatalf("DurableBarrier returned after %v (want 300ms), durable sequence %d", waited, r.DurableSeq())
		}
		opened()
		if !r.DurableBarrier(time.Now().Add(time.Second)) {
			t.Fatal("the barrier was not reached once the message was durable")
		}
		if got := r.DurableSeq(); got != 1 {
			t.Fatalf("durable sequence %d after the barrier, want 1", got)
		}
	})
}
