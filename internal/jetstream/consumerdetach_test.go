package jetstream

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// The files of a consumer handed between a consumer of one replica and a
// replicated one (docs/cluster.md, "Scaling consumers"): its state
// taken by DetachConsumer (three of six deliveries acknowledged with a
// confirmation), then RemoveConsumerFiles and WriteConsumerState with that
// state, as a scale up from one replica and a scale down to it do. A
// power cut before any file operation of theirs leaves a disk on which
// the consumer restores with exactly that state, or not at all (never
// with a part of it: an empty state would deliver the acknowledged
// messages again), and once WriteConsumerState returned it restores.
func TestConsumerHandoverFilesCrash(t *testing.T) {
	confirmed := func(seq uint64) bool { return seq <= 3 }
	var absent int
	for k := 0; ; k++ {
		img, want, done := handoverRun(t, k, confirmed)
		js := newTestJS(t, img, newMemTransport())
		c, jerr := js.lookupConsumer("ORDERS", "proc")
		switch {
		case jerr != nil && jerr.ErrCode == uint16(jserr.ConsumerNotFound) && !done:
			absent++
		case jerr != nil:
			t.Fatalf("power cut before file operation %d (done %v): %v", k, done, jerr)
		default:
			got := c.Snapshot()
			if got.Delivered != want.Delivered || got.AckFloor != want.AckFloor || !reflect.DeepEqual(pendingSeqs(got), pendingSeqs(want)) {
				t.Fatalf("power cut before file operation %d: restored %+v, want %+v", k, got, want)
			}
			checkConfirmedAcked(t, js, 6, confirmed)
		}
		js.Shutdown()
		if done {
			if absent == 0 {
				t.Fatal("no power cut found the consumer between its removal and its rewrite")
			}
			return
		}
	}
}

// handoverRun runs TestConsumerHandoverFilesCrash's sequence and cuts the
// power before the k-th file operation naming the consumer after
// DetachConsumer returned (or, done, after the sequence when it makes
// fewer). It returns the disk after the cut and the detached state.
func handoverRun(t *testing.T, k int, confirmed func(uint64) bool) (img *vfs.CrashFS, want *store.ConsumerState, done bool) {
	t.Helper()
	base := vfs.NewCrashFS()
	ffs := vfs.NewFaultFS(base)
	var armed atomic.Bool
	var mu sync.Mutex
	n := 0
	hook := func(name string) bool {
		if !armed.Load() || !strings.Contains(name, "proc") {
			return false
		}
		mu.Lock()
		if n == k && img == nil {
			img = base.Crash(vfs.CrashOptions{})
		}
		n++
		mu.Unlock()
		return false
	}
	for op := vfs.OpCreate; op <= vfs.OpClose; op++ {
		ffs.Inject(vfs.Rule{Op: op, Match: hook})
	}
	tr := newMemTransport()
	js := confirmedAcksRun(t, ffs, tr, 6, true, confirmed)
	defer js.Shutdown()
	info, jerr := js.ConsumerInfo("ORDERS", "proc")
	if jerr != nil {
		t.Fatal(jerr)
	}
	cfg, jerr := js.ConsumerConfig("ORDERS", "proc")
	if jerr != nil {
		t.Fatal(jerr)
	}
	data, found, jerr := js.DetachConsumer("ORDERS", "proc", info.Created, nil)
	if jerr != nil || !found {
		t.Fatalf("detach: found %v, %v", found, jerr)
	}
	var snap struct {
		State *store.ConsumerState `json:"state"`
	}
	if err := json.Unmarshal(data, &snap); err != nil || snap.State == nil {
		t.Fatalf("detached state %s: %v", data, err)
	}
	armed.Store(true)
	jerrR := js.RemoveConsumerFiles("ORDERS", "proc")
	jerrW := js.WriteConsumerState("ORDERS", "proc", cfg, info.Created, data)
	mu.Lock()
	defer mu.Unlock()
	if img == nil {
		if jerrR != nil || jerrW != nil {
			t.Fatalf("remove %v, write %v", jerrR, jerrW)
		}
		img, done = base.Crash(vfs.CrashOptions{}), true
	}
	return img, snap.State, done
}

// pendingSeqs returns the stream sequences of a state's pending deliveries.
func pendingSeqs(st *store.ConsumerState) []uint64 {
	var out []uint64
	for _, p := range st.Pending {
		out = append(out, p.Stream)
	}
	return out
}
