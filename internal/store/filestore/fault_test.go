package filestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/vfs"
)

// faultCase is one injected failure.
type faultCase struct {
	op   vfs.Op
	path string // substring of the names it applies to
	err  error
	nth  int // fail the nth matching call (0-based)
}

// TestFaults fails, one at a time, the nth write, fsync, directory fsync,
// rename, create and remove with ENOSPC and EIO (docs/durability.md
// section 5, full disk and I/O errors): the
// caller gets an error, the store is fenced, nothing acknowledged is
// missing after a power loss that keeps only synced data, and the store
// works again after reopening on a healthy file system.
func TestFaults(t *testing.T) {
	ops := []struct {
		op   vfs.Op
		path string
	}{
		{vfs.OpWrite, ".blk"}, {vfs.OpSync, ".blk"}, {vfs.OpSyncDir, ""}, {vfs.OpCreate, ".blk"},
		{vfs.OpRemove, ".blk"}, {vfs.OpRename, ""}, {vfs.OpWrite, "state"}, {vfs.OpSync, "state"},
		{vfs.OpWrite, ckptName},
	}
	n := 0
	for _, o := range ops {
		for _, errno := range []error{syscall.ENOSPC, syscall.EIO} {
			for nth := range 12 {
				fc := faultCase{op: o.op, path: o.path, err: errno, nth: nth}
				t.Run(fmt.Sprintf("%v-%s-%v-%d", o.op, o.path, errno, nth), func(t *testing.T) { faultRun(t, fc, nil) })
				n++
			}
		}
	}
	t.Logf("%d injected failures", n)
}

// TestFaultsRandom fails every kind of operation at random with a
// probability from 0.1% to 10%.
func TestFaultsRandom(t *testing.T) {
	for i, p := range []float64{0.001, 0.01, 0.03, 0.1} {
		for seed := range uint64(10) {
			t.Run(fmt.Sprintf("p%v-%d", p, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				faultRun(t, faultCase{}, func(f *vfs.FaultFS) {
					for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpCreate, vfs.OpRemove, vfs.OpRename} {
						rule := vfs.Rule{Op: op, Prob: p, Rand: r, Err: syscall.ENOSPC}
						if op == vfs.OpWrite {
							rule.Short = 7 * int(seed%2)
						}
						f.Inject(rule)
					}
				})
			})
		}
	}
}

// faultRun runs a workload on a FaultFS until the injected failure fences
// the store, then checks the properties that docs/durability.md section 5
// asks of full disks and I/O errors.
func faultRun(t *testing.T, fc faultCase, inject func(*vfs.FaultFS)) {
	inner := vfs.NewCrashFS()
	ffs := vfs.NewFaultFS(inner)
	cfg := Config{Dir: "/s", FS: ffs, BlockSize: 600}
	s := mustOpen(t, cfg, store.Config{})
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatal(err)
	}
	if inject != nil {
		inject(ffs)
	} else {
		short := 0
		if fc.op == vfs.OpWrite {
			short = 5
		}
		ffs.Inject(vfs.Rule{Op: fc.op, Path: fc.path, After: fc.nth, Count: 1, Err: fc.err, Short: short})
	}
	h := newHistory()
	fenced := faultWorkload(t, s, cs, h)
	closeErr := s.Close()
	if fenced && closeErr == nil {
		t.Fatalf("Close of a fenced store returned nil")
	}
	// A power loss keeping only synced data, then a healthy reopen.
	healthy := inner.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	cfg.FS = healthy
	s2, err := Open(cfg, store.Config{})
	if err != nil {
		t.Fatalf("reopen on a healthy FS: %v", err)
	}
	defer s2.Close()
	checkRecovered(t, s2, h, 0)
	checkConsumerRecovered(t, s2, h, 0)
}

// faultWorkload appends, deletes, compacts and updates a consumer until
// an operation fails; it reports whether the store was fenced, and checks
// that a fenced store refuses every change.
func faultWorkload(t *testing.T, s *Store, cs store.ConsumerStore, h *history) bool {
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				m := store.Msg{Subject: fmt.Sprintf("p.%d", w), Data: fmt.Appendf(nil, "%d-%d", w, i), Time: int64(i)}
				seq, err := s.Append(m)
				if err != nil {
					return
				}
				h.mu.Lock()
				h.attempted[seq] = m
				h.mu.Unlock()
				if err := s.WaitDurable(seq); err != nil {
					return
				}
				h.mu.Lock()
				h.acked[seq], h.maxAcked = true, max(h.maxAcked, seq)
				h.mu.Unlock()
				if i%10 == 9 {
					faultRemove(s, h, seq)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		consumerWriterN(cs, h, 60)
	}()
	wg.Wait()
	_, err := s.Append(store.Msg{Subject: "x"})
	if err == nil {
		return false
	}
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Append after a failure: %v, want ErrFenced", err)
	}
	if err := s.WaitDurable(1); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("WaitDurable after a failure: %v, want ErrFenced", err)
	}
	if err := s.Delete(1); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Delete after a failure: %v, want ErrFenced", err)
	}
	return true
}

// faultRemove deletes the message before seq and sometimes compacts.
func faultRemove(s *Store, h *history, seq uint64) {
	h.mu.Lock()
	h.delTried[seq-1] = true
	h.mu.Unlock()
	if err := s.Delete(seq - 1); err == nil {
		h.mu.Lock()
		h.delAcked[seq-1] = true
		h.mu.Unlock()
	}
	if seq%3 == 0 {
		c := seq / 2
		h.mu.Lock()
		h.compTried = max(h.compTried, c)
		h.mu.Unlock()
		if _, err := s.Compact(c); err == nil {
			h.mu.Lock()
			h.compAcked = max(h.compAcked, c)
			h.mu.Unlock()
		}
	}
}

// consumerWriterN updates the consumer n times or until an error.
func consumerWriterN(cs store.ConsumerStore, h *history, n uint64) {
	for i := uint64(1); i <= n; i++ {
		h.mu.Lock()
		h.stateTry = i
		h.mu.Unlock()
		st := &store.ConsumerState{Delivered: store.SequencePair{Consumer: i, Stream: i}}
		if err := cs.Update(st); err != nil {
			return
		}
		h.mu.Lock()
		h.stateAck = i
		h.mu.Unlock()
	}
}

// TestOpenFaults fails each operation of Open: Open returns the error and
// a later Open on the healthy file system succeeds with everything.
func TestOpenFaults(t *testing.T) {
	im := buildImage(t, 10, 300)
	for _, op := range []vfs.Op{vfs.OpMkdirAll, vfs.OpReadDir, vfs.OpOpen, vfs.OpOpenAppend, vfs.OpReadAt, vfs.OpSize, vfs.OpSyncDir, vfs.OpSync} {
		for nth := range 3 {
			inner := im.fs(t)
			ffs := vfs.NewFaultFS(inner)
			ffs.Inject(vfs.Rule{Op: op, After: nth, Count: 1})
			s, err := Open(memConfig(ffs, 300), store.Config{})
			if err == nil {
				s.Close()
			}
			if err != nil && !errors.Is(err, syscall.EIO) {
				t.Fatalf("%v #%d: Open error %v does not wrap the cause", op, nth, err)
			}
			im.openDamaged(t, inner, fmt.Sprintf("after failed %v #%d", op, nth))
		}
	}
}

// TestOpenAppliesLimits: the layer above makes a stream update durable
// and then calls UpdateConfig; when the removals UpdateConfig makes never
// reach the disk (here a failed fsync, then a power loss), the store
// reopened with the new limits holds what memstore holds after the
// update, not more than its limits allow. Open's removals do not count in
// Removals.
func TestOpenAppliesLimits(t *testing.T) {
	for _, limits := range []store.Config{
		{MaxMsgs: 5},
		{MaxBytes: 300},
		{MaxMsgsPerSubject: 2},
		{MaxMsgs: 7, MaxMsgsPerSubject: 1},
		{MaxMsgs: 5, Discard: store.DiscardNew, MaxMsgsPerSubject: 3, DiscardNewPerSubject: true},
	} {
		inner := vfs.NewCrashFS()
		ffs := vfs.NewFaultFS(inner)
		cfg := Config{Dir: "/s", FS: ffs, BlockSize: 400}
		s := mustOpen(t, cfg, store.Config{})
		model := memstore.New(store.Config{})
		for i := range 20 {
			m := msgN(fmt.Sprintf("s.%d", i%3), i)
			appendSync(t, s, m)
			if _, err := model.Append(m); err != nil {
				t.Fatal(err)
			}
		}
		ffs.Inject(vfs.Rule{Op: vfs.OpSync, Path: ".blk"})
		if err := s.UpdateConfig(limits); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("%+v: UpdateConfig on a failing disk: %v", limits, err)
		}
		s.Close()
		if err := model.UpdateConfig(limits); err != nil {
			t.Fatal(err)
		}
		cfg.FS = inner.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
		s2 := mustOpen(t, cfg, limits)
		mustCheck(t, s2, "open")
		if got, want := s2.State(true), model.State(true); !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: reopened with the new limits:\n got %+v\nwant %+v", limits, got, want)
		}
		if n := s2.Removals(); n != 0 {
			t.Fatalf("%+v: Removals() = %d after Open", limits, n)
		}
		s2.Close()
	}
}

// A Compact that finds nothing left below its sequence, because a
// concurrent Compact removed it first, returns only once that removal is
// durable, and its error when it cannot be: its success means the
// messages are gone for good. Before, it returned nil at once, and a
// power loss after the other's failed fsync brought them back
// (TestFaultsRandom, about 1 run in 1,000).
func TestCompactWaitsForConcurrentRemoval(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewCrashFS())
	s := mustOpen(t, Config{Dir: "/s", FS: ffs, BlockSize: 600}, store.Config{})
	defer s.Close()
	for i := range 5 {
		seq, err := s.Append(store.Msg{Subject: "a", Data: fmt.Appendf(nil, "%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitDurable(seq); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ffs.Inject(vfs.Rule{Op: vfs.OpSync, Count: 1, Err: syscall.ENOSPC, Match: func(string) bool {
		once.Do(func() { close(entered); <-release })
		return true
	}})
	first := make(chan error, 1)
	go func() {
		_, err := s.Compact(3)
		first <- err
	}()
	<-entered // the first Compact's removal is written, its fsync held
	second := make(chan error, 1)
	go func() {
		_, err := s.Compact(3)
		second <- err
	}()
	select {
	case err := <-second:
		close(release)
		t.Fatalf("second Compact returned %v while the first's removal was not durable", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	for name, ch := range map[string]chan error{"first": first, "second": second} {
		if err := <-ch; !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s Compact after the failed fsync: %v, want ErrFenced", name, err)
		}
	}
}
