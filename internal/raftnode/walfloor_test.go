package raftnode

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairnmq/cairn/internal/vfs"
)

// walCompact writes a compaction of group g to index (term 1), fsyncs
// and collects.
func walCompact(t testing.TB, w *wal, g GroupID, index uint64) {
	t.Helper()
	var it items
	it.b = []byte{bodyBatch}
	m := snapMeta{index: index, term: 1, conf: &pb.ConfState{Voters: []uint64{1}}}
	it.snap(itemCompact, g, m)
	if err := w.write(it.b, []walUpdate{{group: g, base: &m}}); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	w.collect()
}

// walRemove writes a tombstone of replica 1 of group g.
func walRemove(t testing.TB, w *wal, g GroupID) {
	t.Helper()
	var it items
	it.b = []byte{bodyBatch}
	it.replica(g, 1, replicaRemoved)
	if err := w.write(it.b, []walUpdate{{group: g, removed: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
}

// TestWALReplayCopiesNoCompactedEntry: a WAL whose segments are pinned by
// one group that compacts nothing, holding 12 MiB of another group's
// entries that a later compaction dropped and of a removed group's, is
// replayed without copying their data (a replay copied every entry's
// data, to drop it at the end: 9 s for an 812 MB WAL), and recovers the
// same groups as before.
func TestWALReplayCopiesNoCompactedEntry(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 1<<20)
	walBatch(t, w, 3, 1, 1, 0) // group 3 pins every segment
	const pad = 64 << 10
	for i := uint64(1); i <= 100; i++ {
		walBatch(t, w, 1, i, 1, pad)
		walBatch(t, w, 2, i, 1, pad)
	}
	walCompact(t, w, 1, 95)
	walRemove(t, w, 2)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if len(w.segs) < 10 {
		t.Fatalf("%d segments", len(w.segs))
	}
	w.close()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w = mustOpenWAL(t, fs, 1<<20)
	runtime.ReadMemStats(&after)
	var walBytes uint64
	for _, sg := range w.segs {
		walBytes += uint64(len(readAll(t, fs, "wal/"+segName(sg.seq))))
	}
	// The segments are read (walBytes); entries 1-95 of group 1 and all
	// of group 2 (about walBytes again) must not be copied.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > walBytes*5/4 {
		t.Errorf("replay allocated %d bytes for a WAL of %d", alloc, walBytes)
	}
	rec := w.recovered[1]
	if rec == nil || rec.err != nil || rec.meta.base.index != 95 || len(rec.ents) != 5 || rec.ents[0].GetIndex() != 96 ||
		string(rec.ents[4].Data[:6]) != "1/100\x00" {
		t.Fatalf("group 1: %+v", rec)
	}
	if w.recovered[2] != nil || w.meta[2].removed != 1 || w.recovered[3] == nil {
		t.Fatalf("group 2 %+v (meta %+v), group 3 %+v", w.recovered[2], w.meta[2], w.recovered[3])
	}
}

// TestWALReplayFloorsSameState: over random logs (appends that overwrite,
// compactions, removals and re-additions, segment rotations), a replay
// that skips the entries below the floors recovers exactly what a replay
// decoding every entry does.
func TestWALReplayFloorsSameState(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 3))
		fs := vfs.NewCrashFS()
		w := mustOpenWAL(t, fs, 2048)
		last := map[GroupID]uint64{}
		base := map[GroupID]uint64{}
		for range 300 {
			g := GroupID(1 + r.IntN(3))
			switch k := r.IntN(10); {
			case k < 6:
				first := last[g] + 1
				if last[g] > base[g] && r.IntN(4) == 0 {
					first = base[g] + 1 + uint64(r.IntN(int(last[g]-base[g]))) // overwrite
				}
				n := uint64(1 + r.IntN(4))
				walBatch(t, w, g, first, n, r.IntN(300))
				last[g] = first + n - 1
			case k < 9:
				if last[g] > base[g] {
					base[g] += 1 + uint64(r.IntN(int(last[g]-base[g])))
					walCompact(t, w, g, base[g])
				}
			default:
				if w.meta[g] != nil && w.meta[g].replica == 1 {
					walRemove(t, w, g)
					// A removed replica 1 cannot come back; the group stays removed.
					last[g], base[g] = 1<<40, 1<<40
				}
			}
		}
		if err := w.sync(); err != nil {
			t.Fatal(err)
		}
		w.close()
		got := mustOpenWAL(t, fs, 2048)
		noFloors = true
		want := mustOpenWAL(t, fs, 2048)
		noFloors = false
		if !reflect.DeepEqual(recoveredView(got), recoveredView(want)) || fmt.Sprint(got.damage) != fmt.Sprint(want.damage) {
			t.Fatalf("seed %d: with floors %v (%v), decoding all %v (%v)", seed, recoveredView(got), got.damage, recoveredView(want), want.damage)
		}
		got.close()
		want.close()
	}
}

// recoveredView is what a replay recovered, comparable.
func recoveredView(w *wal) map[GroupID]string {
	out := map[GroupID]string{}
	for g, rec := range w.recovered {
		s := fmt.Sprintf("replica %d removed %d base %d hs %v err %v:", rec.meta.replica, rec.meta.removed, rec.meta.base.index, rec.meta.hs, rec.err)
		for _, e := range rec.ents {
			s += fmt.Sprintf(" %d/%d/%q", e.GetIndex(), e.GetTerm(), e.Data)
		}
		out[g] = s
	}
	for g, m := range w.meta {
		out[g+1000] = fmt.Sprintf("meta replica %d removed %d base %d", m.replica, m.removed, m.base.index)
	}
	return out
}
