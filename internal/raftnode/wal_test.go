package raftnode

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairnmq/cairn/internal/vfs"
)

// walBatch writes, for group g, entries first..first+n-1 (term 1, data
// "g/i", padded) and a hardstate committing them, as one record.
func walBatch(t testing.TB, w *wal, g GroupID, first, n uint64, pad int) {
	t.Helper()
	var ents []*pb.Entry
	for i := first; i < first+n; i++ {
		d := fmt.Appendf(nil, "%d/%d", g, i)
		d = append(d, make([]byte, pad)...)
		ents = append(ents, &pb.Entry{Index: new(i), Term: new(uint64(1)), Data: d})
	}
	hs := &pb.HardState{Term: new(uint64(1)), Commit: new(first + n - 1)}
	var it items
	it.b = []byte{bodyBatch}
	if w.meta[g] == nil || w.meta[g].replica == 0 {
		it.replica(g, 1, 0)
		it.snap(itemCompact, g, snapMeta{conf: &pb.ConfState{Voters: []uint64{1}}})
	}
	it.entries(g, ents)
	it.hardState(g, hs)
	up := walUpdate{group: g, replica: 1, hs: hs, maxIndex: first + n - 1}
	if err := w.write(it.b, []walUpdate{up}); err != nil {
		t.Fatal(err)
	}
}

func mustOpenWAL(t *testing.T, fs vfs.FS, segBytes int64) *wal {
	t.Helper()
	w, err := openWAL(fs, "wal", segBytes, t.Logf, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// lastIndexOf returns the last recovered index of group g (0: none).
func lastIndexOf(w *wal, g GroupID) uint64 {
	rec := w.recovered[g]
	if rec == nil {
		return 0
	}
	if len(rec.ents) == 0 {
		return rec.meta.base.index
	}
	return rec.ents[len(rec.ents)-1].GetIndex()
}

func TestWALReplay(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 1<<20)
	inc := w.inc
	walBatch(t, w, 1, 1, 3, 0)
	walBatch(t, w, 2, 1, 2, 0)
	walBatch(t, w, 1, 4, 2, 0)
	walBatch(t, w, 1, 5, 1, 0) // overwrites 5
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	w.close()
	w = mustOpenWAL(t, fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), 1<<20)
	if w.damage != nil || w.inc != inc {
		t.Fatalf("damage %v, incarnation %s want %s", w.damage, w.inc, inc)
	}
	if got := lastIndexOf(w, 1); got != 5 {
		t.Fatalf("group 1 ends at %d", got)
	}
	if got := lastIndexOf(w, 2); got != 2 {
		t.Fatalf("group 2 ends at %d", got)
	}
	if rec := w.recovered[1]; rec.err != nil || rec.meta.hs.GetCommit() != 5 {
		t.Fatalf("group 1: %v, hardstate %v", rec.err, rec.meta.hs)
	}
}

// Unsynced records lost or torn by a power loss, in every way the crash
// file system can: open cuts the tail and keeps every fsynced record.
func TestWALTornTail(t *testing.T) {
	for seed := range uint64(200) {
		fs := vfs.NewCrashFS()
		w := mustOpenWAL(t, fs, 1<<20)
		walBatch(t, w, 1, 1, 10, 300)
		if err := w.sync(); err != nil {
			t.Fatal(err)
		}
		walBatch(t, w, 1, 11, 5, 700) // unsynced
		walBatch(t, w, 1, 16, 5, 700)
		r := rand.New(rand.NewPCG(seed, 7))
		after := fs.Crash(vfs.CrashOptions{Rand: r, Tail: vfs.TailAny})
		w = mustOpenWAL(t, after, 1<<20)
		if w.damage != nil {
			t.Fatalf("seed %d: %v", seed, w.damage)
		}
		got := lastIndexOf(w, 1)
		if got != 10 && got != 15 && got != 20 {
			t.Fatalf("seed %d: recovered through %d", seed, got)
		}
		if w.recovered[1].err != nil {
			t.Fatalf("seed %d: %v", seed, w.recovered[1].err)
		}
		// The cut is durable and the log goes on from it.
		walBatch(t, w, 1, got+1, 1, 0)
		if err := w.sync(); err != nil {
			t.Fatal(err)
		}
		w = mustOpenWAL(t, after.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), 1<<20)
		if w.damage != nil || lastIndexOf(w, 1) != got+1 {
			t.Fatalf("seed %d: reopened at %d (%v), want %d", seed, lastIndexOf(w, 1), w.damage, got+1)
		}
	}
}

// A bit flipped in fsynced data is damage, never a tail to cut: the WAL
// reports it and every group is fenced.
func TestWALDamageInSyncedData(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 1<<20)
	walBatch(t, w, 1, 1, 3, 100)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	mid := w.size
	walBatch(t, w, 1, 4, 3, 100)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	walBatch(t, w, 1, 7, 1, 0) // vouches that the second record was fsynced
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	name := path.Join("wal", segName(1))
	for _, off := range []int64{segmentHeaderSize + 5, segmentHeaderSize + 30, mid + 2, mid + 40} {
		img := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
		if err := img.FlipBit(name, off*8+3); err != nil {
			t.Fatal(err)
		}
		w := mustOpenWAL(t, img, 1<<20)
		if !errors.Is(w.damage, ErrCorrupt) {
			t.Fatalf("flip at %d: damage %v", off, w.damage)
		}
		b, _ := img.ReadFile(name)
		if int64(len(b)) <= mid {
			t.Fatalf("flip at %d: the WAL was cut", off)
		}
		n := &Node{cfg: Config{Logf: t.Logf}, wal: w}
		n.mu.groups = map[GroupID]*group{}
		n.sched.queued = map[*group]bool{}
		n.sched.wake = make(chan struct{}, 1)
		sm := newHashSM(img, "sm", 1)
		if err := n.AddGroup(GroupConfig{ID: 1, Replica: 1, Incarnation: w.inc, Peers: []Peer{{1, "s1"}}}, sm); err != nil {
			t.Fatal(err)
		}
		if s, _ := n.Status(1); !errors.Is(s.Fenced, ErrCorrupt) {
			t.Fatalf("flip at %d: group not fenced: %+v", off, s)
		}
	}
}

// Segments rotate; old ones go once every group compacted past them;
// replay starts from a checkpoint and closes the gap it leaves.
func TestWALRotateCollect(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 4096)
	next := map[GroupID]uint64{1: 1, 2: 1}
	for range 20 {
		for g := GroupID(1); g <= 2; g++ {
			walBatch(t, w, g, next[g], 2, 200)
			next[g] += 2
		}
		if err := w.sync(); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.segs) < 4 {
		t.Fatalf("%d segments", len(w.segs))
	}
	compact := func(g GroupID, index uint64) { walCompact(t, w, g, index) }
	oldest := w.segs[0].seq
	compact(1, 30)
	if w.segs[0].seq != oldest {
		t.Fatal("segments deleted while group 2 still needs them")
	}
	if got := w.blocking(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("blocking %v", got)
	}
	compact(2, 30)
	if w.segs[0].seq != 4 { // 1-3 hold entries through 24 only
		t.Fatalf("oldest segment %d, want 4", w.segs[0].seq)
	}
	w.close()
	w = mustOpenWAL(t, fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), 4096)
	for g := GroupID(1); g <= 2; g++ {
		rec := w.recovered[g]
		if w.damage != nil || rec == nil || rec.err != nil {
			t.Fatalf("group %d: %v %+v", g, w.damage, rec)
		}
		if rec.meta.base.index != 30 || lastIndexOf(w, g) != next[g]-1 {
			t.Fatalf("group %d: base %d last %d", g, rec.meta.base.index, lastIndexOf(w, g))
		}
	}
}

// A missing segment in the middle is damage.
func TestWALMissingSegment(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 1024)
	for i := uint64(1); i <= 20; i++ {
		walBatch(t, w, 1, i, 1, 200)
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if len(w.segs) < 3 {
		t.Fatalf("%d segments", len(w.segs))
	}
	if err := fs.Remove(path.Join("wal", segName(2))); err != nil {
		t.Fatal(err)
	}
	w = mustOpenWAL(t, fs, 1024)
	if !errors.Is(w.damage, ErrCorrupt) {
		t.Fatalf("damage %v", w.damage)
	}
}

// Replay checks each group: a commit index past the log is damage to
// that group alone.
func TestWALGroupCheck(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 1<<20)
	walBatch(t, w, 1, 1, 3, 0)
	walBatch(t, w, 2, 1, 3, 0)
	var it items
	it.b = []byte{bodyBatch}
	it.hardState(2, &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(9))})
	if err := w.write(it.b, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	w = mustOpenWAL(t, fs, 1<<20)
	if w.damage != nil || w.recovered[1].err != nil {
		t.Fatalf("damage %v, group 1 %v", w.damage, w.recovered[1].err)
	}
	if !errors.Is(w.recovered[2].err, ErrCorrupt) {
		t.Fatalf("group 2: %v", w.recovered[2].err)
	}
}

// Starting and deleting segments is routine: it goes to the debug log,
// never to Logf, which the cluster layer logs as warnings.
func TestWALSegmentsLogAtDebug(t *testing.T) {
	fs := vfs.NewCrashFS()
	var warns, debugs []string
	logTo := func(to *[]string) func(string, ...any) {
		return func(f string, a ...any) { *to = append(*to, fmt.Sprintf(f, a...)) }
	}
	w, err := openWAL(fs, "wal", 4096, logTo(&warns), logTo(&debugs))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 40; i += 2 {
		walBatch(t, w, 1, i, 2, 200)
	}
	m := snapMeta{index: 40, term: 1, conf: &pb.ConfState{Voters: []uint64{1}}}
	var it items
	it.b = []byte{bodyBatch}
	it.snap(itemCompact, 1, m)
	if err := w.write(it.b, []walUpdate{{group: 1, base: &m}}); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	w.collect()
	if len(w.segs) != 1 {
		t.Fatalf("%d segments left", len(w.segs))
	}
	for _, l := range warns {
		if strings.Contains(l, "segment") {
			t.Errorf("logged as a problem: %q", l)
		}
	}
	var started, deleted bool
	for _, l := range debugs {
		started = started || strings.Contains(l, "started")
		deleted = deleted || strings.Contains(l, "deleted")
	}
	if !started || !deleted {
		t.Errorf("debug log %q", debugs)
	}
}

// The active segment holds zeros written ahead of its records, which a
// reopen takes as their end: every record replayed, no torn tail cut or
// logged, the zeros cut off and the log going on from there. A segment
// that rotated out ends exactly at its last record. Without the zeros
// ahead, each fsync would also record a new file size (package comment,
// "Preallocated space").
func TestWALPreallocated(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 64<<10)
	walBatch(t, w, 1, 1, 10, 300)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	name := path.Join("wal", segName(1))
	onDisk, _, err := fs.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if onDisk != w.end || w.end < w.size+int64(w.chunk())/2 {
		t.Fatalf("segment of %d bytes for %d bytes of records (end %d): no zeros written ahead", onDisk, w.size, w.end)
	}
	var logged []string
	w.close()
	after := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	w, err = openWAL(after, "wal", 64<<10, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if w.damage != nil || w.torn != 0 || len(logged) != 0 || lastIndexOf(w, 1) != 10 {
		t.Fatalf("reopened: damage %v, torn %d, logged %q, last index %d", w.damage, w.torn, logged, lastIndexOf(w, 1))
	}
	// Enough records to rotate: the first segment is cut to its records.
	for i := uint64(11); w.segs[len(w.segs)-1].seq == 1; i += 10 {
		walBatch(t, w, 1, i, 10, 300)
		if err := w.sync(); err != nil {
			t.Fatal(err)
		}
	}
	first, _, _ := after.Stat(name)
	buf := readAll(t, after, name)
	if first != int64(len(buf)) || allZero(buf[len(buf)-8:]) {
		t.Fatalf("the rotated segment still ends in zeros (%d bytes)", first)
	}
	last := lastIndexOfLive(w)
	w.close()
	w = mustOpenWAL(t, after.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), 64<<10)
	if w.damage != nil || w.torn != 0 || lastIndexOf(w, 1) != last {
		t.Fatalf("after rotation: damage %v, torn %d, last index %d want %d", w.damage, w.torn, lastIndexOf(w, 1), last)
	}
}

// lastIndexOfLive returns the highest entry index written for group 1
// in any segment of w.
func lastIndexOfLive(w *wal) uint64 {
	var last uint64
	for _, s := range w.segs {
		last = max(last, s.maxIndex[1])
	}
	return last
}

// readAll returns the content of file name.
func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	b, err := readFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// On an FS that cannot write in place (a test wrapper embedding vfs.FS)
// the WAL appends, as before: no zeros ahead, the file exactly its
// records.
func TestWALAppendsWithoutInPlace(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, plainWALFS{fs}, 64<<10)
	walBatch(t, w, 1, 1, 10, 300)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	onDisk, _, _ := fs.Stat(path.Join("wal", segName(1)))
	if w.ip != nil || onDisk != w.size || w.end != w.size {
		t.Fatalf("segment of %d bytes for %d of records (end %d, in place %v)", onDisk, w.size, w.end, w.ip != nil)
	}
	w.close()
	w = mustOpenWAL(t, plainWALFS{fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})}, 64<<10)
	if w.damage != nil || lastIndexOf(w, 1) != 10 {
		t.Fatalf("reopened: %v, last index %d", w.damage, lastIndexOf(w, 1))
	}
}

// plainWALFS hides its FS's in-place writes.
type plainWALFS struct{ vfs.FS }

// Bytes damaged in the zeros written ahead hold no record: the replay
// keeps every record, cuts the damaged zeros as a torn tail (logged) and
// fences nothing; damage in a record before them is still damage.
func TestWALDamageInZerosAhead(t *testing.T) {
	fs := vfs.NewCrashFS()
	w := mustOpenWAL(t, fs, 64<<10)
	walBatch(t, w, 1, 1, 10, 300)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	walBatch(t, w, 1, 11, 10, 300) // its header vouches for the first record
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	size := w.size
	w.close()
	name := path.Join("wal", segName(1))
	damage := func(fs *vfs.CrashFS, off int64) *vfs.CrashFS {
		b := readAll(t, fs, name)
		b[off] ^= 0x5a
		if err := fs.WriteFile(name, b); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	zeros := damage(fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), size+4096)
	var logged []string
	w, err := openWAL(zeros, "wal", 64<<10, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if w.damage != nil || lastIndexOf(w, 1) != 20 || w.torn == 0 || len(logged) != 1 || !strings.Contains(logged[0], "torn tail") {
		t.Fatalf("damaged zeros: damage %v, last index %d, torn %d, logged %q", w.damage, lastIndexOf(w, 1), w.torn, logged)
	}
	w.close()
	record := damage(zeros.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), segmentHeaderSize+recordHeaderSize+100)
	if w = mustOpenWAL(t, record, 64<<10); w.damage == nil {
		t.Fatalf("a damaged record before the zeros was not reported (last index %d)", lastIndexOf(w, 1))
	}
}
