package storetest

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

var miscTests = []test{
	{name: "Copies", fn: testCopies},
	{name: "Closed", fn: testClosed},
	{name: "Concurrent", fn: testConcurrent},
}

// The store copies what it is given and what it returns.
func testCopies(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	hdr, data := []byte("NATS/1.0\r\nK: v\r\n\r\n"), []byte("payload")
	m := store.Msg{Subject: "a", Header: hdr, Data: data, Time: t0}
	h.mustAppend(m, 1)
	hdr[0], data[0] = 'X', 'X'
	h.check(1, 1, 1)
	loads := []func() (*store.StoredMsg, error){
		func() (*store.StoredMsg, error) { return h.s.Load(1) },
		func() (*store.StoredMsg, error) { return h.s.LoadNext(nil, 0) },
		func() (*store.StoredMsg, error) { return h.s.LoadNext([]string{"a"}, 0) },
		func() (*store.StoredMsg, error) { return h.s.LoadLast("a") },
		func() (*store.StoredMsg, error) { return h.s.LoadLast("") },
	}
	for _, load := range loads {
		sm, err := load()
		if err != nil {
			t.Fatal(err)
		}
		sm.Header[0], sm.Data[0] = 'Y', 'Y'
		h.check(1, 1, 1)
	}
}

// After Close every call that can fail returns ErrClosed.
func testClosed(t *testing.T, e Engine) {
	h := open(t, e, store.Config{})
	h.add("a")
	cs := h.consumer("dur")
	if err := h.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h.closed = true
	calls := map[string]func() error{
		"Append":        func() error { _, err := h.s.Append(h.next("a")); return err },
		"WaitDurable":   func() error { return h.s.WaitDurable(1) },
		"Load":          func() error { _, err := h.s.Load(1); return err },
		"LoadNext":      func() error { _, err := h.s.LoadNext(nil, 0); return err },
		"LoadLast":      func() error { _, err := h.s.LoadLast(""); return err },
		"Delete":        func() error { return h.s.Delete(1) },
		"Purge":         func() error { _, err := h.s.Purge(store.PurgeRequest{}); return err },
		"Compact":       func() error { _, err := h.s.Compact(2); return err },
		"ExpireUpTo":    func() error { _, err := h.s.ExpireUpTo(t0); return err },
		"UpdateConfig":  func() error { return h.s.UpdateConfig(store.Config{}) },
		"ConsumerStore": func() error { _, err := h.s.ConsumerStore("x"); return err },
		"Close":         func() error { return h.s.Close() },
		"consumer.State": func() error {
			_, err := cs.State()
			return err
		},
		"consumer.Update": func() error { return cs.Update(sampleState()) },
	}
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		if err := calls[name](); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if n := h.s.NumPending(nil, 0, 0); n != 0 {
		t.Errorf("NumPending after Close = %d, want 0", n)
	}
}

// Appends from many goroutines get unique, contiguous sequences, each
// durable once WaitDurable returns.
func testConcurrent(t *testing.T, e Engine) {
	const writers, each = 8, 250
	h := open(t, e, store.Config{})
	var wg sync.WaitGroup
	got := make([][]uint64, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				seq, err := h.s.Append(store.Msg{Subject: "w", Data: []byte{byte(w), byte(i)}, Time: t0})
				if err == nil {
					err = h.s.WaitDurable(seq)
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				got[w] = append(got[w], seq)
				if _, err := h.s.Load(seq); err != nil {
					t.Errorf("Load(%d): %v", seq, err)
				}
			}
		})
	}
	wg.Wait()
	all := slices.Sorted(slices.Values(slices.Concat(got...)))
	for i, seq := range all {
		if seq != uint64(i+1) {
			t.Fatalf("sequences are not 1..%d: position %d holds %d", writers*each, i, seq)
		}
	}
	if st := h.s.State(false); st.Msgs != writers*each || st.LastSeq != writers*each {
		t.Fatalf("State = %+v, want %d messages", st, writers*each)
	}
	for w := range writers {
		if !slices.IsSorted(got[w]) {
			t.Fatalf("writer %d saw sequences out of order", w)
		}
	}
}
